"""The live view of a sweep: a table on a terminal; otherwise (CI logs, `make train > log`) one line per change of a
run's state and, every few seconds ($POSBENCH_PROGRESS_EVERY, default 60: pipelines.experiment.progress_lines), a line
per running run: its step, tokens/s and training time left, or how long it has been scoring once its steps are done.
Without those lines a log said "running" and then nothing for the 10 minutes a cpu-preset MAESTRO run trains and the
minutes it scores."""

from __future__ import annotations

import statistics
import time

from pipelines.experiment.progress_lines import Ticker, duration, progress_every
from pipelines.launch.jobs import ELSEWHERE, Job


def time_left(jobs: list[Job], workers: int) -> str:
    """About how long the sweep has left: the runs not yet finished (queued or running) at the median wall seconds of
    the runs this sweep finished, `workers` at a time; "" before the first finishes or after the last. A planning
    figure: runs of one sweep differ in cost (CoPE's take twice rope10k's), and the longest start first."""
    finished = [job.seconds for job in jobs if job.status == "done" and job.seconds is not None]
    left = sum(job.status in ("queued", "running") for job in jobs)
    if not finished or not left:
        return ""
    median = statistics.median(finished)
    minutes = left * median / max(1, workers) / 60
    when = f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"
    return f"; about {when} left ({left} runs at a median {median:.0f} s, {workers} at a time)"


class ProgressView:
    """A live table on a terminal; one line per change of state otherwise (CI logs, files), with the time of day
    and, as each run finishes, about how long the sweep has left (time_left)."""

    def __init__(self, jobs: list[Job], live: bool, workers: int = 1, every: float | None = None) -> None:
        self.jobs, self.live, self.workers, self._shown = jobs, live, workers, {}
        self.ticker = Ticker(progress_every() if every is None else every)
        self._scoring: dict[str, float] = {}  # run -> when its steps were first seen done
        self._rich = None
        if live:
            from rich.live import Live

            self._rich = Live(self._table(), refresh_per_second=1, transient=False)
            self._rich.start()

    def _table(self):
        from rich.table import Table

        states = ("done", "skipped", "running", "failed", ELSEWHERE, "queued")
        counts = {s: sum(j.status == s for j in self.jobs) for s in states}
        table = Table(title=" ".join(f"{s} {n}" for s, n in counts.items()), title_justify="left")
        for column in ("run", "status", "step", "tokens/s"):
            table.add_column(column, justify="left" if column in ("run", "status") else "right")
        for job in self.jobs:
            if job.status in ("running", "failed", ELSEWHERE) or (job.status == "done" and job.seconds is not None):
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
                done = sum(j.status in ("done", "skipped", "failed", ELSEWHERE) for j in self.jobs)
                rate = job.tokens_per_s()
                extra = f", {rate:,.0f} tokens/s" if rate and job.status == "done" else ""
                extra += f", {job.seconds:.0f} s" if job.seconds is not None else ""
                extra += f": {job.error}" if job.error else ""
                extra += time_left(self.jobs, self.workers) if job.status == "done" else ""
                clock = time.strftime("%H:%M:%S")
                print(f"[{done:3d}/{len(self.jobs)}] {clock} {job.label}: {job.status}{extra}", flush=True)
        if self.ticker.due():
            clock = time.strftime("%H:%M:%S")
            for job in self.jobs:
                if job.status == "running":
                    print(f"        {clock} {job.label}: {self.where(job)}", flush=True)

    def where(self, job: Job) -> str:
        """How far a running run is: starting, its step with tokens/s and the training time left, or scoring."""
        step, now = job.step, time.time()
        if step >= job.max_steps:
            since = self._scoring.setdefault(job.label, now)
            return (
                f"trained ({job.max_steps}/{job.max_steps} steps), scoring its test splits for {duration(now - since)}"
            )
        if step == 0:
            return f"starting (the data, the model, the first step) for {duration(now - (job.began or now))}"
        text = f"step {step}/{job.max_steps} ({100 * step / job.max_steps:.0f}%)"
        rate = job.tokens_per_s()
        if rate:
            left = (job.max_steps - step) * job.tokens_per_step / rate
            text += f", {rate:,.0f} tokens/s, about {duration(left)} of training left"
        return text

    def close(self) -> None:
        if self._rich is not None:
            self._rich.update(self._table())
            self._rich.stop()
