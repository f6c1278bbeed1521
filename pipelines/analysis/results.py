"""One domain's result as plain data: what the per-domain report and the cross-domain study read."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from domains.base import Metric
from pipelines.analysis.cost import Cost, decided_count
from pipelines.analysis.curves import Curve, PositionNLL
from pipelines.analysis.evidence import SeedSelection
from pipelines.analysis.matrix import Evidence
from pipelines.analysis.sequential import SeedVerdicts
from pipelines.analysis.stats import FriedmanResult, PairedResult, mean_ci, ranks, within_example_ci
from pipelines.analysis.verdict import PairVerdict

TEST_SPLIT = "test"


@dataclass(frozen=True)
class Entry:
    """One encoding's result in one domain.

    `score` is the domain's metric (mean test NLL; for a domain with tasks the mean chance-normalised test accuracy
    over the tasks) over the `n` examples (tasks) and the encoding's own finished seeds (which may differ from
    another encoding's: compare encodings by the matched Δ of DomainResult.matched, not by this), with two 95%
    intervals: the within-example interval of SPEC 3
    (ci_lo, ci_hi: Cousineau's normalisation with Morey's correction, what paper 000's Figure 3 draws) and the
    ordinary t-interval between examples (between_lo, between_hi), much wider where examples differ in difficulty.
    `seed_scores` is the same score from each seed alone (the seeds this encoding finished). `verdict` is the
    seed-aware verdict against the reference (the headline); `test` is paper 000 C.2's per-example paired test
    against it (domains compared per example), conditional on the trained models.
    """

    encoding: str
    score: float
    ci_lo: float
    ci_hi: float
    between_lo: float
    between_hi: float
    n: int
    seed_scores: dict[int, float]
    test: PairedResult | None = None
    verdict: PairVerdict | None = None

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
    seeds: SeedSelection  # the seeds every compared encoding finished, of those with a run folder
    ref: str | None  # the reference of the paired tests, None when there are none
    no_tests_reason: str | None  # why there are no paired tests (domains compared per example)
    entries: dict[str, Entry]  # best first
    incomplete: dict[str, str]  # encoding -> why it has no score here
    seen: set[str]  # trained encodings with any run folder in the domain, finished or not
    missing: list[str]
    extrapolation: list[Curve]
    position_curves: dict[str, PositionNLL] = field(default_factory=dict)  # test NLL by position, per encoding
    tasks: TaskTable | None = None  # a domain with tasks
    # Friedman test over the test examples (blocks) of the encodings in `entries` order, with the Nemenyi critical
    # difference: a domain compared per example with at least 2 examples and 2 encodings
    example_friedman: FriedmanResult | None = None
    verdicts: SeedVerdicts | None = None  # the seed-aware verdicts (primary family, every pair, variance)
    evidence: Evidence | None = None  # the (encoding, seed, example) scores every statistic was computed from
    # what ranks the domain's encodings: each one's Δ to the reference on the seeds both finished (the reference
    # 0; the Δ of its verdict where it has one), or, without a reference, its score on the seeds every encoding
    # finished; never means over unequal seed sets
    matched: dict[str, float] = field(default_factory=dict)
    # (group, split) -> each encoding's seed-paired verdict against the reference on its NLL past the training length
    # (pipelines.analysis.extrapolation.past_length_verdicts)
    past_verdicts: dict[tuple[str, str], list[PairVerdict]] = field(default_factory=dict)
    commits: dict[str, list[str]] = field(default_factory=dict)  # code commit -> the finished runs trained at it
    cost: Cost | None = None  # what the compared runs cost (pipelines.analysis.cost)
    # a study of `ranked_with` at other settings, bridged into that domain's ranking (pipelines.analysis.bridge; this
    # result's `domain` is then the study's name): what its runs train differently, {setting: (its, the domain's)}
    ranked_with: str | None = None
    bridge_settings: dict[str, tuple] = field(default_factory=dict)

    @property
    def decided(self) -> int:
        """How many pairs against the reference are decided (pipelines.analysis.cost.DECIDING)."""
        return decided_count([pair.verdict for pair in self.verdicts.verdicts().values()]) if self.verdicts else 0

    @property
    def below_first_look(self) -> bool:
        """A designed study whose first look is not reached (a slice of it published while it trains): its
        encodings hold unequal seeds, some none, and no pair is tested, so it joins no cross-domain rank yet."""
        verdicts = self.verdicts
        if verdicts is None or verdicts.family is None:
            return False
        return verdicts.family.design.sequential and not verdicts.family.looks

    @property
    def per_example(self) -> bool:
        """Compared per test example (an NLL domain), not per task."""
        return self.tasks is None

    @property
    def blocks(self) -> str:
        """What the intervals and the mean run over: "example" or "task"."""
        return "example" if self.per_example else "task"

    @property
    def interval(self) -> str:
        """The interval the entries' ci_lo, ci_hi hold (tasks are the examples of a domain with tasks)."""
        return f"95% within-{self.blocks}"

    @property
    def heading(self) -> str:
        """The result's name in bold as the answer and the tables open with it; a bridged study's says what it is."""
        if self.ranked_with is None:
            return f"**{self.domain}**"
        changed = ", ".join(f"{key} {mine}" for key, (mine, _) in self.bridge_settings.items())
        return (
            f"**{self.domain}** ({self.ranked_with} at {changed or 'the same settings'}; ranked in {self.ranked_with} "
            f"by each encoding's Δ to this study's own `{self.ref}`)"
        )

    def scores(self) -> dict[str, float]:
        """Each encoding's score over its own seeds (descriptive: seed sets may differ)."""
        return {name: entry.score for name, entry in self.entries.items()}

    def ranks(self, among: set[str] | None = None) -> dict[str, float]:
        """Rank of each scored encoding by the matched rule (1 = best, ties averaged), among all of them or only
        those `among`."""
        scores = {name: score for name, score in self.matched.items() if among is None or name in among}
        return ranks(scores, lower_is_better=not self.metric.higher_is_better)

    def best(self) -> str | None:
        """The encoding ranked first by the matched rule (what a table puts in bold)."""
        return first_ranked(self.ranks())


def first_ranked(rank: dict[str, float]) -> str | None:
    """The encoding of the lowest rank (ties: the first name), NaN ranks aside; None where none is ranked."""
    scored = {name: value for name, value in rank.items() if not math.isnan(value)}
    return min(scored, key=lambda name: (scored[name], name)) if scored else None


def bridged_settings_text(settings: dict[str, tuple]) -> str:
    """A bridged study's settings against its domain's, {setting: (its, the domain's)}, as the reports write them."""
    return ", ".join(f"{key} {mine} (the domain's {theirs})" for key, (mine, theirs) in settings.items())


def entries_with_intervals(
    scores: dict[str, np.ndarray],
    seed_scores: dict[str, dict[int, float]],
    tests: dict[str, PairedResult],
    verdicts: dict[str, PairVerdict],
    own: list[str] | None = None,
) -> dict[str, Entry]:
    """An Entry per encoding from its scores over the same blocks (examples or tasks, aligned), with the
    within-example interval and the between-example t-interval. The within-example interval normalises each example
    over the encodings compared together: the study's `own` encodings (all when None), and an encoding that joined
    the study over those and itself, so that no joined encoding moves the study's own intervals."""
    names = list(scores)
    own = names if own is None else [name for name in names if name in own]
    matrix = np.array([scores[name] for name in names], dtype=float)
    rows = [names.index(name) for name in own]
    means, lo, hi = (np.empty(len(names)) for _ in range(3))
    studied = within_example_ci(matrix[rows])
    for k, row in enumerate(rows):
        means[row], lo[row], hi[row] = (part[k] for part in studied)
    for i, name in enumerate(names):
        if name not in own:
            joined = within_example_ci(matrix[[*rows, i]])
            means[i], lo[i], hi[i] = (part[-1] for part in joined)
    entries = {}
    for i, name in enumerate(names):
        _, between_lo, between_hi = mean_ci(matrix[i])
        entries[name] = Entry(
            name,
            float(means[i]),
            float(lo[i]),
            float(hi[i]),
            between_lo,
            between_hi,
            matrix.shape[1],
            seed_scores[name],
            tests.get(name),
            verdicts.get(name),
        )
    return entries
