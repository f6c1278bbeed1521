"""NLL by position, seeds pooled: the test split's curve of each encoding, and a Curve per (split scored past the
training context, encoding) for the extrapolation tables and figures."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from pipelines.analysis.evidence import finished_by, training_context
from pipelines.analysis.loading import LoadedRun
from pipelines.runs.metrics import is_evaluated

_LENGTH_FACTOR = re.compile(r"_(\d+)x$")  # test_2x: evaluated at 2x the training context


class PositionNLL(NamedTuple):
    """NLL summed over the seeds at each position where any token was scored."""

    positions: np.ndarray
    nll_sum: np.ndarray
    tokens: np.ndarray


def pooled_positions(tables: Iterable[dict[str, np.ndarray]]) -> PositionNLL:
    """per_position tables (position, nll_sum, tokens) summed position by position (over seeds)."""
    tables = list(tables)
    size = 1 + max(int(table["position"].max()) for table in tables)
    nll_sum, tokens = np.zeros(size), np.zeros(size)
    for table in tables:
        position = table["position"].astype(int)
        nll_sum += np.bincount(position, table["nll_sum"], size)
        tokens += np.bincount(position, table["tokens"], size)
    positions = np.flatnonzero(tokens)
    return PositionNLL(positions, nll_sum[positions], tokens[positions])


def pooled_split_positions(runs: Iterable[LoadedRun], split: str) -> PositionNLL:
    return pooled_positions(run.position_table(split) for run in runs)


@dataclass(frozen=True)
class Curve:
    """Per-position NLL of one encoding on one split longer than the training context, seeds pooled.

    status: "ok", "n/a" (every seed skipped the split, `note` says why) or "missing" (no finished run).
    `seed_past`: each evaluated seed's own NLL at positions >= L (token-weighted), what the seed-paired test of the
    extrapolation compares.
    """

    group: str
    split: str
    length: int  # window length the split is scored at
    context: int  # training context L
    encoding: str
    status: str
    note: str = ""
    seeds: int = 0
    by_position: PositionNLL = field(default_factory=lambda: PositionNLL(np.zeros(0, int), np.zeros(0), np.zeros(0)))
    seed_past: dict[int, float] = field(default_factory=dict)

    def mean_nll(self, past: bool) -> float:
        """Token-weighted NLL at positions >= L (`past`) or < L, seeds pooled; nan when there is none."""
        return past_mean(self.by_position, self.context, past)


def past_mean(by_position: PositionNLL, context: int, past: bool = True) -> float:
    """Token-weighted NLL at positions >= context (`past`) or < context; nan when there is none."""
    kept = (by_position.positions >= context) == past
    n = by_position.tokens[kept].sum()
    return float(by_position.nll_sum[kept].sum() / n) if n > 0 else math.nan


def split_length(split: str, entry: dict, context: int) -> int | None:
    """The window length a split was scored at: the entry's `window_length` when the evaluation recorded it,
    else the name's factor times the training context (`test_2x`: 2L), else None (scored at L)."""
    if "window_length" in entry:
        return int(entry["window_length"])
    factor = _LENGTH_FACTOR.search(split)
    return int(factor[1]) * context if factor else None


def load_extrapolation(group: str, runs: list[LoadedRun]) -> list[Curve]:
    """A Curve per (split longer than the training context, encoding) of one domain or task."""
    finished = [run for run in runs if run.finished]
    if not finished:
        return []
    context = training_context(finished)
    splits = {run: run.splits for run in finished}
    lengths = {}
    for entries in splits.values():
        for split, entry in entries.items():
            length = split_length(split, entry, context)
            if length is not None and length > context:
                lengths[split] = max(length, lengths.get(split, 0))
    by_encoding = finished_by(finished, "encoding")
    encodings = sorted({run.encoding for run in runs})
    curves = []
    for split, length in sorted(lengths.items(), key=lambda item: (item[1], item[0])):
        for encoding in encodings:
            enc_runs = by_encoding.get((encoding,), [])
            evaluated = [run for run in enc_runs if is_evaluated(splits[run].get(split))]
            common = {"group": group, "split": split, "length": length, "context": context, "encoding": encoding}
            if evaluated:
                tables = {run.seed: run.position_table(split) for run in evaluated}
                pooled = pooled_positions(tables.values())
                seed_past = {seed: past_mean(pooled_positions([t]), context) for seed, t in tables.items()}
                curves.append(
                    Curve(**common, status="ok", seeds=len(evaluated), by_position=pooled, seed_past=seed_past)
                )
                continue
            reasons = sorted({splits[run][split]["skipped"] for run in enc_runs if split in splits[run]})
            curves.append(
                Curve(**common, status="n/a", note="; ".join(reasons)) if reasons else Curve(**common, status="missing")
            )
    return curves
