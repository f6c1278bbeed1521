"""SyntheticDataModule: Chomsky-hierarchy tasks and probes (paper 000, appendix E), generated from a seed.

Each example is the ASCII string `PREFIX:input>answer`, one token per byte (vocabulary 128; byte 0 pads and is
never produced by a task). Only the answer span is scored. Training examples of at most `context` bytes are
drawn from the seeded stream; evaluation uses fixed sets generated from a seed that does not depend on the run's
seed, so every encoding and seed is scored on the same examples:

  val      task sizes 1..n(context)                    (monitoring only; its own examples)
  test     task sizes 1..n(context)                    (in distribution)
  test_2x  task sizes n(context)+1..n(2 context)       (up to twice the training length)
  test_8x  task sizes n(4 context)+1..n(8 context)     (between four and eight times)

where n(B) is the largest task size whose every rendering fits in B bytes. A split whose size range is empty
(a task bounded by its alphabet) is skipped with that reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from domains.base import (
    EmptySplitError,
    EvalWindows,
    Metric,
    SequenceDataModule,
    Window,
    check_minimum,
    windows_from_examples,
)
from domains.synthetic.registry import TASKS, get_task, sample_example
from domains.synthetic.task import Example, Task

PAD_ID = 0
VOCAB_SIZE = 128
EVAL_ENTROPY = 0x5EED_E7A1  # evaluation sets come from SeedSequence([EVAL_ENTROPY, split, index])
SIZE_FACTORS = {"val": (0, 1), "test": (0, 1), "test_2x": (1, 2), "test_8x": (4, 8)}


def encode(example: Example, length: int) -> Window:
    """Bytes of the example padded to `length`, with the answer span marked as scored."""
    data = example.text.encode("ascii")
    if len(data) > length:
        raise ValueError(f"example of {len(data)} bytes does not fit a window of {length}: {example.text!r}")
    tokens = np.full(length, PAD_ID, dtype=np.int64)
    tokens[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    scored = np.zeros(length, dtype=bool)
    scored[len(example.prompt) : len(data)] = True
    return tokens, scored


class SyntheticDataModule(SequenceDataModule):
    domain = "synthetic"
    eval_split_names = ("test", "test_2x", "test_8x")
    metric = Metric(
        "chance-normalised test accuracy, mean over tasks",
        "norm. acc.",
        "chance = 0, perfect = 1",
        higher_is_better=True,
        digits=3,
        equivalence=0.01,  # SPEC 3: +-0.01 of chance-normalised accuracy
    )
    tasks = tuple(TASKS)  # one model per task
    # tiny (`make demo`): in distribution, reverse_string separates the encodings (RoPE-like ones learn it at this
    # scale, NoPE does not); past the training length, needle does. cpu (the synthetic cpu study): one task of
    # each level of the Chomsky hierarchy and of each probe kind, chosen by a pilot of rope10k and nope
    # (docs/presets.md): modular_arithmetic (regular; every regular task stays near chance at this scale, and this
    # is the one where rope10k was above it), reverse_string (deterministic context-free), duplicate_string
    # (context-sensitive), needle (retrieval: the encodings part past the training length) and fixed_offset
    # (positional: rope10k 0.53, nope 0.15 chance-normalised in the pilot).
    preset_tasks = {
        "tiny": ("reverse_string", "needle"),
        "cpu": ("modular_arithmetic", "reverse_string", "duplicate_string", "needle", "fixed_offset"),
    }

    def __init__(self, *, task: str, eval_examples: int = 500, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task: Task = get_task(task)
        self.task.max_length(self.context)  # a context too short for the task fails here, naming both
        check_minimum(self.domain, 1, eval_examples=eval_examples)
        self.eval_examples = eval_examples

    @property
    def vocab_size(self) -> int:
        return VOCAB_SIZE

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "task": self.task.name, "chance": self.task.chance}

    def draw_train_window(self, rng: np.random.Generator) -> Window:
        return encode(sample_example(self.task, rng, max_bytes=self.context), self.context)

    def stream_key(self) -> tuple:
        """A window is a function of the task, the context and its generator (draw_train_window)."""
        return (self.domain, self.task.name, self.context)

    def size_range(self, split: str) -> tuple[int, int]:
        low, high = SIZE_FACTORS[split]
        first = self.task.max_length(low * self.context) + 1 if low else 1
        return first, self.task.max_length(high * self.context)

    def examples(self, split: str) -> list[Example]:
        first, last = self.size_range(split)
        if first > last:
            raise EmptySplitError(
                f"task {self.task.name} has no size between {first} and {last} for {split} "
                f"(context {self.context} bytes)"
            )
        split_id = list(SIZE_FACTORS).index(split)
        return [
            sample_example(
                self.task,
                np.random.default_rng([EVAL_ENTROPY, split_id, i]),
                max_bytes=SIZE_FACTORS[split][1] * self.context,
                min_length=first,
                max_length=last,
            )
            for i in range(self.eval_examples)
        ]

    def build_eval_windows(self, split: str) -> EvalWindows:
        length = SIZE_FACTORS[split][1] * self.context
        encoded = [encode(example, length) for example in self.examples(split)]
        tokens = [e[0] for e in encoded]
        return windows_from_examples(tokens, length, length, PAD_ID, scored_masks=[e[1] for e in encoded])
