"""The training logs a published study carries (format 4): training/<encoding>.csv.gz, one row per logged step of
each run that had a log when it was published,

    run, step, train_loss, val_loss, lr, grad_norm        (a value the step did not log is blank)

the values as the run's logs/metrics.csv wrote them (pipelines.experiment.loggers: the training loss, the learning
rate and the gradient norm before clipping of each optimiser step, the validation loss where the run validated).
No statistic reads them; the study page draws them, and a diagnosis of a study's seeds (docs/presets.md) needs them.
They travel with the study: a run joined from it (pipelines.runs.published_join) gets its logs/metrics.csv back, so
a study built from published evidence draws the same curves as the one built from the run folders.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from domains.atomic import write_text
from pipelines.runs.layout import TRAIN_METRICS, RunFolder
from pipelines.runs.published_format import StudyError, csv_text, gzipped_csv_rows, record_key
from pipelines.runs.train_log import manifest_steps, run_steps, step_problem

TRAINING = "training"  # a folder: <encoding>.csv.gz
TRAINING_FILE_PATTERN = re.compile(rf"{TRAINING}/([^/]+)\.csv\.gz")
LOGGED = {"train/loss": "train_loss", "val/loss": "val_loss", "lr": "lr", "train/grad_norm": "grad_norm"}  # log: study
TRAINING_HEADER = ["run", "step", *LOGGED.values()]


def training_file(encoding: str) -> str:
    return f"{TRAINING}/{encoding}.csv.gz"


def training_rows(run: RunFolder) -> list[list[str]]:
    """The study's rows of the run's logs/metrics.csv (without the run column): one per logged step, its training
    and validation rows merged, in step order; none when the run folder holds no log."""
    path = run.path / TRAIN_METRICS
    if not path.is_file():
        return []
    by_step: dict[int, dict[str, str]] = {}
    steps = run_steps(run)
    with path.open(newline="") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            step = (row.get("step") or "").strip()
            if problem := step_problem(step, steps):
                raise StudyError(f"{path}: line {line}: {problem}: not a log this posbench wrote for {run.label}")
            merged = by_step.setdefault(int(step), {})
            for column, name in LOGGED.items():
                if value := (row.get(column) or "").strip():
                    merged[name] = value
    return [
        [str(step), *(merged.get(name, "") for name in LOGGED.values())] for step, merged in sorted(by_step.items())
    ]


def parse_training(folder: Path, name: str, raw: bytes, records: dict[str, dict], encoding: str) -> dict[str, list]:
    """{run: rows} of a study's training file, every row checked: a run of `encoding` the study holds, a step of its
    budget (step_problem: as the logger writes it, below the run's max_steps) once, each value blank or a finite
    number >= 0; StudyError naming the file, the run and the line otherwise."""
    path = folder / name
    rows = gzipped_csv_rows(path, raw, TRAINING_HEADER)
    out: dict[str, list[list[str]]] = {}
    seen: set[tuple[str, str]] = set()
    for line, row in enumerate(rows, start=2):
        where = f"{path}: line {line}"
        if len(row) != len(TRAINING_HEADER):
            expected = f"{len(TRAINING_HEADER)} ({','.join(TRAINING_HEADER)})"
            raise StudyError(f"{where}: {len(row)} fields, expected {expected}")
        label, step, *values = row
        if label not in records:
            raise StudyError(f"{where}: a row of {label}, which the study holds no record of")
        if record_key(records[label]).encoding != encoding:
            raise StudyError(f"{where}: a row of {label}, which is no run of {encoding}")
        if problem := step_problem(step, manifest_steps(records[label].get("manifest") or {})):
            raise StudyError(f"{where}: {label}, {problem}")
        if (label, step) in seen:
            raise StudyError(f"{where}: {label}, step {step} listed twice")
        seen.add((label, step))
        for column, value in zip(TRAINING_HEADER[2:], values, strict=True):
            if value and not _non_negative(value):
                raise StudyError(f"{where}: {label}, step {step}: {column} {value!r}, expected a finite number >= 0")
        out.setdefault(label, []).append([step, *values])
    return out


def _non_negative(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and value >= 0


def write_training_log(folder: Path, rows: list[list[str]]) -> None:
    """A joined run's logs/metrics.csv from its published rows, in the columns the run's logger wrote."""
    header = ["step", *LOGGED]
    write_text(folder / TRAIN_METRICS, csv_text(header, rows))
