"""Entry points: train, evaluate, compare, samples, demo. Hydra lives here and nowhere else."""
