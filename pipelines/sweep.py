"""Sweeps: a domain's roster x seeds (x tasks for the synthetic domain); `make train DOMAIN=... ROSTER=...`.

    python -m pipelines.sweep --domain jsb [--roster paper] [--seeds 0 1 2] [--preset tiny] [--launcher local]
                              [--jobs N] [--tasks reverse_string needle] [--runs runs] [overrides ...]
    python -m pipelines.sweep --domain all ...      every domain with a config, one after the other

Every run is `pipelines.train` with the overrides of its (domain, task, encoding, seed), so its folder is a
function of those and nothing else: a finished run (done.json) is skipped, an interrupted one resumes from its
last checkpoint, and a rerun of the same sweep completes only what is missing.

launcher=local: each run in its own process (a crash or an out-of-memory stays inside its run), `--jobs` at a
time (default: one per GPU, each seeing only its GPU through CUDA_VISIBLE_DEVICES; on a CPU one per core, each
with cores / jobs threads). A live table shows queued, running, done and failed runs with their step and tokens/s;
a failed run does not stop the sweep and is listed at the end with its error (exit status 1).

launcher=slurm: the same runs as one SLURM job array per domain through Hydra's submitit launcher
(configs/hydra/launcher/slurm.yaml: partition, GPUs, time, array parallelism, requeue on preemption).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

from pipelines.config import compose_config, config_options, roster, run_dir

# The synthetic tasks of a tiny-preset sweep (and of `make demo`): in distribution, reverse_string separates the
# encodings (RoPE-like ones learn it at this scale, NoPE does not); past the training length, needle does (the
# probes of paper 000 appendix E). The regular-language tasks stay at chance at this scale; the paper preset
# sweeps all 20 tasks.
DEFAULT_SYNTHETIC_TASKS = ("reverse_string", "needle")


@dataclass
class Job:
    """One run of a sweep."""

    overrides: list[str]
    folder: Path
    label: str
    max_steps: int
    tokens_per_step: int
    status: str = "queued"  # queued | running | done | failed | skipped
    error: str | None = None
    began: float | None = None
    seconds: float | None = None
    first_seen: tuple[float, int] | None = field(default=None, repr=False)  # (time, step) when it started

    @property
    def step(self) -> int:
        """Steps done, from the last row of train_log.csv (only its tail is read: the view polls it often)."""
        log = self.folder / "train_log.csv"
        if not log.exists():
            return 0
        with open(log, "rb") as handle:
            handle.seek(max(0, log.stat().st_size - 256))
            last = handle.read().decode(errors="replace").strip().splitlines()[-1:]
        return int(last[0].split(",")[0]) + 1 if last and last[0][:1].isdigit() else 0

    def tokens_per_s(self) -> float | None:
        if self.status in ("done", "skipped"):
            manifest = self.folder / "manifest.json"
            return json.loads(manifest.read_text()).get("tokens_per_s") if manifest.exists() else None
        if self.status == "running" and self.first_seen:
            began, step0 = self.first_seen
            elapsed = time.time() - began
            return (self.step - step0) * self.tokens_per_step / elapsed if elapsed > 0 else None
        return None


def synthetic_tasks(preset: str) -> list[str]:
    from domains.synthetic_tasks import TASKS

    return list(DEFAULT_SYNTHETIC_TASKS) if preset == "tiny" else list(TASKS)


def plan(
    domain: str,
    encodings: list[str],
    seeds: list[int],
    preset: str,
    runs_root: Path,
    tasks: list[str] | None = None,
    overrides: list[str] = (),
) -> list[Job]:
    """The runs of one domain's sweep, seeds outermost (a partial sweep has whole seeds first)."""
    groups = [[f"domain.args.task={t}"] for t in (tasks or synthetic_tasks(preset))] if domain == "synthetic" else [[]]
    jobs = []
    for seed in seeds:
        for group in groups:
            for entry in encodings:
                run_overrides = [
                    f"domain={domain}",
                    f"preset={preset}",
                    f"pe={entry}",
                    f"seed={seed}",
                    f"runs_root={runs_root}",
                    *group,
                    *overrides,
                ]
                cfg = compose_config(run_overrides)
                folder = run_dir(cfg)
                jobs.append(
                    Job(
                        overrides=run_overrides,
                        folder=folder,
                        label=str(folder.relative_to(runs_root)),
                        max_steps=cfg.trainer.max_steps,
                        tokens_per_step=cfg.trainer.batch_size * cfg.trainer.devices * cfg.model.context,
                    )
                )
    return jobs


