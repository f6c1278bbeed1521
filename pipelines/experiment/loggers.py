"""What a run logs while it trains, and where: each step's training loss, learning rate and gradient norm before
clipping, the training tokens/s and the validation loss, through Lightning's loggers into <run>/logs/
(pipelines.runs.layout).

logs/metrics.csv is always written: the sweep's live view reads its step column, and it needs no extra package.
`logger=tensorboard` adds TensorBoard event files (logs/tensorboard/), `logger=wandb` an offline W&B run
(logs/wandb/); each needs the extra of its name (`pip install -e .[tensorboard]`). A resumed run continues its
logs from the checkpoint's step: the CSV keeps its rows before that step, TensorBoard hides the events from that
step on (purge_step), and W&B, which does not resume offline, starts another offline run under the same id.

The training rows come from TrainMetrics, not from the module's self.log: it reads the losses off the device in
batches and stops a diverged run before its next checkpoint.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import time
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger, WandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.utilities.rank_zero import rank_zero_only

from domains.atomic import write_text
from models.training import first_nonfinite, nonfinite_loss_error, synchronize
from pipelines.runs.layout import LOGS

LOGGERS = ("csv", "tensorboard", "wandb")  # configs/logger/; a logger's extra and package are named after it


class TrainMetrics(Callback):
    """Logs each step's training loss, lr and pre-clip gradient norm through the trainer's loggers, stops a diverged
    run, and measures training tokens/s (forward, backward, step). The time and tokens are part of the checkpoint,
    so a resumed run reports the figure over all of its training (Lightning's ThroughputMonitor keeps a window of
    recent steps and nothing in the checkpoint, and would read the device every step).

    The losses stay on the device and are read in batches, every FLUSH_EVERY steps and at every checkpoint step:
    reading each step's loss would wait for the GPU every step. A NaN or infinite loss in a batch stops the run
    there, before the checkpoint of that step is written (Lightning runs checkpoint callbacks last), so the last
    checkpoint is always one of a healthy run; the rows before the first bad step are logged."""

    FLUSH_EVERY = 50

    def __init__(self, ckpt_every: int) -> None:
        self.ckpt_every = ckpt_every
        self.seconds = 0.0
        self.tokens = 0
        # (step, loss on the device, lr, the step's pre-clip gradient norm on the device or None)
        self._pending: list[tuple[int, torch.Tensor, float, torch.Tensor | None]] = []
        # the fit's wall and CPU seconds in the processes before this one, up to the checkpoint it resumed from (a
        # run resumed across sessions costs all of its processes); None: a checkpoint from before they were kept
        self.earlier_fit_seconds: float | None = 0.0
        self.earlier_fit_cpu_seconds: float | None = 0.0
        self._fit_began, self._fit_cpu_began = time.perf_counter(), time.process_time()

    def state_dict(self) -> dict[str, float | None]:
        fit_seconds, fit_cpu_seconds = self.whole_fit(
            time.perf_counter() - self._fit_began, time.process_time() - self._fit_cpu_began
        )
        return {
            "seconds": self.seconds,
            "tokens": self.tokens,
            "fit_seconds": fit_seconds,
            "fit_cpu_seconds": fit_cpu_seconds,
        }

    def whole_fit(self, seconds: float, cpu_seconds: float) -> tuple[float | None, float | None]:
        """(wall, CPU) seconds of the run's fit over every process: the earlier ones' and this one's so far (None
        where the checkpoint resumed from predates the record)."""
        wall, cpu = self.earlier_fit_seconds, self.earlier_fit_cpu_seconds
        return (None if wall is None else wall + seconds, None if cpu is None else cpu + cpu_seconds)

    def load_state_dict(self, state: dict[str, float | None]) -> None:
        self.seconds, self.tokens = float(state["seconds"]), int(state["tokens"])
        self.earlier_fit_seconds, self.earlier_fit_cpu_seconds = state.get("fit_seconds"), state.get("fit_cpu_seconds")

    def on_fit_start(self, trainer, module) -> None:
        self._fit_began, self._fit_cpu_began = time.perf_counter(), time.process_time()

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
        norm = getattr(module, "grad_norm", None)
        self._pending.append((step - 1, outputs["global_loss"].detach(), self._lr, norm))
        if step % self.FLUSH_EVERY == 0 or step % self.ckpt_every == 0 or step >= trainer.max_steps:
            self.flush(trainer)

    def flush(self, trainer) -> None:
        """Log the pending rows, the last with the tokens/s so far, and save the loggers (the live view reads the
        CSV); NonFiniteLossError at the first step whose loss is not finite."""
        if not self._pending:
            return
        steps = [step for step, *_ in self._pending]
        losses = torch.stack([loss for _, loss, *_ in self._pending]).float().cpu()  # one wait for the device
        rates = [lr for _, _, lr, _ in self._pending]
        measured = [norm for *_, norm in self._pending if norm is not None]
        values = iter(torch.stack(measured).float().cpu().tolist() if measured else [])  # one more wait, not one a step
        norms = [None if norm is None else next(values) for *_, norm in self._pending]
        self._pending = []
        bad = first_nonfinite(losses)
        good = len(steps) if bad is None else bad  # the rows before the first bad step
        rows = {steps[i]: {"train/loss": losses[i].item(), "lr": rates[i]} for i in range(good)}
        for i in range(good):
            if norms[i] is not None:
                rows[steps[i]]["train/grad_norm"] = norms[i]
        if rows and self.tokens_per_s:
            rows[steps[good - 1]]["train/tokens_per_s"] = self.tokens_per_s
        for logger in trainer.loggers:  # loggers write on the first process only
            for step, row in rows.items():
                logger.log_metrics(row, step=step)
            logger.save()
        if bad is not None:
            raise nonfinite_loss_error(steps[bad], losses[bad].item())

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens / self.seconds if self.seconds else None


def check_logger(name: str) -> None:
    """ValueError for an unknown logger, ModuleNotFoundError naming the extra for one whose package is missing:
    called before a run writes anything."""
    if name not in LOGGERS:
        raise ValueError(f"unknown logger {name!r}; valid: {', '.join(LOGGERS)}")
    if name != "csv" and importlib.util.find_spec(name) is None:
        raise ModuleNotFoundError(f"logger={name} needs the {name} package: pip install -e .[{name}]")


def build_loggers(folder: Path, resume_step: int, label: str, name: str = "csv", **options: Any) -> list[Logger]:
    """The loggers of the run in `folder`, resuming at `resume_step` (0 for a fresh start): the CSV, and the logger
    `name` chooses with its `options` (keyword arguments of its Lightning class). `label` names the W&B run."""
    check_logger(name)
    logs = folder / LOGS
    if name == "csv":
        return [ContinuedCSVLogger(logs, resume_step, **options)]
    if name == "tensorboard":
        # purge_step: the events from the restored step on, written before a kill, are hidden when TensorBoard reads
        # the folder (and all of them on a fresh start, 0)
        extra = TensorBoardLogger(
            logs, name="", version="tensorboard", default_hp_metric=False, purge_step=resume_step, **options
        )
    else:
        extra = FinishingWandbLogger(
            name=label, save_dir=logs, id=wandb_id(folder), offline=True, resume="allow", **options
        )
    return [ContinuedCSVLogger(logs, resume_step), extra]


def wandb_id(folder: Path) -> str:
    """A W&B run id that is the same on every start of the run in `folder` (W&B ids allow no slashes)."""
    return hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]


class ContinuedCSVLogger(CSVLogger):
    """Lightning's CSVLogger writing <logs>/metrics.csv, which continues the file of a resumed run: Lightning's own
    deletes the file when it opens a named version's folder, and with it the run's history before the checkpoint."""

    def __init__(self, logs: Path, resume_step: int, **options: Any) -> None:
        super().__init__(logs.parent, name="", version=logs.name, **options)
        self.resume_step = resume_step

    @property
    @rank_zero_experiment
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._experiment = _ContinuedWriter(self.log_dir, self.resume_step)
        return self._experiment


class _ContinuedWriter(ExperimentWriter):
    """Keeps the rows of an earlier metrics.csv before the restored step and rewrites the file atomically (a kill
    never leaves half of it); rows at or past that step were logged after the checkpoint and are logged again."""

    def __init__(self, log_dir: str, resume_step: int) -> None:
        self.resume_step = resume_step
        super().__init__(log_dir)

    def _check_log_dir_exists(self) -> None:  # called by __init__ in place of Lightning's deletion
        path = Path(self.metrics_file_path)
        if not path.exists():
            return
        lines = path.read_text().splitlines(keepends=True)
        if lines and not lines[-1].endswith("\n"):
            lines.pop()  # a row the killed process was cut off writing
        reader = csv.DictReader(lines)
        kept = [row for row in reader if (row.get("step") or "").isdigit() and int(row["step"]) < self.resume_step]
        if not kept:  # a fresh start: Lightning writes the file anew
            path.unlink()
            return
        self.metrics_keys = list(reader.fieldnames)
        _write_rows(path, self.metrics_keys, kept)

    def _rewrite_with_new_header(self, fieldnames: list[str]) -> None:
        """Lightning rewrites the file when a metric appears (val/loss after the first validation): atomically."""
        with open(self.metrics_file_path, newline="") as handle:
            rows = list(csv.DictReader(handle))
        _write_rows(Path(self.metrics_file_path), fieldnames, rows)


def _write_rows(path: Path, fieldnames: list[str], rows: list[dict[str, str]]) -> None:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=fieldnames)
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, text.getvalue())


class FinishingWandbLogger(WandbLogger):
    """Lightning's WandbLogger, ending its W&B run when training ends, however it ends: Lightning's leaves the run
    open until the process exits, and the next run trained in the same process (the tests) would log into it."""

    @rank_zero_only
    def finalize(self, status: str) -> None:
        super().finalize(status)
        if self._experiment is not None:
            self._experiment.finish(exit_code=0 if status == "success" else 1)
