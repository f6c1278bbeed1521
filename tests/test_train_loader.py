"""The batches training takes through the real `trainer.fit` (issue 26, section 1): the stream's, step for step, for
0, 1 and 2 loader workers of both kinds, uninterrupted and resumed after a kill -9; and the loader's worker
processes end with the training, whether it finishes or is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from pipelines.experiment.config import compose_config
from pipelines.experiment.training import train_and_evaluate
from pipelines.runs.layout import DONE
from tests.training_fixtures import REPO, BatchRecorder, alive, stream_digests, train_killed

STEPS, CKPT_EVERY, KILL_AT = 6, 3, 4  # the killed run's last checkpoint is at step 3: the resumed run takes 3, 4, 5
WORKERS = [(0, "thread"), (0, "process"), (1, "thread"), (2, "thread"), (1, "process"), (2, "process")]


def overrides(root, workers: int, method: str, *extra: str) -> list[str]:
    return [
        "debug=fast",
        f"runs_root={root}",
        "domain.args.task=reverse_string",
        f"trainer.max_steps={STEPS}",
        f"trainer.ckpt_every={CKPT_EVERY}",
        f"trainer.num_workers={workers}",
        f"trainer.worker_method={method}",
        *extra,
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("workers", "method"), WORKERS)
def test_trainer_fit_takes_the_streams_batches_for_any_workers_uninterrupted_and_resumed_after_kill_9(
    tmp_path, workers, method
):
    cfg = compose_config(overrides(tmp_path / "straight", workers, method))
    straight = BatchRecorder()
    train_and_evaluate(cfg, callbacks=[straight])
    assert straight.seen == stream_digests(cfg, range(STEPS))

    killed_overrides = overrides(tmp_path / "killed", workers, method)
    killed = train_killed(killed_overrides, KILL_AT, tmp_path)
    assert killed["returncode"] == -signal.SIGKILL, killed["output"]
    assert killed["seen"] == stream_digests(cfg, range(KILL_AT + 1))
    resumed = BatchRecorder()
    train_and_evaluate(compose_config(killed_overrides), callbacks=[resumed])
    assert resumed.seen == stream_digests(cfg, range(CKPT_EVERY, STEPS))


def wait_until_gone(pids: list[int], patience_s: float = 60) -> list[int]:
    """The pids still running after up to `patience_s` (a liveness bound, not a measured time)."""
    deadline = time.time() + patience_s
    while time.time() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.2)
    return [pid for pid in pids if alive(pid)]


@pytest.mark.slow
def test_the_loader_worker_processes_of_a_training_killed_with_kill_9_die_with_it(tmp_path):
    killed = train_killed(overrides(tmp_path, 2, "process"), KILL_AT, tmp_path)
    assert killed["returncode"] == -signal.SIGKILL, killed["output"]
    assert len(killed["children"]) == 2, killed["children"]  # the two workers, running at the kill
    assert wait_until_gone(killed["children"]) == [], "loader workers outlived their killed training"


@pytest.mark.slow
def test_a_training_with_process_workers_exits_once_done(tmp_path):
    command = [sys.executable, "-m", "pipelines.train", *overrides(tmp_path, 2, "process")]
    env = {**os.environ, "POSBENCH_PROGRESS": "0", "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output = process.communicate(timeout=240)[0]
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the training and its workers
        output = process.communicate()[0]
        folder = tmp_path / "synthetic/reverse_string/rope10k/seed0"
        pytest.fail(f"the training never exited (done.json written: {(folder / DONE).exists()}):\n{output[-2000:]}")
    assert process.returncode == 0, output[-2000:]
