"""Running a sweep's jobs on this machine.

Isolated (the default for sweeps): each run in its own `python -m pipelines.train` process, so a crash or an
out-of-memory stays inside its run, `workers` at a time: one per GPU, each seeing only its GPU through
CUDA_VISIBLE_DEVICES; on a CPU one per core, each with cores / workers threads. Pooled (the demo): warm worker
processes that each take many runs, for sweeps of runs lasting seconds. A failed run does not stop the sweep.
Every run's process dies with the sweep (on Linux, a parent-death signal), so a killed sweep leaves no orphan
training; and a run folder is held by one process at a time (pipelines.runs.lock), so a rerun never trains a
folder twice. A run whose folder another process holds (another sweep of the same runs) is "running elsewhere", not
failed. Each training process writes its output to a file of its own, <run>/train.<time>.<sweep pid>.out, created
anew (never truncating another process's log, nor the earlier attempts' of a resumed run).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime, timezone
from multiprocessing import get_context
from pathlib import Path

from pipelines.experiment.config import compose_config
from pipelines.experiment.progress_lines import PROGRESS_EVERY_ENV
from pipelines.launch.jobs import ELSEWHERE, Job
from pipelines.launch.progress import ProgressView
from pipelines.runs.layout import DONE, FAILED
from pipelines.runs.lock import LOCKED_EXIT, RunLockedError

PR_SET_PDEATHSIG = 1  # linux/prctl.h
LOG_STAMP = "%Y%m%dT%H%M%S"  # a training process's log: train.<its start, UTC>.<the sweep's pid>[.<n>].out
_LOG_NAME = re.compile(r"train\.(\d{8}T\d{6})\.\d+(?:\.\d+)?\.out")


def die_with_parent(parent: int) -> None:
    """Run in a child process: have the kernel send it SIGTERM when its parent dies, even by SIGKILL (Linux; a
    no-op elsewhere). Lightning turns SIGTERM into an error at the next step, so the run records failed.json."""
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os.kill(os.getpid(), signal.SIGTERM)


def job_env(threads: int, gpu: str | None) -> dict[str, str]:
    """A run's environment: its share of the CPU threads, and the one GPU it sees (as visible_gpus names it)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "POSBENCH_PROGRESS": "0"}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    return env


def _failure_reason(job: Job, fallback: str) -> str:
    failed = job.folder / FAILED
    try:
        return json.loads(failed.read_text()).get("error", fallback)
    except FileNotFoundError:
        return fallback
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return f"{fallback} ({failed} is unreadable)"


def open_log(folder: Path):
    """A new log file for one training process of the run in `folder`: train.<UTC time>.<this pid>.out, created
    exclusively (a name taken already, by another host's sweep, gets a counter)."""
    stamp = datetime.now(timezone.utc).strftime(LOG_STAMP)
    for attempt in itertools.count():
        name = f"train.{stamp}.{os.getpid()}{f'.{attempt}' if attempt else ''}.out"
        try:
            return open(folder / name, "x")  # noqa: SIM115  (closed when the process ends)
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


def log_started(path: Path) -> datetime | None:
    """When the training process whose log `path` is (open_log) was started, to the second; None for another file."""
    match = _LOG_NAME.fullmatch(path.name)
    return datetime.strptime(match[1], LOG_STAMP).replace(tzinfo=timezone.utc) if match else None


# Hydra's last line under a run that raised: not the error (the line before it names that)
HYDRA_HINT = "Set the environment variable HYDRA_FULL_ERROR=1"


def _last_line(path: Path) -> str:
    """The last line of a training process's log that says something: its error (`OSError: [Errno 28] No space left
    on device`), not Hydra's hint after it."""
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(HYDRA_HINT)]
    return lines[-1].strip() if lines else "no output"


