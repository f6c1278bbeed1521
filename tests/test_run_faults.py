"""Faults and bad input around a run: trainer settings checked before anything is written, one process per run
folder (the lock), a killed sweep taking its runs with it, and the manifest of a resumed run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from lightning.pytorch.callbacks import Callback

from pipelines.experiment.config import compose_config
from pipelines.experiment.training import train_and_evaluate
from pipelines.runs import lock as run_lock
from pipelines.runs.layout import CHECKPOINTS, TRAIN_METRICS, run_folder
from pipelines.runs.lock import LOCK, RunLock, RunLockedError
from tests.log_fixtures import train_losses

REPO = Path(__file__).resolve().parents[1]


def config(tmp_path, *overrides):
    return compose_config(["debug=fast", f"runs_root={tmp_path}", "domain.args.task=reverse_string", *overrides])


# ---- trainer settings --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("trainer.max_steps=0", "trainer.max_steps = 0"),
        ("trainer.max_steps=-1", "trainer.max_steps = -1"),
        ("trainer.batch_size=0", "trainer.batch_size = 0"),
        ("trainer.eval_batch_size=-4", "trainer.eval_batch_size = -4"),
        ("trainer.ckpt_every=0", "trainer.ckpt_every = 0"),
        ("trainer.num_workers=-1", "trainer.num_workers = -1"),
        ("trainer.optim.lr=0", "lr = 0"),
        ("trainer.optim.warmup_steps=-5", "warmup_steps = -5"),
        ("+trainer.max_stpes=5", "unknown trainer settings ['max_stpes']"),
    ],
)
def test_bad_trainer_settings_fail_by_name_before_anything_is_written(tmp_path, override, named):
    cfg = config(tmp_path, override)
    with pytest.raises(ValueError) as error:
        train_and_evaluate(cfg)
    assert named in str(error.value)
    assert not tmp_path.joinpath("synthetic").exists()  # no empty run folder left behind


# ---- one process per run folder ----------------------------------------------------------------------------------
def write_lock(folder: Path, pid: int, host: str, age_s: float = 0.0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    path.write_text(json.dumps({"pid": pid, "host": host, "since": "2026-01-01T00:00:00+00:00"}))
    os.utime(path, (time.time() - age_s, time.time() - age_s))
    return path


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_live_lock_is_refused_naming_its_owner(tmp_path):
    path = write_lock(tmp_path, os.getpid(), socket.gethostname())
    with pytest.raises(RunLockedError, match=rf"in use by pid {os.getpid()} on {socket.gethostname()}"):
        RunLock(tmp_path).acquire()
    write_lock(tmp_path, 1, "another-node", age_s=10)  # another host with a recent heartbeat: alive
    with pytest.raises(RunLockedError, match="another-node"):
        RunLock(tmp_path).acquire()
    assert path.exists()


def test_a_stale_lock_is_taken_over_and_released(tmp_path):
    write_lock(tmp_path, dead_pid(), socket.gethostname())  # its process is gone
    with RunLock(tmp_path):
        assert json.loads((tmp_path / LOCK).read_text())["pid"] == os.getpid()
    assert not (tmp_path / LOCK).exists()
    write_lock(tmp_path, 1, "another-node", age_s=run_lock.STALE_AFTER_S + 60)  # no heartbeat for too long
    with RunLock(tmp_path):
        assert json.loads((tmp_path / LOCK).read_text())["host"] == socket.gethostname()


def test_the_owner_keeps_its_lock_alive_with_a_heartbeat(tmp_path, monkeypatch):
    monkeypatch.setattr(run_lock, "HEARTBEAT_S", 0.05)
    with RunLock(tmp_path):
        os.utime(tmp_path / LOCK, (0, 0))
        time.sleep(0.3)
        assert time.time() - (tmp_path / LOCK).stat().st_mtime < 5


def test_a_training_refuses_a_folder_another_process_holds(tmp_path):
    cfg = config(tmp_path)
    write_lock(run_folder(cfg), os.getpid(), socket.gethostname())
    with pytest.raises(RunLockedError, match="a run folder belongs to one process at a time"):
        train_and_evaluate(cfg)
    assert not (run_folder(cfg) / TRAIN_METRICS).exists()


@pytest.mark.slow
def test_two_trainings_of_one_folder_started_together_train_it_once(tmp_path):
    command = [
        sys.executable, "-m", "pipelines.train", "debug=fast", f"runs_root={tmp_path}",
        "domain.args.task=reverse_string", "trainer.max_steps=60", "trainer.ckpt_every=20",
    ]  # fmt: skip
    env = {**os.environ, "POSBENCH_PROGRESS": "0"}
    runs = [subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)]
    runs.append(
        subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    )
    outputs = [process.communicate(timeout=300)[0] for process in runs]
    codes = sorted(process.returncode for process in runs)
    folder = tmp_path / "synthetic" / "reverse_string" / "rope10k" / "seed0"
    assert [step for step, _ in train_losses(folder)] == list(range(60))  # each step once: never two writers
    assert (folder / "done.json").exists() and not (folder / LOCK).exists()
    # either the second found the lock (refused, named) or it started after the first had finished (skipped)
    assert codes == [0, 0] or (codes[0] == 0 and any("RunLockedError" in output for output in outputs))


# ---- a killed sweep takes its runs with it ---------------------------------------------------------------------
@pytest.mark.slow
def test_killing_a_sweep_kills_its_runs_and_a_rerun_completes_them(tmp_path):
    command = [
        sys.executable, "-m", "pipelines.sweep", "--domain", "synthetic", "--encodings", "nope", "--seeds", "0",
        "--tasks", "reverse_string", "--runs", str(tmp_path), "--jobs", "1",
        "debug=fast", "trainer.max_steps=100000", "trainer.ckpt_every=50",
    ]  # fmt: skip
    sweep = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    folder = tmp_path / "synthetic" / "reverse_string" / "nope" / "seed0"
    deadline = time.time() + 120
    while not ((folder / LOCK).exists() and (folder / TRAIN_METRICS).exists()) and time.time() < deadline:
        time.sleep(0.2)
    child = json.loads((folder / LOCK).read_text())["pid"]
    assert child != sweep.pid
    sweep.send_signal(signal.SIGKILL)
    sweep.wait()
    deadline = time.time() + 60
    while time.time() < deadline and _alive(child):
        time.sleep(0.2)
    assert not _alive(child), "the run kept training after its sweep was killed"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:  # a zombie has finished: it waits only for its (dead) parent
        return handle.read().split(")")[-1].split()[0] != "Z"


# ---- a resumed run's manifest --------------------------------------------------------------------------------------
class KillAfterTraining(Callback):
    """Stands in for a process killed after its last checkpoint, while it evaluates."""

    def on_train_end(self, trainer, module):
        raise RuntimeError("killed after training")


@pytest.mark.slow
def test_a_run_resumed_after_its_last_checkpoint_records_its_training_speed(tmp_path):
    cfg = config(tmp_path)  # 6 steps, a checkpoint every 3: the last one at step 6
    with pytest.raises(RuntimeError, match="killed after training"):
        train_and_evaluate(cfg, callbacks=[KillAfterTraining()])
    checkpoint = run_folder(cfg) / CHECKPOINTS / "last.ckpt"
    checkpointed = torch.load(checkpoint, weights_only=False)["callbacks"]["TrainMetrics"]
    folder = train_and_evaluate(cfg)  # resumes at step 6: nothing left to train
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["steps"] == 6 and manifest["resumed_at_step"] == 6
    assert manifest["tokens_per_s"] > 0  # the time and tokens of the six steps came back with the checkpoint
    # what the run cost counts the killed process's fit (up to its checkpoint) and this one's
    assert checkpointed["fit_cpu_seconds"] > 0 and checkpointed["fit_seconds"] > 0
    assert manifest["train_cpu_seconds"] == pytest.approx(
        checkpointed["fit_cpu_seconds"] + manifest["train_cpu_seconds_this_process"]
    )
    assert manifest["train_seconds"] == pytest.approx(
        checkpointed["fit_seconds"] + manifest["train_seconds_this_process"]
    )


# ---- beyond the reported cases: other counts, other readers ------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("model.n_layer=0", "n_layer=0 (must be >= 1)"),
        ("model.n_head=0", "n_head=0 (must be >= 1)"),
        ("model.dropout=1.0", "dropout=1.0 (must be in [0, 1))"),
        ("seed=-1", "seed = -1"),
    ],
)
def test_impossible_model_sizes_and_seeds_fail_before_anything_is_written(tmp_path, override, named):
    with pytest.raises(ValueError) as error:
        train_and_evaluate(config(tmp_path, override))
    assert named in str(error.value)
    assert not tmp_path.joinpath("synthetic").exists()


def test_the_evaluate_command_names_a_damaged_run_file(tmp_path, capsys):
    from pipelines.evaluate import main as evaluate

    (tmp_path / "manifest.json").write_text('{"config": {"domain"')
    assert evaluate([str(tmp_path), "--device", "cpu"]) == 2
    assert f"{tmp_path / 'manifest.json'}: truncated or corrupt" in capsys.readouterr().err
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "model.pt").write_bytes(b"PK\x03\x04 not a whole archive")
    assert evaluate([str(tmp_path), "--device", "cpu"]) == 2
    assert f"{tmp_path / 'model.pt'}: truncated or corrupt" in capsys.readouterr().err


@pytest.mark.parametrize("option", [["--rounds", "0"], ["--reps", "-1"], ["--batch-size", "0"], ["--contexts", "1"]])
def test_the_throughput_bench_refuses_counts_below_one(option, capsys):
    from pipelines.throughput import main as throughput

    with pytest.raises(SystemExit) as exit_:
        throughput(option)
    assert exit_.value.code == 2 and option[0] in capsys.readouterr().err
