"""Timing and memory of one model's training and evaluation steps, and the device's matmul peak.

The training step is the one `DecoderLM` takes under Lightning, without the Trainer around it: forward,
the mean NLL of the scored tokens, backward, the encoding-aware gradient clipping, AdamW with the encoding's
parameter groups. The evaluation step is `token_nll` under inference mode, as `models.training.evaluate`
runs it. Batches are random tokens of the domain's vocabulary: speed does not depend on their values.

Peak memory:
- CUDA: `torch.cuda.max_memory_allocated` over one step, the allocator's own count.
- CPU: there is no allocator statistic, so `LiveTensorMemory` follows every tensor storage that the step's
  operators create (a dispatch mode: each new storage counted once, removed when it is freed) and keeps the
  peak. It sees what eager PyTorch allocates; a compiled graph's kernels bypass the dispatcher, so compiled
  rows on CPU carry no memory figure.
Both report, beyond what was allocated before the step: the bytes autograd holds when the forward pass ends
(activations), the peak over forward and backward (activations, transient buffers such as a T x T score
matrix, gradients: what grows with the context), and the peak of the whole step; "peak" adds the parameters
and optimiser state held between steps.
"""

from __future__ import annotations

import contextlib
import statistics
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from models.training import DecoderLM, synchronize, token_nll

MIB = 2**20


