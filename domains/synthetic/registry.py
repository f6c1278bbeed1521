"""Every synthetic task by name, in the order of SPEC section 2, and how an example of a random size is drawn.

The 15 Chomsky tasks follow google-deepmind/neural_networks_chomsky_hierarchy (Deletang et al. 2023) with the
fixes of the SPEC; the retrieval and positional probes follow tables 10 and 11 of paper 000 (appendix E). Where
the paper's example, its chance column and the Deletang semantics disagree, the task's solver states the decision
taken (order of authority: SPEC, then Deletang, then the table).
"""

from __future__ import annotations

import numpy as np

from domains.synthetic.context_free import CONTEXT_FREE_TASKS
from domains.synthetic.context_sensitive import CONTEXT_SENSITIVE_TASKS
from domains.synthetic.probes import POSITIONAL_PROBES, RETRIEVAL_PROBES
from domains.synthetic.regular import REGULAR_TASKS
from domains.synthetic.task import Example, Task

TASKS: dict[str, Task] = {
    task.name: task
    for task in (*REGULAR_TASKS, *CONTEXT_FREE_TASKS, *CONTEXT_SENSITIVE_TASKS, *RETRIEVAL_PROBES, *POSITIONAL_PROBES)
}


def get_task(name: str) -> Task:
    """The task called `name`; ValueError listing the valid names otherwise."""
    if name not in TASKS:
        raise ValueError(f"unknown synthetic task {name!r}; valid names: {', '.join(TASKS)}")
    return TASKS[name]


def sample_example(
    task: Task,
    rng: np.random.Generator,
    max_bytes: int,
    min_length: int = 1,
    max_length: int | None = None,
) -> Example:
    """An example whose size n is uniform in [min_length, max_length or task.max_length(max_bytes)]."""
    longest = task.max_length(max_bytes) if max_length is None else max_length
    if min_length < 1 or min_length > longest:
        raise ValueError(f"task {task.name!r}: empty length range [{min_length}, {longest}]")
    return task.sample(rng, int(rng.integers(min_length, longest + 1)))
