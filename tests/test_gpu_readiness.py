"""What a GPU run depends on, checked on this CPU: evaluation on the training device and in its precision, DDP
through the real entry point, dropout masks per rank, GPU pinning under a parent's CUDA_VISIBLE_DEVICES, the
throughput bench parking idle models off the device, no host sync per step for the loss, checkpoints removed
after a run is done. (Every encoding's forward and backward on the meta device: tests/test_encodings.py.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lightning.pytorch.callbacks import Callback

from models.training import DecoderLM, dropout_seed
from pipelines.benchmarks.step import StepBench
from pipelines.experiment import training
from pipelines.experiment.config import compose_config
from pipelines.experiment.training import train_and_evaluate
from pipelines.launch import local
from pipelines.runs.layout import TRAIN_METRICS
from tests.log_fixtures import train_losses

REPO = Path(__file__).resolve().parents[1]


def config(tmp_path, *overrides):
    return compose_config(["debug=fast", f"runs_root={tmp_path}", "domain.args.task=reverse_string", *overrides])


# ---- evaluation on the device and in the precision of training ---------------------------------------------------
class RootDevice(Callback):
    def on_fit_start(self, trainer, module):
        self.device = trainer.strategy.root_device


@pytest.mark.slow
def test_evaluation_runs_on_the_training_device_under_the_runs_precision(tmp_path, monkeypatch):
    seen = []

    def recording(model, datamodule, run, device, adapt=None, label=None):
        seen.append((torch.device(device), next(model.parameters()).device, torch.is_autocast_enabled("cpu")))
        return evaluate_splits(model, datamodule, run, device, adapt, label)

    evaluate_splits = training.evaluate_splits
    monkeypatch.setattr(training, "evaluate_splits", recording)
    root = RootDevice()
    folder = train_and_evaluate(config(tmp_path, "trainer.precision=bf16-mixed"), callbacks=[root])
    assert seen == [(root.device, root.device, True)]  # bf16 autocast, as the model trained
    assert json.loads((folder / "manifest.json").read_text())["device"] == str(root.device)


# ---- DDP through the entry point --------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_ddp_through_the_entry_point_every_rank_exits_cleanly_and_only_rank_0_writes(tmp_path):
    """Two gloo ranks started as a cluster scheduler starts them (one process each, rank in the environment), as
    SLURM's tasks are: both must exit 0, and only rank 0 evaluates, writes the results and prints them."""
    port = free_port()
    command = [
        sys.executable, "-m", "pipelines.train", "debug=fast", f"runs_root={tmp_path}", "trainer.max_steps=4",
        "trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp", "domain.args.task=reverse_string",
        "model.dropout=0.1",
    ]  # fmt: skip
    ranks = []
    for rank in (0, 1):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2"}
        env.update(NODE_RANK="0", LOCAL_RANK=str(rank), RANK=str(rank), POSBENCH_PROGRESS="0")
        ranks.append(subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outputs = [process.communicate(timeout=300)[0].decode() for process in ranks]
    assert [process.returncode for process in ranks] == [0, 0], outputs[1][-3000:]
    assert "run: " in outputs[0] and "run: " not in outputs[1]
    folder = tmp_path / "synthetic" / "reverse_string" / "rope10k" / "seed0"
    assert (folder / "done.json").exists() and (folder / "model.pt").exists()
    assert [step for step, _ in train_losses(folder)] == [0, 1, 2, 3]  # one writer


def test_dropout_masks_differ_between_ranks_and_rank_0_keeps_the_single_process_masks():
    assert dropout_seed(7, 3) == dropout_seed(7, 3, rank=0)  # a single process draws what it always drew
    assert len({dropout_seed(7, 3, rank) for rank in range(4)}) == 4
    module = DecoderLM(model={"vocab_size": 8, "context": 8, "n_layer": 1, "n_head": 1, "d_model": 8}, optim={}, seed=7)
    draws = []
    for rank in (0, 1):
        module._trainer = type("Trainer", (), {"global_rank": rank, "global_step": 3})()
        module.on_train_batch_start({}, 0)
        draws.append(torch.rand(4))
    assert not torch.equal(draws[0], draws[1])


# ---- GPU pinning ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("parent", "count", "expected"),
    [
        (None, 2, ["0", "1"]),
        ("4,5", 2, ["4", "5"]),
        (" 3 , 6,7", 3, ["3", "6", "7"]),
        ("GPU-aa,GPU-bb", 2, ["GPU-aa", "GPU-bb"]),
    ],
)
def test_runs_are_pinned_to_the_gpus_the_sweep_itself_sees(monkeypatch, parent, count, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    if parent is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", parent)
    assert local.visible_gpus() == expected
    assert local.job_env(threads=4, gpu=expected[-1])["CUDA_VISIBLE_DEVICES"] == expected[-1]


# ---- the throughput bench keeps only the timed model on the device ---------------------------------------------
def test_an_idle_bench_parks_its_model_optimiser_state_and_batch_off_the_device(monkeypatch):
    monkeypatch.setattr(StepBench, "parking", torch.device("meta"))  # stands for the host while timing on a GPU
    model = {"vocab_size": 16, "context": 8, "n_layer": 1, "n_head": 2, "d_model": 16, "pe": "rope", "pe_options": {}}
    bench = StepBench(
        model, {"max_steps": 10}, batch=2, device=torch.device("cpu"), dtype="fp32", compiled=False, warmup=1
    )
    tensors = [*bench.module.parameters(), *bench.data.values()]
    tensors += [v for state in bench.optimizer.state.values() for v in state.values() if v.ndim]
    assert tensors and all(t.device.type == "meta" for t in tensors)


# ---- no host sync per step for the loss; NaN still stops the run before its next checkpoint ---------------------
class LogRowsAtStep(Callback):
    def __init__(self, folder):
        self.folder, self.rows = folder, {}

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        logged = (self.folder / TRAIN_METRICS).exists()
        self.rows[trainer.global_step] = len(train_losses(self.folder)) if logged else 0


@pytest.mark.slow
def test_losses_are_read_in_batches_not_every_step(tmp_path):
    cfg = config(tmp_path, "trainer.max_steps=8", "trainer.ckpt_every=4")
    folder = tmp_path / "synthetic" / "reverse_string" / "rope10k" / "seed0"
    probe = LogRowsAtStep(folder)
    train_and_evaluate(cfg, callbacks=[probe])
    assert probe.rows == {0: 0, 1: 0, 2: 0, 3: 0, 4: 4, 5: 4, 6: 4, 7: 4}  # rows arrive at the checkpoint step
    assert len(train_losses(folder)) == 8


# ---- a finished run keeps model.pt, not its checkpoint ---------------------------------------------------------
@pytest.mark.slow
def test_a_finished_run_deletes_its_checkpoint_unless_asked_to_keep_it(tmp_path):
    folder = train_and_evaluate(config(tmp_path / "a"))
    assert (folder / "model.pt").exists() and not (folder / "checkpoints").exists()
    kept = train_and_evaluate(config(tmp_path / "b", "trainer.keep_checkpoint=true"))
    assert (kept / "checkpoints" / "last.ckpt").exists()


# ---- the prepared GPU script runs on a CPU at the tiny sizes ------------------------------------------------------
@pytest.mark.slow
def test_the_gpu_check_runs_on_a_cpu_at_the_tiny_preset_and_writes_one_report(tmp_path, capsys):
    from pipelines.gpu_check import main as gpu_check

    # the model benchmark's bf16 steps are slow on a CPU: two encodings of it suffice to check the report's rows
    args = ["--preset", "tiny", "--device", "cpu", "--domains", "synthetic", "--throughput-domains", "synthetic"]
    args += ["--throughput-encodings", "rope10k", "darope"]
    assert gpu_check([*args, "--steps", "1", "--rounds", "1", "--tile-mib", "1", "4", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    steps = report["preset_steps"]
    assert [row["encoding"] for row in steps] == ["rope10k", "rope500k", "nope", "hope", "pope", "darope"]
    assert all(row["status"] == "ok" and row["peak_mib"] > 0 and row["train_step_s"] > 0 for row in steps)
    assert [(row["tile_mib"], row["status"]) for row in report["cope_tiles"]] == [(1, "ok"), (4, "ok")]
    assert {row["encoding"] for row in report["throughput"]} == {"rope10k", "darope"}
    assert report["rope_peak"][0]["domain"] == "synthetic" and report["rope_peak"][0]["fraction_of_peak"] > 0
    markdown = (tmp_path / "report.md").read_text()
    for title in ("Paper-preset steps (bf16)", "CoPE attention by tile budget", "share of the measured bf16"):
        assert title in markdown
    assert (tmp_path / "throughput.csv").exists()


# ---- gradient accumulation resumes exactly -------------------------------------------------------------------
class StopAt(Callback):
    """Stands in for a kill: raises when the first micro-batch of optimiser step `at` starts."""

    def __init__(self, at):
        self.at = at

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_step == self.at:
            raise InterruptedError(f"stopped at step {self.at}")


@pytest.mark.slow
def test_an_accumulating_run_resumed_mid_training_reproduces_the_uninterrupted_run(tmp_path):
    overrides = ["trainer.max_steps=8", "trainer.ckpt_every=3", "trainer.accumulate=2", "model.dropout=0.1"]
    straight = train_and_evaluate(config(tmp_path / "a", *overrides))
    cfg = config(tmp_path / "b", *overrides)
    with pytest.raises(InterruptedError):
        train_and_evaluate(cfg, callbacks=[StopAt(5)])
    resumed = train_and_evaluate(cfg)  # from the checkpoint at step 3: loader batch 6 on
    assert train_losses(resumed) == train_losses(straight)
    weights = [torch.load(folder / "model.pt", weights_only=True)["state_dict"] for folder in (straight, resumed)]
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
