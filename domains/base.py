"""The data spine every domain shares: a seeded infinite training stream and deterministic evaluation windows.

Training: batch s of a run with seed k is built from samples s*B .. s*B+B-1 of the stream, and sample i is
drawn by the domain from `numpy.random.default_rng([k, i])`. The order is therefore a function of (seed, step)
only: identical for every encoding with the same seed and independent of the number of loader workers. The
stream never ends: a run is bounded by max_steps.

Resume: the stream restarts at the step the restored trainer has reached, so a resumed run sees exactly the
batches the uninterrupted run would have. (A loader-state checkpoint, as torchdata's StatefulDataLoader or
nodes.Loader would save inside Lightning's, is one batch ahead of the model: Lightning prefetches a batch before it
runs the current one, and the resumed run would skip it. The stream's position is a pure function of the step, so
no loader state is needed.) Training reads the stream through torchdata.nodes (domains.loading).

Evaluation: a fixed list of windows over the whole split, each tagged with its example and offset, scored in
order; an example longer than the context is covered by sliding windows that each score only new tokens.
"""

from __future__ import annotations

import hashlib
import os
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

from domains.loading import WORKER_METHODS, WorkerMethod, as_tensors, train_loader

Window = tuple[np.ndarray, np.ndarray]  # (tokens int64 (T,), scored bool (T,))


class EmptySplitError(ValueError):
    """The domain has no example for this evaluation split (say, no task size in its length range)."""


def check_minimum(where: str, minimum: int, **settings: Any) -> None:
    """Raise ValueError naming the first of `settings` that is not an integer >= `minimum` (a size, a count or a
    seed given as 0, negative or fractional would otherwise fail later, far from the setting, or not at all)."""
    for name, value in settings.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"{where}: {name} must be an integer >= {minimum}, got {value!r}")


# Warm sweep workers (pipelines.launch.local) train many runs in turn, and every encoding of a (task, seed) reads the
# same stream (its order is a function of (seed, step)): where the worker turns it on (STREAM_CACHE_ENV=1), the
# batches drawn for one run are kept for the next, within STREAM_CACHE_BYTES, oldest out first. Only a stream whose
# domain names everything its draws depend on (SequenceDataModule.stream_key) is kept: the synthetic tasks, whose
# draws are 10% of a tiny run; the language domains' windows are slices of a store, cheaper to draw than to keep.
STREAM_CACHE_ENV = "POSBENCH_STREAM_CACHE"
STREAM_CACHE_BYTES = 256 * 2**20


class _StreamCache:
    """{(stream key, seed, batch size, rank, ranks, step): the batch's arrays}, shared by a process's streams."""

    def __init__(self, limit: int) -> None:
        self.limit, self.bytes = limit, 0
        self.batches: OrderedDict[tuple, dict[str, np.ndarray]] = OrderedDict()
        self.lock = threading.Lock()  # thread workers build batches concurrently

    def get(self, key: tuple) -> dict[str, np.ndarray] | None:
        with self.lock:
            arrays = self.batches.get(key)
            if arrays is not None:
                self.batches.move_to_end(key)
        # a copy: the loader wraps a batch's memory in tensors, and nothing a run does may reach another run's batch
        return None if arrays is None else {name: array.copy() for name, array in arrays.items()}

    def put(self, key: tuple, arrays: dict[str, np.ndarray]) -> None:
        kept = {name: array.copy() for name, array in arrays.items()}
        with self.lock:
            if key in self.batches:
                return
            self.batches[key] = kept
            self.bytes += sum(array.nbytes for array in kept.values())
            while self.bytes > self.limit and self.batches:
                _, dropped = self.batches.popitem(last=False)
                self.bytes -= sum(array.nbytes for array in dropped.values())


STREAM_CACHE = _StreamCache(STREAM_CACHE_BYTES)


