"""The examples of the HRG domain: fixed windows over a chromosome's base codes, each tokenised on its own.

Windows of `window` bases every `stride` bases over each chromosome, N runs included; only full windows, so a
chromosome of L bases has `example_count(L) = (L - window) // stride + 1` examples (0 when L < window). An
example is its window tokenised with the 6-mer phase starting at the window's first base, truncated to a number
of tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from domains.hrg.tokenizer import tokenize, tokenize_windows
from domains.store import StoreError


def example_count(length: int, window: int, stride: int) -> int:
    """Full windows of `window` bases every `stride` bases in a chromosome of `length` bases."""
    return 0 if length < window else (length - window) // stride + 1


def chromosome_windows(bases: np.ndarray, window: int, stride: int, chunk: int = 1024) -> Iterator[np.ndarray]:
    """The example windows of one chromosome's base codes, `chunk` windows (rows) at a time."""
    count = example_count(len(bases), window, stride)
    for first in range(0, count, chunk):
        last = min(count, first + chunk) - 1
        block = np.asarray(bases[first * stride : last * stride + window])
        yield sliding_window_view(block, window)[::stride]


class ChromosomeWindows:
    """The examples of one split (a `domains.stored.ExampleSplit`): fixed windows over its chromosomes' base
    codes (memory-mapped), tokenised when read.

    Pickles without the arrays (a loader worker started by spawn or forkserver maps the files itself).
    """

    def __init__(self, chromosomes: list[str], paths: list[Path], window: int, stride: int, tokens: int):
        self.chromosomes, self.paths = chromosomes, paths
        self.window, self.stride, self.example_tokens = window, stride, tokens
        self._bases: list[np.ndarray] | None = None
        self.counts = np.array([example_count(len(b), window, stride) for b in self.bases], dtype=np.int64)
        self.first = np.concatenate([[0], np.cumsum(self.counts)])

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

    def locate(self, index: int) -> tuple[int, int]:
        """(chromosome position in the split, first base) of example `index`."""
        if not 0 <= index < len(self):
            raise IndexError(f"example {index} of {len(self)}")
        chromosome = int(np.searchsorted(self.first, index, side="right") - 1)
        return chromosome, int(index - self.first[chromosome]) * self.stride

    def window_codes(self, index: int, jitter: int = 0) -> np.ndarray:
        """Base codes of example `index`, its start moved by `jitter` bases and clipped at the chromosome's end."""
        chromosome, start = self.locate(index)
        return np.asarray(self.bases[chromosome][start + jitter : start + jitter + self.window])

    def example(self, index: int, jitter: int = 0) -> np.ndarray:
        return tokenize(self.window_codes(index, jitter))[: self.example_tokens]

    def all_examples(self) -> list[np.ndarray]:
        """Every example, tokenised a chunk of windows at a time (memory: the chunk plus the tokens kept)."""
        examples = []
        for bases in self.bases:
            for windows in chromosome_windows(bases, self.window, self.stride):
                tokens, offsets = tokenize_windows(windows, self.example_tokens)
                examples.extend(np.split(tokens, offsets[1:-1]))
        return examples
