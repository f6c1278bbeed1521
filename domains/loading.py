"""The training input pipeline on torchdata.nodes: step indices -> batches built in order -> prefetch -> pin -> loader.

    IterableWrapper(count(start_step))       the stream's step indices, from the step training resumes at
    -> ParallelMapper(stream.arrays, n, in_order=True, method="thread" | "process")
                                             n workers build batches s, s+1, ... as numpy arrays (window draws,
                                             HRG's on-the-fly 6-mer tokenising, MAESTRO's transposition) and hand
                                             them back in step order; with no worker, Mapper builds them here
    -> Mapper(as_tensors)                    tensors over the same memory (no copy)
    -> Prefetcher(PREFETCH)                  keeps batches ready ahead of the training step (with workers)
    -> PinMemory()                           page-locked host memory for the copy to a CUDA device (on CUDA only)
    -> Loader

Batch s is `TrainStream.batch(s)`, a pure function of (seed, step, rank): the loader yields the very batches the
stream's own iterator does, byte for byte, for any number and kind of workers, and a resumed run restarts the
indices at its restored step (no loader state to checkpoint; see domains.base on why none is wanted).

Threads suit draws that spend their time in numpy (which releases the GIL); processes suit Python-heavy batch
building (HRG's tokenising). Processes start by fork where the platform has it, so the domain's open data is not
pickled; batches come back through a queue as plain arrays (tensors would travel as shared-memory handles, which a
loader dropped at the end of training can leave half received).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Literal, Protocol

import numpy as np
import torch
from torchdata import nodes

WorkerMethod = Literal["thread", "process"]
WORKER_METHODS: tuple[str, ...] = ("thread", "process")
PREFETCH = 2  # batches kept ready per worker's worth of work: enough to hide one slow draw, little memory


class BatchSource(Protocol):
    """What the loader needs of a stream (domains.base.TrainStream): its first step and batch s as arrays."""

    start_step: int

    def arrays(self, step: int) -> dict[str, np.ndarray]: ...


class TrainBatches:
    """The loader as a plain iterable. nodes.Loader has state_dict/load_state_dict, so Lightning would save its
    position in the checkpoint and restore it on resume; that position is one batch ahead of the model (Lightning
    has fetched the next batch when it checkpoints), so the resumed run would skip a batch. The stream's start
    step already puts a resumed run at the right batch: nothing of the loader is to be saved."""

    def __init__(self, loader: nodes.Loader) -> None:
        self._loader = loader

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        return iter(self._loader)


def as_tensors(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {key: torch.from_numpy(value) for key, value in arrays.items()}


def train_loader(
    stream: BatchSource, num_workers: int = 0, method: WorkerMethod = "thread", pin_memory_device: str | None = None
) -> TrainBatches:
    """The training batches of `stream` from its start step on, built by `num_workers` workers of `method`; pinned
    for `pin_memory_device` ("cuda") when given."""
    if method not in WORKER_METHODS:
        raise ValueError(f"worker method must be one of {', '.join(WORKER_METHODS)}, got {method!r}")
    steps = nodes.IterableWrapper(itertools.count(stream.start_step))
    if num_workers == 0:
        arrays: nodes.BaseNode = nodes.Mapper(steps, stream.arrays)
    else:
        arrays = nodes.ParallelMapper(steps, stream.arrays, num_workers=num_workers, in_order=True, method=method)
        arrays = nodes.Prefetcher(arrays, prefetch_factor=PREFETCH * num_workers)
    batches = nodes.Mapper(arrays, as_tensors)
    if pin_memory_device:
        batches = nodes.PinMemory(batches, pin_memory_device=pin_memory_device)
    return TrainBatches(nodes.Loader(batches))
