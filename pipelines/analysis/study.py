"""The cross-domain study (SPEC section 3; paper 000, Figure 3): every domain's result, the mean rank of each
encoding across domains with its standard error, (beyond the paper) Friedman tests with the Nemenyi critical
difference over the domains and over the tasks of a domain with tasks, and the attention by distance of the runs
that were inspected (pipelines.analysis.recency).

Mean ranks, their standard errors and the Friedman test over the domains take only the encodings scored in every
compared domain, ranked among themselves: an encoding run in one domain alone would otherwise take that domain's
rank as its mean and shift everyone else's. The others keep their rank within each domain where they were scored
(`partial_ranks`) and get no mean rank.

A study of one domain at other settings can join the domain's ranking (`make compare BRIDGE=`; its result's
`ranked_with` names the domain): each of its encodings the domain does not hold is ranked there by its matched Δ to
the bridged study's own runs of the shared reference, as the domain's own encodings are by theirs (ranking_groups,
ranked_scores). That reads a Δ measured at other settings as if it carried over, which the report says wherever it
shows one."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from scipy import stats as sps

from pipelines.analysis.bridge import Bridge, bridged, relabelled
from pipelines.analysis.design import DEFAULT_REF
from pipelines.analysis.domain import analyse_domain
from pipelines.analysis.evidence import missing_runs, require_finished
from pipelines.analysis.loading import EvidenceError, LoadedDomain, LoadedRun, load_domain
from pipelines.analysis.recency import StudyRecency, study_recency
from pipelines.analysis.results import DomainResult, first_ranked
from pipelines.analysis.stats import FriedmanResult, cd_groups, chance_normalised, friedman, ranks, summarise_ranks
from pipelines.analysis.verdict import BOOTSTRAP_SEED
from pipelines.experiment.config import domain_names
from pipelines.runs.layout import present_domains


@dataclass(frozen=True)
class BlockTest:
    """A Friedman test over named blocks (domains or tasks) and the encodings scored in every block."""

    result: FriedmanResult
    encodings: list[str]  # in the order of result.mean_ranks
    blocks: list[str]
    left_out: list[str]  # encodings missing from some block
    at_chance: list[str] = field(default_factory=list)  # blocks (tasks) left out: no encoding beats chance there

    def by_rank(self) -> list[str]:
        return [self.encodings[i] for i in np.argsort(self.result.mean_ranks, kind="stable")]

    def not_separated(self) -> list[list[str]]:
        """The groups of encodings (best first) whose mean ranks lie within the critical difference."""
        ordered = self.by_rank()
        return [ordered[first : last + 1] for first, last in cd_groups(self.result.mean_ranks, self.result.cd)]


@dataclass
class Study:
    """Everything the study's summary.md, summary.csv and summary.json report."""

    runs_root: Path
    ref: str
    results: list[DomainResult]
    unfinished_domains: dict[str, list[str]]  # domain -> its missing-run lines (no finished run at all)
    order: list[str]  # encodings: by mean rank, then those scored in some domains only, then those never scored
    mean_rank: dict[str, tuple[float, float]]  # the encodings scored in every domain: (mean, standard error)
    partial_ranks: dict[str, dict[str, float]]  # the others: {domain: rank within the domain} where scored
    # over the domains compared per example only (paper 000's Figure 3 leaves the synthetic tasks out), when a
    # domain with tasks is in the study too
    per_example_mean_rank: dict[str, tuple[float, float]] | None
    friedman: dict[str, BlockTest | str]  # "domains", "<domain> tasks" -> the test or why it was not run
    # the mean rank's uncertainty over training seeds: encoding -> (2.5%, 97.5% percentiles, P(best mean rank))
    rank_interval: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    recency: StudyRecency = field(default_factory=lambda: StudyRecency([], []))  # the inspected runs' attention
    runs: list[LoadedRun] = field(default_factory=list)  # the runs compared, as loaded (the study page's one-run view)

    # each ranked domain's ranking of all its encodings, bridged ones included (what partial ranks and the study's
    # rank column show): domain -> encoding -> rank
    domain_ranks: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def domains(self) -> list[str]:
        """Every result's name: the domains, and the bridged studies (each reported in its own folder)."""
        return [result.domain for result in self.results]

    @property
    def ranked_domains(self) -> list[str]:
        """The domains the mean rank averages over (a bridged study is ranked inside its domain)."""
        return list(ranking_groups(self.results))

    @property
    def unranked(self) -> dict[str, str]:
        """The results no rank takes in, and why (unranked_domains)."""
        return unranked_domains(self.results)

    def best_in(self, result: DomainResult) -> str | None:
        """The first of the ranking `result` is shown in (its domain's, a bridged study's included), as a table puts
        it in bold; the result's own first where the study holds no ranking."""
        rank = self.domain_ranks.get(result.ranked_with or result.domain)
        if not rank:
            return result.best()
        return first_ranked(rank)

    @property
    def missing(self) -> list[str]:
        """Every missing-run line of the study: per domain, then the domains without any finished run."""
        lines = [line for result in self.results for line in result.missing]
        return lines + [line for lines in self.unfinished_domains.values() for line in lines]


