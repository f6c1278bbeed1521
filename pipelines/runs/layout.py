"""Where a run lives: the run folder as a function of (domain, task, encoding, seed), and back.

    <runs_root>/<domain>[/<task>]/<encoding>/seed<k>/

`encoding` is the encoding's config id (configs/pe/<id>.yaml, e.g. `rope10k`); `<id>+yarn` is the YaRN evaluation
of a trained rope run (a derived run: nothing was trained for it). A domain whose DataModule lists tasks (the
synthetic domain) trains one model per task, so its folders have a task level. Because the folder depends on
nothing else, a rerun or a requeued job finds its checkpoint, and a finished run (DONE) is skipped.

A run folder holds, once finished:
  MANIFEST   resolved config, git sha, package versions, data hashes, parameters, encoding, tokens/s
  MODEL      final weights and the model config (pipelines.runs.model_file)
  METRICS/   per-example and per-position metrics of each evaluation split, summary.json (pipelines.runs.metrics)
  LOGS/      the loggers' files: TRAIN_METRICS (step, train/loss, lr, train/tokens_per_s, val/loss), and
             tensorboard/ or wandb/ when chosen (pipelines.experiment.loggers)
  DONE       written last; FAILED instead when training failed
and, once `python -m pipelines.inspect` has looked inside it:
  INSPECT/   <split>.json (attention by distance, the encoding's views) and their figures (pipelines.report.inspection)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig

from pipelines.experiment.config import datamodule_class, domain_names

MANIFEST = "manifest.json"
MODEL = "model.pt"
METRICS = "metrics"
LOGS = "logs"
TRAIN_METRICS = f"{LOGS}/metrics.csv"  # the name Lightning's CSVLogger gives its file
CHECKPOINTS = "checkpoints"
DONE = "done.json"
INSPECT = "inspect"
FAILED = "failed.json"
SETTLE = "settle.json"  # <runs>/<domain>/settle.json: the design and the looks of make settle (pipelines.settle)
DERIVED_MARK = "+"  # `rope10k+yarn`: an evaluation-time variant of a trained run, not an encoding of its own
YARN_SUFFIX = f"{DERIVED_MARK}yarn"
_SEED_DIR = re.compile(r"seed(\d+)")


def has_tasks(domain: str) -> bool:
    """Whether the domain trains one model per task (its run folders have a task level)."""
    return bool(datamodule_class(domain).tasks)


def is_derived(encoding: str) -> bool:
    """An evaluation-time variant of a trained run (YaRN), not a trained encoding."""
    return DERIVED_MARK in encoding


@dataclass(frozen=True)
class RunKey:
    """What names a run. `task` is None for a domain without tasks."""

    domain: str
    task: str | None
    encoding: str
    seed: int

    @classmethod
    def of_config(cls, cfg: DictConfig) -> RunKey:
        """The key of a composed config; a seed that is not a whole number >= 0 is refused by name (before any
        folder is named after it: int() would take 1.5 for seed1, and fail on 'abc' naming nothing)."""
        seed = cfg.seed
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(
                f"seed = {seed!r} (must be a whole number >= 0: it names the run folder and seeds the data)"
            )
        return cls(cfg.domain.name, cfg.domain.args.get("task") or None, cfg.pe.id, seed)

    @property
    def label(self) -> str:
        """The run's folder relative to the runs root."""
        return "/".join([self.domain, *([self.task] if self.task else []), self.encoding, f"seed{self.seed}"])

    @property
    def group(self) -> str:
        """What one comparison covers: the task for a domain with tasks, else the domain."""
        return self.task or self.domain

    @property
    def group_label(self) -> str:
        return f"{self.domain}/{self.task}" if self.task else self.domain

    @property
    def derived(self) -> bool:
        return is_derived(self.encoding)

    def folder(self, runs_root: str | Path) -> Path:
        return Path(runs_root) / self.label

    def yarn(self) -> RunKey:
        """The key of this rope run's YaRN evaluation."""
        return RunKey(self.domain, self.task, self.encoding + YARN_SUFFIX, self.seed)


def run_folder(cfg: DictConfig) -> Path:
    """The folder of the run a composed config describes."""
    return RunKey.of_config(cfg).folder(cfg.runs_root)


class KeyedRun:
    """The parts of a run's `key`, read often enough by the analysis to be worth the shorthand (a run folder found on
    disk, and the run as the analysis loaded it: pipelines.analysis.loading.LoadedRun)."""

    key: RunKey

    @property
    def domain(self) -> str:
        return self.key.domain

    @property
    def group(self) -> str:
        return self.key.group

    @property
    def encoding(self) -> str:
        return self.key.encoding

    @property
    def seed(self) -> int:
        return self.key.seed

    @property
    def derived(self) -> bool:
        return self.key.derived

    @property
    def label(self) -> str:
        return self.key.label


@dataclass(frozen=True)
class RunFolder(KeyedRun):
    """A run folder found on disk. `files` holds what pipelines.runs.metrics has read of it (path -> the parsed
    content), so that each of its files is opened once (the analysis reads a run once, into
    pipelines.analysis.loading.LoadedRun; publishing and joining a study read its files again here)."""

    key: RunKey
    path: Path
    files: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def finished(self) -> bool:
        return (self.path / DONE).is_file()

    @property
    def failed(self) -> bool:
        return (self.path / FAILED).is_file()


def _subdirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir()) if path.is_dir() else []


def discover_runs(runs_root: str | Path, domain: str) -> list[RunFolder]:
    """Every `seed<k>` folder of the domain, finished or not.

    Raises FileNotFoundError naming the domain folder when it holds no run folder at all.
    """
    domain_dir = Path(runs_root) / domain
    tasks = has_tasks(domain)
    group_dirs = _subdirs(domain_dir) if tasks else [domain_dir]
    runs = [
        RunFolder(RunKey(domain, group_dir.name if tasks else None, enc_dir.name, int(m[1])), seed_dir)
        for group_dir in group_dirs
        for enc_dir in _subdirs(group_dir)
        for seed_dir in _subdirs(enc_dir)
        if (m := _SEED_DIR.fullmatch(seed_dir.name))
    ]
    if not runs:
        raise FileNotFoundError(f"no run folders for domain {domain!r} in {domain_dir}")
    return runs


def present_domains(runs_root: str | Path) -> list[str]:
    """The domains (in their configured order) with at least one run folder under `runs_root`."""
    present = []
    for domain in domain_names():
        try:
            discover_runs(runs_root, domain)
        except FileNotFoundError:
            continue
        present.append(domain)
    return present
