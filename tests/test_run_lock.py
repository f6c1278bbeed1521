"""The run lock is exclusive (issue 26, section 3): processes that start together on one folder leave exactly one
owner, whether the folder had no lock, a stale lock of a dead process, or a half-written one. (A live owner refused,
a stale lock taken over, on this host and across hosts: tests/test_run_faults.py.)"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.runs.lock import LOCK, RunLock, RunLockedError

RACERS, TRIALS = 8, 30


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _race(folders: list[str], barrier, results) -> None:
    """One racer: at each trial, try to take the trial's folder at the same moment as the others; an owner holds the
    lock until every racer has tried, then lets go."""
    for trial, folder in enumerate(folders):
        barrier.wait(timeout=120)
        lock = RunLock(Path(folder))
        try:
            lock.acquire()
            owner = True
        except RunLockedError:
            owner = False
        results.put((trial, os.getpid(), owner))
        barrier.wait(timeout=120)  # everyone has tried: only now may an owner let go
        if owner:
            lock.release()


def race(root: Path, trials: int = TRIALS, racers: int = RACERS) -> list[int]:
    """Owners per trial of `racers` processes taking one folder at once; trial k starts from no lock (k % 3 == 0), a
    stale lock of a dead process on this host (1) or an empty lock file, as a process killed while creating it
    leaves (2)."""
    folders = []
    for trial in range(trials):
        folder = root / f"trial{trial}"
        folder.mkdir(parents=True)
        if trial % 3 == 1:
            owner = {"pid": _dead_pid(), "host": socket.gethostname(), "since": "2026-01-01T00:00:00+00:00"}
            (folder / LOCK).write_text(json.dumps(owner))
        elif trial % 3 == 2:
            (folder / LOCK).write_text("")
        folders.append(str(folder))
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(racers), context.Queue()
    processes = [context.Process(target=_race, args=(folders, barrier, results)) for _ in range(racers)]
    for process in processes:
        process.start()
    owners = [0] * trials
    for _ in range(trials * racers):
        trial, _pid, owner = results.get(timeout=300)
        owners[trial] += owner
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return owners


@pytest.mark.slow
def test_eight_processes_racing_for_a_folder_leave_exactly_one_owner_every_time(tmp_path):
    owners = race(tmp_path)
    assert owners == [1] * TRIALS, f"owners per trial: {owners}"
