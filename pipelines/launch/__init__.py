"""Running the runs of a sweep: the plan (jobs.py), on this machine (local.py, with the live view of progress.py),
or as a SLURM job array (slurm.py)."""
