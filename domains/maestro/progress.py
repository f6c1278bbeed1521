"""What MAESTRO's tokenising has done so far, shown while it runs: a rich bar on a terminal, plain lines in a log.

One status line serves both: performances done of all (from the cache and skipped among them), tokens so far,
files/s and tokens/s of this run's tokenising, elapsed time and the time left. The time left is the work still
to do at the rate of work so far, a file's work being its MIDI bytes plus a fixed cost per file
(FILE_COST_BYTES): the largest files go first (`tokenizer.tokenize_files`), so a count of files would promise
the end much too late and a count of bytes too early. Replayed on a whole-set run's log, the estimate with the
fixed cost was 10-25% short in the first two thirds (the machine's load rose during that run) and within 7% in
the last third; from bytes alone it was 25-35% short throughout.

On a terminal the bar moves with the work done and the line is redrawn; where stderr is a file or a pipe
(`make data-maestro > log 2>&1`) a plain line is written when tokenising starts, at most every `every` seconds
after, and at the end, so that a log shows the run advancing. POSBENCH_PROGRESS=0 turns both off.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np
from rich.console import Console, RenderableType
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
from rich.text import Text

PLAIN_EVERY = 30.0  # seconds between two plain progress lines in a log
# A file's tokenising costs about 0.044 s plus 3.25 s per MB of MIDI (one process, 50 files of MAESTRO from 3 to
# 416 kB, least squares): the fixed part is worth 13.5 kB.
FILE_COST_BYTES = 13_500


def progress_enabled() -> bool:
    return os.environ.get("POSBENCH_PROGRESS", "1") == "1"


def human(count: float) -> str:
    """1234567 -> 1.23M, 45600 -> 45.6k, 512 -> 512."""
    for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if count >= threshold:
            return f"{count / threshold:.3g}{suffix}"
    return f"{count:.3g}" if count != int(count) else str(int(count))


def clock(seconds: float) -> str:
    """Seconds as m:ss (h:mm:ss from an hour)."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


@dataclass
class Tally:
    """Counts of one tokenising call: every performance given, those already in the cache and those to tokenise."""

    performances: int
    from_cache: int
    cached_tokens: int  # tokens of the performances found in the cache
    cached_skipped: int  # performances the cache records as not tokenisable
    to_tokenise: int
    bytes_to_tokenise: int
    tokenised: int = 0
    skipped: int = 0  # by this run
    tokens: int = 0  # produced by this run
    bytes_done: int = 0
    began: float = field(default_factory=time.perf_counter)

    @property
    def work_total(self) -> int:
        """What this run has to tokenise, in bytes with each file's fixed cost (FILE_COST_BYTES)."""
        return self.bytes_to_tokenise + FILE_COST_BYTES * self.to_tokenise

    @property
    def work_done(self) -> int:
        return self.bytes_done + FILE_COST_BYTES * self.tokenised

    def add(self, size: int, result: np.ndarray | str) -> None:
        """A file of `size` bytes tokenised: its ids, or the reason it could not be."""
        self.tokenised += 1
        self.bytes_done += size
        if isinstance(result, str):
            self.skipped += 1
        else:
            self.tokens += len(result)

    def line(self, now: float | None = None) -> str:
        """The status: counts, rates over this run's tokenising, elapsed and, while files are left, the time left."""
        elapsed = (time.perf_counter() if now is None else now) - self.began
        done = self.from_cache + self.tokenised
        parts = [f"{done}/{self.performances} performances"]
        notes = [f"{self.from_cache} from the cache"] if self.from_cache else []
        if self.cached_skipped + self.skipped:
            notes.append(f"{self.cached_skipped + self.skipped} skipped")
        if notes:
            parts[0] += f" ({', '.join(notes)})"
        parts.append(f"{human(self.cached_tokens + self.tokens)} tokens")
        if self.to_tokenise:
            rate = elapsed if elapsed > 0 else float("inf")
            parts.append(f"{self.tokenised / rate:.1f} files/s, {human(self.tokens / rate)} tokens/s")
            timing = f"{clock(elapsed)} elapsed"
            if self.tokenised < self.to_tokenise:
                left = self.work_total - self.work_done
                eta = clock(elapsed * left / self.work_done) if self.work_done else "?"
                timing += f", ETA {eta}"
            parts.append(timing)
        return "; ".join(parts)


@dataclass(frozen=True)
class ProgressOutput:
    """Where the progress goes: `stream` (None: nowhere), a rich bar when it is a terminal, else a plain line at
    most every `every` seconds."""

    stream: TextIO | None
    every: float = PLAIN_EVERY

    @classmethod
    def default(cls) -> ProgressOutput:
        """stderr, unless POSBENCH_PROGRESS=0."""
        return cls(sys.stderr if progress_enabled() else None)


class BarAndStatus(Progress):
    """rich's progress display with each task's status on a line of its own under its bar: the status is longer
    than what a narrow terminal leaves beside a bar (rich would cut it)."""

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        for task in self.tasks:
            yield Text(task.fields["status"])


class TokenisingProgress:
    """Shows a Tally while tokenising runs; `update()` after each file, `close()` at the end (a context manager)."""

    def __init__(self, tally: Tally, output: ProgressOutput, workers: int, prefix: str = "maestro: tokenising") -> None:
        self.tally, self.output, self.prefix = tally, output, prefix
        self.bar: Progress | None = None
        self.last_line = -float("inf")
        self.write: Callable[[str], None] = lambda text: None
        if output.stream is None:
            return
        console = Console(file=output.stream)
        if console.is_terminal and tally.to_tokenise:
            self.bar = BarAndStatus(TextColumn(prefix), BarColumn(), TaskProgressColumn(), console=console)
            self.task = self.bar.add_task(prefix, total=tally.work_total, status=tally.line())
            self.bar.start()
        else:
            self.write = lambda text: print(text, file=output.stream, flush=True)
            self.write(
                f"{prefix} {tally.to_tokenise} of {tally.performances} performances "
                f"({human(tally.bytes_to_tokenise)}B of MIDI; {tally.from_cache} in the cache) with {workers} "
                f"worker{'s' if workers > 1 else ''}"
            )
            self.last_line = time.perf_counter()

    def update(self) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=self.tally.work_done, status=self.tally.line())
        elif time.perf_counter() - self.last_line >= self.output.every:
            self.write(f"{self.prefix}: {self.tally.line()}")
            self.last_line = time.perf_counter()

    def close(self, stopped: bool = False) -> None:
        """The last status; `stopped`: tokenising ended early (an error or an interruption), not done."""
        if self.bar is not None:
            self.bar.update(self.task, completed=self.tally.work_done, status=self.tally.line())
            self.bar.stop()
        else:
            self.write(f"{self.prefix}: {'stopped' if stopped else 'done'}, {self.tally.line()}")

    def __enter__(self) -> TokenisingProgress:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.close(stopped=kind is not None)