# ------------------------------------------------------------------------------------------- progress
class ProgressView:
    """A live table on a terminal; one line per change of state otherwise (CI logs, files)."""

    def __init__(self, jobs: list[Job], live: bool) -> None:
        self.jobs, self.live, self._shown = jobs, live, {}
        self._rich = None
        if live:
            from rich.live import Live

            self._rich = Live(self._table(), refresh_per_second=1, transient=False)
            self._rich.start()

    def _table(self):
        from rich.table import Table

        counts = {s: sum(j.status == s for j in self.jobs) for s in ("done", "skipped", "running", "failed", "queued")}
        table = Table(title=" ".join(f"{s} {n}" for s, n in counts.items()), title_justify="left")
        for column in ("run", "status", "step", "tokens/s"):
            table.add_column(column, justify="left" if column in ("run", "status") else "right")
        for job in self.jobs:
            if job.status in ("running", "failed") or (job.status == "done" and job.seconds is not None):
                rate = job.tokens_per_s()
                table.add_row(job.label, job.status, f"{job.step}/{job.max_steps}", f"{rate:,.0f}" if rate else "")
        return table

    def update(self) -> None:
        if self._rich is not None:
            self._rich.update(self._table())
            return
        for index, job in enumerate(self.jobs):
            if self._shown.get(index) != job.status and job.status != "queued":
                self._shown[index] = job.status
                done = sum(j.status in ("done", "skipped", "failed") for j in self.jobs)
                rate = job.tokens_per_s()
                extra = f", {rate:,.0f} tokens/s" if rate and job.status == "done" else ""
                extra += f", {job.seconds:.0f} s" if job.seconds is not None else ""
                extra += f": {job.error}" if job.error else ""
                print(f"[{done:3d}/{len(self.jobs)}] {job.label}: {job.status}{extra}", flush=True)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.update(self._table())
            self._rich.stop()


# ----------------------------------------------------------------------------------------- local runs
def _job_env(threads: int, gpu: int | None) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "POSBENCH_PROGRESS": "0"}
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    return env


def _failure_reason(job: Job, fallback: str) -> str:
    failed = job.folder / "failed.json"
    if failed.exists():
        return json.loads(failed.read_text()).get("error", fallback)
    return fallback


def _run_isolated(jobs: list[Job], workers: int, threads: int, gpus: list[int], view: ProgressView) -> None:
    """One `python -m pipelines.train` process per run; output in <run>/train.out."""
    queue = [job for job in jobs if job.status == "queued"]
    running: dict[subprocess.Popen, tuple[Job, int | None, object]] = {}
    free_gpus = list(gpus)
    while queue or running:
        while queue and len(running) < workers:
            job = queue.pop(0)
            gpu = free_gpus.pop(0) if free_gpus else None
            job.folder.mkdir(parents=True, exist_ok=True)
            out = open(job.folder / "train.out", "w")  # noqa: SIM115  (closed when the process ends)
            command = [sys.executable, "-m", "pipelines.train", *job.overrides]
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=_job_env(threads, gpu))
            job.status, job.began, job.first_seen = "running", time.time(), (time.time(), job.step)
            running[process] = (job, gpu, out)
        time.sleep(0.5)
        for process in [p for p in running if p.poll() is not None]:
            job, gpu, out = running.pop(process)
            out.close()
            if gpu is not None:
                free_gpus.append(gpu)
            job.seconds = time.time() - job.began
            if process.returncode == 0 and (job.folder / "done.json").exists():
                job.status = "done"
            else:
                tail = (job.folder / "train.out").read_text().strip().splitlines()[-1:] or ["no output"]
                job.status, job.error = "failed", _failure_reason(job, f"exit {process.returncode}: {tail[0]}")
        view.update()


def _train_in_process(overrides: list[str], threads: int) -> float:
    """Pool worker: one run inside a warm worker process (no interpreter start per run)."""
    import logging
    import warnings

    import torch

    torch.set_num_threads(threads)
    os.environ["POSBENCH_PROGRESS"] = "0"  # no progress bars from the workers: the sweep prints one line per run
    from pipelines.train import run

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # after lightning's import resets it
    warnings.filterwarnings("ignore", module="lightning")
    began = time.perf_counter()
    run(compose_config(overrides))
    return time.perf_counter() - began


