"""MAESTRO's examples: chunks of whole bars, overlapping by two bars, cut from each performance.

Each performance is BOS + its REMI tokens + EOS, cut into chunks of at most `length` tokens. A chunk ends
just before a Bar token (whole bars only) and the next one starts at the Bar token two bars before that end, so
consecutive chunks share exactly two bars. Exceptions, counted: when the two overlapping bars and the bar after
them do not fit in one chunk (the next chunk would bring nothing new) the overlap shrinks to one bar, then to
none; a single bar longer than a chunk is cut at `length` tokens and the next chunk continues from the cut,
without overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OVERLAP_BARS = 2


@dataclass
class Chunks:
    bounds: list[tuple[int, int]]  # (start, end) token offsets in the performance
    reduced_overlap: int  # chunks followed by an overlap of fewer than two bars
    cut_inside_bar: int  # chunks that end inside a bar longer than a chunk


def chunk_bounds(tokens: np.ndarray, bar_id: int, length: int, overlap_bars: int = OVERLAP_BARS) -> Chunks:
    """Chunks of at most `length` tokens that end before a Bar token and overlap by `overlap_bars` bars.

    See the module docstring for the rule and its two exceptions.
    """
    n = len(tokens)
    bars = np.flatnonzero(tokens == bar_id)
    bounds, reduced, cut = [], 0, 0

    def reaches_past(start: int, end: int) -> bool:
        """Whether a chunk starting at `start` ends after `end` (so the next chunk brings new tokens)."""
        return n - start <= length or bool(np.any((bars > end) & (bars <= start + length)))

    start = 0
    while n - start > length:
        boundaries = bars[(bars > start) & (bars <= start + length)]
        if len(boundaries):
            end = int(boundaries[-1])
            inside = bars[(bars > start) & (bars < end)]  # bar starts after the chunk's first token
            candidates = [int(inside[-k]) for k in range(overlap_bars, 0, -1) if len(inside) >= k] + [end]
            following = next(c for c in candidates if c == end or reaches_past(c, end))
            reduced += int(np.count_nonzero((bars >= following) & (bars < end)) < overlap_bars)
        else:  # the bar starting at `start` (or the BOS) holds more than `length` tokens
            end = following = start + length
            cut += 1
        bounds.append((start, end))
        start = following
    bounds.append((start, n))
    return Chunks(bounds, reduced, cut)
