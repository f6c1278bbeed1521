"""The plan of a sweep: one Job per run of a domain's roster x seeds (x tasks, for a domain with tasks).

Every job is `pipelines.train` with the overrides of its (domain, task, encoding, seed), so its folder is a
function of those and nothing else (pipelines.runs.layout).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from domains.store import read_meta
from domains.stored import StoredDataModule
from pipelines.experiment.config import build_datamodule, compose_config, datamodule_class, override_value
from pipelines.runs.layout import MANIFEST, TRAIN_METRICS, RunKey, has_tasks
from pipelines.runs.published_format import PublishedStudy, StudyError
from pipelines.runs.settings import differences, fixed_properties
from pipelines.runs.train_log import logged_step

ELSEWHERE = "running elsewhere"  # a job's status when another process holds its run folder (another sweep)


@dataclass
class Job:
    """One run of a sweep."""

    overrides: list[str]
    key: RunKey
    folder: Path
    max_steps: int
    tokens_per_step: int
    status: str = "queued"  # queued | running | done | failed | skipped | running elsewhere (ELSEWHERE)
    error: str | None = None
    began: float | None = None
    seconds: float | None = None
    first_seen: tuple[float, int] | None = field(default=None, repr=False)  # (time, step) when it started

    @property
    def label(self) -> str:
        return self.key.label

    @property
    def step(self) -> int:
        """Steps done, from the last row of the run's metrics.csv: its step column, found by name in the header (the
        training and validation rows leave each other's columns blank). Only the header and the tail are read: the
        view polls the file often."""
        try:
            with open(self.folder / TRAIN_METRICS, "rb") as handle:
                header = handle.readline().decode(errors="replace").strip().split(",")
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - 1024))
                tail = handle.read().decode(errors="replace").split("\n")
        except FileNotFoundError:
            return 0
        if "step" not in header:
            return 0
        column = header.index("step")
        # the tail's first line is the header or a cut one, its last is empty or a row still being written
        for line in reversed(tail[1:-1]):
            fields = line.strip().split(",")
            if len(fields) > column and (step := logged_step(fields[column])) is not None:
                return step + 1  # rows are logged at the step's index (from 0)
        return 0

    def tokens_per_s(self) -> float | None:
        if self.status in ("done", "skipped"):
            try:
                return json.loads((self.folder / MANIFEST).read_text()).get("tokens_per_s")
            except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError, AttributeError):
                return None  # the view shows no figure; the report names a damaged manifest
        if self.status == "running" and self.first_seen:
            began, step0 = self.first_seen
            elapsed = time.time() - began
            return (self.step - step0) * self.tokens_per_step / elapsed if elapsed > 0 else None
        return None


def default_tasks(domain: str, preset: str) -> list[str]:
    """The tasks a sweep of a domain with tasks trains: the preset's own (`preset_tasks`), else all of them."""
    cls = datamodule_class(domain)
    return list(cls.preset_tasks.get(preset, cls.tasks))


def plan(
    domain: str,
    encodings: list[str],
    seeds: list[int],
    preset: str,
    runs_root: Path,
    tasks: list[str] | None = None,
    overrides: list[str] = (),
) -> list[Job]:
    """The runs of one domain's sweep, seeds outermost (a partial sweep has whole seeds first); two runs of one
    folder (a seed listed twice, two encodings with one id) are refused by name."""
    groups = (
        [[f"domain.args.task={t}"] for t in (tasks or default_tasks(domain, preset))] if has_tasks(domain) else [[]]
    )
    jobs = []
    planned: dict[Path, list[str]] = {}
    for seed in seeds:
        for group in groups:
            for encoding in encodings:
                run_overrides = [
                    f"domain={domain}",
                    f"preset={preset}",
                    f"pe={encoding}",
                    f"seed={seed}",
                    f"runs_root={override_value(str(runs_root))}",  # quoted: any path is one string
                    *group,
                    *overrides,
                ]
                cfg = compose_config(run_overrides)
                key = RunKey.of_config(cfg)
                folder = key.folder(cfg.runs_root)
                if folder in planned:
                    raise ValueError(
                        f"{folder} is planned twice ({_varying(planned[folder], run_overrides)}): a run folder is "
                        "trained once; list each seed, encoding and task once"
                    )
                planned[folder] = run_overrides
                jobs.append(
                    Job(
                        overrides=run_overrides,
                        key=key,
                        folder=folder,
                        max_steps=cfg.trainer.max_steps,
                        tokens_per_step=cfg.trainer.batch_size
                        * cfg.trainer.accumulate
                        * cfg.trainer.devices
                        * cfg.model.context,
                    )
                )
    return jobs


