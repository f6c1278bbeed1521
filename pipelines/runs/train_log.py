"""A run's training curves as its logger wrote them: <run>/logs/metrics.csv (Lightning's CSVLogger format: one row per
logged step, the training rows (train/loss, lr, ...) and the validation rows (val/loss) leaving each other's columns
blank). What the study page (pipelines.report.html) draws for one run; no statistic reads it."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping
from typing import Any

from pipelines.runs.layout import MANIFEST, TRAIN_METRICS, RunFolder
from pipelines.runs.metrics import read_run_json, run_file_error

CURVES = {"train/loss": "training", "val/loss": "validation"}  # logged column -> the curve's name
# a step as the logger writes it: ASCII digits without a sign, a point or a leading zero (`00` would be a second row
# of step 0; `²` passes str.isdigit, and int() refuses it)
STEP = re.compile(r"0|[1-9][0-9]*")


def logged_step(text: str | None) -> int | None:
    """The step of a training log's row as the logger wrote it, else None."""
    text = (text or "").strip()
    return int(text) if STEP.fullmatch(text) else None


def step_problem(text: str | None, max_steps: int | None) -> str | None:
    """Why `text` is not a step of a run of `max_steps` optimiser steps (logged from 0 to max_steps - 1; None: the
    budget is not known), or None when it is one."""
    step = logged_step(text)
    if step is None:
        return f"step {text!r}, expected a whole number >= 0 in ASCII digits, without a leading zero"
    if max_steps is not None and step >= max_steps:
        return f"step {step} is past the run's {max_steps} steps (logged from 0 to {max_steps - 1})"
    return None


def manifest_steps(manifest: Mapping[str, Any]) -> int | None:
    """The run's optimiser steps (its config's trainer.max_steps), None where its manifest does not say."""
    try:
        steps = manifest["config"]["trainer"]["max_steps"]
    except (KeyError, TypeError):
        return None
    return steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else None


def run_steps(run: RunFolder) -> int | None:
    """The optimiser steps of the run in `run`'s folder (manifest_steps), None without a manifest."""
    return manifest_steps(read_run_json(run, run.path / MANIFEST)) if (run.path / MANIFEST).is_file() else None


def read_training_curves(run: RunFolder) -> dict[str, list[tuple[int, float]]] | None:
    """{curve name: [(step, loss), ...]} from the run's logs/metrics.csv, read once per RunFolder (run.files); None
    when the run folder holds no training log (a run published before studies carried their logs, format 4).
    RunFileError naming the run when the file has no step column, a step that is not one of the run's (step_problem)
    or a value that is not a number."""
    path = run.path / TRAIN_METRICS
    if path not in run.files:
        if not path.is_file():
            return None
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        if rows and "step" not in rows[0]:
            raise run_file_error(run, path, f"no step column (header: {', '.join(rows[0])})")
        curves: dict[str, list[tuple[int, float]]] = {name: [] for name in CURVES.values()}
        steps = run_steps(run)
        for number, row in enumerate(rows, start=1):
            if problem := step_problem(row["step"], steps):
                raise run_file_error(run, path, f"data row {number}: {problem}")
            step = int(row["step"])
            for column, name in CURVES.items():
                cell = (row.get(column) or "").strip()
                if not cell:
                    continue
                try:
                    value = float(cell)
                except ValueError:
                    raise run_file_error(run, path, f"data row {number}: {column} {cell!r} is not a number") from None
                if math.isfinite(value):  # a diverged step stays out of the curve (the loss is inf or nan there)
                    curves[name].append((step, value))
        run.files[path] = {name: points for name, points in curves.items() if points}
    return run.files[path]
