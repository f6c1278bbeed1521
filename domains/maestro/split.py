"""MAESTRO's split over performances: 90/5/5 from a seeded permutation, or the CSV's own split column.

`random`: over the performances that tokenised, val and test get round(5%) each (at least one; at least 3
performances are needed), drawn from a permutation with the split seed. `official`: the CSV's split column.
"""

from __future__ import annotations

import numpy as np

from domains.maestro.archive import Performance

SPLIT_MODES = ("random", "official")
EVAL_FRACTION = 0.05  # of the performances, for val and for test each


def assign_splits(performances: list[Performance], mode: str, seed: int) -> list[str]:
    """The split of each performance: `random` (90/5/5 with `seed`) or `official` (the CSV's column)."""
    n = len(performances)
    if mode == "official":
        labels = [p.csv_split for p in performances]
        for split in ("train", "val", "test"):
            if split not in labels:
                raise ValueError(f"maestro: the CSV's official split puts no usable performance (of {n}) in {split}")
        return labels
    if n < 3:
        raise ValueError(f"maestro: {n} usable performance(s); a train/val/test split needs at least 3")
    n_eval = max(1, round(EVAL_FRACTION * n))
    order = np.random.default_rng(seed).permutation(n)
    labels = np.full(n, "train", dtype=object)
    labels[order[:n_eval]] = "test"
    labels[order[n_eval : 2 * n_eval]] = "val"
    return labels.tolist()
