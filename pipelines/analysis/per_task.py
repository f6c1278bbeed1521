"""A domain with tasks (the synthetic domain, paper 000 appendix E): one model per task, scored by token
accuracy on each evaluation split, chance-normalised `(acc - chance) / (1 - chance)` (SPEC 2). The domain's score
of an encoding is its mean chance-normalised test accuracy over the tasks (paper 000's Figure 4 aggregate), over
the seeds it finished on every task, with a within-task interval (the within-example interval of SPEC 3 with tasks
as the examples) and the t-interval between tasks; an encoding without a test result on every task gets no score
(it cannot be averaged over the same tasks) and is reported apart. The seed-aware verdict treats the tasks as the
examples (pipelines.analysis.matrix). Paper 000 C.2's per-example test, a separate column as for the NLL domains,
runs over the test instances of every task: paired two-sided t-tests on d_i = acc_i(b) - acc_i(ref) of each
instance's seed-averaged chance-normalised token accuracy, Holm over the baselines, conditional on the trained
models (the paper itself reports no test on its synthetic tasks)."""

from __future__ import annotations

import math

import numpy as np

from domains.base import Metric
from pipelines.analysis.curves import load_extrapolation
from pipelines.analysis.design import Design
from pipelines.analysis.evidence import commits, finished_by, missing_runs, preset_of, seed_selection
from pipelines.analysis.extrapolation import past_length_verdicts
from pipelines.analysis.loading import LoadedRun
from pipelines.analysis.matrix import (
    Evidence,
    accuracy_on_test,
    per_instance_evidence,
    per_task_evidence,
    task_chance,
)
from pipelines.analysis.results import (
    TEST_SPLIT,
    Cell,
    DomainResult,
    Entry,
    TaskTable,
    entries_with_intervals,
)
from pipelines.analysis.sequential import SeedVerdicts, matched_scores, seed_verdicts
from pipelines.analysis.stats import PairedResult, chance_normalised, matched_paired_tests, ranks
from pipelines.experiment.config import datamodule_class
from pipelines.runs.layout import is_derived
from pipelines.runs.metrics import is_evaluated


def _cell(runs: list[LoadedRun], split: str, chance: float) -> Cell:
    """Mean over seeds of one split's accuracy and NLL from metrics/summary.json."""
    entries = [run.splits.get(split) for run in runs]
    evaluated = [e for e in entries if is_evaluated(e)]
    if evaluated:
        accuracy = float(np.mean([e["accuracy"] for e in evaluated]))
        return Cell(
            status="ok",
            accuracy=accuracy,
            chance_normalised=chance_normalised(accuracy, chance),
            nll=float(np.mean([e["nll"] for e in evaluated])),
            seeds=len(evaluated),
        )
    reasons = sorted({e["skipped"] for e in entries if e is not None})
    return Cell(status="n/a", note="; ".join(reasons)) if reasons else Cell(status="missing")


def load_task_table(runs: list[LoadedRun], seeds: dict[str, list[int]], splits: tuple[str, ...]) -> TaskTable:
    """Chance per task and cells[split][task][encoding] for every task and encoding seen in `runs`, each cell over
    the encoding's `seeds` (those it finished on every task; all its finished seeds when it has none such). YaRN
    entries (over their rope run's seeds) are left out of the in-distribution split (at scale 1 they are their rope
    run)."""
    finished = finished_by(runs, "group", "encoding")
    tasks = sorted({r.group for r in runs})
    encodings = sorted({r.encoding for r in runs})
    chance = {
        task: task_chance(task, [r for (t, _), rs in finished.items() if t == task for r in rs]) for task in tasks
    }

    def cell(split, task, enc):
        kept = seeds.get(enc.split("+")[0])
        chosen = [r for r in finished.get((task, enc), []) if kept is None or r.seed in kept]
        return _cell(chosen, split, chance[task]) if chosen else Cell(status="missing")

    cells = {
        split: {
            task: {enc: cell(split, task, enc) for enc in encodings if split != TEST_SPLIT or not is_derived(enc)}
            for task in tasks
        }
        for split in splits
    }
    return TaskTable(chance, cells)


def _incomplete(evidence: Evidence | None, runs: list[LoadedRun]) -> dict[str, str]:
    """The trained encodings without a seed finished on every task, with the reason."""
    tasks = sorted({r.group for r in runs})
    scored = set(evidence.encodings) if evidence else set()
    out = {}
    for encoding in sorted({r.encoding for r in runs if not r.derived} - scored):
        done = {r.group for r in runs if r.encoding == encoding and r.finished and accuracy_on_test(r) is not None}
        out[encoding] = f"test results on {len(done)} of {len(tasks)} tasks"
    return out


