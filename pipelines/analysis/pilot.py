"""What a preset costs a verdict (issue 48's pilot, docs/presets.md): a few encodings x seeds trained under each arm
(a preset and its overrides), and from them the seeds and core-hours a whole roster needs to decide a difference.

For an arm and a reference r, each encoding e's paired SD is the SD over their matched seeds of score(e) - score(r)
(the seed is the unit of replication; SPEC 3). The arm's noise is the median of those SDs, and

    seeds      = seeds_needed(effect, median paired SD, alpha per look, paired)   (the verdict's t-test, 80% power)
    core-hours = seeds x roster size x the arm's median core-seconds a run / 3600

where a run's core-seconds are its training and its 1x test scoring (the verdict's split; the longer test windows
are left out, so that arms that scored them and arms that did not are priced alike): CPU seconds where the run
recorded them, else wall seconds x threads (pipelines.analysis.cost). The arm that needs the fewest core-hours is the
one that decides the most per core-hour.

Also per arm, for the runs that logged validation: at each validation step, the median over encodings of the SD over
seeds of the paired validation-loss difference (does the encoding x seed interaction shrink as training goes on?).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import scipy.stats as sps
from scipy.optimize import brentq

from pipelines.analysis.cost import cpu_seconds, fit_seconds, on_gpu, threads
from pipelines.analysis.loading import TEST_SPLIT, LoadedRun
from pipelines.analysis.verdict import MAX_SEEDS_NEEDED, POWER, seeds_needed, t_test_power


@dataclass(frozen=True)
class Arm:
    """One arm's evidence: `scores` encoding -> seed -> test score (the study's metric), `run_seconds` the
    core-seconds of each finished run (see the module docstring), `validation` encoding -> seed -> step -> val loss."""

    name: str
    scores: dict[str, dict[int, float]]
    run_seconds: list[float]
    validation: dict[str, dict[int, dict[int, float]]]


@dataclass(frozen=True)
class ArmCost:
    """An arm priced against one reference (see the module docstring); `seeds` None when no SD could be formed,
    MAX_SEEDS_NEEDED + 1 when even that many fall short."""

    arm: str
    ref: str
    paired_sd: dict[str, float]  # encoding -> SD of its paired differences to `ref`
    median_sd: float
    seeds: int | None
    seconds_per_run: float
    core_hours: float

    @property
    def affordable(self) -> bool:
        return self.seeds is not None and self.seeds <= MAX_SEEDS_NEEDED


def run_core_seconds(run: LoadedRun) -> float | None:
    """A finished trained run's training and 1x test scoring, in core-seconds (CPU seconds where recorded, else wall
    seconds x threads); None where its records hold neither, or it ran on a GPU."""
    if on_gpu(run) or run.derived:
        return None
    test = run.splits.get(TEST_SPLIT) or {}
    measured = cpu_seconds(run) is not None
    training = fit_seconds(run.manifest, cpu=measured)
    if measured:
        scoring = test.get("cpu_seconds")
    else:
        scoring = test["tokens"] / test["tokens_per_s"] if test.get("tokens") and test.get("tokens_per_s") else None
    if not isinstance(training, int | float) or not isinstance(scoring, int | float):
        return None
    return float(training + scoring) * (1 if measured else threads(run))


def validation_by_seed(runs: list[LoadedRun]) -> dict[str, dict[int, dict[int, float]]]:
    """encoding -> seed -> step -> validation loss, from the finished runs that logged one."""
    curves: dict[str, dict[int, dict[int, float]]] = defaultdict(dict)
    for run in runs:
        points = (run.training_curves or {}).get("validation") if run.finished else None
        if points:
            curves[run.encoding][run.seed] = dict(points)
    return dict(curves)


def paired_sd(scores: dict[str, dict[int, float]], encoding: str, ref: str) -> float:
    """SD (ddof 1) over the seeds both finished of score(encoding) - score(ref); nan under 2 matched seeds."""
    seeds = sorted(set(scores.get(encoding, {})) & set(scores.get(ref, {})))
    if len(seeds) < 2:
        return math.nan
    return float(np.std([scores[encoding][s] - scores[ref][s] for s in seeds], ddof=1))


def arm_cost(arm: Arm, ref: str, effect: float, alpha: float, roster_size: int) -> ArmCost:
    """The arm priced against `ref` (see the module docstring)."""
    sds = {name: paired_sd(arm.scores, name, ref) for name in sorted(arm.scores) if name != ref}
    finite = [sd for sd in sds.values() if math.isfinite(sd)]
    median = float(np.median(finite)) if finite else math.nan
    seeds = seeds_needed(effect, median, alpha, paired=True)
    seconds = float(np.median(arm.run_seconds)) if arm.run_seconds else math.nan
    hours = seeds * roster_size * seconds / 3600 if seeds is not None else math.nan
    return ArmCost(arm.name, ref, sds, median, seeds, seconds, hours)


def detectable_effect(sd: float, seeds: int, alpha: float, power: float = POWER) -> float:
    """The smallest difference a paired two-sided t-test at `alpha` over `seeds` seeds detects with `power`, for a
    paired seed SD `sd` (the inverse of seeds_needed in the effect: power rises with it, so a root search finds it);
    nan without an SD or under 2 seeds."""
    if not (math.isfinite(sd) and sd > 0 and seeds >= 2):
        return math.nan
    df = seeds - 1
    crit = sps.t.ppf(1 - alpha / 2, df)

    def shortfall(d: float) -> float:
        return float(t_test_power(np.array([df]), np.array([d * math.sqrt(seeds)]), np.array([crit]))[0]) - power

    return float(sd * brentq(shortfall, 1e-9, 1e4))


def cheapest(costs: list[ArmCost]) -> ArmCost | None:
    """The arm needing the fewest core-hours for the roster (None when no arm can be priced)."""
    priced = [cost for cost in costs if cost.affordable and math.isfinite(cost.core_hours)]
    return min(priced, key=lambda cost: cost.core_hours) if priced else None


def interaction_by_step(validation: dict[str, dict[int, dict[int, float]]], ref: str) -> dict[int, float]:
    """Step -> the median over encodings of the SD over matched seeds of val(encoding) - val(ref), at every step
    where at least one encoding has 2 matched seeds logged there."""
    by_step: dict[int, list[float]] = defaultdict(list)
    reference = validation.get(ref, {})
    for name, seeds in validation.items():
        if name == ref:
            continue
        steps = {step for seed in seeds.values() for step in seed}
        for step in steps:
            matched = [s for s in seeds if step in seeds[s] and step in reference.get(s, {})]
            if len(matched) >= 2:
                differences = [seeds[s][step] - reference[s][step] for s in matched]
                by_step[step].append(float(np.std(differences, ddof=1)))
    return {step: float(np.median(values)) for step, values in sorted(by_step.items())}


def mean_gap(scores: dict[str, dict[int, float]], encoding: str, ref: str) -> float:
    """Mean over matched seeds of score(encoding) - score(ref); nan without a matched seed."""
    seeds = sorted(set(scores.get(encoding, {})) & set(scores.get(ref, {})))
    return float(np.mean([scores[encoding][s] - scores[ref][s] for s in seeds])) if seeds else math.nan
