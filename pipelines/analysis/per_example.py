"""A domain compared per test example: each encoding's test NLL over its finished seeds, 95% within-example
intervals (and the between-example t-interval beside them), the seed-aware verdict of every baseline against the
reference (pipelines.analysis.sequential: the headline), the encodings ranked by their Δ to the reference on matched
seeds, and paper 000 appendix C.2's per-example test as a separate column: paired two-sided t-tests on
d_i = NLL_i(b) - NLL_i(ref) of the examples averaged over the seeds both finished, Holm-corrected over the
baselines, conditional on the trained models. A run scoring other examples than the
others, or a non-finite NLL, stops the comparison with an error naming the run and the file."""

from __future__ import annotations

import numpy as np

from pipelines.analysis.curves import load_extrapolation, pooled_split_positions
from pipelines.analysis.design import Design
from pipelines.analysis.evidence import commits, finished_by, missing_runs, preset_of, seed_selection
from pipelines.analysis.extrapolation import past_length_verdicts
from pipelines.analysis.loading import LoadedRun
from pipelines.analysis.matrix import Evidence, per_example_evidence
from pipelines.analysis.results import TEST_SPLIT, DomainResult, entries_with_intervals
from pipelines.analysis.sequential import SeedVerdicts, matched_scores, seed_verdicts
from pipelines.analysis.stats import FriedmanResult, PairedResult, friedman, matched_paired_tests, ranks
from pipelines.experiment.config import datamodule_class


def analyse_per_example(domain: str, runs: list[LoadedRun], ref: str | None, design: Design | None) -> DomainResult:
    evidence = per_example_evidence(domain, datamodule_class(domain).metric, runs)
    verdicts = seed_verdicts(evidence, ref, design)
    matched = matched_scores(evidence, verdicts)
    rank = ranks(matched, lower_is_better=not evidence.metric.higher_is_better)
    order = sorted(evidence.encodings, key=lambda name: (rank[name], name))
    entries = entries_with_intervals(
        {name: evidence.seed_averaged(name) for name in order},
        {name: evidence.seed_scores(name) for name in order},
        matched_paper_tests(evidence, verdicts) if verdicts.ref is not None else {},
        verdicts.verdicts(),
        verdicts.corrections(order)[0],
    )
    trained = finished_by([run for run in runs if not run.derived], "encoding")
    extrapolation = load_extrapolation(domain, [run for run in runs if run.finished])
    return DomainResult(
        domain=domain,
        metric=evidence.metric,
        preset=preset_of(runs),
        seeds=seed_selection(runs, evidence, verdicts.corrections(evidence.encodings)[0]),
        ref=verdicts.ref,
        no_tests_reason=verdicts.no_tests_reason,
        entries=entries,
        incomplete={},
        seen={run.encoding for run in runs if not run.derived},
        missing=missing_runs(runs, design),
        extrapolation=extrapolation,
        position_curves={name: pooled_split_positions(trained[name,], TEST_SPLIT) for name in order},
        example_friedman=example_friedman(evidence, order),
        verdicts=verdicts,
        evidence=evidence,
        commits=commits(runs),
        matched=matched,
        past_verdicts=past_length_verdicts(extrapolation, verdicts, evidence.metric.equivalence),
    )


def matched_paper_tests(evidence: Evidence, verdicts: SeedVerdicts) -> dict[str, PairedResult]:
    """Paper 000 C.2's per-example test of every baseline against the reference, each pair's examples averaged over
    the seeds both finished (one shared seed is enough: the test pairs examples, not seeds; all of each one's seeds
    only when they share none), Holm over the baselines of each family (the study's own, the joined ones)."""
    ref = verdicts.ref
    baselines = [name for name in evidence.encodings if name != ref]
    tests = {}
    for family in verdicts.corrections(baselines):
        pairs = {name: evidence.paired_examples(name, ref) for name in family}
        tests.update({test.baseline: test for test in matched_paired_tests(pairs, ref)})
    return tests


def example_friedman(evidence: Evidence, order: list[str]) -> FriedmanResult | None:
    """Friedman test with the test examples as blocks (each example averaged over the seeds every encoding finished):
    which encodings a Nemenyi critical difference over the examples separates. None for fewer than 2 examples or
    encodings, or no seed common to all."""
    common = tuple(evidence.common_seeds())
    if len(order) < 2 or len(evidence.example_ids) < 2 or not common:
        return None
    averaged = [evidence.seed_averaged(name, common) for name in order]
    return friedman(np.column_stack(averaged), lower_is_better=not evidence.metric.higher_is_better)
