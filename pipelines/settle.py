"""Buy the seeds a verdict needs: `make settle DOMAIN=jsb`, under a group-sequential design (SPEC 3).

    python -m pipelines.settle --domain jsb [--roster full | --encodings a b ...] [--ref NAME] [--max-seeds 10]
                               [--looks 4] [--runs runs] [--with docs/results/<study> ...] [--jobs N]
                               [--seeds 10 11 12] [--plan | --record] [overrides ...]

It reads the runs the domain's folder already holds (the study's first seeds, every encoding), fixes the design
before its first look (pipelines.analysis.design: looks at n_1 < ... < n_K seeds, alpha spent alpha / K per look,
the reference: --ref, else the SPEC's default rope10k, never chosen from the scores) and writes it to
<runs>/<domain>/settle.json. Then, look by look, it trains the next seeds of the encodings whose verdict against the
reference is inconclusive with |Δ| outside the region of practical equivalence (and of the reference) through the
normal sweep (the same run folders, resumable), re-analyses, and stops when every pair is decided, equivalent or
stopped, or the design's last look is reached. The looks are recorded in
settle.json; `make compare` reads the design and reports the same verdicts.

--with grows a published study without its run folders: its runs join the local ones as in `make compare WITH=...`
(a local run that differs in what the study holds fixed is refused by name, and a planned run that would differ is
refused before anything trains), its design is read from the study (settle/<domain>.json) unless the runs folder
has one, and the runs the looks need are trained into the runs folder (with its settle.json); `make publish
WITH=<study> STUDY=<study>` then publishes the grown study.

--encodings (or --roster) settles those encodings against the reference, whose runs are read whether listed or
not; without --ref, where the default reference has no finished run, the command is refused by name rather than a
listed encoding becoming the reference. A domain with one encoding has nothing to compare and is refused. The
command that fixed a design, run again, continues it (its looks compared as the design it would fix now from the
same first seeds, so a design whose looks collapsed, --max-seeds 3 over 3 seeds, continues too); another maximum,
number of looks or reference is refused by name. A look whose runs another process is training (their run locks)
waits WAIT_SECONDS before it looks again.

--seeds fixes a design before any of its runs exist (a confirmatory study on seeds no earlier run used): its first
look on the seeds given, its family the encodings chosen (--encodings or --roster), the reference --ref or the
default; settle.json is written before anything trains, then the first look is trained and the design continued.

--plan prints the current verdicts, the design and the runs the next look needs with their estimated cost (the
median over the encoding's finished runs of their CPU seconds per thread, their time on cores of their own however
loaded the machine was, from its runs on a CPU of this one's kind where it has them, else from other kinds' runs
scaled by this kind's time over theirs where some encoding ran on both, and says how many runs were priced each
way; for runs recorded before CPU seconds, their wall time from the start of the process that
finished a run, its log's name, to its done.json, start-up included: pipelines.launch.costs.MEASURES), and trains
nothing (nor writes the design).

--record fixes the design (when the runs folder has none), records this look and the runs the next one needs in
settle.json, and trains nothing: a study published at this look (`make publish`) carries its design, and `make settle
WITH=<study>` trains the next look later, on another machine or in another session, under that very design.

--through-look k trains no look past look k: the command stops once look k is recorded (the design unchanged; the
same command without it continues), so that studies sharing a machine take it look by look in the order of their
expected decided pairs per core-hour.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import math
import os
import sys
import time
from pathlib import Path

from domains.atomic import write_json
from pipelines.analysis.design import DEFAULT_LOOKS, DEFAULT_REF, FUTILITY_RULES, SETTLE_FILE, Design, read_design
from pipelines.analysis.domain import analyse_domain
from pipelines.analysis.evidence import preset_of, require_finished
from pipelines.analysis.loading import EvidenceError, LoadedRun, load_runs
from pipelines.analysis.results import DomainResult
from pipelines.analysis.verdict import OPEN, PairVerdict, level_text
from pipelines.arguments import whole_number
from pipelines.experiment.config import config_options, domain_names, encoding_name, roster
from pipelines.launch.costs import MEASURES, estimated_seconds, fmt_seconds, kind_name, longest_first, this_cpu_kind
from pipelines.launch.designing import check_unchanged, design_in_advance, initial_design
from pipelines.launch.jobs import ELSEWHERE, Job, check_joinable, check_prepared_data, plan
from pipelines.launch.local import run_local, visible_gpus
from pipelines.runs.layout import DERIVED_MARK, DONE, discover_runs
from pipelines.runs.metrics import RunFileError
from pipelines.runs.published_format import SETTLE_DIR, PublishedStudy, StudyError
from pipelines.runs.published_join import add_with_option, joined_runs, joined_scratch
from pipelines.runs.published_read import read_studies

DEFAULT_MAX_SEEDS = 10
WAIT_SECONDS = 30  # between looks while another process trains the runs a look needs


def chosen_runs(runs: list[LoadedRun], encodings: list[str] | None, ref: str) -> list[LoadedRun]:
    """The domain's runs of the chosen encodings (and their YaRN siblings) and of the reference they are settled
    against; all of them without a choice."""
    if not encodings:
        return runs
    return [run for run in runs if run.encoding.split(DERIVED_MARK)[0] in encodings or run.encoding == ref]


def reference(
    args: argparse.Namespace, design: Design | None, runs: list[LoadedRun], selection: list[str] | None
) -> str:
    """The reference the chosen encodings are settled against: the design's, else --ref, else the SPEC's default;
    EvidenceError naming the choice when a selection (--encodings, --roster) is to be settled against a default
    reference with no finished run (the selection's own encodings are never the reference unless named)."""
    ref = design.ref if design is not None else args.ref or DEFAULT_REF
    finished = {run.encoding for run in runs if run.finished}
    if selection and design is None and args.ref is None and ref not in finished:
        chosen = f"--encodings {' '.join(args.encodings)}" if args.encodings else f"--roster {args.roster}"
        raise EvidenceError(
            f"{args.domain}: {chosen} settles those encodings against the reference, and the default reference "
            f"{ref} has no finished run in {args.runs / args.domain}: name the reference with --ref"
        )
    return ref


def check_compared(domain: str, runs: list[LoadedRun]) -> None:
    """EvidenceError when the runs to settle hold one encoding: nothing to compare it with."""
    finished = sorted({run.encoding for run in runs if run.finished})
    if len(finished) < 2:
        raise EvidenceError(
            f"{domain}: one encoding ({', '.join(finished) or 'none'}) has finished runs: nothing to compare; settle "
            "compares encodings with a reference (train another: make train ENCODINGS=...)"
        )


def train(args: argparse.Namespace, jobs: list[Job]) -> bool:
    """Train a look's runs (--jobs at once, default one per GPU, else per core); False, naming them, when any
    failed."""
    workers = args.jobs or len(visible_gpus()) or os.cpu_count() or 1
    failed = run_local(jobs, workers=workers, threads=args.threads)
    for job in failed:
        print(f"failed run: {job.label}: {job.error}", file=sys.stderr)
    return not failed


def fix_in_advance(args: argparse.Namespace, selection: list[str] | None, overrides: list[str]) -> int:
    """`--seeds`: write the design into <runs>/<domain>/settle.json before any of its runs exist, with the first
    look's runs as the next ones; then (unless --record) train them and continue the design as make settle does."""
    design = design_in_advance(args, selection)
    if args.plan:
        return first_look(args, design, first_look_jobs(args, design, overrides), overrides)
    next_runs = look_one(design)
    write_json(
        args.runs / args.domain / SETTLE_FILE,
        {"design": design.to_json(), "looks": [], "next_runs": [f"{name}/seed{seed}" for name, seed in next_runs]},
    )
    print(
        f"{args.domain}: design fixed before any of its runs: looks at {', '.join(map(str, design.looks))} seeds "
        f"(seeds {', '.join(map(str, design.seeds))}), reference {design.ref}, {len(design.encodings)} baselines; "
        f"the first look needs {len(next_runs)} runs",
        flush=True,
    )
    return 0 if args.record else first_look(args, design, first_look_jobs(args, design, overrides), overrides)


def look_one(design: Design) -> list[tuple[str, int]]:
    """The runs of the design's first look, whole seeds first (the reference first in each)."""
    return [(name, seed) for seed in design.look_seeds(0) for name in (design.ref, *design.encodings)]


def first_look(args: argparse.Namespace, design: Design, jobs: list[Job], overrides: list[str]) -> int:
    """The first look of a design recorded before any of its runs (--seeds ... --record), until every one of its runs
    has finished: --plan lists the runs still to train, --record has nothing to add, else they are trained (waiting
    for those another process trains) and the design continued as make settle does. Without this, a runs folder that
    holds only the recorded design, or part of its first look, had no look to read and the design could not go on.
    `jobs`: first_look_jobs."""
    todo = unfinished(jobs)
    if args.plan:
        seeds = design.look_seeds(0)
        print(
            f"plan: the design's first look needs {len(todo)} runs (seeds {', '.join(map(str, seeds))})"
            + (f"; {len(jobs) - len(todo)} of its {len(jobs)} have finished" if len(todo) < len(jobs) else "")
        )
        finished = load_runs(discover_runs(args.runs, args.domain)) if len(todo) < len(jobs) else []
        print_priced(todo, finished)
        return 0
    if args.record:
        print(f"{args.domain}: the design is recorded and its first look is not finished: nothing to record")
        return 0
    while todo:
        if not train(args, todo):
            return 1
        elsewhere = [job for job in todo if job.status == ELSEWHERE]
        todo = unfinished(jobs)
        if todo and not elsewhere:
            print(f"{len(todo)} runs of the first look did not finish: {', '.join(job.label for job in todo)}")
            return 1
        if todo:
            wait_for(elsewhere)
    args.seeds = None
    return settle(args, overrides)


def first_look_jobs(args: argparse.Namespace, design: Design, overrides: list[str]) -> list[Job]:
    """The sweep jobs of the design's first look, finished or not."""
    preset = args.preset or "cpu"
    return [
        job
        for name, seed in look_one(design)
        for job in plan(args.domain, [name], [seed], preset, args.runs, None, overrides)
    ]


def unfinished(jobs: list[Job]) -> list[Job]:
    """The jobs whose run has not finished (no done.json in its folder)."""
    return [job for job in jobs if not job.folder.joinpath(DONE).exists()]


def wait_for(elsewhere: list[Job]) -> None:
    """Another settle (or sweep) trains these runs: wait, then look again once it may have finished some."""
    print(
        f"waiting {WAIT_SECONDS} s for {len(elsewhere)} runs another process is training: "
        + ", ".join(f"{job.label} ({job.error})" for job in elsewhere),
        flush=True,
    )
    time.sleep(WAIT_SECONDS)


def verdict_lines(result: DomainResult) -> list[str]:
    """The current verdicts against the reference, one line each."""
    family = result.verdicts.family if result.verdicts else None
    if family is None:
        return [f"  {result.no_tests_reason}"]
    digits = result.metric.digits
    return [verdict_line(name, pair, family.ref, digits) for name, pair in result.verdicts.verdicts().items()]


def verdict_line(name: str, pair: PairVerdict, ref: str, digits: int) -> str:
    """One pair's verdict against the reference; a pair with no verdict yet (no test, or an encoding below the
    design's first look) says so, with its Δ and, where it has one, its 95% interval."""
    seeds = f"{len(pair.seeds_a)} seed{'s' * (len(pair.seeds_a) != 1)}"
    scope = f" [{pair.scope}]" if pair.scope else ""
    if pair.verdict == OPEN:
        interval = (
            f" [{pair.ci_lo:+.{digits}f}, {pair.ci_hi:+.{digits}f}] (95%)"
            if math.isfinite(pair.ci_lo)
            else " (no interval: one seed)"
        )
        return f"  {name:>14} vs {ref}: Δ {pair.delta:+.{digits}f}{interval} over {seeds}: no verdict yet{scope}"
    needed = f", seeds to detect ±{pair.region:g}: {pair.seeds_needed}" if pair.seeds_needed else ""
    if pair.verdict == "inconclusive" and math.isfinite(pair.predictive_power):
        power = pair.predictive_power
        needed += f", P(shown different at the next look) {'below 0.01' if power < 0.005 else f'{power:.2f}'}"
    level, lo, hi = pair.decision_interval()
    return (
        f"  {name:>14} vs {ref}: Δ {pair.delta:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}] "
        f"({level_text(level)}) over {seeds}, p (Holm) {pair.p_holm:.3g}, TOST p {pair.p_tost:.3g} at "
        f"alpha {pair.alpha:.4g}: {pair.verdict} (look {pair.look}){needed}{scope}"
    )


def next_jobs(domain: str, result: DomainResult, preset: str, runs_root: Path, overrides: list[str]) -> list[Job]:
    """The sweep jobs of the runs the design's next look needs (every task of a domain with tasks)."""
    tasks = sorted(result.tasks.chance) if result.tasks is not None else None
    jobs = []
    for encoding, seed in result.verdicts.next_runs:
        jobs += plan(domain, [encoding], [seed], preset, runs_root, tasks, overrides)
    return unfinished(jobs)


def record(domain_folder: Path, result: DomainResult) -> None:
    """settle.json: the design and every look so far, the joined family's too (recomputed from the runs at each
    look)."""
    write_json(
        domain_folder / SETTLE_FILE,
        {"design": result.verdicts.family.design.to_json(), **result.verdicts.looks_record()},
    )


def settle(args: argparse.Namespace, overrides: list[str]) -> int:
    selection = args.encodings or (roster(args.roster) if args.roster else None)
    recorded = read_design(args.runs / args.domain)
    if args.seeds:
        if recorded is None:
            return fix_in_advance(args, selection, overrides)
        if tuple(recorded.look_seeds(0)) != tuple(args.seeds):
            raise EvidenceError(
                f"{args.runs / args.domain / SETTLE_FILE}: the design's first look is seeds "
                f"{', '.join(map(str, recorded.look_seeds(0)))}, not --seeds {' '.join(map(str, args.seeds))}"
            )
    studies = read_studies(args.with_studies)  # read once: they do not change
    if recorded is not None and not studies:
        jobs = first_look_jobs(args, recorded, overrides)
        if unfinished(jobs):
            return first_look(args, recorded, jobs, overrides)
    with joined_scratch("posbench-settle-") as scratch:
        return settle_looks(args, studies, overrides, scratch)


def evidence_runs(
    args: argparse.Namespace, studies: list[PublishedStudy], scratch: Path, look: int
) -> tuple[list[LoadedRun], Path]:
    """The domain's runs, loaded (pipelines.analysis.loading), and the folder its design is read from: the runs
    folder's own, or with --with the published studies' runs joined to the local ones (laid out afresh in `scratch`
    at each look; a local run that could not join a study is refused by name, pipelines.runs.published_join.join)."""
    if not studies:
        return load_runs(discover_runs(args.runs, args.domain)), args.runs / args.domain
    root, notes = joined_runs(args.runs, studies, scratch / f"look{look}", [args.domain])
    for note in notes:
        print(note)
    if not (root / args.domain).is_dir():
        studies = ", ".join(map(str, args.with_studies))
        raise EvidenceError(f"{args.domain}: neither {args.runs} nor {studies} hold runs of it")
    return load_runs(discover_runs(root, args.domain)), root / args.domain


def design_source(args: argparse.Namespace) -> Path:
    """Where the domain's design is read from: the runs folder's settle.json, else a joined study's record."""
    mine = args.runs / args.domain / SETTLE_FILE
    published = [folder / SETTLE_DIR / f"{args.domain}.json" for folder in args.with_studies]
    if mine.is_file():
        return mine
    return next((path for path in published if path.is_file()), mine)


def settle_looks(args: argparse.Namespace, studies: list[PublishedStudy], overrides: list[str], scratch: Path) -> int:
    domain, runs_root = args.domain, args.runs
    domain_folder = runs_root / domain
    selection = args.encodings or (roster(args.roster) if args.roster else None)
    runs, design_folder = evidence_runs(args, studies, scratch, 0)
    require_finished(runs, design_folder.parent)
    design = read_design(design_folder)
    ref = reference(args, design, runs, selection)
    chosen = chosen_runs(runs, selection, ref)
    check_compared(domain, chosen)
    preset = args.preset or preset_of(chosen)
    source = design_source(args)
    if design is None:
        design = initial_design(
            domain, chosen, args.ref, args.max_seeds, args.looks, selection, args.futility or "interval"
        )
        fixed_now = True
    else:
        fixed_now = False
        check_unchanged(args, design, source)
    print(
        f"{domain}: design {'fixed now' if fixed_now else f'from {source}'}: looks at "
        f"{', '.join(map(str, design.looks))} seeds (seeds {', '.join(map(str, design.seeds))}), alpha "
        f"{design.alpha:g} spent {design.level:.4g} per look, reference {design.ref}",
        flush=True,
    )
    for look in itertools.count(1):
        result = analyse_domain(domain, chosen_runs(runs, selection, design.ref), None, design)
        family = result.verdicts.family
        if family.looks:
            print(f"look {len(family.looks)} of {len(design.looks)}:", flush=True)
            print("\n".join(verdict_lines(result)), flush=True)
        else:  # a published slice of the first look: nothing to test yet
            seeds = design.look_seeds(0)
            print(f"below the design's first look (seeds {', '.join(map(str, seeds))}): no verdict yet", flush=True)
        jobs = next_jobs(domain, result, preset, runs_root, overrides)
        check_joinable(jobs, studies)
        if args.plan:
            return print_plan(result, jobs, runs)
        check_prepared_data(jobs, studies)
        record(domain_folder, result)
        if args.record:
            print(
                f"recorded look {len(family.looks)} in {domain_folder / SETTLE_FILE}; the next look needs "
                f"{len(jobs)} runs (trained by make settle without --record)"
            )
            return 0
        if not result.verdicts.next_runs:
            open_pairs = [name for name, pair in result.verdicts.verdicts().items() if pair.verdict == "inconclusive"]
            print(
                f"{domain}: settled at {len(family.looks)} looks"
                if not open_pairs
                else f"{domain}: the design's last look is reached; still inconclusive: {', '.join(open_pairs)}"
            )
            return 0
        if args.through_look is not None and len(family.looks) >= args.through_look:
            print(
                f"{domain}: look {len(family.looks)} recorded, as far as --through-look {args.through_look} goes; the "
                f"next look needs {len(jobs)} runs (the same command without --through-look trains them)"
            )
            return 0
        print(f"training {len(jobs)} runs for look {len(family.looks) + 1}", flush=True)
        if not train(args, longest_first(jobs, runs)):
            return 1
        elsewhere = [job for job in jobs if job.status == ELSEWHERE]
        if elsewhere:
            wait_for(elsewhere)
        runs = evidence_runs(args, studies, scratch, look)[0]  # the look's new runs beside the others


def print_plan(result: DomainResult, jobs: list[Job], runs: list[LoadedRun]) -> int:
    if not jobs:
        print("plan: nothing to train" + ("" if result.verdicts.next_runs else ": every pair is decided or capped"))
        return 0
    family = result.verdicts.family
    print(f"plan: the {'next' if family and family.looks else 'first'} look needs {len(jobs)} runs:")
    seconds = print_priced(jobs, runs)
    print_expected(result, seconds)
    return 0


def print_expected(result: DomainResult, seconds: float) -> None:
    """What the next look should buy: the open pairs' predictive powers summed (the pairs it is expected to show
    different, a planning figure: verdict.predictive_power), and that per core-hour of the priced runs, the figure by
    which studies sharing a machine are ordered. Stops for futility are not counted."""
    powers = [
        pair.predictive_power
        for pair in result.verdicts.verdicts().values()
        if pair.verdict == "inconclusive" and math.isfinite(pair.predictive_power)
    ]
    if not powers:
        return
    expected = sum(powers)
    rate = f", {expected / (seconds / 3600):.2f} per core-hour of its run time" if seconds > 0 else ""
    print(
        f"plan: the next look is expected to show {expected:.2f} of its {len(powers)} open pairs different{rate} "
        "(their predictive powers summed; planning, not evidence)"
    )


def print_priced(jobs: list[Job], runs: list[LoadedRun]) -> float:
    """Each run to train with the time it should take, and the total (returned, in seconds of one core), priced from
    the finished runs (their CPU seconds, on this CPU's kind where they have them: pipelines.launch.costs)."""
    total, used, kind, on_kind, scales = 0.0, collections.Counter(), this_cpu_kind(), 0, collections.Counter()
    for job in jobs:
        seconds, measure, same_kind, scale = estimated_seconds(runs, job.key.encoding, kind)
        total += seconds or 0.0
        on_kind += same_kind
        if scale is not None:
            scales[scale] += 1
        if measure is not None:
            used[measure] += 1
        start_up = "" if measure is None or measure.with_start_up else " and its start-up"
        print(f"  {job.label}  (about {fmt_seconds(seconds)}{start_up})")
    by = [(measure, count) for measure in MEASURES if (count := used[measure])]  # in MEASURES' order
    how = "; ".join(
        f"{f'{count} runs by ' if len(by) > 1 else ''}the finished runs' median {measure.says}" for measure, count in by
    )
    print(f"plan: about {fmt_seconds(total)} of run time in all ({how})")
    elsewhere = sum(1 for _ in used.elements()) - on_kind
    print(f"plan: priced from runs on this CPU's kind, {kind_name(kind)}, for {on_kind} of the {len(jobs)} runs"
          + (f"; {elsewhere} from runs on other or unrecorded CPU kinds" if elsewhere else ""))  # fmt: skip
    for scale, count in scales.items():
        print(
            f"plan: {count} of those scaled by x{scale.factor:.2f}, this kind's time over theirs (the median ratio "
            f"over the {scale.encodings} encoding{'s' if scale.encodings != 1 else ''} with finished runs on both)"
        )
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", required=True, choices=domain_names())
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument(
        "--roster", choices=config_options("roster"), help="settle only this roster's encodings (as --encodings)"
    )
    choice.add_argument(
        "--encodings",
        nargs="+",
        type=encoding_name,
        help="settle only these encodings (pe config ids) against the reference (--ref, default "
        f"{DEFAULT_REF}, read whether listed or not); without --ref, {DEFAULT_REF} must have finished runs",
    )
    parser.add_argument("--ref", help=f"the reference, fixed before the first look (default: {DEFAULT_REF})")
    parser.add_argument("--max-seeds", type=int, default=DEFAULT_MAX_SEEDS, help="seeds per encoding at most")
    parser.add_argument("--looks", type=int, default=DEFAULT_LOOKS, help="looks of the design, the first included")
    parser.add_argument(
        "--seeds",
        type=whole_number(0),  # a seed seeds the data stream: a whole number >= 0
        nargs="+",
        help="fix the design before any of its runs exist: its first look on these seeds (a confirmatory study)",
    )
    parser.add_argument(
        "--futility",
        choices=sorted(FUTILITY_RULES),
        help="how an open pair stops for futility, fixed with the design (default for a new design: interval)",
    )
    parser.add_argument("--preset", choices=config_options("preset"), help="default: the runs' preset")
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    add_with_option(parser, "published studies whose runs join the local ones; the new runs train locally")
    parser.add_argument("--jobs", type=int, default=None, help="runs at once (default: one per GPU, else per core)")
    parser.add_argument(
        "--threads",
        type=whole_number(1),
        default=None,
        help="CPU threads per run (default: cores / jobs); two studies sharing a machine give it so that their runs' "
        "threads add up to its cores (more threads than cores stall each other at every parallel region)",
    )
    parser.add_argument(
        "--through-look",
        type=whole_number(1),
        default=None,
        help="train no look past this one: stop once it is recorded (the design unchanged; the same command without "
        "it continues), so that another study can take the machine by expected decided pairs per core-hour",
    )
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument("--plan", action="store_true", help="print the verdicts and the next runs; train nothing")
    stop.add_argument(
        "--record", action="store_true", help="fix the design, record this look in settle.json; train nothing"
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides every run of the study was trained with")
    args = parser.parse_args(argv)
    if args.looks < 1:
        parser.error(f"--looks must be at least 1, got {args.looks}")
    try:
        return settle(args, args.overrides)
    except (FileNotFoundError, EvidenceError, RunFileError, StudyError, ValueError) as error:
        parser.exit(1, f"error: {error}\n")


if __name__ == "__main__":
    sys.exit(main())