class TrainStream(IterableDataset):
    """Infinite stream of training batches from `start_step` on; batch s holds samples s*B .. s*B+B-1 (this
    rank's share). Training maps `arrays` over the step indices (domains.loading); iterated as a dataset by torch's
    DataLoader, worker w of n produces steps start+w, start+w+n, ... and the loader interleaves them back into step
    order (the same batches: the loader benchmark's baseline). With gradient accumulation over A batches,
    optimiser step k takes the loader's batches kA .. kA+A-1 of every rank: the samples k*G .. k*G+G-1,
    G = B x A x ranks, exactly the batch one process would take with batch size G."""

    def __init__(
        self,
        draw: Callable[[np.random.Generator], Window],
        seed: int,
        batch_size: int,
        start_step: int = 0,
        rank: int = 0,
        world_size: int = 1,
        key: tuple | None = None,
    ) -> None:
        self.draw, self.seed, self.batch_size, self.start_step = draw, seed, batch_size, start_step
        self.rank, self.world_size = rank, world_size
        self.key = key  # what the draws depend on besides (seed, sample): a kept batch is found by it (STREAM_CACHE)

    def arrays(self, step: int) -> dict[str, np.ndarray]:
        """Batch `step` as numpy arrays (what loader processes send back: pickled by value, no shared tensors);
        the kept copy where a warm worker keeps its streams' batches (STREAM_CACHE)."""
        if self.key is None or os.environ.get(STREAM_CACHE_ENV) != "1":
            return self.drawn(step)
        key = (self.key, self.seed, self.batch_size, self.rank, self.world_size, step)
        arrays = STREAM_CACHE.get(key)
        if arrays is None:
            arrays = self.drawn(step)
            STREAM_CACHE.put(key, arrays)
        return arrays

    def drawn(self, step: int) -> dict[str, np.ndarray]:
        """Batch `step` drawn: samples (step x ranks + rank) x B .. + B - 1, each from its own generator."""
        first = (step * self.world_size + self.rank) * self.batch_size
        windows = [self.draw(np.random.default_rng([self.seed, first + i])) for i in range(self.batch_size)]
        return {
            "tokens": np.stack([w[0] for w in windows]).astype(np.int64),
            "scored": np.stack([w[1] for w in windows]),
        }

    def batch(self, step: int) -> dict[str, torch.Tensor]:
        return as_tensors(self.arrays(step))

    def __iter__(self):
        worker = get_worker_info()
        n_workers, worker_id = (worker.num_workers, worker.id) if worker else (1, 0)
        step = self.start_step + worker_id
        while True:
            yield self.batch(step)
            step += n_workers


@dataclass
class EvalWindows(Dataset):
    """A split as fixed windows: tokens (W, T), scored (W, T), example (W,), start (W,)."""

    tokens: np.ndarray
    scored: np.ndarray
    example: np.ndarray
    start: np.ndarray
    n_examples: int
    max_length: int  # longest example, for NLL by position

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "tokens": torch.from_numpy(self.tokens[i].astype(np.int64)),
            "scored": torch.from_numpy(self.scored[i]),
            "example": torch.tensor(self.example[i]),
            "start": torch.tensor(self.start[i]),
        }

    @property
    def window_length(self) -> int:
        return self.tokens.shape[1]

    def digest(self) -> str:
        """sha256 over the windows, so runs can check they were scored on identical data."""
        digest = hashlib.sha256()
        for array in (self.tokens, self.scored, self.example, self.start):
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()


def padded_window(piece: np.ndarray, context: int, pad_id: int) -> Window:
    """A training window: `piece` (at most `context` tokens) padded to `context` with `pad_id`; every token but the
    first (it has no history) and the padding is scored."""
    tokens = np.full(context, pad_id, dtype=np.int64)
    tokens[: len(piece)] = piece
    scored = np.zeros(context, dtype=bool)
    scored[1 : len(piece)] = True
    return tokens, scored


def sliding_windows(length: int, context: int, stride: int) -> list[tuple[int, int]]:
    """(start, first scored index) of windows covering tokens 1..length-1 of an example, each token scored once.

    The first window starts at 0 and scores from token 1; each next window moves by `stride` and scores the
    tokens the previous ones did not reach, with at least context - stride tokens of history; the last window
    is aligned to the example's end.
    """
    if length > context and not 0 < stride < context:
        raise ValueError(
            f"an example of {length} tokens needs sliding windows with stride in 1..{context - 1} "
            f"(context {context}) so each window's first scored token has history; got stride {stride}"
        )
    windows = [(0, 1)]
    scored_until = min(length, context)
    while scored_until < length:
        start = min(windows[-1][0] + stride, length - context)
        windows.append((start, scored_until))
        scored_until = min(length, start + context)
    return windows


def windows_from_examples(
    examples: list[np.ndarray],
    context: int,
    stride: int,
    pad_id: int,
    scored_masks: list[np.ndarray] | None = None,
) -> EvalWindows:
    """Cut examples into evaluation windows of `context` tokens (padded with `pad_id`, never scored)."""
    tokens, scored, example_ids, starts = [], [], [], []
    for i, example in enumerate(examples):
        mask = scored_masks[i] if scored_masks is not None else np.ones(len(example), dtype=bool)
        for start, first in sliding_windows(len(example), context, stride):
            piece = example[start : start + context]
            window = np.full(context, pad_id, dtype=np.int64)
            window[: len(piece)] = piece
            score = np.zeros(context, dtype=bool)
            score[first - start : len(piece)] = mask[first : start + len(piece)]
            score[0] = False
            tokens.append(window)
            scored.append(score)
            example_ids.append(i)
            starts.append(start)
    return EvalWindows(
        tokens=np.stack(tokens),
        scored=np.stack(scored),
        example=np.array(example_ids, dtype=np.int64),
        start=np.array(starts, dtype=np.int64),
        n_examples=len(examples),
        max_length=max(len(e) for e in examples),
    )


@dataclass(frozen=True)
class Metric:
    """A domain's headline test metric, declared once on its DataModule; reports only render it."""

    name: str  # "test NLL"
    short: str  # column label: "NLL"
    unit: str  # "nats"
    higher_is_better: bool
    digits: int  # decimals the tables show
    # Half width of the region of practical equivalence (SPEC 3): two encodings whose difference is known to lie
    # within +-equivalence are `equivalent`. NLL domains: 0.005 nats per token.
    equivalence: float = 0.005


