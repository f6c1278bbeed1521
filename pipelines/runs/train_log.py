"""A run's training curves as its logger wrote them: <run>/logs/metrics.csv (Lightning's CSVLogger format: one row per
logged step, the training rows (train/loss, lr, ...) and the validation rows (val/loss) leaving each other's columns
blank). What the study page (pipelines.report.html) draws for one run; no statistic reads it."""

from __future__ import annotations

import csv
import math

from pipelines.runs.layout import TRAIN_METRICS, RunFolder
from pipelines.runs.metrics import run_file_error

CURVES = {"train/loss": "training", "val/loss": "validation"}  # logged column -> the curve's name


def read_training_curves(run: RunFolder) -> dict[str, list[tuple[int, float]]] | None:
    """{curve name: [(step, loss), ...]} from the run's logs/metrics.csv, read once per RunFolder (run.files); None
    when the run folder holds no training log (a run published before studies carried their logs, format 4).
    RunFileError naming the run when the file has no step column or a value that is not a number."""
    path = run.path / TRAIN_METRICS
    if path not in run.files:
        if not path.is_file():
            return None
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        if rows and "step" not in rows[0]:
            raise run_file_error(run, path, f"no step column (header: {', '.join(rows[0])})")
        curves: dict[str, list[tuple[int, float]]] = {name: [] for name in CURVES.values()}
        for number, row in enumerate(rows, start=1):
            for column, name in CURVES.items():
                cell = (row.get(column) or "").strip()
                if not cell:
                    continue
                try:
                    step, value = int(float(row["step"])), float(cell)
                except ValueError:
                    raise run_file_error(run, path, f"data row {number}: {column} {cell!r} is not a number") from None
                if math.isfinite(value):  # a diverged step stays out of the curve (the loss is inf or nan there)
                    curves[name].append((step, value))
        run.files[path] = {name: points for name, points in curves.items() if points}
    return run.files[path]
