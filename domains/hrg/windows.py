"""The examples of the HRG domain: fixed windows over a split's regions of base codes, each tokenised on its own.

Windows of `window` bases every `stride` bases over each region (a whole chromosome or a stretch of one:
`domains.hrg.regions`), N runs included; only full windows, so a region of L bases has `example_count(L) =
(L - window) // stride + 1` candidate windows (0 when L < window). An example is its window tokenised with the
6-mer phase starting at the window's first base, truncated to a number of tokens. A window whose example is more
than `max_n_fraction` N tokens is not an example (SPEC section 2: inside an assembly gap the tokens are N after N,
which every encoding predicts alike after a few tokens; they would dilute every difference and cost scoring time).
The share is of the example's tokens, not of the window's bases: an N base is a token and six other bases make one,
so a window whose first 2,490 of 6,100 bases are a gap's end (41% N) truncates to 1,000 N tokens. At 1.0, the
protocol's setting, every window is an example.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from domains.hrg.regions import Region
from domains.hrg.tokenizer import N_ID, tokenize, tokenize_windows
from domains.store import StoreError

CHUNK_WINDOWS = 1024  # windows read (and N-counted, tokenised) at a time: bounded memory on whole chromosomes


def example_count(length: int, window: int, stride: int) -> int:
    """Full windows of `window` bases every `stride` bases in a stretch of `length` bases."""
    return 0 if length < window else (length - window) // stride + 1


def chromosome_windows(bases: np.ndarray, window: int, stride: int, chunk: int = CHUNK_WINDOWS) -> Iterator[np.ndarray]:
    """Every full window of one stretch of base codes, `chunk` windows (rows) at a time."""
    count = example_count(len(bases), window, stride)
    for first in range(0, count, chunk):
        last = min(count, first + chunk) - 1
        block = np.asarray(bases[first * stride : last * stride + window])
        yield sliding_window_view(block, window)[::stride]


def window_starts(
    bases: np.ndarray, start: int, end: int, window: int, stride: int, tokens: int, max_n_fraction: float = 1.0
) -> np.ndarray:
    """First bases of the examples of bases[start:end]: the full windows whose example (`tokens` tokens at most) is at
    most `max_n_fraction` N tokens."""
    grid = start + stride * np.arange(example_count(end - start, window, stride), dtype=np.int64)
    if max_n_fraction >= 1.0 or not len(grid):
        return grid
    keep = np.empty(len(grid), dtype=bool)
    for first in range(0, len(grid), CHUNK_WINDOWS):
        starts = grid[first : first + CHUNK_WINDOWS]
        block = np.asarray(bases[starts[0] : starts[-1] + window])
        ids, offsets = tokenize_windows(sliding_window_view(block, window)[starts - starts[0]], tokens)
        n_tokens = np.add.reduceat((ids == N_ID).astype(np.int64), offsets[:-1])
        keep[first : first + len(starts)] = n_tokens <= max_n_fraction * np.diff(offsets)
    return grid[keep]


class ChromosomeWindows:
    """The examples of one split (a `domains.stored.ExampleSplit`): windows over its regions' base codes
    (memory-mapped chromosomes), tokenised when read.

    Pickles without the arrays (a loader worker started by spawn or forkserver maps the files itself).
    """

    def __init__(
        self,
        regions: list[Region],
        paths: list[Path],
        window: int,
        stride: int,
        tokens: int,
        max_n_fraction: float = 1.0,
    ):
        self.regions, self.paths = regions, paths
        self.window, self.stride, self.example_tokens = window, stride, tokens
        self.max_n_fraction = max_n_fraction
        self._bases: list[np.ndarray] | None = None
        self.bounds = [region.bounds(len(bases)) for region, bases in zip(regions, self.bases, strict=True)]
        self.starts = [
            window_starts(bases, start, end, window, stride, tokens, max_n_fraction)
            for bases, (start, end) in zip(self.bases, self.bounds, strict=True)
        ]
        self.counts = np.array([len(starts) for starts in self.starts], dtype=np.int64)
        self.first = np.concatenate([[0], np.cumsum(self.counts)])

    @property
    def chromosomes(self) -> list[str]:
        return [region.chromosome for region in self.regions]

    @property
    def bases(self) -> list[np.ndarray]:
        if self._bases is None:
            self._bases = [self._load(path) for path in self.paths]
        return self._bases

    @staticmethod
    def _load(path: Path) -> np.ndarray:
        try:
            return np.load(path, mmap_mode="r")
        except (OSError, ValueError, EOFError) as err:
            raise StoreError(f"{path}: unreadable base codes ({err}); run `make data-hrg` to encode it again") from err

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_bases": None}

    def __len__(self) -> int:
        return int(self.first[-1])

    def candidate_windows(self) -> int:
        """Full windows over the regions before the N rule: the examples plus those more than max_n_fraction N."""
        return sum(example_count(end - start, self.window, self.stride) for start, end in self.bounds)

    def locate(self, index: int) -> tuple[int, int]:
        """(region position in the split, first base on its chromosome, 0-based) of example `index`."""
        if not 0 <= index < len(self):
            raise IndexError(f"example {index} of {len(self)}")
        region = int(np.searchsorted(self.first, index, side="right") - 1)
        return region, int(self.starts[region][index - self.first[region]])

    def window_codes(self, index: int, jitter: int = 0) -> np.ndarray:
        """Base codes of example `index`, its start moved by `jitter` bases and clipped at its region's end (a
        training window never reads bases of a region it does not belong to)."""
        region, start = self.locate(index)
        end = min(start + jitter + self.window, self.bounds[region][1])
        return np.asarray(self.bases[region][start + jitter : end])

    def example(self, index: int, jitter: int = 0) -> np.ndarray:
        return tokenize(self.window_codes(index, jitter))[: self.example_tokens]

    def all_examples(self) -> list[np.ndarray]:
        """Every example, tokenised a chunk of windows at a time (memory: the chunk plus the tokens kept)."""
        examples = []
        for bases, starts in zip(self.bases, self.starts, strict=True):
            for first in range(0, len(starts), CHUNK_WINDOWS):
                chunk = starts[first : first + CHUNK_WINDOWS]
                block = np.asarray(bases[chunk[0] : chunk[-1] + self.window])
                windows = sliding_window_view(block, self.window)[chunk - chunk[0]]
                tokens, offsets = tokenize_windows(windows, self.example_tokens)
                examples.extend(np.split(tokens, offsets[1:-1]))
        return examples
