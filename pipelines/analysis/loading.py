"""Load once, check once: everything the analysis reads of a domain's run folders, read in one pass before any
statistic. The statistics (pipelines.analysis.*) and the report are functions of what this returns and never open a
run folder again; a damaged file is refused here, naming the run and the file (RunFileError).

Per run folder (LoadedRun): its key and status (finished; failed, with its error; unfinished), and once finished
  manifest        manifest.json, checked to name the folder's own run (a copied or linked folder is refused)
  splits          metrics/summary.json's {split: entry} (on a domain with tasks, an evaluated entry's accuracy and
                  NLL finite)
  per_example     the test split's per-example table, rows by example id, no id twice, the columns the domain's
                  comparison and the study page read finite (NLL; a domain with tasks: tokens and correct too);
                  None when absent (refused by name where a comparison needs it)
  positions       {split: per-position table} of every evaluated split that has one (position_table refuses the
                  absent one a statistic asks for)
  inspections     {split: recency profile} that `python -m pipelines.inspect` left (trained runs)
  training_curves logs/metrics.csv's curves (None when the folder holds no log: a run published without one)
Per domain (LoadedDomain): its runs and its design (settle.json), when make settle wrote one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipelines.analysis.design import Design, read_design
from pipelines.inspection.recency import RecencyProfile
from pipelines.runs.layout import FAILED, INSPECT, MANIFEST, KeyedRun, RunFolder, RunKey, discover_runs, has_tasks
from pipelines.runs.metrics import (
    RunFileError,
    is_evaluated,
    per_example_path,
    per_position_path,
    read_per_position,
    read_run_csv,
    read_run_json,
    run_file_error,
    split_entries,
    summary_path,
)
from pipelines.runs.tolerance import machine_problem
from pipelines.runs.train_log import read_training_curves

TEST_SPLIT = "test"
FINISHED, FAILED_STATUS, UNFINISHED = "finished", "failed", "unfinished"


class EvidenceError(ValueError):
    """The runs of a domain cannot be compared as they are; the message says which and why."""


class IncomparableRunsError(EvidenceError):
    """Finished runs of one domain (one task) differ in what SPEC 3 holds fixed."""


@dataclass(frozen=True, eq=False)  # compared by identity: a run is a dict key of the analysis
class LoadedRun(KeyedRun):
    """One run folder as loaded (see the module docstring); `path` is named in errors, never opened again."""

    key: RunKey
    path: Path
    status: str
    failure: str | None = None  # failed.json's error
    manifest: dict = field(default_factory=dict)
    splits: dict[str, dict] = field(default_factory=dict)
    per_example: dict[str, np.ndarray] | None = None
    positions: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    inspections: dict[str, RecencyProfile] = field(default_factory=dict)
    training_curves: dict[str, list[tuple[int, float]]] | None = None

    @property
    def finished(self) -> bool:
        return self.status == FINISHED

    @property
    def failed(self) -> bool:
        return self.status == FAILED_STATUS

    def file_error(self, path: Path, what: str) -> RunFileError:
        """The error for one of the run's files (what a check of the loaded content found wrong)."""
        return run_file_error(self, path, what)

    def position_table(self, split: str) -> dict[str, np.ndarray]:
        """The split's per-position table; RunFileError naming the file when the run has none."""
        if split not in self.positions:
            raise self.file_error(per_position_path(self.path, split), "missing")
        return self.positions[split]

    def manifest_value(self, *keys: str):
        """A value of manifest.json by its key path; RunFileError naming the run when it is absent."""
        value = self.manifest
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                raise self.file_error(self.path / MANIFEST, f"no {'.'.join(keys)}")
            value = value[key]
        return value


@dataclass(frozen=True)
class LoadedDomain:
    """A domain's loaded runs (every run folder, finished or not) and its design."""

    domain: str
    folder: Path
    runs: list[LoadedRun]
    design: Design | None

    @property
    def any_finished(self) -> bool:
        return any(run.finished for run in self.runs)


