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

Every iter() of the loader starts at the stream's start step: the node graph is built afresh, when its first batch
is asked for. (Lightning calls iter() once on a loader that is not a torch DataLoader, only to check that it can, and
then again to train; a graph shared by the two would have its workers pull step indices for the first iterator and
train from a later step.) A new iter(), close(), or the end or loss of an iterator shuts its graph down: threads
stopped, worker processes ended. Forked worker processes reset the SIGTERM handler they inherit (Lightning's only
logs, so such a worker could never be stopped and the training's exit would wait on it for ever), ignore SIGINT
(Ctrl-C is the training's to handle) and die with the thread that started them, even by kill -9 (Linux: a
parent-death signal).

Threads suit draws that spend their time in numpy (which releases the GIL); processes suit Python-heavy batch
building (HRG's tokenising). Processes start by fork where the platform has it, so the domain's open data is not
pickled; batches come back through a queue as plain arrays (tensors would travel as shared-memory handles, which a
loader dropped at the end of training can leave half received).
"""

from __future__ import annotations

import ctypes
import itertools
import multiprocessing.process
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any, Literal, Protocol

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
    step already puts a resumed run at the right batch: nothing of the loader is to be saved.

    Each iter() builds the graph anew from `build` when its first batch is asked for, so every iterator starts at the
    stream's start step; one iterator runs at a time (a new iter() shuts the previous one down), and close() shuts
    the running one down."""

    def __init__(self, build: Callable[[], nodes.Loader]) -> None:
        self._build = build
        self._running: Iterator[dict[str, torch.Tensor]] | None = None

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        self.close()
        # a function, not a method: an iterator holding `self` (which holds it) would be a reference cycle, so a
        # dropped one would stop its workers only when the cycle collector runs, on whichever thread that is
        self._running = _batches(self._build)
        return self._running

    def close(self) -> None:
        """Shut the running iterator's workers down (at the end of training; idempotent)."""
        running, self._running = self._running, None
        if running is not None:
            running.close()


def _batches(build: Callable[[], nodes.Loader]) -> Iterator[dict[str, torch.Tensor]]:
    """One iterator of TrainBatches: a graph built anew, its workers stopped when it is closed or dropped."""
    loader = build()
    global _starting_workers
    _starting_workers += 1  # the workers are forked inside iter(): see _in_forked_worker
    try:
        batches = iter(loader)
    finally:
        _starting_workers -= 1
    try:
        yield from batches
    finally:  # closed, or dropped: the workers end with the iterator
        shut_down(loader.root)


_starting_workers = 0  # > 0 while a loader's iter() forks its worker processes
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _in_forked_worker(parent: int) -> None:
    """Run in every child forked while a loader starts its workers (os.register_at_fork, below)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the training died before the signal was armed
            os._exit(1)


def _after_fork_in_child() -> None:
    if _starting_workers:
        _in_forked_worker(_forking_parent)


def _before_fork() -> None:
    global _forking_parent
    _forking_parent = os.getpid()


_forking_parent = os.getpid()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def shut_down(root: nodes.BaseNode, patience_s: float = 5.0) -> None:
    """Stop the threads and worker processes of the node graph under `root`, consumers first. torchdata.nodes has no
    public shutdown: each running node's iterator (`_it`) has `_shutdown` (stop its threads, join them briefly), and
    a parallel mapper's iterator lists its `_workers`. A worker process still alive after that (its last batch
    stuck in a queue no one reads any more) is terminated."""
    todo: list[Any] = [root]
    seen: set[int] = set()
    processes: list[multiprocessing.process.BaseProcess] = []
    while todo:
        node = todo.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stop = getattr(node, "_shutdown", None)
        if callable(stop):
            try:
                stop()
            except RuntimeError as error:
                # a dropped iterator can be collected on one of the graph's own threads, which cannot join
                # itself; the other threads and the processes are still stopped below
                if "cannot join current thread" not in str(error):
                    raise
        workers = getattr(node, "_workers", ())
        processes += [w for w in workers if isinstance(w, multiprocessing.process.BaseProcess)]
        todo += [getattr(node, name, None) for name in ("_it", "source")]
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=patience_s)
        if process.is_alive():
            process.kill()
            process.join()


def as_tensors(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {key: torch.from_numpy(value) for key, value in arrays.items()}


def train_loader(
    stream: BatchSource, num_workers: int = 0, method: WorkerMethod = "thread", pin_memory_device: str | None = None
) -> TrainBatches:
    """The training batches of `stream` from its start step on, built by `num_workers` workers of `method`; pinned
    for `pin_memory_device` ("cuda") when given."""
    if method not in WORKER_METHODS:
        raise ValueError(f"worker method must be one of {', '.join(WORKER_METHODS)}, got {method!r}")

    def build() -> nodes.Loader:
        steps = nodes.IterableWrapper(itertools.count(stream.start_step))
        if num_workers == 0:
            arrays: nodes.BaseNode = nodes.Mapper(steps, stream.arrays)
        else:
            arrays = nodes.ParallelMapper(steps, stream.arrays, num_workers=num_workers, in_order=True, method=method)
            arrays = nodes.Prefetcher(arrays, prefetch_factor=PREFETCH * num_workers)
        batches = nodes.Mapper(arrays, as_tensors)
        if pin_memory_device:
            batches = nodes.PinMemory(batches, pin_memory_device=pin_memory_device)
        return nodes.Loader(batches)

    return TrainBatches(build)
