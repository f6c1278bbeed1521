"""What a finished run cost: its CPU seconds per thread (its manifest's and splits' records), its wall time (its log's
start to its done.json, the process's start-up included: read from its folder, as no statistic needs them) and its
training and evaluation time (its loaded manifest and its splits' speeds). make settle prices the next look with
them, from runs on a CPU of the kind it runs on where there are some (`cpu_kind`: the model and the flags its
manifest records; an encoding's speed relative to another's differs between an AVX2 and an AVX-512 CPU by up to 2x,
docs/presets.md), and a sweep and a look start their longest runs first (longest_first)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from datetime import datetime, timezone
from typing import NamedTuple

from pipelines.analysis.cost import cpu_seconds, on_gpu, run_seconds, threads
from pipelines.analysis.loading import LoadedRun
from pipelines.launch.jobs import Job
from pipelines.launch.local import log_started
from pipelines.runs.layout import DONE, RunKey
from pipelines.runs.manifest import cpu_description
from pipelines.runs.metrics import RunFileError, read_json_file

CpuKind = tuple[str, tuple[str, ...]]  # (model, flags)


def cpu_kind(machine: dict | None) -> CpuKind | None:
    """A CPU's kind from a manifest's `machine` (or pipelines.runs.manifest.cpu_description): its model and the flags
    of CPU_FLAGS it has; None where the model is not recorded (a run from before manifests held it)."""
    if not isinstance(machine, dict) or not machine.get("cpu"):
        return None
    return str(machine["cpu"]), tuple(machine.get("cpu_flags") or ())


def this_cpu_kind() -> CpuKind | None:
    """The kind of the CPU this process runs on."""
    return cpu_kind(cpu_description())


def kind_name(kind: CpuKind | None) -> str:
    """`<model> (<flags>)`, or "not recorded"."""
    return "not recorded" if kind is None else f"{kind[0]} ({' '.join(kind[1]) or 'no vector flags recorded'})"


def wall_seconds(run: LoadedRun) -> float | None:
    """A finished run's wall time, process start-up included: from the start of the process that finished it (its
    log's name, pipelines.launch.local.log_started) to its done.json; None without a log (a run trained in process,
    or a published one) or a finishing time."""
    try:
        finished = datetime.fromisoformat(read_json_file(run.path / DONE)["finished"])
    except (KeyError, TypeError, ValueError, RunFileError):
        return None
    if finished.tzinfo is None:
        finished = finished.replace(tzinfo=timezone.utc)
    starts = [began for log in run.path.glob("train.*.out") if (began := log_started(log)) and began <= finished]
    return (finished - max(starts)).total_seconds() if starts else None


def seconds_on_own_cores(run: LoadedRun) -> float | None:
    """A finished CPU run's CPU seconds per thread (training and scoring, `pipelines.analysis.cost.cpu_seconds`):
    what it takes on cores of its own, whatever shared them while it ran; None where its records predate CPU
    seconds, or on a GPU."""
    seconds = None if on_gpu(run) else cpu_seconds(run)
    return None if seconds is None else seconds / threads(run)


class Measure(NamedTuple):
    """One way to time a finished run, and what the plan says of it."""

    seconds: Callable[[LoadedRun], float | None]
    says: str
    with_start_up: bool  # whether the figure holds the process's start-up


# How a run's time is estimated, best first.
MEASURES = (
    Measure(seconds_on_own_cores, "CPU seconds per thread: their time on cores of their own, whatever else ran", False),
    Measure(wall_seconds, "wall time, process start-up included", True),
    Measure(run_seconds, "training and evaluation time; no run here has a log (train.*.out) to time a process's "
            "start-up from: add it, several seconds a run", False),
)  # fmt: skip


class KindScale(NamedTuple):
    """How much longer a run takes on one CPU kind than on the others: the median over `encodings` (those with
    finished runs on both) of the ratio of their median times by one measure."""

    factor: float
    encodings: int


class Estimate(NamedTuple):
    """A run's expected time: the median of some finished runs by one of MEASURES, whether those ran on the CPU kind
    asked for, and the factor their median was scaled by where they did not (kind_scale; None: not scaled)."""

    seconds: float | None
    measure: Measure | None
    same_kind: bool
    scale: KindScale | None = None


def kind_scale(runs: list[LoadedRun], kind: CpuKind, measure: Measure) -> KindScale | None:
    """This CPU kind's time over the other kinds' (and unrecorded ones'), from the encodings that ran on both: per
    encoding the ratio of its runs' medians by `measure`, then the median of those ratios. None where no encoding
    ran on both. A run priced from other kinds' runs is scaled by it: the same run's CPU seconds differ between
    kinds by 2x and more (a MAESTRO run at 4 layers: 610 s on an AMX Xeon, over 1,500 s on an AVX-512 EPYC)."""
    ratios = []
    for encoding in sorted({run.encoding for run in runs if run.finished and not run.derived}):
        here, there = [], []
        for run in runs:
            if run.finished and run.encoding == encoding and (seconds := measure.seconds(run)) is not None:
                (here if cpu_kind(run.manifest.get("machine")) == kind else there).append(seconds)
        if here and there:
            ratios.append(statistics.median(here) / statistics.median(there))
    return KindScale(statistics.median(ratios), len(ratios)) if ratios else None


def estimated_seconds(runs: list[LoadedRun], encoding: str, kind: CpuKind | None = None) -> Estimate:
    """The median time of the encoding's finished runs (every encoding's runs where it has none) by the first of
    MEASURES any of them has, from its runs on a CPU of `kind` where they have that figure, else from its runs on
    any CPU, scaled to `kind` by kind_scale where some encoding ran on both. CPU seconds first: a run's wall time
    counts whatever shared its cores (a niced sweep beside development: KERPLE's 464 s read 55.7 min); then the same
    kind: the same encoding's CPU seconds differ by CPU kind (RoPE's fused attention trains 2.3x faster on an AVX-512
    CPU than on an AVX2 one, the bias paths 1.25x)."""
    finished = [run for run in runs if run.finished]
    for pool in ([r for r in finished if r.encoding == encoding], [r for r in finished if not r.derived]):
        for measure in MEASURES:
            same = [r for r in pool if kind is not None and cpu_kind(r.manifest.get("machine")) == kind]
            for members, same_kind in ((same, True), (pool, False)):
                figures = [s for r in members if (s := measure.seconds(r)) is not None]
                if not figures:
                    continue
                scale = None if same_kind or kind is None else kind_scale(finished, kind, measure)
                return Estimate(
                    statistics.median(figures) * (scale.factor if scale else 1.0), measure, same_kind, scale
                )
    return Estimate(None, None, False)


def own_seconds(runs: list[LoadedRun], key: RunKey) -> float | None:
    """The median process seconds (run_seconds) of the finished runs of `key`'s encoding on its task; None without
    one."""
    own = [s for r in runs if r.finished and (r.encoding, r.key.task) == (key.encoding, key.task)
           if (s := run_seconds(r)) is not None]  # fmt: skip
    return statistics.median(own) if own else None


def longest_first(jobs: list[Job], runs: list[LoadedRun], block: Callable[[Job], int] = lambda job: 0) -> list[Job]:
    """The jobs in the order to start them: within each block (all one block by default; a sweep's seeds, so that a
    partial sweep still holds whole seeds), the longest expected first, so that the block ends on short runs and no
    worker idles while one long run finishes (longest processing time first). Expected: the median of the same
    encoding's finished runs on the same task (own_seconds); one never run goes first (it may be the longest, and
    its time is then known for the next block). Ties keep the plan's order."""
    expected = {job.label: own_seconds(runs, job.key) for job in jobs}
    order = {job.label: i for i, job in enumerate(jobs)}

    def position(job: Job) -> tuple:
        seconds = expected[job.label]
        return (block(job), 0 if seconds is None else 1, -(seconds or 0.0), order[job.label])

    return sorted(jobs, key=position)


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "unknown"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
