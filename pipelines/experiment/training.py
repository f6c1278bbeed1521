"""Train one run (domain [task] x encoding x seed), evaluate it and write its manifest: what `pipelines.train`
and every sweep worker call.

The run folder is a function of the config (pipelines.runs.layout). A run with DONE is skipped; a run with a
checkpoint resumes from it (the data stream restarts at the restored step, so the resumed run sees the batches
the uninterrupted one would). A NaN loss stops the run with FAILED and no results; the last good checkpoint
stays. A rope run with evaluation splits longer than its context also writes its YaRN sibling
(pipelines.experiment.evaluation).
"""

from __future__ import annotations

import logging
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from omegaconf import DictConfig, OmegaConf

from domains.atomic import atomic_path, write_json
from models.training import DecoderLM, OptimConfig
from pipelines.experiment.config import build_datamodule, model_config
from pipelines.experiment.evaluation import evaluate_splits, evaluate_yarn
from pipelines.runs.layout import CHECKPOINTS, DONE, FAILED, TRAIN_LOG, run_folder
from pipelines.runs.manifest import write_run_manifest
from pipelines.runs.model_file import save_run_model

log = logging.getLogger("posbench.train")


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints are written under a temporary name and renamed: a kill never leaves half a checkpoint."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options=None) -> None:
        with atomic_path(path) as tmp:
            torch.save(checkpoint, tmp)


class TrainLog(Callback):
    """Appends step, loss and lr to train_log.csv and measures training tokens/s (forward, backward, step)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds = 0.0
        self.tokens = 0

    def on_train_start(self, trainer, module) -> None:
        # After a resume, drop rows the killed process wrote past its last checkpoint.
        kept = []
        if self.path.exists():
            lines = self.path.read_text().splitlines()[1:]
            kept = [line for line in lines if int(line.split(",")[0]) < trainer.global_step]
        self.path.write_text("\n".join(["step,loss,lr", *kept]) + "\n")

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self._lr = trainer.optimizers[0].param_groups[0]["lr"]  # the rate this step is taken with
        self._began = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.seconds += time.perf_counter() - self._began
        self.tokens += batch["tokens"][:, :-1].numel() * trainer.world_size
        if trainer.is_global_zero:
            with open(self.path, "a") as handle:
                handle.write(f"{trainer.global_step - 1},{outputs['global_loss'].item():.8f},{self._lr:.8g}\n")

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens / self.seconds if self.seconds else None


def train_and_evaluate(cfg: DictConfig, callbacks: list[Callback] | None = None) -> Path:
    """Train, evaluate and record one run; returns its folder. Extra Lightning callbacks are for embedding/tests."""
    folder = run_folder(cfg)
    if (folder / DONE).exists():
        log.info("%s: finished already, skipped", folder)
        return folder
    datamodule = build_datamodule(cfg)  # unknown task names fail here, before training
    model_cfg = model_config(cfg, datamodule.vocab_size)  # unknown encodings fail here
    optim = {**OmegaConf.to_container(cfg.trainer.optim, resolve=True), "max_steps": cfg.trainer.max_steps}
    OptimConfig(**optim)  # a typo in the optimiser config fails before training
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FAILED).unlink(missing_ok=True)

    L.seed_everything(cfg.seed, workers=True, verbose=False)
    module = DecoderLM(model=model_cfg, optim=optim, seed=cfg.seed)
    resume = folder / CHECKPOINTS / "last.ckpt"
    train_log = TrainLog(folder / TRAIN_LOG)
    trainer = L.Trainer(
        default_root_dir=folder,
        max_steps=cfg.trainer.max_steps,
        accelerator=cfg.trainer.accelerator,
        devices=cfg.trainer.devices,
        strategy=cfg.trainer.strategy,
        precision=cfg.trainer.precision,
        val_check_interval=cfg.trainer.val_every,
        check_val_every_n_epoch=None,
        limit_val_batches=cfg.trainer.val_batches,
        num_sanity_val_steps=0,
        logger=False,
        enable_progress_bar=os.environ.get("POSBENCH_PROGRESS", "1") == "1",
        enable_model_summary=False,
        plugins=[AtomicCheckpointIO()],
        callbacks=[
            ModelCheckpoint(
                dirpath=folder / CHECKPOINTS, save_top_k=0, save_last=True, every_n_train_steps=cfg.trainer.ckpt_every
            ),
            train_log,
            *(callbacks or []),
        ],
    )
    began = time.perf_counter()
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=resume if resume.exists() else None)
    except Exception as err:
        write_json(folder / FAILED, {"error": f"{type(err).__name__}: {err}", "step": trainer.global_step})
        raise
    train_seconds = time.perf_counter() - began
    if not trainer.is_global_zero:  # under DDP the other ranks stop here: rank 0 evaluates and writes the results
        return folder

    device = module.device
    save_run_model(folder, module.model, model_cfg)
    evaluation = evaluate_splits(module.model, datamodule, folder, device)
    write_run_manifest(
        folder,
        cfg,
        datamodule,
        module.model,
        evaluation,
        tokens_per_s=train_log.tokens_per_s,
        train_seconds=train_seconds,
        steps=trainer.global_step,
        device=str(device),
    )
    evaluate_yarn(folder, module.model, datamodule, device)  # before DONE: a rerun redoes it if killed here
    write_json(folder / DONE, {"finished": datetime.now(timezone.utc).isoformat()})
    return folder
