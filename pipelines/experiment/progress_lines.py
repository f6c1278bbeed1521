"""Progress as a line every few seconds where no bar is drawn: a run's training (its step, loss, tokens/s and the
time left) and the scoring after it (each split's batches), printed by the training process into its log.

A sweep's training processes write to a log file each (pipelines.launch.local) with no bar, and a run trained into a
log (`python -m pipelines.train > log`) draws none either: before these lines such a log held a logger's
advertisement and a warning for the 10 minutes a cpu-preset MAESTRO run trains, and nothing for the minutes it
scores. The sweep's own view prints the same facts about each running run (pipelines.launch.progress).

`POSBENCH_PROGRESS_EVERY` sets the seconds between lines (default 60; 0 turns them off: the demo's warm workers,
whose output is the demo's own).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from lightning.pytorch.callbacks import Callback

PROGRESS_EVERY_ENV = "POSBENCH_PROGRESS_EVERY"
DEFAULT_EVERY = 60.0
T = TypeVar("T")


def progress_every() -> float:
    """Seconds between progress lines ($POSBENCH_PROGRESS_EVERY, default DEFAULT_EVERY); 0 for none. ValueError
    naming the variable when it is no number."""
    text = os.environ.get(PROGRESS_EVERY_ENV, "").strip()
    if not text:
        return DEFAULT_EVERY
    try:
        return max(0.0, float(text))
    except ValueError:
        raise ValueError(f"${PROGRESS_EVERY_ENV} = {text!r}: expected the seconds between progress lines") from None


def lines_wanted(bar: bool) -> bool:
    """Whether a run prints progress lines: where no bar is drawn (the bar is off, or the output is no terminal)
    and lines are not turned off."""
    return (not bar or not sys.stdout.isatty()) and progress_every() > 0


def duration(seconds: float) -> str:
    """`45 s`, `12 min`, `1.5 h`: a planning figure."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 2 * 3600 else f"{seconds / 3600:.1f} h"


class Ticker:
    """True once every `every` seconds of `clock` (the first time `every` seconds after it was made)."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.clock = every, clock
        self.last = clock()

    def due(self) -> bool:
        now = self.clock()
        if self.every <= 0 or now - self.last < self.every:
            return False
        self.last = now
        return True


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def counted(items: Iterable[T], total: int, what: str, every: float) -> Iterator[T]:
    """`items` (`total` of them), with a line every `every` seconds: `<what>: batch 40/92 (43%), about 1 min left`."""
    ticker, began = Ticker(every), time.monotonic()
    for done, item in enumerate(items, start=1):
        yield item
        if ticker.due() and done < total:
            left = (time.monotonic() - began) / done * (total - done)
            say(f"{what}: batch {done}/{total} ({100 * done / total:.0f}%), about {duration(left)} left")


class TrainingLines(Callback):
    """A line every `every` seconds while a run trains: `<label>: step 120/600 (20%), loss 2.413, 1,234 tokens/s,
    about 6 min of training left` (the rate and the time left over the steps this process has trained)."""

    def __init__(self, label: str, tokens_per_step: int, every: float) -> None:
        self.label, self.tokens_per_step, self.every = label, tokens_per_step, every
        self.ticker: Ticker | None = None
        self.first: tuple[float, int] = (0.0, 0)

    def on_train_start(self, trainer, module) -> None:
        self.ticker, self.first = Ticker(self.every), (time.monotonic(), trainer.global_step)
        if trainer.is_global_zero:  # under DDP one process speaks for the run
            say(f"{self.label}: training from step {trainer.global_step} of {trainer.max_steps}")

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step  # optimiser steps done; the last one's line is the scoring's first
        if self.ticker is None or not trainer.is_global_zero or step >= trainer.max_steps or not self.ticker.due():
            return
        began, first_step = self.first
        seconds, steps = time.monotonic() - began, step - first_step
        loss = outputs.get("global_loss") if isinstance(outputs, dict) else None  # the step's loss (models.training)
        parts = [f"step {step}/{trainer.max_steps} ({100 * step / trainer.max_steps:.0f}%)"]
        parts += [f"loss {float(loss):.4g}"] if loss is not None else []
        if steps > 0 and seconds > 0:
            parts.append(f"{steps * self.tokens_per_step / seconds:,.0f} tokens/s")
            parts.append(f"about {duration(seconds / steps * (trainer.max_steps - step))} of training left")
        say(f"{self.label}: {', '.join(parts)}")
