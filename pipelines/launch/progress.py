"""The live view of a sweep: a table on a terminal, one line per change of a run's state otherwise (CI logs)."""

from __future__ import annotations

from pipelines.launch.jobs import ELSEWHERE, Job


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
                print(f"[{done:3d}/{len(self.jobs)}] {job.label}: {job.status}{extra}", flush=True)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.update(self._table())
            self._rich.stop()
