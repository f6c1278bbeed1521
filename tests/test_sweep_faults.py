"""Sweeps under faults and odd input (issue 26, sections 1 and 3): a run listed twice is trained once, a run another
sweep is training is reported as running elsewhere (not failed), every training process writes a log of its own,
and a sweep whose runs use process loader workers exits when they are done."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines import sweep
from pipelines.launch.jobs import plan
from pipelines.launch.local import run_local
from pipelines.runs.layout import DONE, TRAIN_METRICS
from pipelines.runs.lock import LOCK, RunLock

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "POSBENCH_PROGRESS": "0", "OMP_NUM_THREADS": "1"}


def sweep_command(runs: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "pipelines.sweep", "--domain", "synthetic", "--encodings", "nope", "--seeds", "0",
        "--tasks", "reverse_string", "--runs", str(runs), "--jobs", "1", "debug=fast", *extra,
    ]  # fmt: skip


def test_a_seed_encoding_or_task_listed_twice_is_planned_once_with_a_warning(tmp_path, monkeypatch, capsys):
    planned = []
    monkeypatch.setattr(sweep, "run_local", lambda jobs, workers: planned.extend(jobs) or [])
    argv = ["--domain", "synthetic", "--encodings", "nope", "alibi", "nope", "--seeds", "0", "0", "1"]
    argv += ["--tasks", "parity", "parity", "--runs", str(tmp_path), "debug=fast"]
    assert sweep.main(argv) == 0
    folders = [job.folder for job in planned]
    assert len(folders) == len(set(folders)) == 4  # nope, alibi x seeds 0, 1
    err = capsys.readouterr().err
    assert "warning: --seeds lists 0 twice: each run is trained once" in err
    assert "warning: --encodings lists nope twice: each run is trained once" in err
    assert "warning: --tasks lists parity twice: each run is trained once" in err


def test_a_plan_refuses_two_runs_of_one_folder_naming_it(tmp_path):
    with pytest.raises(ValueError, match=r"synthetic/parity/nope/seed0 is planned twice \(seed=0 and seed=0\)"):
        plan("synthetic", ["nope"], [0, 0], "tiny", tmp_path, ["parity"])


@pytest.mark.slow
def test_the_pooled_sweep_reports_a_run_another_process_holds_as_running_elsewhere(tmp_path):
    """The demo's warm worker processes: a run whose folder is held is not failed either."""
    (job,) = plan("synthetic", ["nope"], [0], "tiny", tmp_path, ["reverse_string"], ["debug=fast"])
    with RunLock(job.folder):
        failed = run_local([job], workers=1, isolate=False, live=False)
    assert failed == [] and job.status == "running elsewhere"
    assert job.error.startswith(f"{job.folder}: in use by pid {os.getpid()}"), job.error


def logs_of(folder: Path) -> list[Path]:
    return sorted(folder.glob("train.*.out"))


@pytest.mark.slow
def test_a_second_sweep_reports_the_run_the_first_is_training_as_running_elsewhere_and_keeps_its_log(tmp_path):
    folder = tmp_path / "synthetic/reverse_string/nope/seed0"
    first = subprocess.Popen(
        sweep_command(tmp_path, "trainer.max_steps=100000", "trainer.ckpt_every=50"),
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 240  # a bound on the first sweep's start, not a measured time
        while not ((folder / LOCK).exists() and (folder / TRAIN_METRICS).exists()) and time.time() < deadline:
            time.sleep(0.2)
        assert (folder / TRAIN_METRICS).exists(), "the first sweep never started its run"
        (first_log,) = logs_of(folder)
        first_lines = first_log.read_text()
        assert first_lines.strip(), "the first run's log is empty"

        second = subprocess.run(
            sweep_command(tmp_path, "trainer.max_steps=100000", "trainer.ckpt_every=50"),
            cwd=tmp_path,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=300,
        )
        output = second.stdout + second.stderr
        assert second.returncode == 0, output
        owner = json.loads((folder / LOCK).read_text())["pid"]
        label = "synthetic/reverse_string/nope/seed0"
        assert f"running elsewhere, not trained by this sweep: {label}: {folder}: in use by pid {owner}" in output
        assert "failed" not in output and "HYDRA_FULL_ERROR" not in output, output
        logs = logs_of(folder)
        assert len(logs) == 2 and first_log in logs  # each training process its own log
        assert first_log.read_text().startswith(first_lines)  # the first one's untouched: never truncated
        (second_log,) = [log for log in logs if log != first_log]
        assert "RunLockedError" in second_log.read_text()
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


@pytest.mark.slow
def test_a_sweep_whose_runs_use_process_loader_workers_exits_once_they_are_done(tmp_path):
    command = sweep_command(tmp_path, "trainer.num_workers=2", "trainer.worker_method=process")
    process = subprocess.Popen(
        command, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        output = process.communicate(timeout=300)[0]
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the sweep, its run and the run's workers
        output = process.communicate()[0]
        done = (tmp_path / "synthetic/reverse_string/nope/seed0" / DONE).exists()
        pytest.fail(f"the sweep never exited (done.json written: {done}):\n{output[-2000:]}")
    assert process.returncode == 0, output[-2000:]


def test_a_runs_folder_that_is_a_file_is_one_line_not_a_traceback(tmp_path, capsys):
    """`--runs` naming a file ended the sweep in a NotADirectoryError traceback: one line names the path and what to
    do; nothing is trained or written."""
    runs = tmp_path / "runs"
    runs.write_text("not a folder\n")
    argv = ["--domain", "synthetic", "--encodings", "nope", "--seeds", "0", "--tasks", "reverse_string"]
    assert sweep.main([*argv, "--runs", str(runs), "debug=fast"]) == 1
    err = capsys.readouterr().err
    assert (
        f"error: {runs}/synthetic/reverse_string/nope/seed0: Not a directory (a file is where a folder must be: move "
        "it, or choose another folder); the finished runs are kept, a rerun completes the rest" in err
    )
    assert "Traceback" not in err and runs.read_text() == "not a folder\n"


def test_a_failed_run_is_named_by_its_error_not_by_hydras_hint(tmp_path, monkeypatch):
    """A training process that raised (a full disk: no failed.json could be written) ends its log with Hydra's
    `Set the environment variable HYDRA_FULL_ERROR=1 ...`; the sweep named that line as the run's error instead of
    `No space left on device`. A process that exits 1 with such a log is listed with its OSError."""
    (job,) = plan("synthetic", ["nope"], [0], "tiny", tmp_path, ["reverse_string"], ["debug=fast"])
    log = (
        "Error executing job with overrides: ['pe=nope']\n"
        "OSError: [Errno 28] No space left on device\n\n"
        "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
    )
    job.overrides = ["-c", f"import sys; sys.stdout.write({log!r}); sys.exit(1)"]
    original = subprocess.Popen

    def popen(command, **kwargs):  # `python -c` with the log's text, in place of `python -m pipelines.train`
        return original([sys.executable, *command[3:]], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    (failed,) = run_local([job], workers=1, live=False)
    assert failed.error == "exit 1: OSError: [Errno 28] No space left on device"