def load_domain(runs_root: str | Path, domain: str) -> LoadedDomain:
    """Every run folder of the domain under `runs_root`, loaded, and its design. FileNotFoundError naming the
    domain's folder when it holds no run folder."""
    folder = Path(runs_root) / domain
    return LoadedDomain(domain, folder, load_runs(discover_runs(runs_root, domain)), read_design(folder))


def load_runs(runs: list[RunFolder]) -> list[LoadedRun]:
    """Each run folder loaded (see the module docstring)."""
    return [load_run(run) for run in runs]


def load_run(run: RunFolder) -> LoadedRun:
    if run.failed:
        error = read_run_json(run, run.path / FAILED).get("error")
        return LoadedRun(run.key, run.path, FAILED_STATUS, failure=str(error))
    if not run.finished:
        return LoadedRun(run.key, run.path, UNFINISHED)
    manifest = read_run_json(run, run.path / MANIFEST)
    check_key(run, manifest)
    if problem := machine_problem(manifest, bound=False):  # a malformed record (copies are held to it where joined)
        raise run_file_error(run, run.path / MANIFEST, problem)
    splits = checked_splits(run)
    evaluated = [split for split, entry in splits.items() if is_evaluated(entry)]
    trained = not run.derived
    return LoadedRun(
        run.key,
        run.path,
        FINISHED,
        manifest=manifest,
        splits=splits,
        per_example=test_table(run) if per_example_path(run.path, TEST_SPLIT).is_file() else None,
        positions={
            split: read_per_position(run, split) for split in evaluated if per_position_path(run.path, split).is_file()
        },
        inspections=inspected_profiles(run) if trained else {},
        training_curves=read_training_curves(run),
    )


def check_key(run: RunFolder, manifest: dict) -> None:
    """The folder is what its manifest says it is (a copied or linked folder is refused, naming both)."""
    recorded = manifest.get("run", {})
    try:
        key = RunKey(recorded["domain"], recorded.get("task") or None, recorded["pe_id"], int(recorded["seed"]))
    except (KeyError, TypeError, ValueError):
        raise run_file_error(run, run.path / MANIFEST, "no run key (run.domain, task, pe_id, seed)") from None
    if key != run.key:
        raise IncomparableRunsError(
            f"{run.path}: the folder says {run.label} but its manifest records {key.label} (a copied or linked run "
            "folder?); move it back or delete it: counting it as what its path says would add a run that does not "
            "exist"
        )


def checked_splits(run: RunFolder) -> dict[str, dict]:
    """summary.json's entries; on a domain with tasks, whose tables read them, an evaluated one's accuracy and NLL
    checked finite (a domain compared per example reads its per-example tables instead)."""
    splits = split_entries(run)
    for split, entry in splits.items():
        if not is_evaluated(entry) or not has_tasks(run.domain):
            continue
        for key in ("accuracy", "nll"):
            value = entry.get(key)
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise run_file_error(run, summary_path(run.path), f"{split}: {key} is {value!r}, not a finite number")
    return splits


def test_table(run: RunFolder) -> dict[str, np.ndarray]:
    """The test per-example table, rows sorted by example id (ids whole numbers, none twice), the columns the
    domain's comparison reads finite."""
    columns = ("nll", "tokens", "correct") if has_tasks(run.domain) else ("nll",)
    path = per_example_path(run.path, TEST_SPLIT)
    table = read_run_csv(run, path, ("example", *columns))
    order = np.argsort(table["example"], kind="stable")
    ids = table["example"][order].astype(int)
    if np.any(np.diff(ids) == 0):
        raise run_file_error(run, path, "an example id appears twice")
    return {"example": ids, **{column: table[column][order] for column in columns}}


def inspected_profiles(run: RunFolder) -> dict[str, RecencyProfile]:
    """{split: profile} of every inspection in the run's folder; RunFileError naming the file when one is damaged."""
    profiles = {}
    for path in sorted((run.path / INSPECT).glob("*.json")):
        data = read_run_json(run, path)
        try:
            profiles[str(data["split"])] = RecencyProfile.from_json(data["recency"])
        except (KeyError, TypeError, ValueError) as error:
            raise run_file_error(run, path, f"not an inspection's recency profile ({error!r})") from None
    return profiles
