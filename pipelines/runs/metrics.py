"""The metrics files of a run folder, written by the evaluation and read by the analysis: one format, one place.

metrics/<split>.per_example.csv    example, nll, tokens, correct, exact
metrics/<split>.per_position.csv   position, nll_sum, tokens       (positions with at least one scored token)
metrics/summary.json               {"splits": {split: entry}}; an entry holds "skipped" (the reason) when the
                                   split was not evaluated, else the split's summary (nll, accuracy, ...)
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from domains.atomic import write_json, write_text
from models.training import EvalResult
from pipelines.runs.layout import METRICS, RunFolder

SUMMARY = "summary.json"


def summary_path(run: Path) -> Path:
    return run / METRICS / SUMMARY


def per_example_path(run: Path, split: str) -> Path:
    return run / METRICS / f"{split}.per_example.csv"


def per_position_path(run: Path, split: str) -> Path:
    return run / METRICS / f"{split}.per_position.csv"


# ------------------------------------------------------------------------------------------------ writing


def write_split_metrics(run: Path, split: str, result: EvalResult) -> None:
    rows = ["example,nll,tokens,correct,exact"] + [
        f"{i},{nll:.8f},{n},{c},{int(c == n)}"
        for i, (nll, n, c) in enumerate(zip(result.nll, result.tokens, result.correct, strict=True))
    ]
    write_text(per_example_path(run, split), "\n".join(rows) + "\n")
    seen = np.nonzero(result.position_tokens)[0]
    rows = ["position,nll_sum,tokens"] + [
        f"{p},{result.position_nll_sum[p]:.8f},{result.position_tokens[p]}" for p in seen
    ]
    write_text(per_position_path(run, split), "\n".join(rows) + "\n")


def write_summary(run: Path, splits: dict[str, dict]) -> dict:
    summary = {"splits": splits}
    write_json(summary_path(run), summary)
    return summary


# ------------------------------------------------------------------------------------------------ reading


class RunFileError(ValueError):
    """A file of a run folder is missing, truncated or corrupt, or holds numbers no comparison can use."""


def run_file_error(run: RunFolder, path: Path, what: str) -> RunFileError:
    """The error for one file of one run: it names the domain, the encoding, the seed and the path."""
    task = f", task {run.key.task}" if run.key.task else ""
    return RunFileError(f"{path}: {what} (domain {run.domain}{task}, encoding {run.encoding}, seed {run.seed})")


def read_csv(path: Path) -> dict[str, np.ndarray]:
    """A numeric CSV file with a header line as {column: float array}."""
    with path.open() as f, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "input contained no data": refused just below, by name
        header = f.readline().strip().split(",")
        try:
            values = np.loadtxt(f, delimiter=",", ndmin=2)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from error
    if values.shape[0] == 0:
        raise ValueError(f"{path} has no rows")
    if values.shape[1] != len(header):
        raise ValueError(f"{path}: {values.shape[1]} columns under a header of {len(header)}")
    return dict(zip(header, values.T, strict=True))


def read_json_file(path: Path) -> dict:
    """The JSON object in `path` (a run folder's file, given by path: the entry points' argument); RunFileError
    starting with the path when it is missing, truncated or corrupt."""
    try:
        with path.open() as f:
            value = json.load(f)
    except FileNotFoundError:
        raise RunFileError(f"{path}: missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RunFileError(f"{path}: truncated or corrupt, not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise RunFileError(f"{path}: expected a JSON object, found {type(value).__name__}")
    return value


def read_run_json(run: RunFolder, path: Path) -> dict:
    """A JSON object of the run's folder (read once per RunFolder, then from run.files: treat it as read-only);
    RunFileError naming the run when it is missing, truncated or corrupt."""
    if path not in run.files:
        try:
            run.files[path] = read_json_file(path)
        except RunFileError as error:
            raise run_file_error(run, path, str(error).removeprefix(f"{path}: ")) from None
    return run.files[path]


def read_run_csv(run: RunFolder, path: Path, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
    """A numeric metrics table of the run (read once per RunFolder, then from run.files: treat it as read-only) with
    (at least) these columns, every value finite; RunFileError naming the run otherwise."""
    if path not in run.files:
        try:
            run.files[path] = read_csv(path)
        except FileNotFoundError:
            raise run_file_error(run, path, "missing") from None
        except (ValueError, UnicodeDecodeError) as error:
            what = f"truncated or corrupt ({str(error).removeprefix(f'{path}: ')})"
            raise run_file_error(run, path, what) from None
    table = run.files[path]
    absent = [column for column in columns if column not in table]
    if absent:
        raise run_file_error(run, path, f"no column {', '.join(absent)} (header: {', '.join(table)})")
    for column in columns:
        bad = np.flatnonzero(~np.isfinite(table[column]))
        if bad.size:
            row = int(bad[0])
            raise run_file_error(
                run, path, f"{column} is {table[column][row]} in data row {row + 1} ({bad.size} non-finite values)"
            )
    return table


def split_entries(run: RunFolder) -> dict[str, dict]:
    """metrics/summary.json's {split: entry}."""
    path = summary_path(run.path)
    splits = read_run_json(run, path).get("splits")
    if not isinstance(splits, dict) or not all(isinstance(entry, dict) for entry in splits.values()):
        raise run_file_error(run, path, 'expected {"splits": {split: entry}}')
    return splits


def is_evaluated(entry: dict | None) -> bool:
    return entry is not None and "skipped" not in entry


def read_per_position(run: RunFolder, split: str) -> dict[str, np.ndarray]:
    return read_run_csv(run, per_position_path(run.path, split), ("position", "nll_sum", "tokens"))
