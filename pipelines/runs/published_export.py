"""Publishing a study from run folders (`make publish`): collect_study gathers the evidence of every finished run in
memory, read_back reads it back with every check of read_study, write_study writes it, all or nothing; export_study
does the three.
"""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domains.atomic import write_json
from pipelines.report.files import publish
from pipelines.runs.layout import DONE, MANIFEST, discover_runs
from pipelines.runs.layout import SETTLE as SETTLE_FILE
from pipelines.runs.manifest import git_state, package_versions
from pipelines.runs.metrics import read_run_json, summary_path
from pipelines.runs.published_format import (
    EXAMPLE_HEADER,
    FILES,
    FORMAT,
    PER_EXAMPLE,
    PER_EXAMPLE_FILE,
    PER_POSITION,
    POSITION_HEADER,
    RUNS,
    SETTLE_DIR,
    STREAM,
    STUDY,
    TOLERANCE,
    PublishedStudy,
    StudyError,
    check_tolerance,
    csv_text,
    example_file,
    metric_rows,
    settle_text,
    sha256,
)
from pipelines.runs.published_read import collector_paused, parse_study
from pipelines.runs.published_training import TRAINING, TRAINING_HEADER, training_file, training_rows
from pipelines.runs.settings import fixed_properties, without


def _gzip_bytes(text: str) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=9) as handle:
        handle.write(text.encode())
    return buffer.getvalue()


@dataclass
class StudyExport:
    """A study in memory: study.json's content, and every other file's bytes by its name in the study folder."""

    study: dict[str, Any]
    files: dict[str, bytes]

    @property
    def labels(self) -> list[str]:
        return [label for labels in self.study["domains"].values() for label in labels]


def location_free(value, roots: tuple[str, ...]):
    """`value` with every path under one of the absolute `roots` (the runs folder the run was trained in, the one it
    is published from) written relative to it, the root itself as ".": a published study names no machine's
    folders and does not depend on where it was built."""
    if isinstance(value, dict):
        return {key: location_free(item, roots) for key, item in value.items()}
    if isinstance(value, list):
        return [location_free(item, roots) for item in value]
    if isinstance(value, str):
        for root in (root.rstrip("/") for root in roots if root.startswith("/") and root != "/"):
            if value == root:
                return "."
            if value.startswith(root + "/"):
                return value[len(root) + 1 :]
    return value


def collect_study(runs_root: Path, domains: list[str], tolerance: float = TOLERANCE) -> StudyExport:
    """The study of every finished run of `domains` under `runs_root`, in memory; StudyError naming the run when
    runs of one group differ in what a comparison holds fixed, and naming the domain when it has no finished run."""
    check_tolerance(tolerance, "--tolerance")
    records, fixed, domain_runs, settles = {}, {}, {}, {}
    examples: dict[str, list[list[str]]] = {}  # encoding -> its runs' rows
    positions: dict[str, list[list[str]]] = {}
    logs: dict[str, list[list[str]]] = {}
    published_from = str(Path(runs_root).resolve())
    for domain in domains:
        runs = sorted((r for r in discover_runs(runs_root, domain) if r.finished), key=lambda r: r.label)
        if not runs:
            raise StudyError(f"{Path(runs_root) / domain}: no finished run of {domain}: nothing to publish")
        domain_runs[domain] = [run.label for run in runs]
        for run in runs:
            manifest = read_run_json(run, run.path / MANIFEST)
            roots = (published_from, str(manifest.get("config", {}).get("runs_root", "")))
            records[run.label] = location_free(
                {
                    "manifest": manifest,
                    "summary": read_run_json(run, summary_path(run.path)),
                    "done": without(read_run_json(run, run.path / DONE), ("published", "published_run")),
                },
                roots,
            )
            examples.setdefault(run.key.encoding, []).extend(
                [run.label, split, *row] for split, row_list in metric_rows(run, "per_example") for row in row_list
            )
            positions.setdefault(run.key.encoding, []).extend(
                [run.label, split, *row] for split, row_list in metric_rows(run, "per_position") for row in row_list
            )
            if not run.derived:  # a YaRN entry evaluates its trained run: it has no training of its own
                if log := training_rows(run):
                    logs.setdefault(run.key.encoding, []).extend([run.label, *row] for row in log)
                group = run.key.group_label
                properties = fixed_properties(manifest)
                if group in fixed and fixed[group] != properties:
                    differing = sorted(
                        k for k in set(fixed[group]) | set(properties) if fixed[group].get(k) != properties.get(k)
                    )
                    raise StudyError(f"{run.label}: differs from the other runs of {group} in {', '.join(differing)}")
                fixed.setdefault(group, properties)
        settle = Path(runs_root) / domain / SETTLE_FILE
        if settle.is_file():
            raw = settle.read_bytes()
            settle_text(settle, raw)  # a damaged record is refused by its own name, before it is published
            settles[f"{SETTLE_DIR}/{domain}.json"] = raw
    files = {
        RUNS: _gzip_bytes(json.dumps(records, sort_keys=True, indent=1)),
        **{example_file(name): _gzip_bytes(csv_text(EXAMPLE_HEADER, rows)) for name, rows in examples.items()},
        **{
            f"{PER_POSITION}/{name}.csv.gz": _gzip_bytes(csv_text(POSITION_HEADER, rows))
            for name, rows in positions.items()
        },
        **{training_file(name): _gzip_bytes(csv_text(TRAINING_HEADER, rows)) for name, rows in logs.items()},
        **settles,
    }
    study = {
        "format": FORMAT,
        "domains": domain_runs,
        "holds_fixed": fixed,
        "stream": STREAM,
        "tolerance_nats": tolerance,
        "produced_at": git_state(),
        "packages": package_versions(),
        FILES: {name: sha256(data) for name, data in sorted(files.items())},
    }
    return StudyExport(study, files)


