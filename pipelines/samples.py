"""Look at the data: print rendered examples of a domain.

    python -m pipelines.samples --domain synthetic --task TASK --n N --seed S [--max-len BYTES]
    python -m pipelines.samples --domain synthetic --list
    python -m pipelines.samples --domain jsb|maestro|hrg|sleep_edf [--split test] [--n N] [--max-tokens T]
    python -m pipelines.samples --domain sleep_edf --plot DIR          also draws each example to DIR/*.png

For the synthetic domain, one JSON object per line: {"task", "length", "prompt", "answer"} where `prompt` is
everything up to and including the separator and `answer` the scored span, exactly as the model sees them.
Examples come from the same generator and seeding as the training stream (`--seed` is the run's seed, sample i
is drawn from default_rng([seed, i])).

For a stored domain, the store is prepared if needed and the first N examples of the split are printed as the
domain renders them (decoded events, bases, stages); trailing arguments are Hydra overrides of the domain config.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from domains.stored import StoredDataModule
from domains.synthetic.registry import TASKS, get_task, sample_example
from pipelines.arguments import whole_number
from pipelines.experiment.config import config_options, datamodule_class, stored_datamodule


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


def stored_samples(
    domain: str, split: str, n: int, max_tokens: int, overrides: list[str], plot: Path | None = None
) -> list[str]:
    dm = stored_datamodule(domain, overrides)
    dm.prepare_data()
    indices = range(min(n, dm.example_count(split)))
    if plot is not None:
        for i in indices:
            dm.plot_example(split, i, plot / f"{domain}_{split}_{i}.png")
    return [dm.render_example(split, i, max_tokens) for i in indices]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", default="synthetic", choices=config_options("domain"))
    parser.add_argument("--task", help="synthetic task name (see --list)")
    parser.add_argument("--n", type=whole_number(1), default=5, help="number of examples")
    parser.add_argument("--seed", type=whole_number(0), default=0)
    parser.add_argument(
        "--max-len", type=whole_number(1), default=256, help="longest example in bytes (prompt + answer)"
    )
    parser.add_argument("--list", action="store_true", help="list the tasks with group, answer kind and chance")
    parser.add_argument("--split", default="test", help="stored domains: train, val or test")
    parser.add_argument(
        "--max-tokens", type=whole_number(1), default=64, help="stored domains: tokens shown per example"
    )
    parser.add_argument("--plot", type=Path, metavar="DIR", help="signal domains (sleep_edf): also write PNGs to DIR")
    parser.add_argument("overrides", nargs="*", help="stored domains: Hydra overrides of the domain config")
    args = parser.parse_args(argv)
    if issubclass(datamodule_class(args.domain), StoredDataModule):
        try:
            blocks = stored_samples(args.domain, args.split, args.n, args.max_tokens, args.overrides, args.plot)
        except (ValueError, FileNotFoundError, RuntimeError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print("\n\n".join(blocks))
        return 0
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
