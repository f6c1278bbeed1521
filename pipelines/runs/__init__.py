"""The run folder: where a run lives (layout.py), what it records about itself (manifest.py), its metrics files
(metrics.py) and its final weights (model_file.py)."""
