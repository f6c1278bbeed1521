"""A synthetic task and its examples: the rendering every task shares (SPEC section 2, "Synthetic tasks").

Every example is `PREFIX:input` + SEPARATOR + `answer`; only the answer span is scored. A task is a solver
`solve_<name>(input) -> answer` whose docstring gives the rendering, an example, the semantics and the meaning of
the size parameter n, an input generator `(rng, n) -> input`, and the longest `len(input) + len(answer)` any
example of size n can have, from which `Task.max_length` is derived.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SEPARATOR = ">"


@dataclass(frozen=True)
class Example:
    prompt: str  # f"{prefix}:{input}{SEPARATOR}"
    answer: str

    @property
    def text(self) -> str:
        return self.prompt + self.answer


@dataclass(frozen=True)
class Task:
    """One synthetic task; its size parameter n (>= 1) is documented in the docstring of its solver."""

    name: str
    prefix: str
    group: str  # "regular" | "dcf" | "cs" | "retrieval" | "positional"
    answer_kind: str  # "single" | "sequence"
    chance: float
    make_input: Callable[[np.random.Generator, int], str]
    solve: Callable[[str], str]
    longest_body: Callable[[int], int]  # max len(input) + len(answer) over all examples of size n
    # largest n the rendering allows (26 keys, four-digit offsets); None when only max_bytes bounds n
    size_limit: int | None = None

    def sample(self, rng: np.random.Generator, length: int) -> Example:
        """One example of size `length`; deterministic given the state of `rng`."""
        if length < 1 or (self.size_limit is not None and length > self.size_limit):
            limit = "" if self.size_limit is None else f" and <= {self.size_limit}"
            raise ValueError(f"task {self.name!r}: length must be >= 1{limit}, got {length}")
        task_input = self.make_input(rng, length)
        return Example(f"{self.prefix}:{task_input}{SEPARATOR}", self.solve(task_input))

    def longest_text(self, length: int) -> int:
        """Largest len(example.text) over all examples of size `length`."""
        return len(self.prefix) + len(":") + len(SEPARATOR) + self.longest_body(length)

    def max_length(self, max_bytes: int) -> int:
        """Largest n such that every example of size n renders to at most `max_bytes` bytes."""
        if self.longest_text(1) > max_bytes:
            raise ValueError(f"task {self.name!r}: even n=1 needs {self.longest_text(1)} bytes > max_bytes={max_bytes}")
        upper = self.size_limit if self.size_limit is not None else math.inf
        fitting, beyond = 1, 2
        while beyond <= upper and self.longest_text(beyond) <= max_bytes:
            fitting, beyond = beyond, 2 * beyond
        beyond = min(beyond, upper + 1)
        while beyond - fitting > 1:
            middle = (fitting + beyond) // 2
            if self.longest_text(middle) <= max_bytes:
                fitting = middle
            else:
                beyond = middle
        return fitting