def _complete_matrix(table: dict[str, dict[str, float]]) -> tuple[np.ndarray, list[str], list[str]]:
    """(blocks x encodings score matrix, encodings scored in every block, encodings left out)."""
    everywhere = [
        enc
        for enc in dict.fromkeys(e for row in table.values() for e in row)
        if all(not math.isnan(row.get(enc, math.nan)) for row in table.values())
    ]
    left_out = sorted({e for row in table.values() for e in row} - set(everywhere))
    matrix = np.array([[row[enc] for enc in everywhere] for row in table.values()], dtype=float).reshape(
        len(table), len(everywhere)
    )
    return matrix, everywhere, left_out


def friedman_over(table: dict[str, dict[str, float]], higher_is_better: list[bool], blocks: str) -> BlockTest | str:
    """The Friedman test over the blocks of `table` (block -> encoding -> score), or why it was not run.

    The direction is per block, so domains of different metrics (NLL, accuracy) share one test: each block is
    ranked in its own direction, and ranks are all the Friedman test uses."""
    matrix, encodings, left_out = _complete_matrix(table)
    if len(table) < 2 or len(encodings) < 2:
        return (
            f"not run: needs at least 2 {blocks} and 2 encodings scored in every one; "
            f"here {len(table)} and {len(encodings)}"
        )
    oriented = np.where(np.array(higher_is_better)[:, None], -matrix, matrix)  # negate the higher-is-better blocks
    return BlockTest(friedman(oriented, lower_is_better=True), encodings, list(table), left_out)


def ranking_groups(results: list[DomainResult]) -> dict[str, list[DomainResult]]:
    """Each ranked domain's results: the domain's own first, then the studies bridged into its ranking. EvidenceError
    when a bridged study's domain is not compared, or the two do not share a reference and a metric: a Δ to another
    reference, or in another metric, cannot be ranked beside the domain's. A result below its design's first look
    ranks nowhere (unranked_domains), nor do the studies bridged into its domain."""
    unranked = unranked_domains(results)
    groups = {
        result.domain: [result] for result in results if result.ranked_with is None and result.domain not in unranked
    }
    for result in results:
        if result.ranked_with is None or result.domain in unranked:
            continue
        own = groups.get(result.ranked_with)
        if own is None:
            raise EvidenceError(
                f"{result.domain}: bridged into {result.ranked_with}'s ranking, but {result.ranked_with} is not "
                "compared here"
            )
        if result.ref is None or result.ref != own[0].ref or result.metric != own[0].metric:
            raise EvidenceError(
                f"{result.domain}: bridged into {result.ranked_with}'s ranking, which needs the same reference and "
                f"metric: it has reference {result.ref} and {result.metric.name}, {result.ranked_with} "
                f"{own[0].ref} and {own[0].metric.name}"
            )
        own.append(result)
    for group in groups.values():
        check_bridged_once(group)
    return groups


def unranked_domains(results: list[DomainResult]) -> dict[str, str]:
    """The results the cross-domain ranks leave out, and why: a designed study below its first look (a published
    slice of a look still training) holds some encodings at one seed and others at none, and beside a domain past
    its first look would shrink the ranks to the few encodings it holds; a study bridged into a domain left out goes
    with it. A study of such domains alone still ranks them, each within itself (descriptive, as its page says)."""
    below = {result.domain for result in results if result.below_first_look}
    if all(result.domain in below or result.ranked_with in below for result in results):
        return {}
    left = dict.fromkeys(below, "its design's first look is not reached: no pair tested, encodings on unequal seeds")
    for result in results:
        if result.ranked_with in below and result.domain not in below:
            left[result.domain] = f"bridged into {result.ranked_with}, which is not ranked yet"
    return left


