"""The LightningModule shared by every domain and encoding, and the deterministic evaluation pass.

Batches are dicts:
  tokens  (B, T) long   a window of tokens; the model reads tokens[:, :-1] and predicts tokens[:, 1:]
  scored  (B, T) bool   which tokens are scored as targets (padding never; synthetic: the answer span only).
                        Token 0 of a window has no context and is never scored.
  example (B,)   long   evaluation only: the test example the window belongs to
  start   (B,)   long   evaluation only: offset of the window inside its example (for NLL by position)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F

from models.gpt import GPT, GPTConfig


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite: the run stops, keeps its last good checkpoint, writes no results."""


def first_nonfinite(losses: torch.Tensor) -> int | None:
    """Index of the first loss that is NaN or infinite (`losses` on the host, one per step), or None."""
    bad = torch.nonzero(~torch.isfinite(losses)).flatten()
    return int(bad[0]) if bad.numel() else None


def nonfinite_loss_error(step: int, loss: float) -> NonFiniteLossError:
    return NonFiniteLossError(
        f"loss is {loss} at step {step}; training stopped, the last good checkpoint is kept and no results are "
        "written for this run"
    )


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a GPU step ends when its kernels do, not when Python has queued them)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class OptimConfig:
    lr: float = 6e-4
    min_lr: float = 6e-5
    warmup_steps: int = 50
    max_steps: int = 3000  # sizes the schedule; never taken from trainer.estimated_stepping_batches
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # global norm over the default groups; 0 disables

    def __post_init__(self) -> None:
        problems = [
            f"{name} = {getattr(self, name)} ({rule})"
            for name, ok, rule in (
                ("lr", self.lr > 0, "must be > 0"),
                ("min_lr", 0 <= self.min_lr <= self.lr, "must be in [0, lr]"),
                ("warmup_steps", self.warmup_steps >= 0, "must be >= 0"),
                ("max_steps", self.max_steps >= 1, "must be >= 1"),
                ("weight_decay", self.weight_decay >= 0, "must be >= 0"),
                ("beta1", 0 <= self.beta1 < 1, "must be in [0, 1)"),
                ("beta2", 0 <= self.beta2 < 1, "must be in [0, 1)"),
                ("grad_clip", self.grad_clip >= 0, "must be >= 0 (0 disables clipping)"),
            )
            if not ok
        ]
        if problems:
            raise ValueError(f"optimiser config: {'; '.join(problems)}")

    def lr_at(self, step: int) -> float:
        """Linear warmup to `lr` over `warmup_steps`, then cosine decay to `min_lr` at `max_steps`."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.max_steps - self.warmup_steps))
        return self.min_lr + 0.5 * (self.lr - self.min_lr) * (1.0 + math.cos(math.pi * progress))


def token_nll(model: GPT, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-target NLL (B, T-1), argmax correctness (B, T-1) and the scored mask (B, T-1)."""
    tokens = batch["tokens"]
    logits = model(tokens[:, :-1]).float()
    targets = tokens[:, 1:]
    nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    correct = logits.argmax(dim=-1) == targets
    return nll, correct, batch["scored"][:, 1:]


def dropout_seed(seed: int, step: int, rank: int = 0, micro: int = 0) -> int:
    """The torch seed of one training batch's dropout masks: a function of (seed, step), like the data, so a resumed
    run draws the same masks even though loaders and validation passes consume random numbers at different times;
    and of the DDP rank and the accumulated micro-batch of the step, each of which needs masks of its own (rank 0's
    first micro-batch keeps the single-process seed)."""
    entropy = [seed, step] if rank == micro == 0 else [seed, step, rank, micro]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


def seed_generators(seed: int, device: torch.device) -> None:
    """Seed the generators a training batch draws from on `device` (dropout masks, random positions). On CPU only
    the CPU generator: torch.manual_seed would also queue a seeding of each accelerator backend that is not
    initialised (CUDA, XPU, MTIA), formatting the stack for each, 1.6 ms a step (4% of a tiny run); the CPU generator
    it seeds is the same, so the draws are the same."""
    if device.type == "cpu":
        torch.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)