def _varying(first: list[str], second: list[str]) -> str:
    """What tells two plans of one run folder apart, e.g. "pe=a and pe=b"; "seed=0 and seed=0" for a repeat."""
    differ = [f"{a} and {b}" for a, b in zip(first, second, strict=True) if a != b]
    seed = next(o for o in first if o.startswith("seed="))
    return "; ".join(differ) or f"{seed} and {seed}"


def check_joinable(jobs: list[Job], studies: list[PublishedStudy]) -> None:
    """StudyError, before anything trains, naming what a planned run would be trained with that a study holds
    otherwise (the data hashes are checked by join once the runs exist): such runs could never join it."""
    first_of_group = {job.key.group_label: job for job in reversed(jobs)}
    for group, job in sorted(first_of_group.items()):
        holding = [(study, study.study["holds_fixed"].get(group)) for study in studies]
        holding = [(study, theirs) for study, theirs in holding if theirs is not None]
        if not holding:
            continue
        cfg = OmegaConf.to_container(compose_config(job.overrides), resolve=True)
        mine = fixed_properties({"config": cfg, "data_hashes": {}})
        for published, theirs in holding:
            lines = [
                f"  {job.label}: {key} {mine.get(key, '(not set)')}, the study has {theirs.get(key, '(not set)')}"
                for key in differences(mine, theirs)
                if not key.startswith("data_hashes.")
            ]
            if lines:
                raise StudyError(
                    f"refusing to train for {published.folder}: the runs would not join it:\n" + "\n".join(lines)
                )


def check_prepared_data(jobs: list[Job], studies: list[PublishedStudy]) -> None:
    """StudyError, before anything trains, when the prepared store a planned run would train on holds other raw
    data than a study it is meant to join records (its runs' `raw/` data hashes): a partial MAESTRO store built from
    the 11 samples, say, for a study prepared from all 1,276 performances, whose runs the join would refuse after
    the training (DataModule.other_raw_data says how many of how many, and what to run). A store not prepared yet
    is not read here: the runs prepare it, and the join checks it."""
    first_of_group = {job.key.group_label: job for job in reversed(jobs)}
    for group, job in sorted(first_of_group.items()):
        holding = [(study, study.study["holds_fixed"].get(group)) for study in studies]
        holding = [(study, theirs) for study, theirs in holding if isinstance(theirs, dict)]
        if not holding or not issubclass(datamodule_class(job.key.domain), StoredDataModule):
            continue
        datamodule = build_datamodule(compose_config(job.overrides))
        meta = read_meta(datamodule.store)
        if meta is None:
            continue
        for published, theirs in holding:
            prefix = "data_hashes.raw/"
            wanted = {key.removeprefix(prefix): value for key, value in theirs.items() if key.startswith(prefix)}
            if wanted and (why := datamodule.other_raw_data(meta, wanted)) is not None:
                raise StudyError(f"refusing to train {job.label} for {published.folder}: {why}")


def unpublished(jobs: list[Job], studies: list[PublishedStudy]) -> tuple[list[Job], list[Job]]:
    """(the jobs no study holds, the jobs a study holds already): a run published in a study is not trained again
    (`make train WITH=<study>`: a study grown across machines or sessions, whose run folders are gone)."""
    held = {label for study in studies for label in study.labels}
    return [job for job in jobs if job.label not in held], [job for job in jobs if job.label in held]
