"""One domain's evidence as one array: the score of every (encoding, seed, example), read and checked once.

A domain compared per example holds each test example's NLL under each finished trained run; a domain with tasks
holds each task's chance-normalised test accuracy (its tasks are its examples, as for the within-task interval), and
beside it each test instance's (paper 000 C.2's per-example test on such a domain).
Every statistic of the seed-aware verdict (pipelines.analysis.verdict, .sequential) is a pure function of it.
Missing (encoding, seed) cells are nan throughout: each encoding has its own finished seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from domains.base import Metric
from pipelines.analysis.loading import TEST_SPLIT, LoadedRun
from pipelines.analysis.stats import chance_normalised
from pipelines.runs.metrics import is_evaluated, per_example_path


@dataclass(frozen=True)
class Evidence:
    """values[e, s, i]: the score of encodings[e] under seeds[s] on example_ids[i] (nan: that seed did not finish)."""

    domain: str
    metric: Metric
    encodings: tuple[str, ...]
    seeds: tuple[int, ...]  # every finished seed of any encoding, ascending
    example_ids: tuple  # example numbers (per example) or task names (per task)
    values: np.ndarray
    blocks: str  # "example" or "task"

    def __post_init__(self) -> None:
        shape = (len(self.encodings), len(self.seeds), len(self.example_ids))
        if self.values.shape != shape:
            raise ValueError(f"{self.domain}: evidence of shape {self.values.shape}, expected {shape}")

    def finished(self, encoding: str) -> np.ndarray:
        """Which of `seeds` the encoding finished."""
        return np.isfinite(self.values[self.encodings.index(encoding)]).all(axis=1)

    def seeds_of(self, encoding: str, within: tuple[int, ...] | None = None) -> list[int]:
        """The encoding's finished seeds, ascending (only those in `within` when given); none for an encoding
        without runs (a design's member whose first runs are still due)."""
        if encoding not in self.encodings:
            return []
        done = [s for s, ok in zip(self.seeds, self.finished(encoding), strict=True) if ok]
        return done if within is None else [s for s in done if s in within]

    def seed_scores(self, encoding: str, within: tuple[int, ...] | None = None) -> dict[int, float]:
        """Each finished seed's score (those in `within` when given): the mean over the examples."""
        row = self.values[self.encodings.index(encoding)]
        return {s: float(row[self.seeds.index(s)].mean()) for s in self.seeds_of(encoding, within)}

    def score(self, encoding: str, within: tuple[int, ...] | None = None) -> float:
        """The encoding's score: its per-seed scores averaged (= the mean of the seed-averaged examples), over its
        finished seeds (those in `within` when given)."""
        return float(np.mean(list(self.seed_scores(encoding, within).values())))

    def seed_averaged(self, encoding: str, within: tuple[int, ...] | None = None) -> np.ndarray:
        """Each example's score averaged over the encoding's finished seeds (those in `within` when given: paper
        000 C.2's input, on the seeds an encoding shares with the reference)."""
        row = self.values[self.encodings.index(encoding)]
        columns = [self.seeds.index(s) for s in self.seeds_of(encoding, within)]
        return row[columns].mean(axis=0)

    def paired_examples(self, encoding: str, ref: str) -> tuple[np.ndarray, np.ndarray]:
        """Paper 000 C.2's input: each example of `encoding` and of `ref` averaged over the seeds both finished. One
        shared seed is enough (the test pairs examples, not seeds); each one's own seeds only where they share none."""
        within = tuple(self.common_seeds((encoding, ref))) or None
        return self.seed_averaged(encoding, within), self.seed_averaged(ref, within)

    def common_seeds(self, encodings: tuple[str, ...] | None = None) -> list[int]:
        """The seeds every one of `encodings` (all by default) finished."""
        names = encodings or self.encodings
        done = np.all([self.finished(name) for name in names], axis=0)
        return [s for s, ok in zip(self.seeds, done, strict=True) if ok]

    def only(self, names: tuple[str, ...]) -> Evidence:
        """The evidence of those of `names` it holds (their seeds: those any of them finished)."""
        rows = [i for i, name in enumerate(self.encodings) if name in names]
        finished = np.isfinite(self.values[rows]).all(axis=2).any(axis=0)
        columns = [j for j, ok in enumerate(finished) if ok]
        values = self.values[np.ix_(rows, columns)]
        encodings = tuple(self.encodings[i] for i in rows)
        seeds = tuple(self.seeds[j] for j in columns)
        return Evidence(self.domain, self.metric, encodings, seeds, self.example_ids, values, self.blocks)

    def complete(self) -> np.ndarray:
        """The (E, S_common, N) block of the seeds every encoding finished."""
        columns = [self.seeds.index(s) for s in self.common_seeds()]
        return self.values[:, columns]


def _grid(cells: dict[tuple[str, int], np.ndarray], n: int) -> tuple[tuple[str, ...], tuple[int, ...], np.ndarray]:
    encodings = tuple(sorted({e for e, _ in cells}))
    seeds = tuple(sorted({s for _, s in cells}))
    values = np.full((len(encodings), len(seeds), n), np.nan)
    for (encoding, seed), row in cells.items():
        values[encodings.index(encoding), seeds.index(seed)] = row
    return encodings, seeds, values


def _test_tables(runs: list[LoadedRun], columns: tuple[str, ...]) -> tuple[np.ndarray | None, list]:
    """The example ids and each run's (run, {column: values}) of its test per-example table (rows by example id,
    checked when loaded). Every run must score the same examples (RunFileError naming the run and the first run's
    file otherwise)."""
    tables, ids, first = [], None, None
    for run in sorted(runs, key=lambda r: (r.encoding, r.seed)):
        path = per_example_path(run.path, TEST_SPLIT)
        if run.per_example is None:
            raise run.file_error(path, "missing")
        run_ids = run.per_example["example"]
        if ids is not None and not np.array_equal(run_ids, ids):
            raise run.file_error(
                path,
                f"scores {run_ids.size} examples, not the {ids.size} of {first.label} "
                f"({per_example_path(first.path, TEST_SPLIT)}): every run must score the same test examples",
            )
        ids, first = (run_ids, run) if ids is None else (ids, first)
        tables.append((run, {column: run.per_example[column] for column in columns}))
    return ids, tables


def per_example_evidence(domain: str, metric: Metric, runs: list[LoadedRun]) -> Evidence:
    """The test NLL of every example under every finished trained run."""
    ids, tables = _test_tables([r for r in runs if r.finished and not r.derived], ("nll",))
    if ids is None:
        raise FileNotFoundError(f"{domain}: no finished trained run (only evaluation-time variants)")
    encodings, seeds, values = _grid({(run.encoding, run.seed): t["nll"] for run, t in tables}, ids.size)
    return Evidence(domain, metric, encodings, seeds, tuple(int(i) for i in ids), values, "example")


def task_chance(task: str, runs: list[LoadedRun]) -> float:
    """The task's chance level from the manifests (nan when none gives one); all runs must agree."""
    levels = {run.manifest.get("chance") for run in runs}
    levels = {level for level in levels if level is not None}
    if len(levels) > 1:
        raise ValueError(f"task {task!r}: manifests disagree on the chance level: {sorted(levels)}")
    return levels.pop() if levels else math.nan


def accuracy_on_test(run: LoadedRun) -> float | None:
    """The run's test token accuracy (None when the split was not evaluated)."""
    entry = run.splits.get(TEST_SPLIT)
    return float(entry["accuracy"]) if is_evaluated(entry) else None


def per_task_evidence(domain: str, metric: Metric, runs: list[LoadedRun]) -> Evidence:
    """Each task's chance-normalised test accuracy under every (encoding, seed) that finished every task."""
    trained = [r for r in runs if r.finished and not r.derived]
    tasks = tuple(sorted({r.group for r in runs}))
    chance = {task: task_chance(task, [r for r in trained if r.group == task]) for task in tasks}
    scores: dict[tuple[str, int], dict[str, float]] = {}
    for run in trained:
        accuracy = accuracy_on_test(run)
        if accuracy is not None and not math.isnan(chance[run.group]):
            scores.setdefault((run.encoding, run.seed), {})[run.group] = chance_normalised(accuracy, chance[run.group])
    cells = {key: np.array([row[t] for t in tasks]) for key, row in scores.items() if len(row) == len(tasks)}
    if not cells:
        raise FileNotFoundError(f"{domain}: no (encoding, seed) with a test result on every one of its tasks")
    encodings, seeds, values = _grid(cells, len(tasks))
    return Evidence(domain, metric, encodings, seeds, tasks, values, "task")


def per_instance_evidence(domain: str, metric: Metric, runs: list[LoadedRun], chance: dict[str, float]) -> Evidence:
    """Each test instance's chance-normalised token accuracy (correct / tokens of its output span, normalised by its
    task's chance level), every task's instances in turn (ids `task:example`), under every (encoding, seed) among
    `runs` that finished every task: paper 000 C.2's per-example input for a domain with tasks."""
    trained = [r for r in runs if r.finished and not r.derived]
    tasks = sorted({r.group for r in trained})
    parts: dict[tuple[str, int], list[np.ndarray]] = {}
    ids: list[str] = []
    for task in tasks:
        task_ids, tables = _test_tables([r for r in trained if r.group == task], ("tokens", "correct"))
        for run, table in tables:
            if np.any(table["tokens"] <= 0):
                raise run.file_error(per_example_path(run.path, TEST_SPLIT), "an example scores no tokens")
            accuracy = table["correct"] / table["tokens"]
            parts.setdefault((run.encoding, run.seed), []).append(chance_normalised(accuracy, chance[task]))
        ids += [f"{task}:{i}" for i in task_ids]
    cells = {key: np.concatenate(rows) for key, rows in parts.items() if len(rows) == len(tasks)}
    if not cells:
        raise FileNotFoundError(f"{domain}: no (encoding, seed) with a test result on every one of its tasks")
    encodings, seeds, values = _grid(cells, len(ids))
    return Evidence(domain, metric, encodings, seeds, tuple(ids), values, "example")
