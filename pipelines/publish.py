"""Publish the evidence of a study's runs, so others can join it without retraining: `make publish`.

    python -m pipelines.publish --runs runs --domains jsb --out docs/results/jsb-cpu [--tolerance 1e-5]
                                [--with docs/results/<study> ...] [--replace]

Writes study.json, runs.json.gz, per_example/ and per_position/<encoding>.csv.gz (and settle/<domain>.json) into OUT
(pipelines.runs.published_format), study.json listing each other file's sha256, and beside them the study's report,
as `make compare` writes it: summary.md/csv/json, the figures, the per-domain folders and index.html
(pipelines.report.study). The report is built from exactly the evidence published (report_from_evidence), as anyone
joining the study reads it, never from the run folders it was collected from: their manifests name the machine's
folders (runs_root, a YaRN entry's derived_from), which the evidence writes relative to the runs folder. Only
finished runs are published; a domain without one, and runs of one domain (or task) that differ in what a comparison
holds fixed, are refused, naming them. --with publishes a published study's runs joined to the local ones
(pipelines.runs.published_join.join, as `make compare WITH=...` reads them): how a study grown by `make settle
WITH=...` is published again, into its own folder or another.

Everything is read, checked and analysed before anything is written, and the study (evidence and report) is written
all or nothing: a publish that fails leaves OUT as it was (on a full disk or a read-only folder too, said in one
line). When OUT holds a study already, the new one must keep every run of it with the same numbers (within its
tolerance), as a grown study does; one that would drop or change runs is refused, naming them, unless --replace is
given (then it says what it replaced).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from pipelines.analysis.loading import EvidenceError
from pipelines.analysis.study import Study, analyse_study
from pipelines.arguments import os_error_text
from pipelines.experiment.config import domain_names
from pipelines.report.files import publish
from pipelines.report.markdown import runs_text
from pipelines.report.study import render_study, study_readme, study_report_files
from pipelines.report.study_about import study_about
from pipelines.runs.layout import is_derived
from pipelines.runs.metrics import RunFileError
from pipelines.runs.published_export import (
    EVIDENCE_FILES,
    StudyExport,
    collect_study,
    read_back,
    render_evidence,
    with_looks,
)
from pipelines.runs.published_format import RUNS, STUDY, TOLERANCE, PublishedStudy, StudyError
from pipelines.runs.published_join import (
    add_with_option,
    copies_disagree,
    join,
    joined_runs,
    joined_scratch,
    runs_label,
)
from pipelines.runs.published_read import read_studies, read_study


def _listed(labels: list[str], limit: int = 8) -> str:
    shown = ", ".join(labels[:limit])
    return shown + (f" and {len(labels) - limit} more" if len(labels) > limit else "")


def replaced(new: PublishedStudy, out: Path) -> tuple[int, list[str], list[str], list[str]]:
    """(the runs of the study already in `out`, those of them the new one (read back: read_back) drops, those it holds
    with other numbers, those it adds); StudyError naming `out` when it holds a study that cannot be read."""
    try:
        old = read_study(out)
    except StudyError as error:
        raise StudyError(
            f"{out} holds a study that cannot be read ({error}); publish into another folder, or remove it first"
        ) from None
    dropped = [label for label in old.labels if label not in new.records]
    changed = [label for label in old.labels if label in new.records and copies_disagree(old, new, label)]
    added = [label for label in new.labels if label not in old.records]
    return len(old.labels), dropped, changed, added


def report_from_evidence(evidence: PublishedStudy, domains: list[str], scratch: Path) -> Study:
    """The study's report from its evidence as read back (read_back): its runs laid out in `scratch` from the
    published records (pipelines.runs.published_join.join), as `make compare WITH=<study>` lays them out, so that the
    page and summary hold what the study publishes and nothing of the machine it was built on."""
    join([evidence], scratch / "no-local-runs", scratch / "runs", domains)
    return analyse_study(scratch / "runs", domains, None)


def write_published(export: StudyExport, report: Study, out: Path, joined: list[Path] = ()) -> None:
    """Write the study's evidence and its report into `out` in one step, all or nothing; the evidence has read back
    with every check (pipelines.runs.published_export.read_back) and the report is its (report_from_evidence).
    `joined`: the published studies its runs were joined with (--with), which its page names."""
    readme = study_readme(out)
    about = study_about(out, joined)
    publish(
        out,
        lambda folder: [*render_evidence(export, folder), *render_study(report, folder, readme, about)],
        owned=[*EVIDENCE_FILES, *study_report_files(out)],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--domains", nargs="+", required=True, choices=domain_names())
    parser.add_argument("--out", type=Path, required=True, help="the study folder, e.g. docs/results/jsb-cpu")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE, help="nats two copies of a run agree within")
    parser.add_argument(
        "--replace", action="store_true", help="replace the study in OUT even where the new one drops or changes runs"
    )
    add_with_option(parser, "published studies whose runs are published with the local ones")
    args = parser.parse_args(argv)
    if not 0 < args.tolerance < math.inf:
        parser.error(f"--tolerance must be a finite positive number of nats, got {args.tolerance}")
    try:
        with joined_scratch("posbench-publish-") as scratch:
            studies = read_studies(args.with_studies)
            runs_root, _ = joined_runs(args.runs, studies, scratch / "joined", args.domains)
            export = collect_study(runs_root, args.domains, args.tolerance)
            evidence = read_back(export, args.out)  # every check of read_study, before anything is written
            report = report_from_evidence(evidence, args.domains, scratch / "published")  # it may refuse too
            report.runs_root = runs_label(args.runs, *args.with_studies)
            # each settle record's looks as the report computes them (the design as recorded)
            looks = {result.domain: result.verdicts.looks_record() for result in report.results if result.verdicts}
            export = with_looks(export, looks)
            notes = []
            if (args.out / STUDY).exists():
                held, dropped, changed, added = replaced(evidence, args.out)
                lost = [f"drops {len(dropped)}: {_listed(dropped)}"] if dropped else []
                lost += [f"changes the numbers of {len(changed)}: {_listed(changed)}"] if changed else []
                what = f"the study there holds {held} runs, the new one {len(export.labels)}: it {'; it '.join(lost)}"
                if lost and not args.replace:
                    raise StudyError(
                        f"refusing to publish into {args.out}: {what}. Publish into another folder, grow the study "
                        f"(--with {args.out}), or replace it (--replace)"
                    )
                notes = [f"replacing the study in {args.out}: {what}"] if lost else []
                notes += [f"{args.out}: the study grows by {len(added)} runs: {_listed(added)}"] if added else []
            write_published(export, report, args.out, args.with_studies)
    # ValueError: what read_design refuses in a settle record (naming it; the other errors name their file or run)
    except (StudyError, RunFileError, FileNotFoundError, EvidenceError, ValueError) as error:
        parser.exit(1, f"error: {error}\n")
    except OSError as error:  # a full disk, a read-only folder, a file where a folder must be
        parser.exit(1, f"error: {os_error_text(error)}; {args.out} is as it was\n")
    for note in notes:
        print(note)
    # a label ends <encoding>/seed<k>, after the domain and, in a domain with tasks, the task
    evaluations = sum(is_derived(label.split("/")[-2]) for label in export.labels)
    counts = runs_text(len(export.labels) - evaluations, evaluations)
    print(f"published {counts} of {', '.join(args.domains)} into {args.out} ({STUDY}, {RUNS}, ...)")
    print(f"the study's report: {args.out / 'summary.md'}, its page: {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
