"""The run's loggers (pipelines.experiment.loggers): the CSV every run writes, each step once across a resume;
TensorBoard and an offline W&B run on request; a missing extra named before anything is written."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import torch

from pipelines.experiment.config import compose_config, config_options
from pipelines.experiment.loggers import LOGGERS, ContinuedCSVLogger, TrainMetrics, check_logger, wandb_id
from pipelines.experiment.training import train_and_evaluate
from pipelines.runs.layout import LOGS, TRAIN_METRICS, run_folder
from tests.log_fixtures import metric_rows, train_losses
from tests.training_fixtures import Kill, SimulatedKill


def config(tmp_path, *overrides):
    """8 steps; a validation and a checkpoint every 3 (debug=fast)."""
    overrides = [
        "debug=fast",
        f"runs_root={tmp_path}",
        "domain.args.task=reverse_string",
        "trainer.max_steps=8",
        *overrides,
    ]
    return compose_config(overrides)


def without_speed(rows):
    """The rows without their tokens/s, which differ from one run to the next."""
    return [{name: value for name, value in row.items() if name != "train/tokens_per_s"} for row in rows]


def scalars(folder, tag):
    """(step, value) of a scalar in the run's TensorBoard events, as TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder / LOGS / "tensorboard"))
    events.Reload()
    return [(event.step, event.value) for event in events.Scalars(tag)]


def test_the_logger_group_offers_the_loggers_built():
    assert config_options("logger") == sorted(LOGGERS)
    assert compose_config([]).logger.name == "csv"  # the default
    for name in LOGGERS:
        assert compose_config([f"logger={name}"]).logger.name == name
    with pytest.raises(ValueError, match="unknown logger 'mlflow'; valid: csv, tensorboard, wandb"):
        check_logger("mlflow")


@pytest.mark.parametrize("name", ["tensorboard", "wandb"])
def test_a_missing_extra_is_named_before_anything_is_written(tmp_path, monkeypatch, name):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda module, *args: None if module == name else find_spec(module, *args)
    )
    with pytest.raises(
        ModuleNotFoundError, match=re.escape(f"logger={name} needs the {name} package: pip install -e .[{name}]")
    ):
        train_and_evaluate(config(tmp_path, f"logger={name}"))
    assert not tmp_path.joinpath("synthetic").exists()


def test_the_csv_of_a_resumed_run_keeps_its_rows_before_the_restored_step(tmp_path):
    logs = tmp_path / LOGS
    logs.mkdir()
    earlier = (
        "epoch,lr,step,train/loss,val/loss\r\n,0.1,0,4.0,\r\n,0.1,1,3.0,\r\n0,,1,,3.5\r\n,0.1,2,2.0,\r\n,0.1,3,1.0,\r\n"
    )
    (tmp_path / TRAIN_METRICS).write_text(earlier + ",0.1,4,0.")  # killed writing step 4, after the checkpoint at 3
    logger = ContinuedCSVLogger(logs, resume_step=3)
    logger.log_metrics({"train/loss": 1.5, "lr": 0.1, "train/tokens_per_s": 9.0}, step=3)  # a new column: rewritten
    logger.save()
    rows = [
        (row["step"], row["train/loss"], row["val/loss"], row["train/tokens_per_s"]) for row in metric_rows(tmp_path)
    ]
    assert rows == [
        ("0", "4.0", "", ""),
        ("1", "3.0", "", ""),
        ("1", "", "3.5", ""),
        ("2", "2.0", "", ""),
        ("3", "1.5", "", "9.0"),
    ]
    assert list(logs.iterdir()) == [tmp_path / TRAIN_METRICS]  # no temporary file left
    assert ContinuedCSVLogger(logs, resume_step=0).experiment.metrics_keys == []  # a fresh start (no checkpoint)
    assert not (tmp_path / TRAIN_METRICS).exists()


