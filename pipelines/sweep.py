"""Sweeps: a domain's roster x seeds (x tasks for the synthetic domain); `make train DOMAIN=... ROSTER=...`.

    python -m pipelines.sweep --domain jsb [--roster paper] [--seeds 0 1 2] [--preset tiny] [--launcher local]
                              [--jobs N] [--tasks reverse_string needle] [--runs runs]
                              [--with docs/results/<study> ...] [overrides ...]
    python -m pipelines.sweep --domain all ...      every domain with a config, one after the other

Every run is `pipelines.train` with the overrides of its (domain, task, encoding, seed), so its folder is a
function of those and nothing else: a finished run (done.json) is skipped, an interrupted one resumes from its
last checkpoint, and a rerun of the same sweep completes only what is missing. Seeds go outermost (a partial sweep
holds whole seeds), and within a seed the runs expected to take longest start first, by the finished runs of the
same encoding (pipelines.launch.costs.longest_first), so that a seed does not end on one long run.

A seed, encoding or task listed twice is trained once (with a warning). launcher=local: each run in its own process
(a crash or an out-of-memory stays inside its run), `--jobs` at a time (default: one per GPU, each seeing only its
GPU through CUDA_VISIBLE_DEVICES; on a CPU one per core, each with cores / jobs threads), its output in
<run>/train.<time>.<sweep pid>.out (each training process its own). A live table shows queued, running, done and
failed runs with their step and tokens/s; a failed run does not stop the sweep and is listed at the end with its
error (exit status 1). A run another process is training (another sweep: its run lock) is listed as running
elsewhere, not failed.

--with: a run a published study holds is not trained again, and a planned run that would be trained with another
setting than the study holds fixed, or on a prepared store of other raw data (a MAESTRO store of 11 of the 1,276
performances for a study prepared from all of them: pipelines.launch.jobs.check_prepared_data), is refused by name
before anything trains: how a study grows across machines or sessions whose run folders are gone (train the rest
WITH= the study, then `make publish WITH=<study> STUDY=<study>`).

launcher=slurm: the same runs as one SLURM job array per domain through Hydra's submitit launcher
(configs/hydra/launcher/slurm.yaml: partition, GPUs, time, array parallelism, requeue on preemption).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from pipelines.analysis.loading import EvidenceError, LoadedRun, load_runs
from pipelines.arguments import os_error_text, whole_number
from pipelines.experiment.config import config_options, domain_names, encoding_name, roster
from pipelines.launch.costs import longest_first
from pipelines.launch.jobs import ELSEWHERE, Job, check_joinable, check_prepared_data, plan, unpublished
from pipelines.launch.local import run_local, visible_gpus
from pipelines.launch.slurm import run_slurm
from pipelines.runs.layout import discover_runs
from pipelines.runs.metrics import RunFileError
from pipelines.runs.published_format import StudyError
from pipelines.runs.published_join import add_with_option
from pipelines.runs.published_read import read_studies


def once(values: list, option: str) -> list:
    """`values` without repeats, in their order; each repeat warned about by name (a run is trained once)."""
    unique = list(dict.fromkeys(values))
    for value in unique:
        if values.count(value) > 1:
            times = "twice" if values.count(value) == 2 else f"{values.count(value)} times"
            print(f"warning: {option} lists {value} {times}: each run is trained once", file=sys.stderr)
    return unique


def finished_runs(runs_root: Path, domain: str) -> list[LoadedRun]:
    """The domain's runs so far, loaded to order the sweep by their times (none when there are none, or when one
    cannot be read: the plan's order then, and the sweep's runs name what is wrong when they are compared)."""
    try:
        return load_runs(discover_runs(runs_root, domain))
    except (FileNotFoundError, RunFileError, EvidenceError):
        return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", required=True, help=f"one of {', '.join(domain_names())}, or all")
    parser.add_argument("--roster", default="paper", choices=config_options("roster"))
    parser.add_argument(
        "--encodings", nargs="+", type=encoding_name, help="pe configs to run instead of a roster, e.g. nope rope10k"
    )
    parser.add_argument("--seeds", nargs="+", type=whole_number(0), default=[0, 1, 2])
    parser.add_argument("--preset", default="tiny", choices=config_options("preset"))
    parser.add_argument(
        "--tasks", nargs="+", help="domains with tasks: the tasks (default: the demo's at tiny, all at paper)"
    )
    parser.add_argument("--launcher", default="local", choices=["local", "slurm"])
    parser.add_argument(
        "--jobs", type=int, default=None, help="local: runs at once (default: one per GPU; on a CPU one per core)"
    )
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    add_with_option(parser, "published studies: the runs they hold are not trained again")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run (slurm: also hydra.launcher.*)")
    args = parser.parse_args(argv)
    domains = domain_names() if args.domain == "all" else [args.domain]
    unknown = [d for d in domains if d not in domain_names()]
    if unknown:
        parser.error(f"unknown domain {unknown[0]!r}; valid: {', '.join(domain_names())}, all")

    args.seeds = once(args.seeds, "--seeds")
    args.encodings = once(args.encodings, "--encodings") if args.encodings else None
    args.tasks = once(args.tasks, "--tasks") if args.tasks else None
    launcher_overrides = [o for o in args.overrides if o.startswith("hydra.launcher.")]
    run_overrides = [o for o in args.overrides if not o.startswith("hydra.launcher.")]
    try:
        studies = read_studies(args.with_studies)
    except StudyError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        failed, elsewhere, began = sweep_domains(args, domains, studies, launcher_overrides, run_overrides)
    except OSError as error:  # a full disk, a read-only folder, a runs folder that is a file: the runs so far stay
        print(f"error: {os_error_text(error)}; the finished runs are kept, a rerun completes the rest", file=sys.stderr)
        return 1
    except StudyError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if failed is None:  # the slurm launcher could not submit
        return 1
    print(f"sweep wall time: {time.time() - began:.0f} s")
    for job in elsewhere:
        print(f"running elsewhere, not trained by this sweep: {job.label}: {job.error}", file=sys.stderr)
    for job in failed:
        print(f"failed run: {job.label}: {job.error}", file=sys.stderr)
    return 1 if failed else 0


def sweep_domains(
    args: argparse.Namespace, domains: list[str], studies: list, launcher_overrides: list[str], run_overrides: list[str]
) -> tuple[list[Job] | None, list[Job], float]:
    """Plan and run each domain's jobs: (the failed ones, None where slurm could not submit; those running elsewhere;
    when the sweep began). StudyError before anything trains where a planned run could not join a study."""
    failed: list[Job] = []
    elsewhere: list[Job] = []
    began = time.time()
    for domain in domains:
        encodings = args.encodings or roster(args.roster)
        jobs = plan(domain, encodings, args.seeds, args.preset, args.runs, args.tasks, run_overrides)
        jobs, published = unpublished(jobs, studies)
        check_joinable(jobs, studies)
        check_prepared_data(jobs, studies)
        print(
            f"{domain}: {len(jobs)} runs ({' '.join(encodings)} x seeds {' '.join(map(str, args.seeds))})"
            + (f"; {len(published)} published already, not trained again" if published else ""),
            flush=True,
        )
        if args.launcher == "slurm":
            if run_slurm(jobs, launcher_overrides):
                return None, elsewhere, began
            continue
        jobs = longest_first(jobs, finished_runs(args.runs, domain), block=lambda job: args.seeds.index(job.key.seed))
        failed += run_local(jobs, workers=args.jobs or len(visible_gpus()) or os.cpu_count() or 1)
        elsewhere += [job for job in jobs if job.status == ELSEWHERE]
    return failed, elsewhere, began


if __name__ == "__main__":
    sys.exit(main())
