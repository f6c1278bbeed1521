"""Data domains: one DataModule per domain over the shared spine in `base`."""
