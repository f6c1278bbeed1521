"""Fixing a make-settle design (pipelines.analysis.design) from a command: at the first look over the runs a domain
holds, or before any of its runs exist (a confirmatory study on new seeds); and refusing a command that would change
a design already fixed."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipelines.analysis.design import DEFAULT_REF, Design
from pipelines.analysis.loading import EvidenceError, LoadedRun
from pipelines.analysis.matrix import per_example_evidence, per_task_evidence
from pipelines.experiment.config import datamodule_class
from pipelines.runs.layout import has_tasks


def initial_design(
    domain: str,
    runs: list[LoadedRun],
    ref: str | None,
    max_seeds: int,
    looks: int,
    encodings: list[str] | None,
    futility: str = "interval",
) -> Design:
    """The design fixed at the first look over `runs` (the chosen encodings'): its seeds those every encoding
    finished, the reference the one given (`--ref`) or the SPEC's default, fixed before any score is read (a
    reference chosen from the scores would raise the family-wise error: tests/test_verdict_simulations.py)."""
    metric = datamodule_class(domain).metric
    load = per_task_evidence if has_tasks(domain) else per_example_evidence
    evidence = load(domain, metric, runs)
    first = evidence.common_seeds()
    if len(first) < 2:
        raise EvidenceError(
            f"{domain}: a design needs at least 2 seeds every encoding finished for its first look, found "
            f'{first or "none"}; train the study first (make train SEEDS="0 1 2")'
        )
    chosen, rule = (ref, "given") if ref is not None else (DEFAULT_REF, "default")
    if chosen not in evidence.encodings:
        how = "--ref" if rule == "given" else "the default reference (SPEC 3; name another with --ref)"
        raise EvidenceError(f"{domain}: {how} {chosen} has no finished run here; a design's reference must have one")
    # the design's own family, recorded: an encoding that joins the study later gets a family of its own
    settled = tuple(sorted(set(encodings or evidence.encodings) - {chosen}))
    return Design.grow(first, max_seeds, looks, ref=chosen, encodings=settled, ref_rule=rule, futility=futility)


def design_in_advance(args: argparse.Namespace, selection: list[str] | None) -> Design:
    """The design `--seeds` fixes before any run of it exists (a confirmatory study): its first look's seeds those
    given, its family the chosen encodings, the reference --ref or the SPEC's default; no score is read."""
    if not selection:
        raise EvidenceError(
            f"{args.domain}: --seeds fixes a design before any of its runs exist; name its encodings (--encodings or "
            "--roster)"
        )
    chosen, rule = (args.ref, "given") if args.ref else (DEFAULT_REF, "default")
    settled = tuple(sorted(set(selection) - {chosen}))
    try:
        return Design.grow(
            list(args.seeds),
            args.max_seeds,
            args.looks,
            ref=chosen,
            encodings=settled,
            ref_rule=rule,
            futility=args.futility or "interval",
        )
    except ValueError as error:
        raise EvidenceError(f"{args.domain}: --seeds {' '.join(map(str, args.seeds))}: {error}") from None


def check_unchanged(args: argparse.Namespace, design: Design, source: Path) -> None:
    """EvidenceError naming what the command asks for that differs from the design it continues: the design it
    would fix now from the same first seeds (so the command that fixed it, run again, continues it, even where its
    looks collapsed: --max-seeds 3, or 9 seeds with at most 10) and the reference when --ref is given."""
    try:
        asked = Design.grow(design.look_seeds(0), args.max_seeds, args.looks, ref=design.ref)
    except ValueError as error:
        raise EvidenceError(f"{source}: the design was fixed at the first look and cannot change: {error}") from None
    differ = {
        "max seeds": (args.max_seeds, len(design.seeds)),
        "looks at": (", ".join(map(str, asked.looks)), ", ".join(map(str, design.looks))),
        "reference": (args.ref or design.ref, design.ref),
        "futility": (args.futility or design.futility, design.futility),
    }
    changed = [f"{name} {mine} (the design has {theirs})" for name, (mine, theirs) in differ.items() if mine != theirs]
    if changed:
        raise EvidenceError(f"{source}: the design was fixed at the first look and cannot change: {'; '.join(changed)}")
