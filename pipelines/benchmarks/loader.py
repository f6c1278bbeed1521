"""The training loader benchmark: batches/s of each domain's training input at a preset, today's path against
torchdata.nodes, at 0, 1 and 2 workers.

The paths, over the same stream (`TrainStream`: batch s is a pure function of seed and step):
  dataloader  torch's DataLoader over the stream (batch_size=None; its workers are processes)
  nodes       domains.loading: ParallelMapper on threads or processes, Prefetcher (the training path)
With 0 workers both build the batches in the training process. Each configuration takes `warmup` batches first
(worker start-up is not a steady-state cost), then `batches` timed ones.

A stored domain is prepared from the mirror folder into a temporary data root, as the data benchmark does
(pipelines.benchmarks.data), at the preset's example geometry (HRG's paper windows of 6,100 bases are the
demanding case: every window is tokenised into 6-mers on the fly). A domain whose preparation fails gives one row
with `skipped` saying why.

Each row also carries the training tokens/s the model of the same preset reached in the same `make throughput`
run (the reference encoding's preset row) and their ratio: above 1, the loader keeps up with training; below 1, it
would hold training back on this machine's CPU. On a GPU the training figure is far higher: the row then says what
the host must sustain.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader

from domains.base import SequenceDataModule
from domains.loading import train_loader
from domains.stored import StoredDataModule
from pipelines.benchmarks.data import INPUT_ERRORS, data_root, hrg_overrides
from pipelines.experiment.config import build_datamodule, compose_config, datamodule_class

COLUMNS = (
    "domain",
    "preset",
    "path",
    "method",
    "workers",
    "batch",
    "context",
    "batches",
    "seconds",
    "batches_per_s",
    "tokens_per_s",
    "train_tokens_per_s",
    "loader_vs_train",
    "skipped",
)


def configurations(workers: Iterable[int]) -> list[tuple[str, str, int]]:
    """(path, method, workers) of every measured loader: today's DataLoader, then nodes on threads and processes."""
    rows = []
    for count in workers:
        rows.append(("dataloader", "process" if count else "main", count))
    for count in workers:
        rows += [("nodes", "main", 0)] if count == 0 else [("nodes", "thread", count), ("nodes", "process", count)]
    return rows


def loader(path: str, method: str, workers: int, datamodule: SequenceDataModule) -> Iterable:
    stream = datamodule.train_stream()
    if path == "dataloader":
        return DataLoader(stream, batch_size=None, num_workers=workers)
    return train_loader(stream, workers, "thread" if method == "main" else method)


def time_loader(batches_of: Iterable, batches: int, warmup: int) -> float:
    """Seconds for `batches` batches after `warmup` untimed ones."""
    iterator = iter(batches_of)
    for _ in range(warmup):
        next(iterator)
    began = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return time.perf_counter() - began


def measure_loaders(
    domains: Iterable[str],
    preset: str,
    source: Path | None,
    *,
    workers: Iterable[int] = (0, 1, 2),
    batches: int = 20,
    warmup: int = 2,
    train_tokens_per_s: dict[str, float] | None = None,
) -> list[dict[str, Any]]:
    """One row per (domain, loader configuration); see the module docstring."""
    rows = []
    for domain in domains:
        base = {"domain": domain, "preset": preset, "train_tokens_per_s": (train_tokens_per_s or {}).get(domain)}
        with tempfile.TemporaryDirectory(prefix=f"posbench-loader-{domain}-") as tmp:
            try:
                with data_root(source or Path(tmp) / "no-mirror", Path(tmp) / "data"):
                    datamodule = prepared_datamodule(domain, preset, source)
                    for path, method, count in configurations(workers):
                        seconds = time_loader(loader(path, method, count, datamodule), batches, warmup)
                        rows.append(row(base, datamodule, path, method, count, batches, seconds))
            except INPUT_ERRORS as err:
                rows.append({**dict.fromkeys(COLUMNS), **base, "skipped": f"{type(err).__name__}: {err}"})
    return rows


def prepared_datamodule(domain: str, preset: str, source: Path | None) -> SequenceDataModule:
    """The domain's datamodule at `preset`, its store prepared from `source` (a stored domain), ready to draw."""
    overrides = [f"domain={domain}", f"preset={preset}"]
    stored = issubclass(datamodule_class(domain), StoredDataModule)
    if stored and source is None:
        raise FileNotFoundError(f"{domain}: no mirror folder to prepare it from (--data-source or $POSBENCH_MIRROR)")
    if domain == "hrg":
        overrides += hrg_overrides(Path(source) / domain)
    datamodule = build_datamodule(compose_config(overrides))
    if stored:
        datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule


def row(
    base: dict[str, Any],
    datamodule: SequenceDataModule,
    path: str,
    method: str,
    workers: int,
    batches: int,
    seconds: float,
) -> dict[str, Any]:
    tokens = batches * datamodule.batch_size * datamodule.context
    tokens_per_s = tokens / seconds
    train = base["train_tokens_per_s"]
    return {
        **base,
        "path": path,
        "method": method,
        "workers": workers,
        "batch": datamodule.batch_size,
        "context": datamodule.context,
        "batches": batches,
        "seconds": seconds,
        "batches_per_s": batches / seconds,
        "tokens_per_s": tokens_per_s,
        "loader_vs_train": tokens_per_s / train if train else None,
        "skipped": "",
    }
