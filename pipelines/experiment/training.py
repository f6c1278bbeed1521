"""Train one run (domain [task] x encoding x seed), evaluate it and write its manifest: what `pipelines.train`
and every sweep worker call.

The run folder is a function of the config (pipelines.runs.layout). The trainer settings are checked before
anything is written (TrainerSettings), and the folder is held by one process at a time (pipelines.runs.lock). A
run with DONE is skipped; a run with a checkpoint resumes from it (the data stream restarts at the restored step,
so the resumed run sees the batches the uninterrupted one would). A NaN loss stops the run with FAILED and no
results; the last good checkpoint stays. A rope run with evaluation splits longer than its context also writes its
YaRN sibling (pipelines.experiment.evaluation).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from contextlib import nullcontext
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch.callbacks import Callback, ModelCheckpoint, TQDMProgressBar
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from domains.atomic import atomic_path, write_json, write_text
from models.gpt import GPTConfig
from models.training import DecoderLM, OptimConfig, first_nonfinite, nonfinite_loss_error, synchronize
from pipelines.experiment.config import build_datamodule, model_config
from pipelines.experiment.evaluation import evaluate_splits, evaluate_yarn
from pipelines.runs.layout import CHECKPOINTS, DONE, FAILED, TRAIN_LOG, run_folder
from pipelines.runs.lock import RunLock
from pipelines.runs.manifest import write_run_manifest
from pipelines.runs.model_file import save_run_model

log = logging.getLogger("posbench.train")


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints are written under a temporary name and renamed: a kill never leaves half a checkpoint."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options=None) -> None:
        with atomic_path(path) as tmp:
            torch.save(checkpoint, tmp)


@dataclass(frozen=True)
class TrainerSettings:
    """The `trainer` config group, checked before anything is written: an unknown key (a typo) or a count that is
    zero or negative fails here, naming the setting, instead of training forever, writing done.json for an
    untrained model, or failing deep inside a data loader."""

    max_steps: int  # optimiser steps
    batch_size: int  # sequences per device and micro-batch: the effective batch is batch_size x accumulate x devices
    eval_batch_size: int
    val_every: int
    val_batches: int | float  # Lightning's limit_val_batches: a count, or a fraction of the split
    ckpt_every: int
    precision: str | int
    accelerator: str
    devices: int | str | list[int]  # Lightning's: a count, "auto", or the device indices
    strategy: str
    num_workers: int
    optim: dict[str, Any]
    # model.pt and the metrics are all a finished run needs; its last checkpoint (GBs at paper scale) is deleted
    # once done.json is written, unless kept
    keep_checkpoint: bool = False
    accumulate: int = 1  # micro-batches per optimiser step (gradient accumulation)

    def __post_init__(self) -> None:
        def count(value: Any, least: int) -> bool:
            return isinstance(value, int) and not isinstance(value, bool) and value >= least

        rules = {
            "max_steps": (count(self.max_steps, 1), "a whole number >= 1"),
            "batch_size": (count(self.batch_size, 1), "a whole number >= 1"),
            "eval_batch_size": (count(self.eval_batch_size, 1), "a whole number >= 1"),
            "val_every": (count(self.val_every, 1), "a whole number >= 1"),
            "ckpt_every": (count(self.ckpt_every, 1), "a whole number >= 1"),
            "accumulate": (count(self.accumulate, 1), "a whole number >= 1"),
            "num_workers": (count(self.num_workers, 0), "a whole number >= 0"),
            "val_batches": (
                count(self.val_batches, 1) or (isinstance(self.val_batches, float) and 0 < self.val_batches <= 1),
                "a whole number >= 1 or a fraction in (0, 1]",
            ),
            "devices": (not isinstance(self.devices, int) or count(self.devices, 1), "at least 1"),
        }
        problems = [
            f"trainer.{name} = {getattr(self, name)!r} (must be {rule})" for name, (ok, rule) in rules.items() if not ok
        ]
        if problems:
            raise ValueError(f"invalid trainer settings: {'; '.join(problems)}")
        OptimConfig(**self.optim, max_steps=self.max_steps)  # an optimiser typo or bad value fails here too

    @classmethod
    def of(cls, cfg: DictConfig) -> TrainerSettings:
        settings = OmegaConf.to_container(cfg.trainer, resolve=True)
        unknown = sorted(set(settings) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown trainer settings {unknown}; valid: {', '.join(f.name for f in fields(cls))}")
        return cls(**settings)


class TrainLog(Callback):
    """Appends step, loss and lr to train_log.csv, stops a diverged run, and measures training tokens/s (forward,
    backward, step). The time and tokens are part of the checkpoint, so a resumed run reports the figure over all
    of its training.

    The losses stay on the device and are read in batches, every FLUSH_EVERY steps and at every checkpoint step:
    reading each step's loss would wait for the GPU every step. A NaN or infinite loss in a batch stops the run
    there, before the checkpoint of that step is written (Lightning runs checkpoint callbacks last), so the last
    checkpoint is always one of a healthy run; the rows before the first bad step are kept."""

    FLUSH_EVERY = 50

    def __init__(self, path: Path, ckpt_every: int) -> None:
        self.path, self.ckpt_every = path, ckpt_every
        self.seconds = 0.0
        self.tokens = 0
        self._pending: list[tuple[int, torch.Tensor, float]] = []  # (step, loss on the device, lr)

    def state_dict(self) -> dict[str, float]:
        return {"seconds": self.seconds, "tokens": self.tokens}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.seconds, self.tokens = float(state["seconds"]), int(state["tokens"])

    def on_train_start(self, trainer, module) -> None:
        # After a resume, drop rows the killed process wrote past its last checkpoint (and a row it was cut off
        # writing), so the log holds each step once.
        kept = []
        if self.path.exists():
            rows = [line.split(",") for line in self.path.read_text().splitlines()[1:]]
            kept = [",".join(r) for r in rows if len(r) == 3 and r[0].isdigit() and int(r[0]) < trainer.global_step]
        if trainer.is_global_zero:
            write_text(self.path, "\n".join(["step,loss,lr", *kept]) + "\n")

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        if trainer.global_step != getattr(self, "_step", None):  # the first (micro-)batch of an optimiser step
            self._step, self._lr = trainer.global_step, trainer.optimizers[0].param_groups[0]["lr"]
        synchronize(module.device)
        self._began = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        synchronize(module.device)
        self.seconds += time.perf_counter() - self._began
        self.tokens += batch["tokens"][:, :-1].numel() * trainer.world_size
        step = trainer.global_step  # optimiser steps done
        if step == self._step:
            return  # a micro-batch the step accumulates: the step's loss comes with its last one
        self._pending.append((step - 1, outputs["global_loss"].detach(), self._lr))
        if step % self.FLUSH_EVERY == 0 or step % self.ckpt_every == 0 or step >= trainer.max_steps:
            self.flush(trainer)

    def flush(self, trainer) -> None:
        """Write the pending rows; NonFiniteLossError at the first step whose loss is not finite."""
        if not self._pending:
            return
        steps = [step for step, _, _ in self._pending]
        losses = torch.stack([loss for _, loss, _ in self._pending]).float().cpu()  # one wait for the device
        rates = [lr for _, _, lr in self._pending]
        self._pending = []
        bad = first_nonfinite(losses)
        good = len(steps) if bad is None else bad  # the rows before the first bad step
        if trainer.is_global_zero and good:
            with open(self.path, "a") as handle:
                handle.writelines(f"{steps[i]},{losses[i].item():.8f},{rates[i]:.8g}\n" for i in range(good))
        if bad is not None:
            raise nonfinite_loss_error(steps[bad], losses[bad].item())

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens / self.seconds if self.seconds else None


def train_and_evaluate(cfg: DictConfig, callbacks: list[Callback] | None = None) -> Path:
    """Train, evaluate and record one run; returns its folder. Extra Lightning callbacks are for embedding/tests."""
    folder = run_folder(cfg)
    if (folder / DONE).exists():
        log.info("%s: finished already, skipped", folder)
        return folder
    settings = TrainerSettings.of(cfg)  # bad or misspelt trainer settings fail here, before anything is written
    if not (isinstance(cfg.seed, int) and cfg.seed >= 0):
        raise ValueError(f"seed = {cfg.seed!r} (must be a whole number >= 0: it seeds the data stream)")
    datamodule = build_datamodule(cfg)  # unknown task names fail here, before training
    model_cfg = model_config(cfg, datamodule.vocab_size)  # unknown encodings fail here
    GPTConfig(**model_cfg)  # so do impossible model sizes
    # Only the first process owns the folder: DDP's other ranks (and SLURM's other tasks) train beside it.
    with RunLock(folder) if rank_zero_only.rank == 0 else nullcontext():
        if (folder / DONE).exists():  # finished by the process whose lock this one waited out
            return folder
        return _train_and_evaluate(cfg, folder, settings, datamodule, model_cfg, callbacks)


def _train_and_evaluate(
    cfg: DictConfig,
    folder: Path,
    settings: TrainerSettings,
    datamodule,
    model_cfg: dict[str, Any],
    callbacks: list[Callback] | None,
) -> Path:
    optim = {**settings.optim, "max_steps": settings.max_steps}
    (folder / FAILED).unlink(missing_ok=True)

    L.seed_everything(cfg.seed, workers=True, verbose=False)
    module = DecoderLM(model=model_cfg, optim=optim, seed=cfg.seed)
    resume = folder / CHECKPOINTS / "last.ckpt"
    train_log = TrainLog(folder / TRAIN_LOG, settings.ckpt_every)
    progress = os.environ.get("POSBENCH_PROGRESS", "1") == "1"
    on_gpu = settings.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    # the bar reads the logged loss when it refreshes: on a GPU each read waits for the device, so not every step
    bar = [TQDMProgressBar(refresh_rate=TrainLog.FLUSH_EVERY if on_gpu else 1)] if progress else []
    trainer = L.Trainer(
        default_root_dir=folder,
        max_steps=settings.max_steps,
        accelerator=settings.accelerator,
        devices=settings.devices,
        strategy=settings.strategy,
        precision=settings.precision,
        val_check_interval=settings.val_every * settings.accumulate,  # counted in loader batches
        accumulate_grad_batches=settings.accumulate,
        check_val_every_n_epoch=None,
        limit_val_batches=settings.val_batches,
        num_sanity_val_steps=0,
        logger=False,
        enable_progress_bar=progress,
        enable_model_summary=False,
        plugins=[AtomicCheckpointIO()],
        callbacks=[
            ModelCheckpoint(
                dirpath=folder / CHECKPOINTS, save_top_k=0, save_last=True, every_n_train_steps=settings.ckpt_every
            ),
            train_log,
            *bar,
            *(callbacks or []),
        ],
    )
    if trainer.strategy.root_device.type == "cuda":
        torch.set_float32_matmul_precision("high")  # TF32 for the fp32 matmuls (bf16 autocast covers the rest)
    began = time.perf_counter()
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=resume if resume.exists() else None)
    except Exception as err:
        write_json(folder / FAILED, {"error": f"{type(err).__name__}: {err}", "step": trainer.global_step})
        raise
    train_seconds = time.perf_counter() - began
    if not trainer.is_global_zero:  # under DDP the other ranks stop here: rank 0 evaluates and writes the results
        return folder

    # Lightning's teardown has moved the module back to the CPU: score on the device it trained on, in its precision
    device = trainer.strategy.root_device
    model = module.model.to(device)
    save_run_model(folder, model, model_cfg)
    with trainer.precision_plugin.forward_context():
        evaluation = evaluate_splits(model, datamodule, folder, device)
    write_run_manifest(
        folder,
        cfg,
        datamodule,
        model,
        evaluation,
        tokens_per_s=train_log.tokens_per_s,
        train_seconds=train_seconds,
        steps=trainer.global_step,
        device=str(device),
    )
    with trainer.precision_plugin.forward_context():
        evaluate_yarn(folder, model, datamodule, device)  # before DONE: a rerun redoes it if killed here
    write_json(folder / DONE, {"finished": datetime.now(timezone.utc).isoformat()})
    if not settings.keep_checkpoint:
        shutil.rmtree(folder / CHECKPOINTS, ignore_errors=True)
    return folder
