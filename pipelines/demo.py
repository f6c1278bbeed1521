"""`make demo`: a small but real comparison on the synthetic tasks, on a laptop CPU.

Trains the tiny preset for every encoding of the roster x seeds x four tasks the tiny model learns
(deterministic context-free, context-sensitive, a retrieval and a positional probe; the regular-language tasks
stay at chance at this scale), runs in parallel worker processes, then prints the comparison table and the
path of the figure.

    python -m pipelines.demo [--roster full] [--tasks parity needle ...] [--seeds 0 1 2] [--preset tiny] [--jobs 2]
                             [-- extra Hydra overrides for every run]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

DEFAULT_TASKS = ["reverse_string", "bucket_sort", "needle", "fixed_offset"]


def _train_one(overrides: list[str]) -> tuple[list[str], str, float]:
    """Worker: one run in this process (one torch thread: the workers share the machine's cores)."""
    import logging
    import warnings

    import torch

    torch.set_num_threads(1)
    from pipelines.config import compose_config
    from pipelines.train import run

    # after importing lightning, which sets its own level: the demo prints one line per run instead
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module="lightning")

    began = time.perf_counter()
    folder = run(compose_config(overrides))
    return overrides, str(folder), time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--roster", default="full")
    parser.add_argument("--tasks", nargs="+", default=DEFAULT_TASKS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--preset", default="tiny", choices=["tiny", "paper"])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--runs", type=Path, default=Path("runs/demo"))
    parser.add_argument("--out", type=Path, default=Path("results/demo"))
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run, e.g. trainer.max_steps=100")
    args = parser.parse_args(argv)

    from domains.synthetic_tasks import get_task
    from pipelines.config import roster

    encodings = roster(args.roster)
    for task in args.tasks:
        get_task(task)  # unknown names fail before anything runs
    jobs = [
        [
            f"domain.args.task={task}",
            f"pe={pe}",
            f"seed={seed}",
            f"preset={args.preset}",
            f"runs_root={args.runs}",
            *args.overrides,
        ]
        for seed in args.seeds
        for task in args.tasks
        for pe in encodings
    ]
    print(
        f"demo: {len(args.tasks)} tasks x {len(encodings)} encodings x {len(args.seeds)} seeds = {len(jobs)} runs "
        f"on {args.jobs} worker(s)\n  tasks: {' '.join(args.tasks)}\n  roster {args.roster}: {' '.join(encodings)}"
    )
    os.environ.setdefault("POSBENCH_PROGRESS", "0")
    began = time.perf_counter()
    failures = []
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(_train_one, job): job for job in jobs}
        for done, future in enumerate(as_completed(futures), start=1):
            job = futures[future]
            label = " ".join(o.split("=", 1)[1] for o in job[:3])
            try:
                _, folder, seconds = future.result()
            except Exception as err:  # a failed run is reported, the others go on
                failures.append((label, err))
                print(f"[{done:3d}/{len(jobs)}] {label}: FAILED {type(err).__name__}: {err}", flush=True)
                continue
            test = json.loads((Path(folder) / "metrics" / "summary.json").read_text())["splits"]["test"]
            print(
                f"[{done:3d}/{len(jobs)}] {label}: test accuracy {test['accuracy']:.3f} ({seconds:.0f} s)",
                flush=True,
            )

    from pipelines.compare import compare

    summary = compare(args.runs, "synthetic", args.out / "synthetic")
    print()
    print(summary.read_text())
    print(f"figure: {summary.parent / 'accuracy.png'}")
    print(f"demo wall time: {time.perf_counter() - began:.0f} s")
    for label, err in failures:
        print(f"failed run: {label}: {err}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
