"""One domain's result as plain data: what the per-domain report and the cross-domain study read."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from domains.base import Metric
from pipelines.analysis.curves import Curve, PositionNLL
from pipelines.analysis.stats import PairedResult, ranks

TEST_SPLIT = "test"
# SPEC 3: "ref = `darope` by default, configurable".
DEFAULT_REF = "darope"


@dataclass(frozen=True)
class Entry:
    """One encoding's result in one domain.

    `score` is the domain's metric (mean test NLL; for a domain with tasks the mean chance-normalised test accuracy
    over the tasks) with its 95% t-interval over the `n` examples (tasks). `seed_scores` is the same score from
    each seed alone. `test` is the paired test against the reference (domains compared per example).
    """

    encoding: str
    score: float
    ci_lo: float
    ci_hi: float
    n: int
    seed_scores: dict[int, float]
    test: PairedResult | None = None

    @property
    def seed_sd(self) -> float:
        values = np.array(list(self.seed_scores.values()))
        return float(values.std(ddof=1)) if values.size > 1 else math.nan


@dataclass(frozen=True)
class Cell:
    """One (task, encoding, split) of a domain with tasks, over the finished seeds.

    status: "ok"; "n/a" (the split was skipped, `note` says why: e.g. a learned absolute table cannot be
    evaluated past its length); "missing" (no finished run reports this split).
    """

    status: str
    accuracy: float = math.nan  # token accuracy, mean over the seeds that evaluated the split
    chance_normalised: float = math.nan
    nll: float = math.nan
    seeds: int = 0
    note: str = ""


@dataclass(frozen=True)
class TaskTable:
    """A domain with tasks: each task's chance level and cells[split][task][encoding]."""

    chance: dict[str, float]
    cells: dict[str, dict[str, dict[str, Cell]]]

    def accuracy(self, split: str = TEST_SPLIT) -> dict[str, dict[str, float]]:
        """{task: {encoding: accuracy}} of one split (nan where not evaluated)."""
        return {task: {enc: cell.accuracy for enc, cell in row.items()} for task, row in self.cells[split].items()}


@dataclass
class DomainResult:
    """What the reports and the study need from one domain."""

    domain: str
    metric: Metric
    preset: str
    ref: str | None  # the reference of the paired tests, None when there are none
    no_tests_reason: str | None  # why there are no paired tests (domains compared per example)
    entries: dict[str, Entry]  # best first
    incomplete: dict[str, str]  # encoding -> why it has no score here
    seen: set[str]  # trained encodings with any run folder in the domain, finished or not
    missing: list[str]
    extrapolation: list[Curve]
    position_curves: dict[str, PositionNLL] = field(default_factory=dict)  # test NLL by position, per encoding
    tasks: TaskTable | None = None  # a domain with tasks

    @property
    def per_example(self) -> bool:
        """Compared per test example (an NLL domain), not per task."""
        return self.tasks is None

    def scores(self) -> dict[str, float]:
        return {name: entry.score for name, entry in self.entries.items()}

    def ranks(self) -> dict[str, float]:
        return ranks(self.scores(), lower_is_better=not self.metric.higher_is_better)