def with_looks(export: StudyExport, looks: dict[str, dict]) -> StudyExport:
    """`export` with each domain's settle record (where it has one) holding the looks, joined looks and next runs of
    `looks` (domain -> SeedVerdicts.looks_record, recomputed from the evidence published) in place of those recorded
    when make settle last ran: a record written before encodings joined the study, or before a rule changed, would
    otherwise disagree with the report published beside it. The design is kept as recorded, key for key."""
    files, digests = dict(export.files), dict(export.study[FILES])
    for domain, record in looks.items():
        name = f"{SETTLE_DIR}/{domain}.json"
        if name in files:
            data = {**json.loads(files[name].decode()), **record}
            files[name] = (json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode()
            digests[name] = sha256(files[name])
    return StudyExport({**export.study, FILES: digests}, files)


def write_study(export: StudyExport, out: Path) -> None:
    """Write the study into `out` all or nothing (pipelines.report.files.publish), once it reads back with every
    check of read_study: the files of an earlier study there are replaced (study.json last), an encoding's or a
    domain's file it no longer has removed; other files of the folder (its README, a report) are kept."""
    out = Path(out)
    read_back(export, out)
    publish(out, lambda folder: render_evidence(export, folder), owned=EVIDENCE_FILES)


# What a study's evidence owns in its folder (an older format's per-example file too: re-publishing removes it)
EVIDENCE_FILES = (RUNS, PER_EXAMPLE, PER_EXAMPLE_FILE, PER_POSITION, TRAINING, SETTLE_DIR, STUDY)


def render_evidence(export: StudyExport, folder: Path) -> list[str]:
    """Write the study's evidence files into `folder` (study.json last); return the names written there."""
    for name, data in export.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    write_json(folder / STUDY, export.study)
    return [*sorted({name.split("/")[0] for name in export.files}), STUDY]


def read_back(export: StudyExport, out: Path) -> PublishedStudy:
    """The study as read_study will read it once written into `out`, with every check; StudyError saying nothing is
    written otherwise."""
    try:
        with collector_paused():
            return parse_study(Path(out), export.study, export.files.__getitem__)
    except StudyError as error:
        raise StudyError(f"nothing written to {out}: the study would not read back: {error}") from None


def export_study(runs_root: Path, domains: list[str], out: Path, tolerance: float = TOLERANCE) -> dict:
    """Write the evidence of every finished run of `domains` under `runs_root` into `out`; returns study.json."""
    export = collect_study(runs_root, domains, tolerance)
    write_study(export, out)
    return export.study
