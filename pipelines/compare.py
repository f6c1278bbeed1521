"""Compare the runs of each domain and write the cross-domain study (SPEC section 3); `make compare`.

    python -m pipelines.compare [--domains all-present | DOMAIN ...] [--runs runs] [--out results] [--ref darope]

Writes OUT/<domain>/ (each domain's summary.md, summary.csv and figures) and the study: OUT/summary.md (also
.csv and .json), figure3.png, nll_by_position.png, cd_*.png, extrapolation.csv (pipelines.report.study). The
numbers come from pipelines.analysis: each domain compares only the seeds every encoding finished, missing and
failed runs are always listed, and runs of a domain that differ in data, token budget, model or preset are
refused, naming them, as are damaged or non-finite metrics files. Nothing is written unless the whole report
succeeds. With --strict, anything missing (a run, a seed, a domain without a finished run) is an error instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.analysis.evidence import EvidenceError
from pipelines.analysis.results import DEFAULT_REF
from pipelines.analysis.study import analyse_study
from pipelines.experiment.config import domain_names
from pipelines.report.study import write_study_report
from pipelines.runs.metrics import RunFileError

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
    parser.add_argument(
        "--strict", action="store_true", help="exit non-zero, writing nothing, when any run, seed or domain is missing"
    )
    args = parser.parse_args(argv)
    if ALL_PRESENT in args.domains and len(args.domains) > 1:
        parser.error(f"{ALL_PRESENT} cannot be combined with domain names")
    chosen = None if args.domains == [ALL_PRESENT] else list(dict.fromkeys(args.domains))
    try:
        study = analyse_study(args.runs, chosen, args.ref)
        if args.strict and study.missing:
            listed = "".join(f"\n  {line}" for line in study.missing)
            parser.exit(1, f"error: --strict: the evidence is incomplete, nothing written:{listed}\n")
        summary = write_study_report(study, args.out)
    except (FileNotFoundError, EvidenceError, RunFileError) as error:
        parser.exit(1, f"error: {error}\n")
    print(summary.read_text())
    print("figures:")
    for path in sorted(args.out.glob("*.png")) + sorted(args.out.glob("*/*.png")):
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
