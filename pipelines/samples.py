"""Look at the data: print rendered examples of a domain.

    python -m pipelines.samples --domain synthetic --task TASK --n N --seed S [--max-len BYTES]
    python -m pipelines.samples --domain synthetic --list

For the synthetic domain, one JSON object per line: {"task", "length", "prompt", "answer"} where `prompt` is
everything up to and including the separator and `answer` the scored span, exactly as the model sees them.
Examples come from the same generator and seeding as the training stream (`--seed` is the run's seed, sample i
is drawn from default_rng([seed, i])).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from domains.synthetic_tasks import TASKS, get_task, sample_example


def synthetic_samples(task_name: str, n: int, seed: int, max_len: int) -> list[dict]:
    task = get_task(task_name)
    rows = []
    for i in range(n):
        example = sample_example(task, np.random.default_rng([seed, i]), max_bytes=max_len)
        rows.append(
            {
                "task": task.name,
                "length": len(example.text),
                "prompt": example.prompt,
                "answer": example.answer,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", default="synthetic", choices=["synthetic"])
    parser.add_argument("--task", help="synthetic task name (see --list)")
    parser.add_argument("--n", type=int, default=5, help="number of examples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-len", type=int, default=256, help="longest example in bytes (prompt + answer)")
    parser.add_argument("--list", action="store_true", help="list the tasks with group, answer kind and chance")
    args = parser.parse_args(argv)
    if args.list:
        for task in TASKS.values():
            print(f"{task.name:28s} {task.prefix:3s} {task.group:10s} {task.answer_kind:8s} chance {task.chance:.3f}")
        return 0
    if not args.task:
        parser.error("--task is required (see --list)")
    try:
        rows = synthetic_samples(args.task, args.n, args.seed, args.max_len)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
