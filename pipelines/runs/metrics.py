"""The metrics files of a run folder, written by the evaluation and read by the analysis: one format, one place.

metrics/<split>.per_example.csv    example, nll, tokens, correct, exact
metrics/<split>.per_position.csv   position, nll_sum, tokens       (positions with at least one scored token)
metrics/summary.json               {"splits": {split: entry}}; an entry holds "skipped" (the reason) when the
                                   split was not evaluated, else the split's summary (nll, accuracy, ...)
"""

from __future__ import annotations

import json
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


def read_json(path: Path) -> dict:
    with path.open() as f:
        return json.load(f)


def read_csv(path: Path) -> dict[str, np.ndarray]:
    """A numeric CSV file with a header line as {column: float array}."""
    with path.open() as f:
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


def split_entries(run: RunFolder) -> dict[str, dict]:
    """metrics/summary.json's {split: entry}."""
    return read_json(summary_path(run.path))["splits"]


def is_evaluated(entry: dict | None) -> bool:
    return entry is not None and "skipped" not in entry


def read_per_example(run: RunFolder, split: str) -> dict[str, np.ndarray]:
    return read_csv(per_example_path(run.path, split))
