"""A domain with tasks (the synthetic domain, paper 000 appendix E): one model per task, scored by token
accuracy on each evaluation split, chance-normalised `(acc - chance) / (1 - chance)` (SPEC 2). The domain's score
of an encoding is its mean chance-normalised test accuracy over the tasks (paper 000's Figure 4 aggregate), with a
within-task interval (the within-example interval of SPEC 3 with tasks as the examples) and the t-interval between
tasks; an encoding without a test result on every task gets no score (it cannot be averaged over the same tasks)
and is reported apart. Only the seeds that every scored encoding finished on every task are used."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from pipelines.analysis.curves import load_extrapolation
from pipelines.analysis.evidence import SeedSelection, finished_by, missing_runs, preset_of, select_seeds, with_seeds
from pipelines.analysis.results import TEST_SPLIT, Cell, DomainResult, Entry, TaskTable, entries_with_intervals
from pipelines.analysis.stats import chance_normalised
from pipelines.experiment.config import datamodule_class
from pipelines.runs.layout import MANIFEST, RunFolder, is_derived
from pipelines.runs.metrics import is_evaluated, read_run_json, run_file_error, split_entries, summary_path


def _task_chance(task: str, runs: list[RunFolder]) -> float:
    """The task's chance level from the manifests (nan when none gives one); all runs must agree."""
    levels = {read_run_json(run, run.path / MANIFEST).get("chance") for run in runs}
    levels = {level for level in levels if level is not None}
    if len(levels) > 1:
        raise ValueError(f"task {task!r}: manifests disagree on the chance level: {sorted(levels)}")
    return levels.pop() if levels else math.nan


def _evaluated_entry(run: RunFolder, split: str) -> dict | None:
    """The split's entry of the run's summary.json when it was evaluated, its accuracy and NLL checked finite."""
    entry = split_entries(run).get(split)
    if not is_evaluated(entry):
        return entry
    for key in ("accuracy", "nll"):
        value = entry.get(key)
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise run_file_error(run, summary_path(run.path), f"{split}: {key} is {value!r}, not a finite number")
    return entry


def _cell(runs: list[RunFolder], split: str, chance: float) -> Cell:
    """Mean over seeds of one split's accuracy and NLL from metrics/summary.json."""
    entries = [_evaluated_entry(run, split) for run in runs]
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


def load_task_table(runs: list[RunFolder], used: list[RunFolder], splits: tuple[str, ...]) -> TaskTable:
    """Chance per task and cells[split][task][encoding] for every task and encoding seen in `runs`, from the runs
    of the seeds `used`.

    YaRN entries are left out of the in-distribution split (at scale 1 they are their rope run)."""
    finished = finished_by(used, "group", "encoding")
    tasks = sorted({r.group for r in runs})
    encodings = sorted({r.encoding for r in runs})
    chance = {
        task: _task_chance(task, [r for (t, _), rs in finished.items() if t == task for r in rs]) for task in tasks
    }
    cells = {
        split: {
            task: {
                enc: _cell(finished[task, enc], split, chance[task])
                if (task, enc) in finished
                else Cell(status="missing")
                for enc in encodings
                if split != TEST_SPLIT or not is_derived(enc)
            }
            for task in tasks
        }
        for split in splits
    }
    return TaskTable(chance, cells)


def _test_accuracy_by_seed(runs: list[RunFolder]) -> dict[tuple[str, str], dict[int, float]]:
    """{(task, encoding): {seed: test token accuracy}} of the finished, trained (not derived) runs."""
    accuracy = defaultdict(dict)
    for (task, encoding), group_runs in finished_by(runs, "group", "encoding").items():
        if is_derived(encoding):
            continue
        for run in group_runs:
            entry = _evaluated_entry(run, TEST_SPLIT)
            if is_evaluated(entry):
                accuracy[task, encoding][run.seed] = float(entry["accuracy"])
    return dict(accuracy)


def _entries(table: TaskTable, runs: list[RunFolder]) -> tuple[dict[str, Entry], dict[str, str]]:
    """The domain's entries (see the module docstring) and the encodings left apart with the reason."""
    chance, test_cells = table.chance, table.cells[TEST_SPLIT]
    tasks = list(test_cells)
    unknown = [t for t in tasks if math.isnan(chance[t]) and any(c.status == "ok" for c in test_cells[t].values())]
    if unknown:
        raise ValueError(f"synthetic tasks without a chance level in their manifests: {', '.join(unknown)}")
    by_seed = _test_accuracy_by_seed(runs)
    scores, seed_scores, incomplete = {}, {}, {}
    for encoding in dict.fromkeys(enc for row in test_cells.values() for enc in row):
        done = [task for task in tasks if test_cells[task][encoding].status == "ok"]
        if len(done) < len(tasks):
            incomplete[encoding] = f"test results on {len(done)} of {len(tasks)} tasks"
            continue
        scores[encoding] = np.array([test_cells[task][encoding].chance_normalised for task in tasks])
        seeds = set.intersection(*(set(by_seed[task, encoding]) for task in tasks))
        seed_scores[encoding] = {
            seed: float(np.mean([chance_normalised(by_seed[task, encoding][seed], chance[task]) for task in tasks]))
            for seed in sorted(seeds)
        }
    return (entries_with_intervals(scores, seed_scores, {}) if scores else {}), incomplete


def _select_seeds(runs: list[RunFolder]) -> SeedSelection:
    """The seeds finished for every task by every trained encoding that has a finished run on every task (by all
    trained encodings when none has)."""
    trained = finished_by([run for run in runs if not run.derived], "group", "encoding")
    tasks = {task for task, _ in trained}
    complete = {enc for _, enc in trained if all((task, enc) in trained for task in tasks)}
    compared = [group for (_, enc), group in trained.items() if enc in complete or not complete]
    return select_seeds(runs, compared)


def analyse_per_task(domain: str, runs: list[RunFolder]) -> DomainResult:
    datamodule = datamodule_class(domain)
    seeds = _select_seeds(runs)
    used = with_seeds(runs, seeds)
    table = load_task_table(runs, used, datamodule.eval_split_names)
    entries, incomplete = _entries(table, used)
    return DomainResult(
        domain=domain,
        metric=datamodule.metric,
        preset=preset_of(runs),
        seeds=seeds,
        ref=None,
        no_tests_reason=None,
        entries=entries,
        incomplete=incomplete,
        seen={run.encoding for run in runs if not run.derived},
        missing=missing_runs(runs),
        extrapolation=[
            curve
            for task in sorted({r.group for r in used})
            for curve in load_extrapolation(task, [r for r in used if r.group == task])
        ],
        tasks=table,
    )
