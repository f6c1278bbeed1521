"""Train one run (domain [task] x encoding x seed), evaluate it, and write its manifest.

    python -m pipelines.train pe=nope seed=1 domain.args.task=fixed_offset [preset=paper]

The run folder is <runs_root>/<domain>[/<task>]/<pe id>/seed<k>/. A run with done.json is skipped; a run with a
checkpoint resumes from it (mid-epoch: the data stream's position is in the checkpoint). The folder ends with:
  manifest.json   resolved config, git sha, package versions, data hashes, parameters, encoding, tokens/s
  model.pt        final weights and model config
  metrics/        per-example and per-position metrics per evaluation split (see pipelines.evaluate)
  train_log.csv   step, loss, lr
  done.json       written last; its presence means the run is complete
A rope run with evaluation splits longer than its context also writes <pe id>+yarn/seed<k>/ beside it: the same
model evaluated with YaRN (see pipelines.evaluate).
A NaN loss stops the run with failed.json and no results; the last good checkpoint stays.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import torch
from lightning.fabric.plugins import TorchCheckpointIO
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from omegaconf import DictConfig, OmegaConf

from domains.atomic import atomic_path, write_json
from models.training import DecoderLM, OptimConfig
from pipelines.config import build_datamodule, model_config, run_dir
from pipelines.evaluate import MODEL_FORMAT, evaluate_splits, evaluate_yarn
from pipelines.manifest import git_state, package_versions

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


def run(cfg: DictConfig, callbacks: list[Callback] | None = None) -> Path:
    """Train, evaluate and record one run; returns its folder. Extra Lightning callbacks are for embedding/tests."""
    folder = run_dir(cfg)
    if (folder / "done.json").exists():
        log.info("%s: finished already, skipped", folder)
        return folder
    datamodule = build_datamodule(cfg)  # unknown task names fail here, before training
    model_cfg = model_config(cfg, datamodule.vocab_size)  # unknown encodings fail here
    optim = {**OmegaConf.to_container(cfg.trainer.optim, resolve=True), "max_steps": cfg.trainer.max_steps}
    OptimConfig(**optim)  # a typo in the optimiser config fails before training
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "failed.json").unlink(missing_ok=True)

    L.seed_everything(cfg.seed, workers=True, verbose=False)
    module = DecoderLM(model=model_cfg, optim=optim, seed=cfg.seed)
    checkpoints = folder / "checkpoints"
    resume = checkpoints / "last.ckpt"
    train_log = TrainLog(folder / "train_log.csv")
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
                dirpath=checkpoints, save_top_k=0, save_last=True, every_n_train_steps=cfg.trainer.ckpt_every
            ),
            train_log,
            *(callbacks or []),
        ],
    )
    began = time.perf_counter()
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=resume if resume.exists() else None)
    except Exception as err:
        write_json(folder / "failed.json", {"error": f"{type(err).__name__}: {err}", "step": trainer.global_step})
        raise
    train_seconds = time.perf_counter() - began
    if not trainer.is_global_zero:  # under DDP the other ranks stop here: rank 0 evaluates and writes the results
        return folder

    device = module.device
    with atomic_path(folder / "model.pt") as tmp:
        torch.save({"format": MODEL_FORMAT, "config": model_cfg, "state_dict": module.model.state_dict()}, tmp)
    summary = evaluate_splits(module.model, datamodule, folder, device)
    data = datamodule.describe()
    write_json(
        folder / "manifest.json",
        {
            "run": {
                "domain": cfg.domain.name,
                "task": cfg.domain.args.get("task"),
                "pe": cfg.pe.name,
                "pe_id": cfg.pe.id,
                "seed": cfg.seed,
                "preset": cfg.preset,
            },
            "config": OmegaConf.to_container(cfg, resolve=True),
            "data": data,
            "chance": data.get("chance"),  # synthetic tasks: compare reads it for chance-normalised accuracy
            "git": git_state(),
            "packages": package_versions(),
            "data_hashes": datamodule.data_hashes(),
            "n_params": module.model.num_parameters(),
            "encoding": module.model.encoding.describe(),
            "tokens_per_s": train_log.tokens_per_s,
            "train_seconds_this_process": train_seconds,
            "steps": trainer.global_step,
            "device": str(device),
            "eval_tokens_per_s": {split: s.get("tokens_per_s") for split, s in summary["splits"].items()},
        },
    )
    evaluate_yarn(folder, module.model, datamodule, device)  # before done.json: a rerun redoes it if killed here
    write_json(folder / "done.json", {"finished": datetime.now(timezone.utc).isoformat()})
    return folder


@hydra.main(config_path="../configs", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    folder = run(cfg)
    print(f"run: {folder}")
    print((folder / "metrics" / "summary.json").read_text())


if __name__ == "__main__":
    main()
