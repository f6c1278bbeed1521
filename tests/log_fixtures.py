"""A run's training metrics as the tests read them: the rows of <run>/logs/metrics.csv."""

from __future__ import annotations

import csv
from pathlib import Path

from pipelines.runs.layout import TRAIN_METRICS


def metric_rows(folder: Path) -> list[dict[str, str]]:
    """Every row, in order: training rows (train/loss, lr) and validation rows (val/loss) leave the others blank."""
    with open(folder / TRAIN_METRICS, newline="") as handle:
        return list(csv.DictReader(handle))


def train_losses(folder: Path) -> list[tuple[int, float]]:
    """(step, training loss) of each training row."""
    return [(int(row["step"]), float(row["train/loss"])) for row in metric_rows(folder) if row.get("train/loss")]
