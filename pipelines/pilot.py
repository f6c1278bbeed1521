"""What each arm of a preset pilot costs a verdict (issue 48; pipelines.analysis.pilot has the arithmetic).

    python -m pipelines.pilot --domain maestro --arm A=docs/results/maestro-cpu --arm B=runs/pilot-maestro/B \
        --arm C=runs/pilot-maestro/C --encodings rope10k kerple alibi darope nope --refs rope10k kerple \
        [--effect 0.02] [--roster-size 24]

An arm is NAME=FOLDER: a runs root, or a published study (a folder holding study.json), read as compare --with reads
it. Prints, per reference, each arm's paired SDs, the seeds a pair needs to detect --effect at the verdict's level
per look with 80% power, a run's core-seconds and the core-hours for --roster-size encodings; then the validation
interaction by step and each encoding's mean gap to the first reference; and the arm the rule picks (fewest
core-hours against the first reference).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from pipelines.analysis.design import ALPHA, DEFAULT_LOOKS, Design
from pipelines.analysis.domain import analyse_domain
from pipelines.analysis.loading import LoadedRun, load_domain
from pipelines.analysis.pilot import (
    Arm,
    arm_cost,
    cheapest,
    detectable_effect,
    interaction_by_step,
    mean_gap,
    run_core_seconds,
    validation_by_seed,
)
from pipelines.experiment.config import encoding_name
from pipelines.runs.published_format import STUDY
from pipelines.runs.published_join import joined_runs, joined_scratch
from pipelines.runs.published_read import read_studies


def read_arm(name: str, folder: Path, domain: str, encodings: list[str], ref: str) -> Arm:
    """The arm's evidence from its folder (a runs root or a published study), restricted to `encodings`."""
    if (folder / STUDY).is_file():
        with joined_scratch("pilot-") as scratch:
            root, _ = joined_runs(scratch / "local", read_studies([folder]), scratch / "joined", [domain])
            return _arm(name, load_domain(root, domain).runs, domain, encodings, ref)
    return _arm(name, load_domain(folder, domain).runs, domain, encodings, ref)


def _arm(name: str, runs: list[LoadedRun], domain: str, encodings: list[str], ref: str) -> Arm:
    chosen = [run for run in runs if run.encoding in encodings]
    missing = sorted(set(encodings) - {run.encoding for run in chosen if run.finished})
    if missing:
        raise SystemExit(f"arm {name}: no finished run of {', '.join(missing)} in {domain}")
    result = analyse_domain(domain, chosen, ref)
    seconds = [s for s in map(run_core_seconds, chosen) if s is not None]
    return Arm(
        name, {e: dict(entry.seed_scores) for e, entry in result.entries.items()}, seconds, validation_by_seed(chosen)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.pilot", description=__doc__.split("\n\n")[0])
    parser.add_argument("--domain", required=True)
    parser.add_argument("--arm", action="append", required=True, metavar="NAME=FOLDER")
    parser.add_argument("--encodings", nargs="+", type=encoding_name, required=True)
    parser.add_argument("--refs", nargs="+", default=["rope10k"])
    parser.add_argument("--effect", type=float, default=0.02, help="the difference to detect, in the metric's units")
    parser.add_argument("--roster-size", type=int, default=24, help="encodings a study under the arm would train")
    parser.add_argument("--alpha", type=float, default=ALPHA / DEFAULT_LOOKS, help="the verdict's level per look")
    parser.add_argument("--max-seeds", type=int, default=10, help="the design's seeds at its last look")
    parser.add_argument("--looks", type=int, default=DEFAULT_LOOKS, help="the design's looks")
    args = parser.parse_args(argv)

    arms = []
    for spec in args.arm:
        name, _, folder = spec.partition("=")
        if not folder or not Path(folder).is_dir():
            parser.error(f"--arm {spec!r}: expected NAME=FOLDER with an existing folder")
        arms.append(read_arm(name, Path(folder), args.domain, args.encodings, args.refs[0]))

    for ref in args.refs:
        others = [e for e in args.encodings if e != ref]
        print(
            f"\nagainst {ref}: SD over seeds of the paired difference; seeds a pair needs to detect {args.effect} "
            f"at alpha {args.alpha:g} with 80% power; core-hours for {args.roster_size} encodings"
        )
        print(f"| arm | {' | '.join(others)} | median SD | seeds | core-s a run | core-hours |")
        print("|---" * (len(others) + 5) + "|")
        costs = [arm_cost(arm, ref, args.effect, args.alpha, args.roster_size) for arm in arms]
        for cost in costs:
            seeds = "-" if cost.seeds is None else (f">{cost.seeds - 1}" if not cost.affordable else str(cost.seeds))
            hours = f"{cost.core_hours:,.1f}" if cost.affordable else "-"
            cells = " | ".join(f"{cost.paired_sd[e]:.3f}" for e in others)
            print(f"| {cost.arm} | {cells} | {cost.median_sd:.3f} | {seeds} | {cost.seconds_per_run:,.0f} | {hours} |")
        looks = Design.grow(list(range(3)), args.max_seeds, args.looks, ref=ref).looks  # looks from 3 seeds
        print(f"Δ each arm detects with 80% power at alpha {args.alpha:g} at the design's looks (seeds {looks}):")
        for cost in costs:
            cells = ", ".join(f"{n} seeds {detectable_effect(cost.median_sd, n, args.alpha):.3f}" for n in looks)
            print(f"  {cost.arm}: {cells}")
        if ref == args.refs[0]:
            chosen = cheapest(costs)
            rule = f"arm {chosen.arm}: {chosen.core_hours:,.1f} core-hours" if chosen else "no arm can be priced"
            print(f"fewest core-hours for the roster against {ref}: {rule}")

    ref = args.refs[0]
    print(f"\nmean gap to {ref} (score - {ref}, over matched seeds):")
    for arm in arms:
        gaps = ", ".join(f"{e} {mean_gap(arm.scores, e, ref):+.3f}" for e in args.encodings if e != ref)
        print(f"  {arm.name}: {gaps}")
    print(f"\nvalidation: median over encodings of the SD over seeds of the paired val-loss difference to {ref}:")
    for arm in arms:
        steps = interaction_by_step(arm.validation, ref)
        line = ", ".join(f"{step}: {sd:.3f}" for step, sd in steps.items() if math.isfinite(sd))
        print(f"  {arm.name}: {line or 'no validation logged on 2 matched seeds'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