def check_bridged_once(group: list[DomainResult]) -> None:
    """EvidenceError when two studies bridged into one domain both hold an encoding the domain does not: ranked by
    the first that holds it (ranked_scores), its rank would depend on the order the bridges are named in."""
    bridging: dict[str, str] = {}
    for result in group[1:]:
        for name in result.entries:
            if name in group[0].entries:
                continue
            first = bridging.setdefault(name, result.domain)
            if first != result.domain:
                raise EvidenceError(
                    f"{result.domain}: bridges `{name}` into {group[0].domain}'s ranking, as {first} does (each by "
                    f"its Δ to its own `{result.ref}`): its rank would depend on which is named first; bridge one "
                    "of them, or publish their runs as one study"
                )


def ranked_entries(group: list[DomainResult]) -> list[str]:
    """The encodings a ranked domain scores: its own, then each bridged study's that it does not hold."""
    return list(dict.fromkeys(name for result in group for name in result.entries))


def ranked_scores(group: list[DomainResult]) -> dict[str, float]:
    """What ranks a domain's encodings: each one's matched score (DomainResult.matched) from the first result of the
    group that holds it: the domain's own, else the bridged study's, its Δ to that study's own reference runs."""
    scores: dict[str, float] = {}
    for result in group:
        for name in result.entries:
            scores.setdefault(name, result.matched.get(name, math.nan))
    return scores


def group_ranks(group: list[DomainResult], among: set[str] | None = None) -> dict[str, float]:
    """Rank of each encoding the group scores (1 = best, ties averaged), among all of them or only those `among`."""
    scores = {name: score for name, score in ranked_scores(group).items() if among is None or name in among}
    return ranks(scores, lower_is_better=not group[0].metric.higher_is_better)


def mean_ranks(results: list[DomainResult]) -> dict[str, tuple[float, float]]:
    """(mean, standard error) of the ranks of the encodings scored in every ranked domain of `results`, ranked among
    themselves in each domain."""
    groups = list(ranking_groups(results).values())
    common = set.intersection(*(set(ranked_entries(group)) for group in groups)) if groups else set()
    return summarise_ranks(group_ranks(group, among=common) for group in groups)


RANK_REPLICATES = 10_000
# a domain of one seed has no spread over seeds to resample: every replicate would give it weight 1, and a study of
# one seed (a design's first look still training) would print a zero-width range and P(rank 1) = 1.00
MIN_RESAMPLED_SEEDS = 2


def resampled_matched(result: DomainResult, name: str, weights: np.ndarray) -> np.ndarray:
    """The encoding's matched score (DomainResult.matched) under each row of seed weights (R, S over the domain's
    evidence.seeds): its Δ to the reference as the weighted mean of the per-seed differences on the seeds both
    finished (the weighted difference of the two weighted seed means when fewer than 2 pair); without a reference,
    its weighted mean over the seeds every encoding finished."""
    ev, ref = result.evidence, result.ref

    def weighted(encoding: str, seeds: list[int]) -> np.ndarray:
        columns = [ev.seeds.index(s) for s in seeds]
        per_seed = np.array([ev.seed_scores(encoding)[s] for s in seeds])
        w = weights[:, columns]
        return (w @ per_seed) / w.sum(axis=1)

    if ref is None:
        return weighted(name, ev.common_seeds() or ev.seeds_of(name))
    if name == ref:
        return np.zeros(weights.shape[0])
    common = ev.common_seeds((name, ref))
    if len(common) >= 2:
        return weighted(name, common) - weighted(ref, common)
    return weighted(name, ev.seeds_of(name)) - weighted(ref, ev.seeds_of(ref))


