"""What every run records about itself in manifest.json: config, code version, packages, data hashes, size, speed."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from domains.atomic import write_json
from domains.base import SequenceDataModule
from models.gpt import GPT
from pipelines.runs.layout import MANIFEST, RunKey

PACKAGES = (
    "torch",
    "lightning",
    "torchdata",  # the training input pipeline
    "hydra-core",
    "numpy",
    "scipy",
    "miditok",
    "mne",
    "pyfaidx",
)

REPO = Path(__file__).resolve().parent.parent.parent


def git_state(repo: Path = REPO) -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()

    try:
        return {
            "sha": git("rev-parse", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        }
    except (subprocess.CalledProcessError, FileNotFoundError):
        return {"sha": None, "dirty": None}


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def write_run_manifest(
    folder: Path,
    cfg: DictConfig,
    datamodule: SequenceDataModule,
    model: GPT,
    evaluation: dict,
    *,
    tokens_per_s: float | None,
    train_seconds: float,
    steps: int,
    device: str,
) -> dict[str, Any]:
    """The manifest of a trained run; `evaluation` is metrics/summary.json's content."""
    key = RunKey.of_config(cfg)
    data = datamodule.describe()
    manifest = {
        "run": {
            "domain": key.domain,
            "task": cfg.domain.args.get("task"),
            "pe": cfg.pe.name,
            "pe_id": key.encoding,
            "seed": key.seed,
            "preset": cfg.preset,
        },
        "config": OmegaConf.to_container(cfg, resolve=True),
        "data": data,
        "chance": data.get("chance"),  # tasks with a chance level: the analysis normalises accuracy by it
        "git": git_state(),
        "packages": package_versions(),
        "data_hashes": datamodule.data_hashes(),
        "n_params": model.num_parameters(),
        "encoding": model.encoding.describe(),
        "tokens_per_s": tokens_per_s,
        "train_seconds_this_process": train_seconds,
        "steps": steps,
        "device": device,
        "eval_tokens_per_s": eval_tokens_per_s(evaluation),
    }
    write_json(folder / MANIFEST, manifest)
    return manifest


def eval_tokens_per_s(evaluation: dict) -> dict[str, float | None]:
    return {split: entry.get("tokens_per_s") for split, entry in evaluation["splits"].items()}
