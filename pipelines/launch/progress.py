"""The live view of a sweep: a table on a terminal, one line per change of a run's state otherwise (CI logs)."""

from __future__ import annotations

import statistics
import time

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

    def __init__(self, jobs: list[Job], live: bool, workers: int = 1) -> None:
        self.jobs, self.live, self.workers, self._shown = jobs, live, workers, {}
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

    def close(self) -> None:
        if self._rich is not None:
            self._rich.update(self._table())
            self._rich.stop()
