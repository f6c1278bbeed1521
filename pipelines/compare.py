"""Compare the runs of each domain and write the cross-domain study (SPEC section 3); `make compare`.

    python -m pipelines.compare [--domains all-present | DOMAIN ...] [--runs runs] [--out results] [--ref darope]
                                [--with docs/results/<study> ...] [--bridge docs/results/<study> ...] [--strict]

Writes OUT/<domain>/ (each domain's summary.md, summary.csv and figures) and the study: OUT/summary.md (also
.csv and .json), figure3.png, nll_by_position.png, cd_*.png, extrapolation.csv (pipelines.report.study). The
numbers come from pipelines.analysis: each domain compares only the seeds every encoding finished, missing and
failed runs are always listed, and runs of a domain that differ in data, token budget, model or preset are
refused, naming them, as are damaged or non-finite metrics files. Nothing is written unless the whole report
succeeds. With --strict, anything missing (a run, a seed, a domain without a finished run), or domains trained at
different presets, is an error instead. --with joins a published study's runs to the local ones without retraining
them (pipelines.runs.published_join): a local run that differs in what the study holds fixed is refused by name, and a
local copy of a published run must agree with it within the bound of its conditions (pipelines.runs.tolerance).
--bridge reads a published study of one compared domain at other settings (MAESTRO's layer patterns at 4 layers)
into that domain's ranking by its encodings' Δ to its own reference runs (pipelines.analysis.bridge); it is reported
in its own folder, OUT/<study name>/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.analysis.bridge import Bridge
from pipelines.analysis.design import DEFAULT_REF
from pipelines.analysis.loading import EvidenceError
from pipelines.analysis.study import Study, analyse_study
from pipelines.arguments import os_error_text
from pipelines.experiment.config import domain_names
from pipelines.report.study import write_study_report
from pipelines.runs.metrics import RunFileError
from pipelines.runs.published_format import StudyError
from pipelines.runs.published_join import add_with_option, joined_runs, joined_scratch, runs_label
from pipelines.runs.published_read import read_studies

ALL_PRESENT = "all-present"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.compare",
        description="Compare the runs of each domain and write the cross-domain study (SPEC section 3).",
    )
    domains = domain_names()
    parser.add_argument(
        "--domains",
        "--domain",
        nargs="+",
        default=[ALL_PRESENT],
        choices=[ALL_PRESENT, *domains],
        metavar="DOMAIN",
        help=f"domains to compare ({', '.join(domains)}) or {ALL_PRESENT} (default): every one with run folders",
    )
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="runs root (default: runs)")
    parser.add_argument("--out", type=Path, default=Path("results"), help="writes OUT/summary.* and OUT/<domain>/")
    parser.add_argument("--ref", default=None, help=f"reference of the paired tests (default {DEFAULT_REF})")
    add_with_option(parser, "published studies (docs/results/<name>) whose runs join the local ones as run folders")
    parser.add_argument(
        "--bridge",
        nargs="+",
        type=Path,
        default=[],
        metavar="STUDY",
        help="published studies of one compared domain at other settings, ranked in that domain by their Δ to their "
        "own reference runs (pipelines.analysis.bridge)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit non-zero, writing nothing, when any run, seed or domain is missing"
    )
    args = parser.parse_args(argv)
    if ALL_PRESENT in args.domains and len(args.domains) > 1:
        parser.error(f"{ALL_PRESENT} cannot be combined with domain names")
    chosen = None if args.domains == [ALL_PRESENT] else list(dict.fromkeys(args.domains))
    try:
        with joined_scratch("posbench-joined-") as scratch:
            studies = read_studies(args.with_studies)
            runs_root, notes = joined_runs(args.runs, studies, scratch, domain_names())
            bridges = laid_out_bridges(args.bridge, scratch / BRIDGES)
            study = analyse_study(runs_root, chosen, args.ref, bridges)
            if args.with_studies or args.bridge:
                study.runs_root = runs_label(args.runs, *args.with_studies, *args.bridge)
                for note in notes:
                    print(note)
            _report(study, args, parser)
    # ValueError: what read_design refuses in a settle record (naming it; the other errors name their file or run)
    except (FileNotFoundError, EvidenceError, RunFileError, StudyError, ValueError) as error:
        parser.exit(1, f"error: {error}\n")
    except OSError as error:  # a full disk, a read-only folder, a file where a folder must be
        parser.exit(1, f"error: {os_error_text(error)}; nothing written to {args.out}\n")
    return 0


BRIDGES = ".bridges"  # the scratch folder the bridged studies are laid out in, one runs root each


def laid_out_bridges(folders: list[Path], scratch: Path) -> list[Bridge]:
    """Each bridged study laid out as a runs root of its own under `scratch` (its runs would collide with the
    domain's: the same encodings and seeds at other settings). StudyError when a study holds more or fewer than one
    domain, or its name is a domain's or another bridge's (it names its report folder)."""
    bridges: list[Bridge] = []
    for published in read_studies(folders):
        name, held = published.folder.name, sorted(published.study["domains"])
        if len(held) != 1:
            raise StudyError(f"{published.folder}: a bridged study holds one domain; it holds {', '.join(held)}")
        if name in domain_names() or name in {bridge.name for bridge in bridges}:
            raise StudyError(f"{published.folder}: its name {name!r} would name two reports; rename the folder")
        root, _ = joined_runs(scratch / name / "local", [published], scratch / name, [])
        bridges.append(Bridge(name, root, held[0]))
    return bridges


def _report(study: Study, args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Refuse what --strict refuses, else write the study and print its summary and figures."""
    if args.strict and study.missing:
        listed = "".join(f"\n  {line}" for line in study.missing)
        parser.exit(1, f"error: --strict: the evidence is incomplete, nothing written:{listed}\n")
    presets = {result.domain: result.preset for result in study.results}
    if args.strict and len(set(presets.values())) > 1:
        listed = ", ".join(f"{domain} at `{preset}`" for domain, preset in presets.items())
        parser.exit(
            1,
            f"error: --strict: the domains were trained at different presets ({listed}); nothing written: a mean "
            "rank across them mixes scales\n",
        )
    summary = write_study_report(study, args.out, args.with_studies, args.bridge)
    print(summary.read_text())
    print("figures:")
    for path in sorted(args.out.glob("*.png")) + sorted(args.out.glob("*/*.png")):
        print(f"  {path}")


if __name__ == "__main__":
    sys.exit(main())