def rank_uncertainty(results: list[DomainResult], replicates: int = RANK_REPLICATES) -> dict[str, tuple]:
    """The spread of the mean rank over training seeds and P(rank 1), for each encoding scored in every domain. Each
    replicate draws, per domain, one weight per seed from a flat Dirichlet (the Bayesian bootstrap: every seed keeps
    a positive weight, so a pair that shares only 3 seeds with the reference is never left without one), shared by
    every encoding of the domain so that each encoding stays matched to the reference seed by seed (a bridged study
    draws its own weights: its runs are other trainings, whatever their seeds are called); ranks each
    domain's encodings by their resampled matched scores (resampled_matched), and averages the ranks over the
    domains. Returns (2.5%, 97.5% percentiles of the mean rank, P(rank 1)): P(rank 1) is the share of replicates
    where the encoding's mean rank is the best (ties shared). A descriptive spread, not a test: its coverage at 3 to
    10 seeds is not established. Fixed random numbers. Nothing ({}) where a domain holds fewer than
    MIN_RESAMPLED_SEEDS seeds."""
    groups = list(ranking_groups(results).values())
    common = sorted(set.intersection(*(set(ranked_entries(group)) for group in groups))) if groups else []
    if not common or any(result.evidence is None for result in results):
        return {}
    if any(len(result.evidence.seeds) < MIN_RESAMPLED_SEEDS for result in results):
        return {}
    rng = np.random.default_rng([BOOTSTRAP_SEED, 2])
    total = np.zeros((replicates, len(common)))
    for group in groups:
        weights = {id(result): rng.dirichlet(np.ones(len(result.evidence.seeds)), size=replicates) for result in group}
        sign = -1.0 if group[0].metric.higher_is_better else 1.0
        holder = {name: next(result for result in group if name in result.entries) for name in common}
        scores = np.column_stack([resampled_matched(holder[name], name, weights[id(holder[name])]) for name in common])
        total += sps.rankdata(sign * scores, method="average", axis=1)
    mean_rank = total / len(groups)
    best = mean_rank == mean_rank.min(axis=1, keepdims=True)
    p_best = (best / best.sum(axis=1, keepdims=True)).mean(axis=0)
    lo, hi = np.percentile(mean_rank, [2.5, 97.5], axis=0)
    return {name: (float(lo[j]), float(hi[j]), float(p_best[j])) for j, name in enumerate(common)}


def friedman_blocks(results: list[DomainResult]) -> tuple[dict[str, dict[str, float]], list[bool]]:
    """The blocks of the study's Friedman test: one per domain, as the mean rank has them (a domain with tasks is
    one block, its score the mean over its tasks: five synthetic tasks as five blocks gave one domain 5 of 7 votes,
    one of them a task at chance for every encoding), each by its matched scores (Δ to the reference on matched
    seeds) in its own direction, a bridged study's encodings in its domain's block (ranked_scores)."""
    groups = ranking_groups(results)
    return {domain: ranked_scores(group) for domain, group in groups.items()}, [
        group[0].metric.higher_is_better for group in groups.values()
    ]


AT_CHANCE = 0.05  # a task whose best encoding's chance-normalised test accuracy is below this is at chance


def tasks_above_chance(result: DomainResult) -> tuple[dict[str, dict[str, float]], list[str]]:
    """({task: {encoding: test accuracy}} of the tasks some encoding learns, the tasks left out: those where no
    encoding's chance-normalised accuracy reaches AT_CHANCE, whose ranks would be noise)."""
    accuracy = result.tasks.accuracy()
    kept, at_chance = {}, []
    for task, row in accuracy.items():
        chance = result.tasks.chance[task]
        best = max((chance_normalised(acc, chance) for acc in row.values() if np.isfinite(acc)), default=-math.inf)
        if best < AT_CHANCE:
            at_chance.append(task)
        else:
            kept[task] = row
    return kept, sorted(at_chance)


def shared_reference(results: list[DomainResult]) -> str:
    """The study's reference when none is asked for: the one every domain's verdict uses, when they agree (a make
    settle design fixes a domain's own), else DEFAULT_REF: the header, the gaps and the marks then name one
    encoding."""
    refs = {result.ref for result in results if result.ref is not None}
    return refs.pop() if len(refs) == 1 else DEFAULT_REF


