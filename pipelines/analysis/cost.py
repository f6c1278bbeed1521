"""What a study's evidence cost, from its runs' own records: core-hours in all, per encoding and per decided pair
(what make settle's next look is priced with too, pipelines.launch.costs).

    core-seconds of a run = its CPU seconds (training and every scored split), where its records hold them;
                            else (training seconds + evaluation seconds) x threads

- CPU seconds: the manifest's `train_cpu_seconds` and each split's `cpu_seconds` (metrics/summary.json): every
  thread of the run's processes, so what the run held of the cores whatever else shared them (recorded since
  issue 50; a run's figure does not grow when it trained beside other work);
- training seconds: the manifest's `train_seconds` (the fit, its validation passes included);
- a run resumed after an interruption counts every process that trained it, up to the checkpoint each later one
  resumed from (the checkpoint carries the figures); a run recorded before that (only `train_cpu_seconds_this_process`
  and `train_seconds_this_process`), or resumed from such a checkpoint, counts its last process: a lower bound;
- evaluation seconds: each evaluated split's tokens / its tokens per second (the scoring after training); a YaRN
  entry (`rope10k+yarn`) trains nothing and counts its own evaluation, under its rope encoding;
- threads: the manifest's `machine.threads` (the torch threads the run used); 1 where a manifest predates that
  record. A run on a GPU counts GPU-hours (its wall seconds, one device) instead.

The wall seconds are what a run held a core for: a run recorded before CPU seconds were, that shared its cores with
other work (more processes than cores), states more than it needed alone, so such a study states an upper bound.

A pair is decided when its verdict is `better`, `worse` or `equivalent`: each tells a reader something definite.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from pipelines.analysis.loading import LoadedRun
from pipelines.runs.layout import DERIVED_MARK

DECIDING = ("better", "worse", "equivalent")


def fit_seconds(manifest: dict, cpu: bool) -> float | None:
    """A trained run's fit in wall (or CPU) seconds: over all of its processes where recorded, else its last
    process's (a lower bound for a run resumed before the total was recorded); None where neither is."""
    prefix = "train_cpu_seconds" if cpu else "train_seconds"
    for key in (prefix, f"{prefix}_this_process"):
        if isinstance(value := manifest.get(key), int | float) and not isinstance(value, bool):
            return float(value)
    return None


def run_seconds(run: LoadedRun) -> float | None:
    """A finished run's process seconds: its training (none for a YaRN entry) and evaluation; None when a trained
    run's manifest records no training time."""
    seconds = 0.0 if run.derived else fit_seconds(run.manifest, cpu=False)
    if not isinstance(seconds, int | float):
        return None
    for entry in run.splits.values():
        if entry.get("tokens_per_s") and entry.get("tokens"):
            seconds += entry["tokens"] / entry["tokens_per_s"]
    return float(seconds)


def cpu_seconds(run: LoadedRun) -> float | None:
    """A finished run's CPU seconds, training (none for a YaRN entry) and every scored split; None where its records
    predate them."""
    seconds = 0.0 if run.derived else fit_seconds(run.manifest, cpu=True)
    scored = [entry.get("cpu_seconds") for entry in run.splits.values() if entry.get("tokens")]
    if not isinstance(seconds, int | float) or not all(isinstance(s, int | float) for s in scored):
        return None
    return float(seconds + sum(scored))


def on_gpu(run: LoadedRun) -> bool:
    return str(run.manifest.get("device", "cpu")).startswith("cuda")


def threads(run: LoadedRun) -> int:
    """The torch threads the run used (1 where its manifest predates the record)."""
    recorded = (run.manifest.get("machine") or {}).get("threads")
    return int(recorded) if isinstance(recorded, int) and recorded > 0 else 1


@dataclass(frozen=True)
class Cost:
    """Core-seconds (CPU runs) and GPU-seconds (GPU runs) per encoding, over the finished runs counted."""

    core_seconds: dict[str, float]
    gpu_seconds: dict[str, float]
    runs: int  # trained runs counted (YaRN entries add their scoring, not a run)
    untimed: tuple[str, ...] = ()  # finished trained runs whose manifest records no training time (not counted)
    cpu_timed: int = 0  # runs and YaRN entries counted on a CPU by their CPU seconds
    wall_timed: int = 0  # ... by their wall seconds x threads (recorded before CPU seconds were)
    # YaRN entries counted (their scoring, under their rope encoding): what a count of the study's run records holds
    # beyond `runs` (issue 64: "179 runs" beside "164 runs")
    evaluations: int = 0

    @property
    def core_hours(self) -> float:
        return sum(self.core_seconds.values()) / 3600

    @property
    def gpu_hours(self) -> float:
        return sum(self.gpu_seconds.values()) / 3600

    def hours_of(self, encoding: str) -> float:
        """The encoding's core-hours and GPU-hours together (a study runs on one kind of device)."""
        return (self.core_seconds.get(encoding, 0.0) + self.gpu_seconds.get(encoding, 0.0)) / 3600

    @property
    def unit(self) -> str:
        return "GPU-hours" if self.gpu_seconds and not self.core_seconds else "core-hours"

    @property
    def hours(self) -> float:
        return self.core_hours + self.gpu_hours

    def per_decided(self, decided: int) -> float | None:
        """The hours spent per decided pair; None when none is decided."""
        return self.hours / decided if decided else None


def runs_cost(runs: list[LoadedRun]) -> Cost:
    """The cost of the finished runs among `runs` (see the module docstring)."""
    core: dict[str, float] = defaultdict(float)
    gpu: dict[str, float] = defaultdict(float)
    counted, evaluations, untimed, timed = 0, 0, [], Counter()
    for run in runs:
        if not run.finished:
            continue
        gpu_run = on_gpu(run)
        measured = None if gpu_run else cpu_seconds(run)  # a CPU run's own CPU seconds, where recorded
        seconds = measured if measured is not None else run_seconds(run)
        if seconds is None:
            untimed.append(run.label)
            continue
        encoding = run.encoding.split(DERIVED_MARK)[0]
        if gpu_run:
            gpu[encoding] += seconds
        else:  # wall seconds count once per thread the run held
            core[encoding] += seconds if measured is not None else seconds * threads(run)
            timed["cpu" if measured is not None else "wall"] += 1
        counted += not run.derived  # a YaRN entry's scoring is counted, not as a run: it trains nothing
        evaluations += run.derived
    return Cost(dict(core), dict(gpu), counted, tuple(untimed), timed["cpu"], timed["wall"], evaluations)


def combined(costs: list[Cost]) -> Cost:
    """The cost of several domains' runs together."""
    core, gpu = Counter(), Counter()
    for cost in costs:
        core.update(cost.core_seconds)
        gpu.update(cost.gpu_seconds)
    untimed = tuple(label for cost in costs for label in cost.untimed)
    runs = sum(cost.runs for cost in costs)
    cpu_timed, wall_timed = sum(cost.cpu_timed for cost in costs), sum(cost.wall_timed for cost in costs)
    evaluations = sum(cost.evaluations for cost in costs)
    return Cost(dict(core), dict(gpu), runs, untimed, cpu_timed, wall_timed, evaluations)


def decided_count(words: list[str]) -> int:
    """How many of these verdict words decide their pair."""
    return sum(word in DECIDING for word in words)
