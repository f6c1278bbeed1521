"""A domain compared per test example: each encoding's test NLL over its finished seeds, 95% within-example
intervals (and the between-example t-interval beside them), the seed-aware verdict of every baseline against the
reference (pipelines.analysis.sequential: the headline), and paper 000 appendix C.2's per-example test as a
separate column: paired two-sided t-tests on d_i = NLL_i(b) - NLL_i(ref) of the seed-averaged examples,
Holm-corrected over the baselines, conditional on the trained models. A run scoring other examples than the
others, or a non-finite NLL, stops the comparison with an error naming the run and the file."""

from __future__ import annotations

import numpy as np

from pipelines.analysis.curves import load_extrapolation, pooled_split_positions
from pipelines.analysis.evidence import commits, finished_by, missing_runs, preset_of, seed_selection
from pipelines.analysis.matrix import Evidence, per_example_evidence
from pipelines.analysis.results import DEFAULT_REF, TEST_SPLIT, DomainResult, entries_with_intervals
from pipelines.analysis.sequential import Design, seed_verdicts
from pipelines.analysis.stats import FriedmanResult, friedman, paired_tests, ranks
from pipelines.experiment.config import datamodule_class
from pipelines.runs.layout import RunFolder


def analyse_per_example(domain: str, runs: list[RunFolder], ref: str | None, design: Design | None) -> DomainResult:
    evidence = per_example_evidence(domain, datamodule_class(domain).metric, runs)
    verdicts = seed_verdicts(evidence, ref, design, DEFAULT_REF)
    ref = verdicts.ref
    seed_averaged = {name: evidence.seed_averaged(name) for name in evidence.encodings}
    paper = {}
    if ref is not None:
        paper = {t.baseline: t for t in paired_tests(seed_averaged, ref)}
    rank = ranks({name: evidence.score(name) for name in evidence.encodings})
    order = sorted(evidence.encodings, key=lambda name: (rank[name], name))
    entries = entries_with_intervals(
        {name: seed_averaged[name] for name in order},
        {name: evidence.seed_scores(name) for name in order},
        paper,
        verdicts.family.verdicts if verdicts.family else {},
    )
    trained = finished_by([run for run in runs if not run.derived], "encoding")
    return DomainResult(
        domain=domain,
        metric=evidence.metric,
        preset=preset_of(runs),
        seeds=seed_selection(runs, evidence),
        ref=ref,
        no_tests_reason=verdicts.no_tests_reason,
        entries=entries,
        incomplete={},
        seen={run.encoding for run in runs if not run.derived},
        missing=missing_runs(runs, design),
        extrapolation=load_extrapolation(domain, [run for run in runs if run.finished]),
        position_curves={name: pooled_split_positions(trained[name,], TEST_SPLIT) for name in order},
        example_friedman=example_friedman(evidence, order),
        verdicts=verdicts,
        evidence=evidence,
        commits=commits(runs),
    )


def example_friedman(evidence: Evidence, order: list[str]) -> FriedmanResult | None:
    """Friedman test with the test examples as blocks (seed-averaged NLL, lower is better): which encodings a
    Nemenyi critical difference over the examples separates. None for fewer than 2 examples or encodings."""
    if len(order) < 2 or len(evidence.example_ids) < 2:
        return None
    return friedman(np.column_stack([evidence.seed_averaged(name) for name in order]), lower_is_better=True)