def build_study(
    runs_root: Path, ref: str | None, results: list[DomainResult], unfinished: dict[str, list[str]]
) -> Study:
    """The cross-domain statistics over the domains' results."""
    rank = mean_ranks(results)
    # each ranked domain's ranking of all its encodings (a bridged study's among its domain's)
    within = {domain: group_ranks(group) for domain, group in ranking_groups(results).items()}
    partial = {
        encoding: {domain: ranks[encoding] for domain, ranks in within.items() if encoding in ranks}
        for encoding in sorted({e for result in results for e in result.entries} - set(rank))
    }
    # every trained encoding with a run folder anywhere gets a row, even without a single score
    unscored = sorted({encoding for result in results for encoding in result.seen} - set(rank) - set(partial))
    order = sorted(rank, key=lambda enc: (rank[enc][0], enc))
    order += sorted(partial, key=lambda enc: (min(partial[enc].values()), enc)) + unscored
    per_example = [result for result in results if result.per_example]
    per_example_mean_rank = mean_ranks(per_example) if per_example and len(per_example) < len(results) else None

    blocks, higher = friedman_blocks(results)
    tests = {
        "domains": friedman_over(blocks, higher, "domains")
        if len(blocks) >= 2
        else f"not run: needs at least 2 domains; here {len(blocks)}"
    }
    for result in results:
        if result.tasks is not None:
            accuracy, at_chance = tasks_above_chance(result)
            test = friedman_over(accuracy, [True] * len(accuracy), "tasks")
            tests[f"{result.domain} tasks"] = (
                replace(test, at_chance=at_chance) if isinstance(test, BlockTest) else test
            )
    return Study(
        runs_root=Path(runs_root),
        ref=ref or shared_reference(results),
        results=results,
        unfinished_domains=unfinished,
        order=order,
        mean_rank=rank,
        partial_ranks=partial,
        per_example_mean_rank=per_example_mean_rank,
        friedman=tests,
        rank_interval=rank_uncertainty(results),
        domain_ranks=within,
    )


def load_study(runs_root: Path, domains: list[str] | None) -> list[LoadedDomain]:
    """Every domain's runs loaded (`domains`, or every domain with run folders under `runs_root` when None): the one
    pass over the run folders (pipelines.analysis.loading). FileNotFoundError when a named domain has no run folder
    or there is none for any domain."""
    names = present_domains(runs_root) if domains is None else list(domains)
    if not names:
        raise FileNotFoundError(f"no run folders under {runs_root} for any domain of {', '.join(domain_names())}")
    return [load_domain(runs_root, domain) for domain in names]


def analyse_loaded(
    runs_root: Path, loaded: list[LoadedDomain], ref: str | None, bridges: list[tuple[Bridge, LoadedDomain]] = ()
) -> Study:
    """The study of the loaded domains, and of the studies bridged into their rankings (each with its loaded runs):
    a function of what was loaded, which opens no run folder. FileNotFoundError when nothing has finished anywhere
    (or in a bridged study); IncomparableRunsError (naming the runs) when the runs of a domain differ in data,
    budget, model or preset; EvidenceError when a bridge cannot be made (pipelines.analysis.bridge)."""
    results, unfinished, compared = [], {}, []
    for domain in loaded:
        if not domain.any_finished:
            unfinished[domain.domain] = missing_runs(domain.runs)
            continue
        results.append(analyse_domain(domain.domain, domain.runs, ref, domain.design))
        compared += domain.runs
    if not results:
        raise FileNotFoundError(f"no finished run under {runs_root} for {', '.join(d.domain for d in loaded)}")
    for bridge, domain in bridges:
        require_finished(domain.runs, bridge.root)
        own = next((d.runs for d in loaded if d.domain == bridge.domain and d.any_finished), None)
        if own is None:
            raise EvidenceError(
                f"{bridge.name}: bridged into {bridge.domain}'s ranking, but {bridge.domain} is not compared here"
            )
        result = analyse_domain(bridge.domain, domain.runs, ref, domain.design)
        results.append(bridged(result, bridge, domain.runs, own))
        compared += relabelled(domain.runs, bridge.name)
    study = build_study(runs_root, ref, results, unfinished)
    study.recency = study_recency(compared)
    study.runs = compared
    return study


def analyse_study(runs_root: Path, domains: list[str] | None, ref: str | None, bridges: list[Bridge] = ()) -> Study:
    """Load the domains' runs (and the bridged studies') once, then analyse them (load_study, analyse_loaded)."""
    loaded_bridges = [(bridge, load_domain(bridge.root, bridge.domain)) for bridge in bridges]
    return analyse_loaded(runs_root, load_study(runs_root, domains), ref, loaded_bridges)