class DecoderLM(L.LightningModule):
    def __init__(self, model: dict[str, Any], optim: dict[str, Any], seed: int = 0, compile: bool = False) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.seed = seed
        self.model_cfg = GPTConfig(**model)
        self.optim_cfg = OptimConfig(**optim)
        self.model = GPT(self.model_cfg)
        # Compiling the function rather than wrapping the module keeps the checkpoint's keys those of the eager model
        # (its files load anywhere; a resume with another trainer.compile is refused, as it rounds otherwise:
        # pipelines.experiment.training); validation and the final evaluation stay eager.
        self._train_nll = torch.compile(token_nll) if compile else token_nll
        self._micro_step, self._micro = -1, 0  # the optimiser step the micro-batches are counted in, and which one
        self._step_totals: torch.Tensor | None = None  # accumulation: the step's global (NLL sum, count) so far
        self.grad_norm: torch.Tensor | None = None  # the last step's gradient norm before clipping (the shared groups)

    # ---- training -----------------------------------------------------------------------------------
    def on_train_batch_start(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        if self._micro_step != self.global_step:
            self._micro_step, self._micro, self._step_totals = self.global_step, 0, None
        else:
            self._micro += 1
        rank = self.trainer.global_rank if self._trainer is not None else 0
        seed_generators(dropout_seed(self.seed, self.global_step, rank, self._micro), self.device)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> dict[str, torch.Tensor]:
        """Mean NLL over the scored tokens of the global batch of the step: every rank's share, and with gradient
        accumulation every micro-batch of the step. Under DDP the gradients are averaged over ranks, so each rank's
        NLL sum is divided by the global count / ranks: the step then equals one process taking the whole batch,
        whatever the ranks' scored-token counts. With accumulation the step's count is known only after its last
        micro-batch: each micro-batch's gradient is that of its NLL sum, and on_before_optimizer_step divides the
        accumulated gradient by the step's global count (Lightning divides each loss by the micro-batches)."""
        nll, _, scored = self._train_nll(self.model, batch)
        nll_sum = (nll * scored).sum()
        totals = torch.stack([nll_sum.detach(), scored.sum().to(nll_sum.dtype)])  # this rank's (NLL sum, count)
        ranks = self.trainer.world_size if self._trainer is not None else 1
        if ranks > 1:
            totals = self.all_gather(totals).sum(0)  # one collective per batch: the global NLL sum and count
        accumulate = self.trainer.accumulate_grad_batches if self._trainer is not None else 1
        if accumulate > 1:
            self._step_totals = totals if self._step_totals is None else self._step_totals + totals
            totals = self._step_totals
            loss = nll_sum * ranks * accumulate
        else:
            loss = nll_sum * ranks / totals[1].clamp_min(1)
        global_loss = totals[0] / totals[1].clamp_min(1)  # the trainer's log checks it for NaN, in batches
        # on the bar only: the run's loggers get each step's loss from a callback that reads the losses in batches.
        # Without a bar (a sweep's workers) nothing reads them, and logging them is 6% of a tiny run's time.
        if self._trainer is not None and self.trainer.progress_bar_callback is not None:
            self.log("train/loss", global_loss, prog_bar=True, logger=False)
            self.log("lr", self.lr_schedulers().get_last_lr()[0], prog_bar=True, logger=False)
        return {"loss": loss, "global_loss": global_loss}

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """With gradient accumulation: the gradients of the step's NLL sum become those of its mean (see
        training_step), before clipping and the update."""
        if self._step_totals is None:
            return
        scale = 1.0 / self._step_totals[1].clamp_min(1)
        for param in self.model.parameters():
            if param.grad is not None:
                param.grad.mul_(scale)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        nll, _, scored = token_nll(self.model, batch)
        loss = (nll * scored).sum() / scored.sum().clamp_min(1)
        self.log("val/loss", loss, prog_bar=True, batch_size=batch["tokens"].shape[0])

    def configure_optimizers(self):
        """AdamW. The encoding's own groups first; then weight decay on matrices only (ndim >= 2)."""
        cfg = self.optim_cfg
        groups = [dict(group) for group in self.model.encoding.optimizer_groups()]
        claimed = {id(p) for group in groups for p in group["params"]}
        seen: set[int] = set()
        decay, no_decay = [], []
        for param in self.model.parameters():  # tied weights appear once
            if id(param) in claimed or id(param) in seen or not param.requires_grad:
                continue
            seen.add(id(param))
            (decay if param.ndim >= 2 else no_decay).append(param)
        groups += [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=cfg.lr, betas=(cfg.beta1, cfg.beta2))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: cfg.lr_at(step) / cfg.lr)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        """Groups with their own "clip_norm" are clipped on their own; the rest share `grad_clip`. The shared
        groups' norm before clipping is kept in `grad_norm` for the training log (the clipping computes it anyway;
        with clipping off it is measured without touching the gradients)."""
        shared = []
        for group in optimizer.param_groups:
            if group.get("clip_norm"):
                torch.nn.utils.clip_grad_norm_(group["params"], group["clip_norm"])
            else:
                shared.extend(group["params"])
        if self.optim_cfg.grad_clip > 0:
            self.grad_norm = torch.nn.utils.clip_grad_norm_(shared, self.optim_cfg.grad_clip)
        else:
            self.grad_norm = torch.nn.utils.get_total_norm([p.grad for p in shared if p.grad is not None])


