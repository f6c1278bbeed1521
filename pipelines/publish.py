"""Publish the evidence of a study's runs, so others can join it without retraining: `make publish`.

    python -m pipelines.publish --runs runs --domains jsb --out docs/results/jsb-cpu [--tolerance 1e-5]
                                [--with docs/results/<study> ...]

Writes study.json, runs.json.gz, per_example.csv.gz, per_position/<encoding>.csv.gz (and settle/<domain>.json) into OUT
(pipelines.runs.published), and beside them the study's report from the same runs, as `make compare` writes it:
summary.md/csv/json, the figures, the per-domain folders and index.html (pipelines.report.study). Only finished runs
are published; runs of one domain (or task) that differ in what a comparison holds fixed are refused, naming the run.
--with publishes a published study's runs joined to the local ones (pipelines.runs.published.join, as
`make compare WITH=...` reads them): how a study grown by `make settle WITH=...` is published again, into its own
folder or another.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from pipelines.analysis.evidence import EvidenceError
from pipelines.analysis.study import analyse_study
from pipelines.experiment.config import domain_names
from pipelines.report.study import write_study_report
from pipelines.runs.metrics import RunFileError
from pipelines.runs.published import (
    RUNS,
    STUDY,
    TOLERANCE,
    StudyError,
    add_with_option,
    export_study,
    joined_runs,
    read_study,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--domains", nargs="+", required=True, choices=domain_names())
    parser.add_argument("--out", type=Path, required=True, help="the study folder, e.g. docs/results/jsb-cpu")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE, help="nats two copies of a run agree within")
    add_with_option(parser, "published studies whose runs are published with the local ones")
    args = parser.parse_args(argv)
    if not args.tolerance > 0:
        parser.error(f"--tolerance must be a positive number of nats, got {args.tolerance}")
    try:
        with tempfile.TemporaryDirectory(prefix="posbench-publish-") as scratch:
            studies = [read_study(folder) for folder in args.with_studies]
            runs_root, _ = joined_runs(args.runs, studies, Path(scratch), args.domains)
            report = analyse_study(runs_root, args.domains, None)  # before anything is written: it may refuse
            study = export_study(runs_root, args.domains, args.out, args.tolerance)
            report.runs_root = Path(" + ".join(map(str, [args.runs, *args.with_studies])))
            write_study_report(report, args.out)
    except (StudyError, RunFileError, FileNotFoundError, EvidenceError) as error:
        parser.exit(1, f"error: {error}\n")
    count = sum(len(labels) for labels in study["domains"].values())
    print(f"published {count} runs of {', '.join(args.domains)} into {args.out} ({STUDY}, {RUNS}, ...)")
    print(f"the study's report: {args.out / 'summary.md'}, its page: {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
