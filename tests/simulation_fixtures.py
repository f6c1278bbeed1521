"""Simulated studies for the tests of the verdict's rates (tests/test_moderated_simulations.py,
tests/test_verdict_simulations.py, tests/test_settle_simulations.py): each published study's seed SDs and seed
covariance, null or shifted studies drawn as Evidence, and `make settle`'s design run over them as it trains: the
first look's seeds for every encoding, then at each look only the runs the design calls for (the reference and the
open pairs' encodings), through the code's own families (pipelines.analysis.sequential)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from domains.base import Metric
from pipelines.analysis.design import Design
from pipelines.analysis.matrix import Evidence
from pipelines.analysis.sequential import Comparator, FamilyResult, family_over, joined_verdicts

NLL = Metric("test NLL", "NLL", "nats", higher_is_better=False, digits=4)  # region of practical equivalence 0.005
STUDIES = Path(__file__).resolve().parents[1] / "docs" / "results"
# every published study whose seed SDs the verdict is simulated under, and its domain: the confirmatory studies'
# profiles are their own (maestro-confirm's FoX has ten times the median seed SD)
PUBLISHED = {
    "jsb-cpu": "jsb",
    "jsb-confirm": "jsb",
    "maestro-cpu": "maestro",
    "maestro-confirm": "maestro",
    "synthetic-cpu": "synthetic",
}


def monte_carlo_bound(rate: float, studies: int) -> float:
    """rate plus three binomial standard errors: what a simulated rate may exceed its bound by, by chance."""
    return rate + 3 * math.sqrt(rate * (1 - rate) / studies)


def study_profile(study: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(encodings, the reference first; each one's seed SD over its published seeds; the covariance of their seed
    scores over the seeds all of them finished, plus a tenth of each variance on its diagonal so that it is not
    singular) from the published study's summary.json."""
    domain = PUBLISHED[study]
    summary = json.loads((STUDIES / study / "summary.json").read_text())["domains"][domain]
    seeds = {name: {int(k): v for k, v in row["seeds"].items()} for name, row in summary["encodings"].items()}
    ref = summary["reference"]
    names = [ref, *sorted(name for name in seeds if name != ref)]
    sds = np.array([np.std(list(seeds[name].values()), ddof=1) for name in names])
    common = sorted(set.intersection(*(set(seeds[name]) for name in names)))
    covariance = np.cov(np.array([[seeds[name][s] for s in common] for name in names]))
    return names, sds, covariance + np.diag(0.1 * np.diag(covariance) + 1e-10)


def study_deltas(study: str) -> np.ndarray:
    """Each encoding's published Δ to the reference (the reference's 0 first), in study_profile's order: a world
    whose true differences are the study's estimates."""
    domain = PUBLISHED[study]
    summary = json.loads((STUDIES / study / "summary.json").read_text())["domains"][domain]
    names, _, _ = study_profile(study)
    return np.array([0.0 if name == summary["reference"] else summary["encodings"][name]["matched"] for name in names])


def simulated(
    rng,
    seeds: int,
    sds: np.ndarray | None = None,
    covariance: np.ndarray | None = None,
    shifts: np.ndarray | None = None,
) -> Evidence:
    """A study of equal encodings (plus `shifts`, one true Δ per encoding): each (encoding, seed) moved by an
    independent shift of the encoding's SD (or a draw from `covariance`), every seed by a shared one; two examples
    (the verdicts read seed means). The reference is `e00`."""
    if covariance is not None:
        moves = (np.linalg.cholesky(covariance) @ rng.normal(size=(covariance.shape[0], seeds)))[:, :, None]
    else:
        moves = rng.normal(size=(sds.size, seeds, 1)) * sds[:, None, None]
    values = 2.0 + moves + rng.normal(0, 0.01, (1, seeds, 1)) + rng.normal(0, 1e-4, (moves.shape[0], seeds, 2))
    if shifts is not None:
        values = values + np.asarray(shifts, float)[:, None, None]
    names = tuple(f"e{i:02d}" for i in range(values.shape[0]))
    return Evidence("jsb", NLL, names, tuple(range(seeds)), (0, 1), values, "example")


def first_encodings(full: Evidence, count: int) -> Evidence:
    """The study of `full`'s first `count` encodings alone."""
    return Evidence(
        full.domain, full.metric, full.encodings[:count], full.seeds, full.example_ids, full.values[:count], full.blocks
    )


def held_only(full: Evidence, held: np.ndarray) -> Evidence:
    """`full` with only the (encoding, seed) runs `held` marks finished (the others nan)."""
    values = np.where(held[:, :, None], full.values, np.nan)
    return Evidence(full.domain, full.metric, full.encodings, full.seeds, full.example_ids, values, full.blocks)


@dataclass
class Settled:
    """A design run as make settle trains it: its own family, the joined one, and the runs it trained."""

    family: FamilyResult
    joined: FamilyResult | None
    evidence: Evidence  # the runs trained (every other cell nan)

    @property
    def runs(self) -> int:
        return int(np.isfinite(self.evidence.values[:, :, 0]).sum())


def as_settle_trains(
    full: Evidence,
    design: Design,
    members: list[str],
    newcomers: dict[str, int] | None = None,
    blocked: bool = True,
    plan: bool = False,
) -> Settled:
    """Run `design` over `full` (every seed of every encoding drawn in advance) as `make settle` trains it: the
    reference and `members` start with the first look's seeds, each newcomer (an encoding that joined the study)
    with its first `newcomers[name]` seeds; after each look only the runs the design's families call for
    (SeedVerdicts.next_runs: the reference and the open pairs' encodings, of the study's family and of the joined
    one) are added, until the families call for none. `plan`: the looks carry their planning figures (each open
    pair's predictive power at the next look)."""
    newcomers = newcomers or {}
    held = np.zeros(full.values.shape[:2], bool)
    first = len(design.look_seeds(0))
    for name in [design.ref, *members]:
        held[full.encodings.index(name), :first] = True
    for name, count in newcomers.items():
        held[full.encodings.index(name), :count] = True
    # one Comparator throughout, its evidence's runs added in place as they are trained: a look's statistics are a
    # function of its own seeds' runs, which later runs never change, so what it cached stays true
    evidence = held_only(full, held)
    comparator = Comparator(evidence, blocked)
    while True:
        family = family_over(comparator, design, design.ref, members, plan_seeds=False)
        joined, _ = joined_verdicts(comparator, design, design.ref, list(newcomers))
        runs = [*family.next_runs, *(joined.next_runs if joined else [])]
        if not runs:
            if plan:
                family = family_over(comparator, design, design.ref, members, plan_seeds=False, predict=True)
            return Settled(family, joined, evidence)
        for name, seed in runs:
            row, column = full.encodings.index(name), full.seeds.index(seed)
            evidence.values[row, column] = full.values[row, column]
