"""Train one run (domain [task] x encoding x seed), evaluate it and write its manifest: what `pipelines.train`
and every sweep worker call.

The run folder is a function of the config (pipelines.runs.layout). The trainer settings are checked before
anything is written (TrainerSettings), and the folder is held by one process at a time (pipelines.runs.lock). A
run with DONE is skipped; a run with a checkpoint resumes from it (the data stream restarts at the restored step,
so the resumed run sees the batches the uninterrupted one would). A run folder is one experiment: each checkpoint
stores what it was trained with (the resolved config less what cannot change a result, pipelines.runs.settings,
and the data hashes), and a resume with anything else is refused before anything is written, naming the folder,
the setting and both values
(ResumeMismatchError; a longer max_steps too: it sizes the cosine schedule). A NaN loss stops the run with FAILED
and no results; the last good checkpoint stays. The training metrics go to <run>/logs/ (pipelines.experiment.loggers).
A rope run with evaluation splits longer than its context also writes its YaRN sibling
(pipelines.experiment.evaluation).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Mapping
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

from domains.atomic import atomic_path, write_json
from domains.base import SequenceDataModule
from models.gpt import GPTConfig
from models.training import DecoderLM, OptimConfig
from pipelines.experiment.config import build_datamodule, model_config
from pipelines.experiment.evaluation import evaluate_splits, evaluate_yarn
from pipelines.experiment.loggers import TrainMetrics, build_loggers, check_logger
from pipelines.experiment.progress_lines import TrainingLines, lines_wanted, progress_every
from pipelines.host_memory import keep_freed_memory
from pipelines.runs.layout import CHECKPOINTS, DONE, FAILED, RunKey, run_folder
from pipelines.runs.lock import RunLock
from pipelines.runs.manifest import write_run_manifest
from pipelines.runs.model_file import save_run_model
from pipelines.runs.settings import RESULT_NEUTRAL, flat_settings, without

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
    worker_method: str  # "thread" or "process": what builds the training batches when num_workers > 0
    optim: dict[str, Any]
    # model.pt and the metrics are all a finished run needs; its last checkpoint (GBs at paper scale) is deleted
    # once done.json is written, unless kept
    keep_checkpoint: bool = False
    accumulate: int = 1  # micro-batches per optimiser step (gradient accumulation)
    compile: bool = False  # torch.compile of the training step's forward (and so its backward)

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


TRAINED_WITH = "posbench_trained_with"  # the checkpoint's entry: {"settings": ..., "data_hashes": ...}
_UNSET = object()


class ResumeMismatchError(ValueError):
    """The config resuming a run differs from what its checkpoint was trained with."""


def trained_settings(cfg: DictConfig, vocab_size: int) -> dict[str, Any]:
    """What a run is trained with, as dotted keys: the resolved config less what cannot change its result
    (pipelines.runs.settings.RESULT_NEUTRAL), and the vocabulary."""
    kept = without(flat_settings(OmegaConf.to_container(cfg, resolve=True)), RESULT_NEUTRAL)
    return {**kept, "model.vocab_size": vocab_size}


def hparams_settings(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """DecoderLM's saved hyperparameters (model, optimiser, seed) under the config's dotted keys: what a checkpoint
    written before TRAINED_WITH existed still tells."""
    flat: dict[str, Any] = {"seed": hparams.get("seed", _UNSET)}
    for key, value in (hparams.get("model") or {}).items():
        if key == "pe":
            flat["pe.name"] = value
        elif key == "pe_options":
            flat.update(flat_settings(value or {}, "pe.options."))
        else:
            flat[f"model.{key}"] = value
    for key, value in (hparams.get("optim") or {}).items():
        flat["trainer.max_steps" if key == "max_steps" else f"trainer.optim.{key}"] = value
    return {k: v for k, v in flat.items() if v is not _UNSET}


def _shown(value: Any) -> str:
    if value is _UNSET:
        return "(not set)"
    if value is None:
        return "null"
    return value if isinstance(value, str) else repr(value)


def check_resume(folder: Path, checkpoint: Path, cfg: DictConfig, datamodule: SequenceDataModule) -> None:
    """Refuse to resume `folder` from `checkpoint` with settings or data other than it was trained with
    (ResumeMismatchError naming the folder, every differing key and both values); before anything is written."""
    state = torch.load(checkpoint, map_location="cpu", mmap=True, weights_only=False)
    now = trained_settings(cfg, datamodule.vocab_size)
    trained_with = state.get(TRAINED_WITH)
    if trained_with is None:  # an older checkpoint: its model, optimiser and seed are what can be checked
        then = hparams_settings(state.get("hyper_parameters") or {})
        now = {key: now.get(key, _UNSET) for key in then}
        log.warning(
            "%s: %s records only the model, optimiser and seed it was trained with; the other settings and the data "
            "hashes cannot be checked",
            folder,
            checkpoint,
        )
    else:
        then = trained_with["settings"]
    problems = [
        f"{key} {_shown(now.get(key, _UNSET))}, the checkpoint was trained with {_shown(then.get(key, _UNSET))}"
        for key in sorted(set(now) | set(then))
        if now.get(key, _UNSET) != then.get(key, _UNSET)
    ]
    if trained_with is not None and not problems:  # the data is compared once the settings agree (it costs more)
        datamodule.prepare_data()  # what fit does first: the store the hashes are read from
        hashes, hashes_then = datamodule.data_hashes(), trained_with["data_hashes"]
        problems = [
            f"data hash {name} {_shown(hashes.get(name, _UNSET))}, the checkpoint was trained with "
            f"{_shown(hashes_then.get(name, _UNSET))}"
            for name in sorted(set(hashes) | set(hashes_then))
            if hashes.get(name, _UNSET) != hashes_then.get(name, _UNSET)
        ]
    if problems:
        raise ResumeMismatchError(
            f"{folder}: {'; '.join(problems)}. A run folder is one experiment: resume it with the settings it was "
            f"trained with (a longer trainer.max_steps too: it sizes the learning-rate schedule), or train the new "
            f"ones under another runs_root (or delete {folder} to train it anew)"
        )


class RecordTrainedWith(Callback):
    """Stores in every checkpoint what it was trained with (TRAINED_WITH): the settings and the data hashes."""

    def __init__(self, settings: dict[str, Any], datamodule: SequenceDataModule) -> None:
        self.settings, self.datamodule = settings, datamodule
        self.data_hashes: dict[str, str] | None = None

    def on_train_start(self, trainer, module) -> None:  # after prepare_data, before the first step
        self.data_hashes = self.datamodule.data_hashes()

    def on_save_checkpoint(self, trainer, module, checkpoint: dict[str, Any]) -> None:
        if self.data_hashes is None:
            self.data_hashes = self.datamodule.data_hashes()
        checkpoint[TRAINED_WITH] = {"settings": self.settings, "data_hashes": self.data_hashes}


def restored_step(checkpoint: Path) -> int:
    """The step a run resumes at (its checkpoint's, else 0), which the loggers need before Lightning restores the
    checkpoint; memory-mapped, so the weights are not read."""
    if not checkpoint.exists():
        return 0
    return int(torch.load(checkpoint, map_location="cpu", mmap=True, weights_only=False)["global_step"])


def train_and_evaluate(cfg: DictConfig, callbacks: list[Callback] | None = None) -> Path:
    """Train, evaluate and record one run; returns its folder. Extra Lightning callbacks are for embedding/tests."""
    folder = run_folder(cfg)
    if (folder / DONE).exists():
        log.info("%s: finished already, skipped", folder)
        return folder
    keep_freed_memory()  # a CPU step's large tensors reuse freed memory, without page faults (pipelines.host_memory)
    settings = TrainerSettings.of(cfg)  # bad or misspelt trainer settings fail here, before anything is written
    check_logger(cfg.logger.name)  # so do an unknown logger and a missing extra
    if not (isinstance(cfg.seed, int) and cfg.seed >= 0):
        raise ValueError(f"seed = {cfg.seed!r} (must be a whole number >= 0: it seeds the data stream)")
    datamodule = build_datamodule(cfg)  # unknown task names fail here, before training
    model_cfg = model_config(cfg, datamodule.vocab_size)  # unknown encodings fail here
    GPTConfig(**model_cfg)  # so do impossible model sizes
    # Only the first process owns the folder: DDP's other ranks (and SLURM's other tasks) train beside it.
    with RunLock(folder) if rank_zero_only.rank == 0 else nullcontext():
        if (folder / DONE).exists():  # finished by the process whose lock this one waited out
            return folder
        resume = folder / CHECKPOINTS / "last.ckpt"
        if rank_zero_only.rank == 0 and resume.exists():
            check_resume(folder, resume, cfg, datamodule)  # before anything is written
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
    module = DecoderLM(model=model_cfg, optim=optim, seed=cfg.seed, compile=settings.compile)
    resume = folder / CHECKPOINTS / "last.ckpt"
    metrics = TrainMetrics(settings.ckpt_every)
    resumed_at = restored_step(resume)
    label = RunKey.of_config(cfg).label
    loggers = build_loggers(
        folder,
        resumed_at,
        label,
        **OmegaConf.to_container(cfg.logger, resolve=True),
    )
    progress = os.environ.get("POSBENCH_PROGRESS", "1") == "1"
    on_gpu = settings.accelerator in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    # the bar reads the logged loss when it refreshes: on a GPU each read waits for the device, so not every step
    bar = [TQDMProgressBar(refresh_rate=TrainMetrics.FLUSH_EVERY if on_gpu else 1)] if progress else []
    # where no bar is drawn: a line every few seconds (pipelines.experiment.progress_lines)
    lines = lines_wanted(progress)
    tokens_per_step = settings.batch_size * settings.accumulate * model_cfg["context"]
    bar += [TrainingLines(label, tokens_per_step, progress_every())] if lines else []
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
        logger=loggers,
        enable_progress_bar=progress,
        enable_model_summary=False,
        plugins=[AtomicCheckpointIO()],
        callbacks=[
            ModelCheckpoint(
                dirpath=folder / CHECKPOINTS, save_top_k=0, save_last=True, every_n_train_steps=settings.ckpt_every
            ),
            metrics,
            RecordTrainedWith(trained_settings(cfg, datamodule.vocab_size), datamodule),
            *bar,
            *(callbacks or []),
        ],
    )
    if trainer.strategy.root_device.type == "cuda":
        torch.set_float32_matmul_precision("high")  # TF32 for the fp32 matmuls (bf16 autocast covers the rest)
    began, cpu_began = time.perf_counter(), time.process_time()
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=resume if resume.exists() else None)
    except Exception as err:
        write_json(folder / FAILED, {"error": f"{type(err).__name__}: {err}", "step": trainer.global_step})
        raise
    finally:
        datamodule.close_train_loader()  # its worker threads and processes end with the training
    train_seconds, train_cpu_seconds = time.perf_counter() - began, time.process_time() - cpu_began
    if not trainer.is_global_zero:  # under DDP the other ranks stop here: rank 0 evaluates and writes the results
        return folder

    # Lightning's teardown has moved the module back to the CPU: score on the device it trained on, in its precision
    device = trainer.strategy.root_device
    model = module.model.to(device)
    save_run_model(folder, model, model_cfg)
    with trainer.precision_plugin.forward_context():
        evaluation = evaluate_splits(model, datamodule, folder, device, label=label if lines else None)
    write_run_manifest(
        folder,
        cfg,
        datamodule,
        model,
        evaluation,
        tokens_per_s=metrics.tokens_per_s,
        train_seconds=train_seconds,
        train_cpu_seconds=train_cpu_seconds,
        whole_fit=metrics.whole_fit(train_seconds, train_cpu_seconds),
        resumed_at=resumed_at,
        steps=trainer.global_step,
        device=str(device),
    )
    with trainer.precision_plugin.forward_context():
        # before DONE: a rerun redoes it if killed here
        evaluate_yarn(folder, model, datamodule, device, label=label if lines else None)
    write_json(folder / DONE, {"finished": datetime.now(timezone.utc).isoformat()})
    if not settings.keep_checkpoint:
        shutil.rmtree(folder / CHECKPOINTS, ignore_errors=True)
    return folder