@pytest.mark.slow
def test_the_csv_holds_each_step_once_with_its_loss_lr_and_grad_norm_the_validation_losses_and_tokens_per_s(
    tmp_path, monkeypatch
):
    clip, measured = torch.nn.utils.clip_grad_norm_, []

    def recording_clip(parameters, max_norm, *args, **kwargs):  # what the clipping itself measured, step by step
        norm = clip(parameters, max_norm, *args, **kwargs)
        measured.append(float(norm))
        return norm

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    folder = train_and_evaluate(config(tmp_path))
    rows = metric_rows(folder)
    training = [row for row in rows if row["train/loss"]]
    assert [int(row["step"]) for row in training] == list(range(8))
    assert all(float(row["lr"]) > 0 for row in training)
    # the norm before clipping, as the clipping computed it (float32 printed in full)
    assert [float(row["train/grad_norm"]) for row in training] == measured and len(measured) == 8
    assert all(m > 0 for m in measured)
    assert [int(row["step"]) for row in rows if row["val/loss"]] == [2, 5]  # after steps 0-2 and 3-5
    assert all(float(row["val/loss"]) > 0 for row in rows if row["val/loss"])
    speeds = [float(row["train/tokens_per_s"]) for row in rows if row["train/tokens_per_s"]]
    assert len(speeds) == 3 and all(speed > 0 for speed in speeds)  # at each flush: the checkpoints and the end
    manifest = json.loads((folder / "manifest.json").read_text())
    assert speeds[-1] == pytest.approx(manifest["tokens_per_s"])
    # its cost in CPU seconds beside the wall seconds (pipelines.analysis.cost): a fit of one process takes some
    scored = json.loads((folder / "metrics" / "summary.json").read_text())["splits"]
    assert manifest["train_cpu_seconds_this_process"] > 0 and manifest["train_seconds_this_process"] > 0
    # a run trained in one process: its whole fit is that process's
    assert manifest["resumed_at_step"] == 0
    assert manifest["train_cpu_seconds"] == manifest["train_cpu_seconds_this_process"]
    assert manifest["train_seconds"] == manifest["train_seconds_this_process"]
    assert all(entry["cpu_seconds"] > 0 for entry in scored.values() if "tokens" in entry)


@pytest.mark.slow
def test_a_resumed_run_logs_what_the_uninterrupted_run_logs_in_the_csv_and_in_tensorboard(tmp_path, monkeypatch):
    monkeypatch.setattr(TrainMetrics, "FLUSH_EVERY", 2)  # step 3 is logged after the checkpoint at 3, before the kill
    straight = train_and_evaluate(config(tmp_path / "a", "logger=tensorboard"))
    cfg = config(tmp_path / "b", "logger=tensorboard")
    with pytest.raises(SimulatedKill):
        train_and_evaluate(cfg, callbacks=[Kill(at=5)])
    assert [step for step, _ in train_losses(run_folder(cfg))] == [0, 1, 2, 3]
    assert [step for step, _ in scalars(run_folder(cfg), "train/loss")] == [0, 1, 2, 3]
    resumed = train_and_evaluate(cfg)  # from the checkpoint at step 3
    assert [step for step, _ in train_losses(resumed)] == list(range(8))
    assert without_speed(metric_rows(resumed)) == without_speed(metric_rows(straight))
    assert [step for step, _ in scalars(resumed, "train/loss")] == list(range(8))  # step 3 once: purged, logged again
    for tag in ("train/loss", "lr", "val/loss"):
        assert scalars(resumed, tag) == scalars(straight, tag), tag


@pytest.mark.slow
def test_logger_wandb_writes_an_offline_run_into_the_run_folder_under_an_id_of_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")  # restored afterwards: Lightning's offline mode sets it for the process
    folder = train_and_evaluate(config(tmp_path, "logger=wandb"))
    runs = list((folder / LOGS / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and runs[0].name.endswith(f"-{wandb_id(folder)}")
    assert [step for step, _ in train_losses(folder)] == list(range(8))  # the CSV beside it