class LiveTensorMemory(TorchDispatchMode):
    """Bytes of tensor storage created inside the block and still alive: `live` now, `peak` at most."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._alive: set[int] = set()

    def _freed(self, key: int, nbytes: int) -> None:
        self._alive.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            key = storage._cdata  # views and in-place results share their storage: counted once
            if key in self._alive:
                continue
            self._alive.add(key)
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._freed, key, storage.nbytes())
        return out


@dataclass
class Timing:
    seconds: list[float]  # one per timed repetition
    first_seconds: float  # the first warm-up call (includes compilation when compiled)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def spread(self) -> float:
        """Half the interquartile range over the median: the relative noise of the figure."""
        if len(self.seconds) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.seconds, n=4, method="inclusive")
        return (q3 - q1) / 2 / self.median


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}  # `make throughput --clock`


def time_calls(
    step: Callable[[], Any], device: torch.device, calls: int, clock: Callable[[], float] = time.perf_counter
) -> list[float]:
    """Seconds of each of `calls` calls of `step`, timed one by one: wall seconds, or with `clock` the process's CPU
    seconds (CLOCKS["cpu"]: on the CPU, what other processes sharing its cores do not add to)."""
    times = []
    for _ in range(calls):
        synchronize(device)
        began = clock()
        step()
        synchronize(device)
        times.append(clock() - began)
    return times


@dataclass
class StepMemory:
    """Bytes allocated by one training step beyond what was allocated before it."""

    saved: int  # still allocated when the forward pass ends: what autograd keeps for backward
    through_backward: int  # the peak over forward and backward: activations, transient buffers, gradients
    step: int  # the peak of the whole step, the optimiser's update included


def step_memory(
    forward: Callable[[], torch.Tensor],
    backward: Callable[[torch.Tensor], None],
    update: Callable[[], None],
    device: torch.device,
) -> StepMemory:
    """Memory of one training step taken as loss = forward(); backward(loss); update()."""
    if device.type == "cuda":
        synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        loss = forward()
        synchronize(device)
        saved = torch.cuda.memory_allocated(device) - before
        backward(loss)
        synchronize(device)
        through_backward = torch.cuda.max_memory_allocated(device) - before
        update()
        synchronize(device)
        return StepMemory(saved, through_backward, torch.cuda.max_memory_allocated(device) - before)
    with LiveTensorMemory() as tracker:
        loss = forward()
        saved = tracker.live
        backward(loss)
        through_backward = tracker.peak
        update()
    return StepMemory(saved, through_backward, tracker.peak)


def held_bytes(module: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    """Parameters and optimiser state: the memory a training process holds between steps."""
    tensors = {id(p): p for p in module.parameters()}
    for state in optimizer.state.values():
        tensors.update({id(t): t for t in state.values() if isinstance(t, torch.Tensor)})
    return sum(t.numel() * t.element_size() for t in tensors.values())


def autocast(device: torch.device, dtype: str):
    if dtype == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    if dtype == "fp32":
        return contextlib.nullcontext()
    raise ValueError(f"dtype must be fp32 or bf16, got {dtype!r}")


def random_batch(vocab_size: int, batch: int, context: int, device: torch.device) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab_size, (batch, context + 1), generator=generator)
    scored = torch.ones_like(tokens, dtype=torch.bool)
    scored[:, 0] = False
    return {"tokens": tokens.to(device), "scored": scored.to(device)}


@dataclass
class StepFigures:
    train: Timing
    evaluation: Timing
    memory: StepMemory | None  # None where it cannot be measured (compiled on CPU)
    held_bytes: int
    n_params: int


class StepBench:
    """One DecoderLM, built and warmed up once; `time(reps)` adds timed training and evaluation steps, so that
    several benches can be timed in interleaved rounds (drift of the machine then hits every encoding alike).

    Between its turns a bench is parked: its parameters, optimiser state and batch move to `parking` (the host), so
    the device holds only the model being timed (at HRG's paper size one roster's models and AdamW states alone
    would fill 64 GB, and which encodings ran out of memory would depend on their order)."""

    parking = torch.device("cpu")

    def __init__(
        self,
        model_cfg: dict[str, Any],
        optim_cfg: dict[str, Any],
        batch: int,
        device: torch.device,
        dtype: str,
        compiled: bool,
        warmup: int,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        torch.manual_seed(0)
        self.device, self.dtype, self.clock = device, dtype, clock
        self.module = DecoderLM(model=model_cfg, optim=optim_cfg).to(device)
        self.optimizer = self.module.configure_optimizers()["optimizer"]
        if compiled:
            # Every bench compiles the same GPT.forward (one graph per encoding, training and evaluation); past
            # dynamo's default of 8 graphs per function the later models would silently run eagerly.
            dynamo = torch._dynamo.config
            dynamo.recompile_limit = max(dynamo.recompile_limit, 1024)
            dynamo.accumulated_recompile_limit = max(dynamo.accumulated_recompile_limit, 4096)
        self.model = torch.compile(self.module.model) if compiled else self.module.model
        self.data = random_batch(model_cfg["vocab_size"], batch, model_cfg["context"], device)
        self.train_seconds: list[float] = []
        self.eval_seconds: list[float] = []
        # at least one warm-up call each: the first pays for compilation and the allocator's growth
        self.module.train()
        warm_train = time_calls(self.train_step, device, max(1, warmup), clock)
        eager_memory = not compiled or device.type == "cuda"  # see the module docstring
        self.memory = step_memory(self.forward, self.backward, self.update, device) if eager_memory else None
        self.held_bytes = held_bytes(self.module, self.optimizer)
        self.module.eval()
        warm_eval = time_calls(self.eval_step, device, max(1, warmup), clock)
        self.first_train_seconds, self.first_eval_seconds = warm_train[0], warm_eval[0]
        self.park()

    def park(self) -> None:
        """Move the model, its optimiser state and its batch off the device (see the class docstring)."""
        self._move(self.parking)

    def unpark(self) -> None:
        self._move(self.device)

    def _move(self, device: torch.device) -> None:
        if device == self.device == self.parking:
            return
        self.module.to(device)  # in place: the optimiser and a compiled graph keep the same parameters
        for state in self.optimizer.state.values():
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and value.ndim:  # AdamW's scalar `step` stays on the host
                    state[key] = value.to(device)
        self.data = {key: value.to(device) for key, value in self.data.items()}
        if device.type != "cuda" and self.device.type == "cuda":
            torch.cuda.empty_cache()

    def forward(self) -> torch.Tensor:
        with autocast(self.device, self.dtype):
            nll, _, scored = token_nll(self.model, self.data)
            return (nll * scored).sum() / scored.sum()

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def update(self) -> None:
        self.module.configure_gradient_clipping(self.optimizer)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def train_step(self) -> None:
        self.backward(self.forward())
        self.update()

    @torch.inference_mode()
    def eval_step(self) -> None:
        with autocast(self.device, self.dtype):
            token_nll(self.model, self.data)

    def time(self, reps: int) -> None:
        self.unpark()
        self.module.train()
        self.train_seconds += time_calls(self.train_step, self.device, reps, self.clock)
        self.module.eval()
        self.eval_seconds += time_calls(self.eval_step, self.device, reps, self.clock)
        self.park()

    def figures(self) -> StepFigures:
        return StepFigures(
            train=Timing(self.train_seconds, self.first_train_seconds),
            evaluation=Timing(self.eval_seconds, self.first_eval_seconds),
            memory=self.memory,
            held_bytes=self.held_bytes,
            n_params=self.module.model.num_parameters(),
        )


def matmul_peak(
    device: torch.device,
    dtype: str,
    size: int | None = None,
    reps: int = 5,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """FLOP/s of a square matmul in `dtype` (fp32 or bf16): the device's practical peak for this process,
    measured with the same threads as the models (by `clock`, as they are)."""
    n = size or (8192 if device.type == "cuda" else 2048)
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator).to(device=device, dtype=torch_dtype)
    b = torch.randn(n, n, generator=generator).to(device=device, dtype=torch_dtype)
    seconds = time_calls(lambda: torch.mm(a, b), device, 2 + reps, clock)[2:]
    return 2 * n**3 / min(seconds)