def _run_pooled(jobs: list[Job], workers: int, threads: int, view: ProgressView) -> None:
    """Warm worker processes that each take many runs: for sweeps of runs lasting seconds (the demo). A worker
    that dies (segfault, OOM kill) breaks the pool: its unfinished runs are failed, to be rerun by the next sweep."""
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
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
                except Exception as err:  # the run failed; the sweep goes on
                    job.status, job.error = "failed", _failure_reason(job, f"{type(err).__name__}: {err}")
            view.update()


def run_local(jobs: list[Job], workers: int, isolate: bool = True, live: bool | None = None) -> list[Job]:
    """Run the jobs on this machine; returns the failed ones."""
    for job in jobs:
        if (job.folder / "done.json").exists():
            job.status = "skipped"
    gpus = _gpus()
    workers = max(1, min(workers, len(gpus) or workers))
    threads = max(1, (os.cpu_count() or 1) // workers)
    view = ProgressView(jobs, live=sys.stdout.isatty() if live is None else live)
    view.update()
    try:
        if isolate:
            _run_isolated(jobs, workers, threads, gpus, view)
        else:
            _run_pooled(jobs, workers, threads, view)
    finally:
        view.close()
    return [job for job in jobs if job.status == "failed"]


def _gpus() -> list[int]:
    import torch

    return list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []


# ----------------------------------------------------------------------------------------- SLURM runs
def slurm_command(jobs: list[Job], launcher_overrides: list[str] = ()) -> list[str]:
    """One Hydra multirun over the jobs' (encoding, seed[, task]) with the submitit SLURM launcher."""
    varying = {}
    for job in jobs:
        for override in job.overrides:
            key, value = override.split("=", 1)
            varying.setdefault(key, [])
            if value not in varying[key]:
                varying[key].append(value)
    sweep = [f"{key}={','.join(values)}" for key, values in varying.items()]
    return [sys.executable, "-m", "pipelines.train", "-m", "hydra/launcher=slurm", *sweep, *launcher_overrides]


def run_slurm(jobs: list[Job], launcher_overrides: list[str] = (), runner: Callable = subprocess.run) -> int:
    todo = [job for job in jobs if not (job.folder / "done.json").exists()]
    if not todo:
        print("every run of the sweep is finished")
        return 0
    command = slurm_command(todo, launcher_overrides)
    print(f"submitting {len(todo)} runs as a SLURM job array:\n  {' '.join(command)}", flush=True)
    return runner(command).returncode


# ---------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", required=True, help=f"one of {', '.join(config_options('domain'))}, or all")
    parser.add_argument("--roster", default="paper", choices=config_options("roster"))
    parser.add_argument("--encodings", nargs="+", help="pe configs to run instead of a roster, e.g. nope rope10k")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--preset", default="tiny", choices=config_options("preset"))
    parser.add_argument("--tasks", nargs="+", help="synthetic: tasks (default: the demo's at tiny, all 20 at paper)")
    parser.add_argument("--launcher", default="local", choices=["local", "slurm"])
    parser.add_argument(
        "--jobs", type=int, default=None, help="local: runs at once (default: one per GPU; on a CPU one per core)"
    )
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run (slurm: also hydra.launcher.*)")
    args = parser.parse_args(argv)
    domains = config_options("domain") if args.domain == "all" else [args.domain]
    unknown = [d for d in domains if d not in config_options("domain")]
    if unknown:
        parser.error(f"unknown domain {unknown[0]!r}; valid: {', '.join(config_options('domain'))}, all")

    launcher_overrides = [o for o in args.overrides if o.startswith("hydra.launcher.")]
    run_overrides = [o for o in args.overrides if not o.startswith("hydra.launcher.")]
    failed: list[Job] = []
    began = time.time()
    for domain in domains:
        encodings = args.encodings or roster(args.roster)
        jobs = plan(domain, encodings, args.seeds, args.preset, args.runs, args.tasks, run_overrides)
        print(
            f"{domain}: {len(jobs)} runs ({' '.join(encodings)} x seeds {' '.join(map(str, args.seeds))})", flush=True
        )
        if args.launcher == "slurm":
            if run_slurm(jobs, launcher_overrides):
                return 1
            continue
        failed += run_local(jobs, workers=args.jobs or len(_gpus()) or os.cpu_count() or 1)
    print(f"sweep wall time: {time.time() - began:.0f} s")
    for job in failed:
        print(f"failed run: {job.label}: {job.error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