class SequenceDataModule(L.LightningDataModule, ABC):
    """Base DataModule: subclasses draw training windows and build evaluation windows."""

    domain: ClassVar[str]
    eval_split_names: ClassVar[tuple[str, ...]] = ("test",)
    metric: ClassVar[Metric] = Metric("test NLL", "NLL", "nats", higher_is_better=False, digits=4)
    # A domain trained as one model per task lists its task names here; empty: one model for the whole domain.
    tasks: ClassVar[tuple[str, ...]] = ()
    # The tasks a sweep at a preset trains (`make train`, `make demo` at tiny), fixed per preset so that every run of
    # a study at that preset holds the same blocks; a preset not listed (paper) trains every task.
    preset_tasks: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __init__(
        self,
        *,
        context: int,
        batch_size: int,
        eval_batch_size: int,
        seed: int,
        num_workers: int = 0,
        worker_method: WorkerMethod = "thread",
    ) -> None:
        super().__init__()
        # context 1 would leave nothing to score: a window's first token has no history
        check_minimum(self.domain, 2, context=context)
        check_minimum(self.domain, 1, batch_size=batch_size, eval_batch_size=eval_batch_size)
        check_minimum(self.domain, 0, seed=seed, num_workers=num_workers)  # numpy seeds are non-negative
        if worker_method not in WORKER_METHODS:
            raise ValueError(
                f"{self.domain}: worker_method must be one of {', '.join(WORKER_METHODS)}, got {worker_method!r}"
            )
        self.context, self.batch_size, self.eval_batch_size = context, batch_size, eval_batch_size
        self.seed, self.num_workers, self.worker_method = seed, num_workers, worker_method
        self._windows: dict[str, EvalWindows] = {}

    # ---- what a domain provides -----------------------------------------------------------------------
    @property
    @abstractmethod
    def vocab_size(self) -> int: ...

    @abstractmethod
    def draw_train_window(self, rng: np.random.Generator) -> Window:
        """One training window of exactly `context` tokens and its scored mask, drawn from `rng` only."""

    @abstractmethod
    def build_eval_windows(self, split: str) -> EvalWindows: ...

    def data_hashes(self) -> dict[str, str]:
        """Hashes that identify the data (raw inputs and evaluation windows) for the run manifest."""
        hashes = {}
        for split in self.eval_split_names:
            try:
                hashes[f"eval/{split}"] = self.eval_windows(split).digest()
            except EmptySplitError as err:
                hashes[f"eval/{split}"] = f"empty: {err}"
        return hashes

    def describe(self) -> dict[str, Any]:
        return {"domain": self.domain, "vocab_size": self.vocab_size, "context": self.context}

    def stream_key(self) -> tuple | None:
        """Everything `draw_train_window` depends on besides its generator, when a domain can name it: then a warm
        worker keeps the stream's batches for the next run of the same seed (STREAM_CACHE). None: never kept."""
        return None

    # ---- loaders ---------------------------------------------------------------------------------------
    def eval_windows(self, split: str) -> EvalWindows:
        if split not in self._windows:
            self._windows[split] = self.build_eval_windows(split)
        return self._windows[split]

    def train_stream(self) -> TrainStream:
        """Lightning asks for the loader after restoring a checkpoint, so global_step (in optimiser steps, each
        `accumulate_grad_batches` loader batches) is where training resumes."""
        trainer = self.trainer
        return TrainStream(
            self.draw_train_window,
            self.seed,
            self.batch_size,
            start_step=trainer.global_step * trainer.accumulate_grad_batches if trainer else 0,
            rank=trainer.global_rank if trainer else 0,
            world_size=trainer.world_size if trainer else 1,
            key=self.stream_key(),
        )

    def train_dataloader(self) -> Iterable[dict[str, torch.Tensor]]:
        """The stream through torchdata.nodes (domains.loading): `num_workers` workers of `worker_method` build the
        batches in step order; pinned for the copy when training on CUDA. Its workers end at close_train_loader()."""
        on_cuda = self.trainer is not None and self.trainer.strategy.root_device.type == "cuda"
        self.close_train_loader()
        loader = train_loader(self.train_stream(), self.num_workers, self.worker_method, "cuda" if on_cuda else None)
        self._train_loader = loader
        return loader

    def close_train_loader(self) -> None:
        """End the training loader's worker threads and processes (idempotent): at the end of fit, however it ends."""
        loader, self._train_loader = getattr(self, "_train_loader", None), None
        if loader is not None:
            loader.close()

    def teardown(self, stage: str) -> None:
        if stage == "fit":
            self.close_train_loader()

    def eval_dataloader(self, split: str) -> DataLoader:
        return DataLoader(self.eval_windows(split), batch_size=self.eval_batch_size, shuffle=False)

    def val_dataloader(self) -> DataLoader:
        return self.eval_dataloader("val")
