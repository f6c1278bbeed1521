"""`make demo`: a small but real comparison on the synthetic tasks, on a laptop CPU.

Trains the tiny preset for every encoding of the full roster x 3 seeds x two tasks the tiny model learns
(reverse_string, deterministic context-free, and the needle retrieval probe; the regular-language tasks stay at
chance at this scale), in warm worker processes (pipelines.sweep), then prints the comparison table and the paths
of the figure and of the study's page (results/demo/index.html).

    python -m pipelines.demo [--roster full] [--tasks parity needle ...] [--seeds 0 1 2] [--preset tiny] [--jobs 2]
                             [-- extra Hydra overrides for every run]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from domains.synthetic.registry import get_task
from pipelines.analysis.study import analyse_study
from pipelines.arguments import whole_number
from pipelines.experiment.config import datamodule_class, roster
from pipelines.launch.jobs import plan
from pipelines.launch.local import run_local
from pipelines.report.domain import PER_TASK_FIGURES
from pipelines.report.html import INDEX
from pipelines.report.study import write_study_report

DOMAIN = "synthetic"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--roster", default="full")
    # the tiny preset's two tasks: the full roster on them fits the demo's time
    parser.add_argument("--tasks", nargs="+", default=list(datamodule_class(DOMAIN).preset_tasks["tiny"]))
    parser.add_argument("--seeds", nargs="+", type=whole_number(0), default=[0, 1, 2])
    parser.add_argument("--preset", default="tiny", choices=["tiny", "paper"])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--runs", type=Path, default=Path("runs/demo"))
    parser.add_argument("--out", type=Path, default=Path("results/demo"))
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run, e.g. trainer.max_steps=100")
    args = parser.parse_args(argv)

    for task in args.tasks:
        get_task(task)  # unknown names fail before anything runs
    jobs = plan(DOMAIN, roster(args.roster), args.seeds, args.preset, args.runs, args.tasks, args.overrides)
    encodings = sorted({job.key.encoding for job in jobs})
    print(
        f"demo: {len(args.tasks)} tasks x {len(encodings)} encodings x {len(args.seeds)} seeds = {len(jobs)} runs "
        f"on {args.jobs} worker(s)\n  tasks: {' '.join(args.tasks)}\n  roster {args.roster}: {' '.join(encodings)}",
        flush=True,
    )
    began = time.perf_counter()
    failures = run_local(jobs, workers=args.jobs, isolate=False, live=False)

    # the study of the one domain, as `make compare` writes it: results/demo/synthetic/ and the study's page
    write_study_report(analyse_study(args.runs, [DOMAIN], None), args.out)
    summary = args.out / DOMAIN / "summary.md"
    print()
    print(summary.read_text())
    print(f"figure: {summary.parent / PER_TASK_FIGURES[0]}")
    print(f"page: {args.out / INDEX} (open it in a browser: sortable tables, every run's curves)")
    print(f"demo wall time: {time.perf_counter() - began:.0f} s")
    for job in failures:
        print(f"failed run: {job.label}: {job.error}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
