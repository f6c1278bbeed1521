"""What every run records about itself in manifest.json: config, code version, packages, data hashes, size, speed."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from domains.atomic import write_json
from domains.base import SequenceDataModule
from models.gpt import GPT
from pipelines.host_memory import allocator_state
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


# The folders whose files decide what a run computes: an untracked or changed file there makes the run dirty.
CODE_FOLDERS = ("models", "configs", "domains", "pipelines")
RESULTS_FOLDER = "docs/results"  # published studies: their changes do not make a tree dirty
# CPU flags that change which kernels torch picks (and so speed, and in the last bits, results).
CPU_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "neon", "asimd")


def git_state(repo: Path = REPO) -> dict[str, Any]:
    """The commit, and whether the working tree differs from it: any tracked change (but to published studies'
    files, RESULTS_FOLDER), or an untracked file under
    CODE_FOLDERS (a new encoding module that git does not see still runs). The untracked and changed code files are
    listed with their sha256 (None: deleted), so a dirty run says which code it ran; untracked files elsewhere
    (notes, ignored outputs) do not count."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout

    try:
        sha = git("rev-parse", "HEAD").strip()
        # a published study's files are outputs, not code: publishing one study beside another's new outputs
        # must not mark it as built from a changed tree
        outputs = f":(exclude){RESULTS_FOLDER}"
        tracked_changes = bool(git("status", "--porcelain", "--untracked-files=no", "--", ".", outputs).strip())
        untracked = git("ls-files", "-z", "--others", "--exclude-standard", "--", *CODE_FOLDERS).split("\0")
        modified = git("diff", "-z", "--name-only", "HEAD", "--", *CODE_FOLDERS).split("\0")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return {"sha": None, "dirty": None, "untracked": None, "modified": None}
    untracked_hashes = file_hashes(repo, untracked)
    return {
        "sha": sha,
        "dirty": tracked_changes or bool(untracked_hashes),
        "untracked": untracked_hashes,
        "modified": file_hashes(repo, modified),
    }


def file_hashes(repo: Path, paths: list[str]) -> dict[str, str | None]:
    """Repository-relative path -> sha256 of the file as it is now (None where it is gone)."""
    hashes = {}
    for path in sorted(p for p in paths if p):
        file = repo / path
        hashes[path] = hashlib.sha256(file.read_bytes()).hexdigest() if file.is_file() else None
    return hashes


def machine_state() -> dict[str, Any]:
    """What the speed (and on CPU the last bits) of a run depend on beyond the packages: the threads torch used,
    how freed memory is kept (speed only: pipelines.host_memory), the CPU, and the kernels and BLAS torch was built
    with."""
    return {
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "allocator": allocator_state(),
        "cpu_count": os.cpu_count(),
        **cpu_description(),
        "torch_build": torch_build(),
    }


def cpu_description(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """The CPU model and which of CPU_FLAGS it has (None where /proc/cpuinfo is not there to say)."""
    fields: dict[str, str] = {}
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip().lower(), value.strip())
    except OSError:
        pass
    model = fields.get("model name") or fields.get("hardware") or platform.processor() or platform.machine()
    flags = fields.get("flags") or fields.get("features")
    return {"cpu": model or None, "cpu_flags": [f for f in CPU_FLAGS if f in flags.split()] if flags else None}


def torch_build() -> dict[str, Any]:
    """torch.__config__.show()'s component lines (compiler, BLAS, oneDNN, OpenMP, CPU capability; the long build
    settings line reduced to its BLAS), and which CPU backends are available."""
    lines = [line.strip().removeprefix("- ") for line in torch.__config__.show().splitlines()[1:] if line.strip()]
    settings = next((line for line in lines if line.startswith("Build settings:")), "").removeprefix("Build settings:")
    blas = next((item.split("=", 1)[1] for item in settings.split(",") if item.strip().startswith("BLAS_INFO=")), None)
    return {
        "components": [line for line in lines if not line.startswith("Build settings:")],
        "blas": blas,
        "mkl": torch.backends.mkl.is_available(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "openmp": torch.backends.openmp.is_available(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


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
    train_cpu_seconds: float,
    whole_fit: tuple[float | None, float | None] | None = None,
    resumed_at: int = 0,
    steps: int,
    device: str,
) -> dict[str, Any]:
    """The manifest of a trained run; `evaluation` is metrics/summary.json's content."""
    key = RunKey.of_config(cfg)
    data = datamodule.describe()
    whole_seconds, whole_cpu_seconds = whole_fit or (train_seconds, train_cpu_seconds)  # one process: its own
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
        # CPU seconds of every thread of this process (thread loader workers included; process workers are not):
        # what a run cost in core-seconds, whatever else shared the cores (pipelines.analysis.cost)
        "train_cpu_seconds_this_process": train_cpu_seconds,
        # the whole fit over every process that trained the run (a resumed run: the earlier ones up to the checkpoint
        # it resumed from, kept in the checkpoint); null where that checkpoint predates the record
        "resumed_at_step": resumed_at,
        "train_seconds": whole_seconds,
        "train_cpu_seconds": whole_cpu_seconds,
        "steps": steps,
        "device": device,
        "machine": machine_state(),
        "eval_tokens_per_s": eval_tokens_per_s(evaluation),
    }
    write_json(folder / MANIFEST, manifest)
    return manifest


def eval_tokens_per_s(evaluation: dict) -> dict[str, float | None]:
    return {split: entry.get("tokens_per_s") for split, entry in evaluation["splits"].items()}