def instance_tests(
    domain: str, evidence: Evidence, runs: list[LoadedRun], chance: dict[str, float], verdicts: SeedVerdicts
) -> dict[str, PairedResult]:
    """Paper 000 C.2's per-example test of every baseline against the reference over the test instances of every
    task, each pair's instances averaged over the seeds both finished on every task (Evidence.paired_examples), Holm
    over the baselines of each family (the study's own, the joined ones)."""
    ref = verdicts.ref
    kept = {name: set(evidence.seeds_of(name)) for name in evidence.encodings}
    scored = [r for r in runs if not r.derived and r.seed in kept.get(r.encoding, ())]
    instances = per_instance_evidence(domain, evidence.metric, scored, chance)
    tests = {}
    for family in verdicts.corrections([name for name in instances.encodings if name != ref]):
        pairs = {name: instances.paired_examples(name, ref) for name in family}
        tests.update({test.baseline: test for test in matched_paired_tests(pairs, ref)})
    return tests


def table_seeds(evidence: Evidence | None, verdicts: SeedVerdicts | None) -> dict[str, list[int]]:
    """The seeds each encoding's cells of the task tables (bold, mean rank over the tasks) are over: the seeds every
    one of the study's own encodings finished on every task (each one's own where none is common to all), and for an
    encoding that joined the study, those of them it finished (its own where it finished none): a joined encoding
    never changes the seeds the study's own cells are over."""
    if evidence is None:
        return {}
    own = verdicts.corrections(evidence.encodings)[0] if verdicts is not None else list(evidence.encodings)
    common = evidence.common_seeds(tuple(own))
    seeds = {}
    for name in evidence.encodings:
        mine = evidence.seeds_of(name)
        held = [seed for seed in common if seed in mine]
        seeds[name] = (common or mine) if name in own else (held or mine)
    return seeds


def analyse_per_task(domain: str, runs: list[LoadedRun], ref: str | None, design: Design | None) -> DomainResult:
    datamodule = datamodule_class(domain)
    try:
        evidence = per_task_evidence(domain, datamodule.metric, runs)
    except FileNotFoundError:
        evidence = None
    verdicts = seed_verdicts(evidence, ref, design) if evidence is not None else None
    table = load_task_table(runs, table_seeds(evidence, verdicts), datamodule.eval_split_names)
    entries: dict[str, Entry] = {}
    matched = {}
    if evidence is not None:
        unknown = [t for t, c in table.chance.items() if math.isnan(c)]
        if unknown:
            raise ValueError(f"synthetic tasks without a chance level in their manifests: {', '.join(unknown)}")
        matched = matched_scores(evidence, verdicts)
        rank = ranks(matched, lower_is_better=False)
        order = sorted(evidence.encodings, key=lambda name: (rank[name], name))
        paper = {}
        if verdicts.ref is not None:
            paper = instance_tests(domain, evidence, runs, table.chance, verdicts)
        entries = entries_with_intervals(
            {name: evidence.seed_averaged(name) for name in order},
            {name: evidence.seed_scores(name) for name in order},
            paper,
            verdicts.verdicts(),
            verdicts.corrections(order)[0],
        )
    own = {name: evidence.seeds_of(name) for name in evidence.encodings} if evidence else {}
    used = [run for run in runs if run.finished and run.seed in own.get(run.encoding.split("+")[0], [])]
    extrapolation = [
        curve
        for task in sorted({r.group for r in used})
        for curve in load_extrapolation(task, [r for r in used if r.group == task])
    ]
    return DomainResult(
        domain=domain,
        metric=datamodule.metric,
        preset=preset_of(runs),
        seeds=seed_selection(runs, evidence, verdicts.corrections(evidence.encodings)[0] if verdicts else None),
        ref=verdicts.ref if verdicts else None,
        no_tests_reason=verdicts.no_tests_reason if verdicts else "No paired tests: no encoding finished every task.",
        entries=entries,
        incomplete=_incomplete(evidence, runs),
        seen={run.encoding for run in runs if not run.derived},
        missing=missing_runs(runs, design),
        extrapolation=extrapolation,
        tasks=table,
        verdicts=verdicts,
        evidence=evidence,
        commits=commits(runs),
        matched=matched,
        # NLL past the training length: the region of the NLL domains (the default Metric's)
        past_verdicts=past_length_verdicts(extrapolation, verdicts, Metric.equivalence),
    )