@dataclass
class EvalResult:
    """Per-example and per-position metrics of one deterministic pass over an evaluation split."""

    nll: np.ndarray  # (N,) mean NLL in nats over each example's scored tokens
    tokens: np.ndarray  # (N,) scored tokens per example
    correct: np.ndarray  # (N,) argmax-correct scored tokens per example
    position_nll_sum: np.ndarray  # (P,) summed NLL of the scored tokens at each position
    position_tokens: np.ndarray  # (P,)

    def summary(self) -> dict[str, float | int]:
        tokens = self.tokens.sum()
        return {
            "nll": float(np.mean(self.nll)),
            "token_nll": float((self.nll * self.tokens).sum() / max(1, tokens)),
            "accuracy": float(np.mean(self.correct / np.maximum(self.tokens, 1))),
            "exact_match": float(np.mean(self.correct == self.tokens)),
            "examples": int(len(self.nll)),
            "tokens": int(tokens),
        }


@torch.no_grad()
def evaluate(model: GPT, loader, n_examples: int, max_length: int, device: torch.device | str = "cpu") -> EvalResult:
    """Score every window of `loader`, accumulating per example and per absolute position."""
    was_training = model.training
    model.eval()
    nll_sum = torch.zeros(n_examples, dtype=torch.float64)
    tokens = torch.zeros(n_examples, dtype=torch.long)
    correct = torch.zeros(n_examples, dtype=torch.long)
    pos_sum = torch.zeros(max_length, dtype=torch.float64)
    pos_tokens = torch.zeros(max_length, dtype=torch.long)
    for batch in loader:
        batch = {key: value.to(device) for key, value in batch.items()}
        nll, hit, scored = token_nll(model, batch)
        nll, hit, scored = nll.double().cpu(), hit.cpu(), scored.cpu()
        example = batch["example"].cpu()
        nll_sum.index_add_(0, example, (nll * scored).sum(1))
        tokens.index_add_(0, example, scored.sum(1))
        correct.index_add_(0, example, (hit & scored).sum(1))
        positions = batch["start"].cpu()[:, None] + torch.arange(1, nll.shape[1] + 1)[None, :]
        pos_sum.index_add_(0, positions[scored], nll[scored])
        pos_tokens.index_add_(0, positions[scored], torch.ones_like(positions[scored]))
    model.train(was_training)
    if (tokens == 0).any():
        missing = torch.nonzero(tokens == 0).flatten()[:5].tolist()
        raise RuntimeError(f"evaluation scored no token for examples {missing}: the split or its windows are wrong")
    return EvalResult(
        nll=(nll_sum / tokens).numpy(),
        tokens=tokens.numpy(),
        correct=correct.numpy(),
        position_nll_sum=pos_sum.numpy(),
        position_tokens=pos_tokens.numpy(),
    )