def _run_isolated(jobs: list[Job], workers: int, threads: int, gpus: list[str], view: ProgressView) -> None:
    """One `python -m pipelines.train` process per run; output in a log of its own (open_log)."""
    queue = [job for job in jobs if job.status == "queued"]
    running: dict[subprocess.Popen, tuple[Job, str | None, object]] = {}
    free_gpus = list(gpus)
    while queue or running:
        while queue and len(running) < workers:
            job = queue.pop(0)
            gpu = free_gpus.pop(0) if free_gpus else None
            job.folder.mkdir(parents=True, exist_ok=True)
            out = open_log(job.folder)
            command = [sys.executable, "-m", "pipelines.train", *job.overrides]
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=job_env(threads, gpu),
                preexec_fn=functools.partial(die_with_parent, os.getpid()),
            )
            job.status, job.began, job.first_seen = "running", time.time(), (time.time(), job.step)
            running[process] = (job, gpu, out)
        time.sleep(0.5)
        for process in [p for p in running if p.poll() is not None]:
            job, gpu, out = running.pop(process)
            out.close()
            if gpu is not None:
                free_gpus.append(gpu)
            job.seconds = time.time() - job.began
            if process.returncode == 0 and (job.folder / DONE).exists():
                job.status = "done"
            elif process.returncode == LOCKED_EXIT:  # another process holds the folder: its line names the owner
                job.status, job.error = ELSEWHERE, _last_line(Path(out.name)).removeprefix("RunLockedError: ")
            else:
                tail = _last_line(Path(out.name))
                job.status, job.error = "failed", _failure_reason(job, f"exit {process.returncode}: {tail}")
        view.update()


def _train_in_process(overrides: list[str], threads: int) -> float:
    """Pool worker: one run inside a warm worker process (no interpreter start per run)."""
    import logging
    import warnings

    import torch

    from domains.base import STREAM_CACHE_ENV

    torch.set_num_threads(threads)
    os.environ["POSBENCH_PROGRESS"] = "0"  # no progress bars from the workers: the sweep prints one line per run
    os.environ[PROGRESS_EVERY_ENV] = "0"  # nor progress lines: a worker's output is the sweep's own
    os.environ[STREAM_CACHE_ENV] = "1"  # the next run of the same (task, seed) reads the batches this one drew
    from pipelines.experiment.training import train_and_evaluate

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # after lightning's import resets it
    warnings.filterwarnings("ignore", module="lightning")
    began = time.perf_counter()
    train_and_evaluate(compose_config(overrides))
    return time.perf_counter() - began


def _run_pooled(jobs: list[Job], workers: int, threads: int, view: ProgressView) -> None:
    """Warm worker processes that each take many runs: for sweeps of runs lasting seconds (the demo). A worker
    that dies (segfault, OOM kill) breaks the pool: its unfinished runs are failed, to be rerun by the next sweep."""
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=get_context("spawn"), initializer=die_with_parent, initargs=(os.getpid(),)
    ) as pool:
        futures: dict[Future, Job] = {}
        for job in jobs:
            if job.status == "queued":
                futures[pool.submit(_train_in_process, job.overrides, threads)] = job  # stays "queued" until done
        remaining = set(futures)
        while remaining:
            finished, remaining = wait(remaining, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in finished:
                job = futures[future]
                try:
                    job.seconds = future.result()
                    job.status = "done"
                except BrokenProcessPool:
                    job.status, job.error = "failed", "a worker process died (out of memory?); rerun the sweep"
                except RunLockedError as err:  # another process holds the folder
                    job.status, job.error = ELSEWHERE, str(err)
                except Exception as err:  # the run failed; the sweep goes on
                    job.status, job.error = "failed", _failure_reason(job, f"{type(err).__name__}: {err}")
            view.update()


def run_local(
    jobs: list[Job], workers: int, isolate: bool = True, live: bool | None = None, threads: int | None = None
) -> list[Job]:
    """Run the jobs on this machine, each with `threads` threads (default: its share, cores / workers); returns the
    failed ones."""
    for job in jobs:
        if (job.folder / DONE).exists():
            job.status = "skipped"
    gpus = visible_gpus()
    workers = max(1, min(workers, len(gpus) or workers))
    threads = threads or max(1, (os.cpu_count() or 1) // workers)
    view = ProgressView(jobs, live=sys.stdout.isatty() if live is None else live, workers=workers)
    view.update()
    try:
        if isolate:
            _run_isolated(jobs, workers, threads, gpus, view)
        else:
            _run_pooled(jobs, workers, threads, view)
    finally:
        view.close()
    return [job for job in jobs if job.status == "failed"]


def visible_gpus() -> list[str]:
    """The GPUs runs may use, each as CUDA_VISIBLE_DEVICES names it to a child process: the sweep's own
    CUDA_VISIBLE_DEVICES entries when it has them (with "4,5" the runs go to physical GPUs 4 and 5, not 0 and 1;
    ids or UUIDs alike), else the indices of every GPU."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    listed = [name.strip() for name in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if name.strip()]
    return listed[:count] if listed else [str(index) for index in range(count)]
