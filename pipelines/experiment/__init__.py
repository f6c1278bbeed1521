"""One experiment: its config (config.py), training it (training.py), scoring it (evaluation.py) and letting it
generate music (generation.py)."""
