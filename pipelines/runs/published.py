"""A published study: the evidence of every run, committed under docs/results/<name>/, so that a new encoding is
compared with the published runs without retraining them (`make compare WITH=docs/results/<name>`).

    study.json             what a joining run must match (`holds_fixed`: domain and its arguments, data hashes,
                           preset, model and trainer config but the encoding, effective batch, the training
                           stream's definition), the package versions and code commit it was produced at, the
                           tolerance two copies of a run must agree within, the runs it holds, and `files`: the
                           sha256 of each of its other files
    runs.json.gz           per run: its manifest, metrics/summary.json and done.json
    per_example/<encoding>.csv.gz
                           run, split, example, nll, tokens, correct, exact     (every evaluation split)
    per_position/<encoding>.csv.gz
                           run, split, position, nll_sum, tokens
    settle/<domain>.json   the make-settle design and looks of a domain, when it has one

One file per encoding: each stays small however many seeds, tasks and encodings the study grows to (a repository
takes files of at most 2 MB: the synthetic study's 337,500 per-example rows gzip to 3 MB in one file, about 0.2 MB
per encoding). CSV rather than Parquet: CSV needs no new dependency (pyarrow is 100+ MB) and reads in any tool; gzip
is written with a zero timestamp, so an export reproduces byte for byte.

A study is what others join, cite and grow, so it is read strictly (`read_study`): only the files study.json lists, each
against its sha256; every record is the run it is listed as (its manifest's key), holds fixed what study.json says, and
its summary is its rows' (the mean per-example NLL, the examples, the tokens); every value is one a model can score. A
refusal names the study's file, the run and what is wrong. A study written before the checksums (format 1) is read with
the same checks but the checksums, with a warning: `make publish WITH=<study> STUDY=<study>` re-publishes it with them.
A study of format 2 holds every run's per-example rows in one file, per_example.csv.gz; it is read as such, and
re-publishing it writes the current format. Publishing (`export_study`) builds the whole study in memory, reads it back
with the same checks, and only then writes it, all or nothing.

`materialize` turns the evidence back into run folders the analysis reads as it reads its own; `join` lays the runs of
one or more studies out beside the local ones, refusing runs that contradict each other.
"""

from __future__ import annotations

import argparse
import csv
import gc
import gzip
import hashlib
import io
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from domains.atomic import write_json, write_text
from pipelines.report.files import publish
from pipelines.runs.layout import DONE, MANIFEST, METRICS, RunFolder, RunKey, discover_runs
from pipelines.runs.layout import SETTLE as SETTLE_FILE
from pipelines.runs.manifest import git_state, package_versions
from pipelines.runs.metrics import SUMMARY, per_example_path, per_position_path, read_run_json, summary_path
from pipelines.runs.settings import differences, fixed_properties, without

STUDY = "study.json"
RUNS = "runs.json.gz"
PER_EXAMPLE = "per_example"  # a folder: <encoding>.csv.gz
PER_EXAMPLE_FILE = "per_example.csv.gz"  # formats 1 and 2: every run's per-example rows in one file
PER_POSITION = "per_position"  # a folder: <encoding>.csv.gz
SETTLE_DIR = "settle"
FILES = "files"  # study.json's {file: sha256} of every other file of the study
FORMAT = 3  # 2: the per-example rows in one file (PER_EXAMPLE_FILE); 1: that, and no `files` (read with a warning)
READABLE_FORMATS = (1, 2, FORMAT)
# Two copies of one run (a published one and a local one) agree when every per-example NLL differs by at most this
# many nats. Measured (README, "Compare your encoding with the published study"): the same CPU and thread count
# reproduce to about 2e-8; other thread counts reorder float sums and differ by up to about 1e-6.
TOLERANCE = 1e-5
# The largest NLL a model scoring in float32 can report: a token's log-probability is a float32 (beyond it, -inf),
# and a per-example NLL is a mean of them. A larger finite value is no model's score (1e308 overflows every sum).
MAX_NLL = float(np.finfo(np.float32).max)
# A record's summary NLL is the mean of its per-example NLL, which are written to 8 decimals: they agree to 5e-9.
SUMMARY_TOLERANCE = 1e-7
STREAM = (
    "sample i of seed k is drawn from numpy.random.default_rng([k, i]); batch s holds samples s*B .. s*B+B-1 "
    "(B the batch per device; ranks take their share of a step's samples); pure function of (seed, step)"
)
EXAMPLE_HEADER = ["run", "split", "example", "nll", "tokens", "correct", "exact"]
POSITION_HEADER = ["run", "split", "position", "nll_sum", "tokens"]
_POSITION_FILE = re.compile(rf"{PER_POSITION}/([^/]+)\.csv\.gz")
_EXAMPLE_FILE = re.compile(rf"{PER_EXAMPLE}/([^/]+)\.csv\.gz")
_SETTLE_FILE = re.compile(rf"{SETTLE_DIR}/([^/]+)\.json")


class StudyError(ValueError):
    """A published study is damaged, or a local run cannot join it; the message names the file or the run."""


def _gzip_bytes(text: str) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=9) as handle:
        handle.write(text.encode())
    return buffer.getvalue()


def _csv_text(header: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_tolerance(tolerance: Any, where: str) -> float:
    """The tolerance as a float; StudyError naming `where` unless it is a finite positive number of nats (with an
    infinite one any copy of a run would "reproduce" it)."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 < tolerance < math.inf:
        raise StudyError(f"{where}: the tolerance must be a finite positive number of nats, got {tolerance!r}")
    return float(tolerance)


def _metric_rows(run: RunFolder, pattern: str) -> list[tuple[str, list[list[str]]]]:
    """(split, rows without the header) of the run's metrics files of one kind."""
    out = []
    for path in sorted((run.path / METRICS).glob(f"*.{pattern}.csv")):
        split = path.name.removesuffix(f".{pattern}.csv")
        lines = path.read_text().splitlines()[1:]
        out.append((split, [line.split(",") for line in lines if line]))
    return out


# ------------------------------------------------------------------------------------------------ publishing


@dataclass
class StudyExport:
    """A study in memory: study.json's content, and every other file's bytes by its name in the study folder."""

    study: dict[str, Any]
    files: dict[str, bytes]

    @property
    def labels(self) -> list[str]:
        return [label for labels in self.study["domains"].values() for label in labels]


def collect_study(runs_root: Path, domains: list[str], tolerance: float = TOLERANCE) -> StudyExport:
    """The study of every finished run of `domains` under `runs_root`, in memory; StudyError naming the run when
    runs of one group differ in what a comparison holds fixed, and naming the domain when it has no finished run."""
    check_tolerance(tolerance, "--tolerance")
    records, fixed, domain_runs, settles = {}, {}, {}, {}
    examples: dict[str, list[list[str]]] = {}  # encoding -> its runs' rows
    positions: dict[str, list[list[str]]] = {}
    for domain in domains:
        runs = sorted((r for r in discover_runs(runs_root, domain) if r.finished), key=lambda r: r.label)
        if not runs:
            raise StudyError(f"{Path(runs_root) / domain}: no finished run of {domain}: nothing to publish")
        domain_runs[domain] = [run.label for run in runs]
        for run in runs:
            manifest = read_run_json(run, run.path / MANIFEST)
            records[run.label] = {
                "manifest": manifest,
                "summary": read_run_json(run, summary_path(run.path)),
                "done": without(read_run_json(run, run.path / DONE), ("published", "published_run")),
            }
            examples.setdefault(run.key.encoding, []).extend(
                [run.label, split, *row] for split, row_list in _metric_rows(run, "per_example") for row in row_list
            )
            positions.setdefault(run.key.encoding, []).extend(
                [run.label, split, *row] for split, row_list in _metric_rows(run, "per_position") for row in row_list
            )
            if not run.derived:
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
            settles[f"{SETTLE_DIR}/{domain}.json"] = settle.read_bytes()
    files = {
        RUNS: _gzip_bytes(json.dumps(records, sort_keys=True, indent=1)),
        **{example_file(name): _gzip_bytes(_csv_text(EXAMPLE_HEADER, rows)) for name, rows in examples.items()},
        **{
            f"{PER_POSITION}/{name}.csv.gz": _gzip_bytes(_csv_text(POSITION_HEADER, rows))
            for name, rows in positions.items()
        },
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


def write_study(export: StudyExport, out: Path) -> None:
    """Write the study into `out` all or nothing (pipelines.report.files.publish), once it reads back with every
    check of read_study: the files of an earlier study there are replaced (study.json last), an encoding's or a
    domain's file it no longer has removed; other files of the folder (its README, a report) are kept."""
    out = Path(out)
    read_back(export, out)
    publish(out, lambda folder: render_evidence(export, folder), owned=EVIDENCE_FILES)


# What a study's evidence owns in its folder (an older format's per-example file too: re-publishing removes it)
EVIDENCE_FILES = (RUNS, PER_EXAMPLE, PER_EXAMPLE_FILE, PER_POSITION, SETTLE_DIR, STUDY)


def example_file(encoding: str) -> str:
    """The study's file of an encoding's per-example rows (format 3)."""
    return f"{PER_EXAMPLE}/{encoding}.csv.gz"


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
        with _collector_paused():
            return parse_study(Path(out), export.study, export.files.__getitem__)
    except StudyError as error:
        raise StudyError(f"nothing written to {out}: the study would not read back: {error}") from None


def export_study(runs_root: Path, domains: list[str], out: Path, tolerance: float = TOLERANCE) -> dict:
    """Write the evidence of every finished run of `domains` under `runs_root` into `out`; returns study.json."""
    export = collect_study(runs_root, domains, tolerance)
    write_study(export, out)
    return export.study


# ------------------------------------------------------------------------------------------------ reading


@dataclass
class PublishedStudy:
    """A study folder as read back: study.json, and its runs' records and metrics rows by run label."""

    folder: Path
    study: dict[str, Any]
    records: dict[str, dict]
    examples: dict[str, dict[str, list[list[str]]]]  # run -> split -> rows (example, nll, tokens, correct, exact)
    positions: dict[str, dict[str, list[list[str]]]]
    settles: dict[str, str] = field(default_factory=dict)  # domain -> the text of its settle record

    @property
    def labels(self) -> list[str]:
        return [label for labels in self.study["domains"].values() for label in labels]

    @property
    def tolerance(self) -> float:
        return float(self.study.get("tolerance_nats", TOLERANCE))

    def key(self, label: str) -> RunKey:
        return record_key(self.records[label])

    def nll(self, label: str, split: str = "test") -> dict[int, float]:
        return {int(row[0]): float(row[1]) for row in self.examples.get(label, {}).get(split, [])}

    def metrics(self, label: str) -> dict[str, dict[int, float]]:
        """{split: {example: nll}} of a published run."""
        return {split: self.nll(label, split) for split in self.examples.get(label, {})}

    def example_path(self, label: str) -> Path:
        """The study's file that holds a run's per-example rows."""
        return self.folder / examples_name(self.study.get("format"), self.key(label).encoding)


def examples_name(format_: Any, encoding: str) -> str:
    """The name, in a study of `format_`, of the file of an encoding's per-example rows."""
    return example_file(encoding) if format_ == FORMAT else PER_EXAMPLE_FILE


def record_key(record: dict) -> RunKey:
    run = record["manifest"]["run"]
    return RunKey(run["domain"], run.get("task") or None, run["pe_id"], int(run["seed"]))


def read_study(folder: Path) -> PublishedStudy:
    """The published study in `folder`, read strictly (parse_study); StudyError naming the file, and the run, when a
    piece is missing, damaged or contradicts another."""
    folder = Path(folder)
    try:
        study = json.loads((folder / STUDY).read_text())
    except FileNotFoundError:
        raise StudyError(f"{folder / STUDY}: missing; {folder} is not a published study (make publish)") from None
    except (OSError, ValueError) as error:
        raise StudyError(f"{folder / STUDY}: damaged, not JSON ({type(error).__name__}: {error})") from None

    def read(name: str) -> bytes:
        return (folder / name).read_bytes()

    with _collector_paused():
        return parse_study(folder, study, read)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused: reading a study builds a million small lists and tuples (its rows),
    none in a cycle, and collections among them while they are built would double the time it takes."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_studies(folders: list[Path]) -> list[PublishedStudy]:
    """The studies of `--with`, each once: a folder named twice is read once, with a warning."""
    studies: dict[Path, PublishedStudy] = {}
    for folder in folders:
        resolved = Path(folder).resolve()
        if resolved in studies:
            print(f"warning: --with names {folder} twice: it is read once", file=sys.stderr)
            continue
        studies[resolved] = read_study(folder)
    return list(studies.values())


def parse_study(folder: Path, study: Any, read: Callable[[str], bytes]) -> PublishedStudy:
    """The study whose study.json holds `study` and whose other files `read(name)` gives: only the files study.json
    lists, each against its sha256, every record the run it is listed as and holding fixed what study.json does,
    every row a run's and a number a model can score, every record's summary its rows'. StudyError otherwise,
    naming the study's file, the run and what is wrong."""
    if not isinstance(study, dict) or not isinstance(study.get("domains"), dict):
        raise StudyError(f"{folder / STUDY}: not a study's description (no `domains`)")
    if not isinstance(study.get("holds_fixed"), dict):
        raise StudyError(f"{folder / STUDY}: no `holds_fixed`")
    check_tolerance(study.get("tolerance_nats", TOLERANCE), f"{folder / STUDY}")
    format_ = study.get("format")
    legacy = format_ == 1
    if format_ not in READABLE_FORMATS:
        raise StudyError(
            f"{folder / STUDY}: format {format_!r}; this posbench reads formats "
            f"{', '.join(map(str, READABLE_FORMATS))} (a newer posbench wrote it?)"
        )
    listed = _listed_files(folder, study, legacy)

    def load(name: str) -> bytes:
        try:
            data = read(name)
        except FileNotFoundError:
            raise StudyError(f"{folder / name}: missing ({STUDY} lists it)") from None
        if listed[name] is not None and (actual := sha256(data)) != listed[name]:
            raise StudyError(
                f"{folder / name}: its sha256 is {actual}, {STUDY} lists {listed[name]}: the file changed after the "
                "study was published (restore it; if the change is meant, publish the study again: make publish)"
            )
        return data

    records = _records(folder, study, load(RUNS))
    if legacy:  # the files a format-1 study wrote: one per encoding, a settle record per domain that has one
        print(
            f"warning: {folder / STUDY}: format 1, without its files' checksums: they are checked against each "
            f"other but not against what was published; re-publish it to add them (make publish WITH={folder} "
            f'STUDY={folder} DOMAINS="{" ".join(study["domains"])}")',
            file=sys.stderr,
        )
        listed.update({f"{PER_POSITION}/{name}.csv.gz": None for name in sorted(_encodings(records))})
        settled = [f"{SETTLE_DIR}/{domain}.json" for domain in study["domains"]]
        listed.update({name: None for name in settled if (folder / name).is_file()})
    if format_ == FORMAT:  # every encoding's per-example file listed: a run without rows is named by its file
        unlisted = [example_file(name) for name in sorted(_encodings(records)) if example_file(name) not in listed]
        if unlisted:
            raise StudyError(
                f"{folder / STUDY}: `{FILES}` does not list {', '.join(unlisted)}, the per-example "
                "rows of runs it holds"
            )
    examples: dict[str, dict[str, list[list[str]]]] = {}
    positions: dict[str, dict[str, list[list[str]]]] = {}
    settles = {}
    for name in listed:
        if name == PER_EXAMPLE_FILE:
            examples.update(_rows(folder, name, load(name), records, "per_example", None))
        elif match := _EXAMPLE_FILE.fullmatch(name):
            examples.update(_rows(folder, name, load(name), records, "per_example", match[1]))
        elif match := _POSITION_FILE.fullmatch(name):
            positions.update(_rows(folder, name, load(name), records, "per_position", match[1]))
        elif match := _SETTLE_FILE.fullmatch(name):
            settles[match[1]] = _settle_text(folder / name, load(name))
    published = PublishedStudy(folder, study, records, examples, positions, settles)
    _check_summaries(published)
    return published


def _listed_files(folder: Path, study: dict, legacy: bool) -> dict[str, str | None]:
    """{file: its sha256} of the files study.json lists (a format-1 study: the two every study has, no sum)."""
    if legacy:
        return {RUNS: None, PER_EXAMPLE_FILE: None}
    files = study.get(FILES)
    where = f"{folder / STUDY}"
    if not isinstance(files, dict) or not all(
        isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest) for digest in files.values()
    ):
        raise StudyError(f"{where}: `{FILES}` must map each file of the study to its sha256")
    # format 2: the per-example rows in one file; format 3: one per encoding
    examples_file = _EXAMPLE_FILE.fullmatch if study["format"] == FORMAT else {PER_EXAMPLE_FILE}.__contains__
    for name in files:
        settle = _SETTLE_FILE.fullmatch(name)
        if name == RUNS or examples_file(name) or _POSITION_FILE.fullmatch(name):
            continue
        if settle and settle[1] in study["domains"]:
            continue
        raise StudyError(f"{where}: lists {name!r}, which is no file of a study of {', '.join(study['domains'])}")
    for name in (RUNS,) if study["format"] == FORMAT else (RUNS, PER_EXAMPLE_FILE):
        if name not in files:
            raise StudyError(f"{where}: `{FILES}` does not list {name}, which every study has")
    return dict(files)


def _encodings(records: dict[str, dict]) -> set[str]:
    return {record_key(record).encoding for record in records.values()}


def _records(folder: Path, study: dict, raw: bytes) -> dict[str, dict]:
    """runs.json.gz's records, each checked: its manifest names the run it is listed as, and holds fixed what
    study.json holds fixed for its group."""
    path = folder / RUNS
    try:
        records = json.loads(gzip.decompress(raw))
    except (OSError, EOFError, ValueError) as error:
        raise StudyError(f"{path}: damaged, not gzipped JSON ({type(error).__name__}: {error})") from None
    if not isinstance(records, dict):
        raise StudyError(f"{path}: expected an object of run records, found {type(records).__name__}")
    listed = {}
    for domain, labels in study["domains"].items():
        if not isinstance(labels, list):
            raise StudyError(f"{folder / STUDY}: `domains`.{domain} must list run labels")
        listed.update(dict.fromkeys(labels, domain))
    missing = sorted(set(listed) - set(records))
    if missing:
        raise StudyError(f"{path}: no record of {', '.join(missing)}, which {STUDY} lists")
    unlisted = sorted(set(records) - set(listed))
    if unlisted:
        raise StudyError(f"{path}: records of {', '.join(unlisted)}, which {STUDY} does not list")
    for label, record in records.items():
        where = f"{path}: {label}"
        if not isinstance(record, dict) or not all(
            isinstance(record.get(k), dict) for k in ("manifest", "summary", "done")
        ):
            raise StudyError(f"{where}: a record holds the run's manifest, summary and done objects")
        try:
            key = record_key(record)
            mine = fixed_properties(record["manifest"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise StudyError(
                f"{where}: its manifest lacks the run's key (run.domain, task, pe_id, seed) or config"
            ) from None
        if key.label != label or key.domain != listed[label]:
            raise StudyError(
                f"{where}: its manifest records {key.label}: a record must be the run it is listed as (under "
                f"{listed[label]} in {STUDY})"
            )
        theirs = study["holds_fixed"].get(key.group_label)
        if not isinstance(theirs, dict):
            raise StudyError(f"{folder / STUDY}: holds nothing fixed for {key.group_label}, which {label} is a run of")
        changed = differences(mine, theirs)
        if changed:
            lines = "; ".join(
                f"{k} {mine.get(k, '(not set)')} ({STUDY}: {theirs.get(k, '(not set)')})" for k in changed
            )
            raise StudyError(f"{where}: its manifest contradicts what {STUDY} holds fixed: {lines}")
    return records


# What each number of a row must be (after run, split and the example or position): (column, whole number, the
# check over the column (the columns before it parsed), what it must be)
_EXAMPLE_COLUMNS = (
    ("example", True, lambda v, c: v >= 0, "a whole number >= 0"),
    ("nll", False, lambda v, c: (v >= 0) & (v <= MAX_NLL), f"a number of nats in [0, {MAX_NLL:.3g}]"),
    ("tokens", True, lambda v, c: v >= 1, "a count of scored tokens, at least 1"),
    ("correct", True, lambda v, c: (v >= 0) & (v <= c["tokens"]), "a count between 0 and the tokens"),
    ("exact", True, lambda v, c: (v == 0) | (v == 1), "0 or 1"),
)
_POSITION_COLUMNS = (
    ("position", True, lambda v, c: v >= 0, "a whole number >= 0"),
    ("tokens", True, lambda v, c: v >= 1, "a count of scored tokens, at least 1"),
    (
        "nll_sum",
        False,
        lambda v, c: (v >= 0) & (v <= MAX_NLL * c["tokens"]),
        f"a sum of NLL in [0, {MAX_NLL:.3g} x the tokens]",
    ),
)


_LAYOUTS = {"per_example": (EXAMPLE_HEADER, _EXAMPLE_COLUMNS), "per_position": (POSITION_HEADER, _POSITION_COLUMNS)}


def _rows(
    folder: Path, name: str, raw: bytes, records: dict[str, dict], kind: str, encoding: str | None
) -> dict[str, dict[str, list[list[str]]]]:
    """A metrics file's rows (`kind` per_example or per_position) as {run: {split: rows}}, every row checked: a run of
    the study (of `encoding` when the file is that encoding's), each number one a model can score, no example or
    position twice. Checked column by column (a study holds hundreds of thousands of rows)."""
    path = folder / name
    header, checks = _LAYOUTS[kind]
    try:
        head, *rows = list(csv.reader(io.StringIO(gzip.decompress(raw).decode()))) or [None]
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as error:
        raise StudyError(f"{path}: damaged, not gzipped CSV ({type(error).__name__}: {error})") from None
    if head != header:
        raise StudyError(f"{path}: header {head}, expected {','.join(header)}")

    def refuse(index: int, what: str) -> StudyError:
        label, split, item = (rows[index] + ["", "", ""])[:3]
        return StudyError(f"{path}: {label}, {split} {header[2]} {item} (line {index + 2}): {what}")

    if bad := [i for i, row in enumerate(rows) if len(row) != len(header)]:
        raise refuse(bad[0], f"{len(rows[bad[0]])} fields, expected {len(header)} ({','.join(header)})")
    columns = dict(zip(header, zip(*rows, strict=True), strict=True)) if rows else dict.fromkeys(header, ())
    for label in dict.fromkeys(columns["run"]):
        if label not in records:
            raise refuse(columns["run"].index(label), f"a row of {label}, which {RUNS} holds no record of")
        if encoding and record_key(records[label]).encoding != encoding:
            raise refuse(columns["run"].index(label), f"a row of {label}, which is no run of {encoding}")
    parsed: dict[str, np.ndarray] = {}
    for column, whole, valid, what in checks:
        try:
            values = np.array(columns[column], dtype=float)
        except ValueError:
            index = next(i for i, text in enumerate(columns[column]) if not _is_number(text))
            raise refuse(index, f"{column} {columns[column][index]!r}, not a number") from None
        parsed[column] = values
        with np.errstate(invalid="ignore", over="ignore"):
            good = np.isfinite(values) & valid(values, parsed)
            if whole:
                good &= values == np.round(values)
        if not good.all():
            index = int(np.flatnonzero(~good)[0])
            raise refuse(index, f"{column} {columns[column][index]}, expected {what}")
    keys = list(zip(columns["run"], columns["split"], parsed[header[2]].tolist(), strict=True))
    if len(set(keys)) != len(keys):
        seen: set[tuple[str, str, float]] = set()
        index = next(i for i, key in enumerate(keys) if key in seen or seen.add(key))
        raise refuse(index, f"{header[2]} listed twice")
    out: dict[str, dict[str, list[list[str]]]] = {}
    for row in rows:
        out.setdefault(row[0], {}).setdefault(row[1], []).append(row[2:])
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_summaries(published: PublishedStudy) -> None:
    """Every record's summary is its rows': each evaluated split has rows, whose mean NLL, count and tokens are the
    summary's; a skipped or unlisted split has none."""
    for label, record in published.records.items():
        splits = record["summary"].get("splits")
        where = f"{published.folder / RUNS}: {label}"
        rows_file = published.example_path(label)
        if not isinstance(splits, dict) or not all(isinstance(entry, dict) for entry in splits.values()):
            raise StudyError(f'{where}: its summary is not {{"splits": {{split: entry}}}}')
        rows = published.examples.get(label, {})
        for split in sorted(set(splits) | set(rows)):
            entry = splits.get(split)
            if entry is None or "skipped" in entry:
                if split in rows:
                    said = "does not list" if entry is None else "records as skipped"
                    raise StudyError(f"{rows_file}: rows of {label}, {split}, a split its summary {said}")
                continue
            if split not in rows:
                raise StudyError(f"{rows_file}: no row of {label}, {split}, a split its summary scores")
            nll = [float(row[1]) for row in rows[split]]
            mean, claimed = math.fsum(nll) / len(nll), entry.get("nll")
            if not isinstance(claimed, int | float) or not abs(mean - claimed) <= SUMMARY_TOLERANCE * max(
                1.0, abs(mean)
            ):
                raise StudyError(
                    f"{where}: its {split} summary has nll {claimed!r}, the mean of its {len(nll)} rows in "
                    f"{rows_file.relative_to(published.folder)} is {mean!r}: the record and its rows disagree"
                )
            tokens = sum(int(row[2]) for row in rows[split])
            for name, counted in (("examples", len(nll)), ("tokens", tokens)):
                if name in entry and entry[name] != counted:
                    raise StudyError(
                        f"{where}: its {split} summary has {entry[name]!r} {name}, its rows in "
                        f"{rows_file.relative_to(published.folder)} "
                        f"{counted}: the record and its rows disagree"
                    )


def _settle_text(path: Path, raw: bytes) -> str:
    """A settle record's text, once it is a design make settle wrote (read_design checks the design itself)."""
    try:
        text = raw.decode()
        design = json.loads(text).get("design")
    except (UnicodeDecodeError, ValueError, AttributeError) as error:
        raise StudyError(f"{path}: damaged, not a settle record ({type(error).__name__}: {error})") from None
    if not isinstance(design, dict):
        raise StudyError(f"{path}: no design: not a settle record written by make settle")
    return text


# ------------------------------------------------------------------------------------------------ joining


def materialize(published: PublishedStudy, label: str, runs_root: Path) -> Path:
    """Write one published run as a finished run folder under `runs_root` (what the analysis reads); its done.json
    names the study and the run (in_study_terms names them instead of this folder)."""
    key = published.key(label)
    folder = key.folder(runs_root)
    record = published.records[label]
    write_json(folder / MANIFEST, record["manifest"])
    write_json(summary_path(folder), record["summary"])
    for split, rows in published.examples.get(label, {}).items():
        write_text(per_example_path(folder, split), _csv_text(EXAMPLE_HEADER[2:], rows))
    for split, rows in published.positions.get(label, {}).items():
        write_text(per_position_path(folder, split), _csv_text(POSITION_HEADER[2:], rows))
    write_json(folder / DONE, {**record["done"], "published": str(published.folder), "published_run": label})
    return folder


def settle_record(published: PublishedStudy, domain: str) -> str | None:
    return published.settles.get(domain)


def _design(path: Path) -> Any:
    """The design a settle record holds (None when it cannot be read: read_design names the damage)."""
    try:
        return json.loads(path.read_text()).get("design")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return None


def largest_difference(a: dict[int, float], b: dict[int, float]) -> tuple[float, int | None]:
    """(the largest |a - b| over the examples, its example); inf when the example sets differ."""
    if set(a) != set(b):
        return math.inf, None
    if not a:
        return 0.0, None
    ids = sorted(a)
    diffs = np.abs(np.array([a[i] for i in ids]) - np.array([b[i] for i in ids]))
    worst = int(np.argmax(diffs))
    return float(diffs[worst]), ids[worst]


def worst_difference(
    mine: dict[str, dict[int, float]], theirs: dict[str, dict[int, float]]
) -> tuple[float, str | None, int | None]:
    """(the largest per-example difference over every split either holds, its split, its example): inf, with no
    example, when a split's examples differ; (0, None, None) when neither holds a split."""
    worst: tuple[float, str | None, int | None] = (0.0, None, None)
    for split in sorted(set(mine) | set(theirs)):
        diff, example = largest_difference(mine.get(split, {}), theirs.get(split, {}))
        if worst[1] is None or diff > worst[0]:
            worst = (diff, split, example)
    return worst


def local_metrics(run: RunFolder) -> dict[str, dict[int, float]]:
    """{split: {example: nll}} of a local run's per-example files."""
    out = {}
    for split, rows in _metric_rows(run, "per_example"):
        out[split] = {int(row[0]): float(row[1]) for row in rows}
    return out


def disagreement(published: PublishedStudy, run: RunFolder, tolerance: float) -> str | None:
    """Why a local copy of a published run does not agree with it (the largest per-example difference over every
    split, with its split and example), or None when every split agrees within `tolerance` nats."""
    diff, split, example = worst_difference(local_metrics(run), published.metrics(run.label))
    if diff <= tolerance:
        return None
    if math.isinf(diff):
        return f"{run.label}: scores other {split} examples than the published run"
    return (
        f"{run.label}: {split} example {example} differs from the published run by {diff:.3g} nats (tolerance "
        f"{tolerance:g}); the local run is not the published one (another machine, precision or code?)"
    )


def copies_disagree(first: PublishedStudy, other: PublishedStudy, label: str) -> str | None:
    """Why two studies' copies of one run cannot both be it (their largest per-example difference beyond the
    smaller tolerance), or None when they agree."""
    tolerance = min(first.tolerance, other.tolerance)
    diff, split, example = worst_difference(first.metrics(label), other.metrics(label))
    if diff <= tolerance:
        return None
    what = (
        f"they score other {split} examples"
        if math.isinf(diff)
        else f"{split} example {example} differs by {diff:.3g} nats (tolerance {tolerance:g})"
    )
    return (
        f"{label}: {first.example_path(label)} and {other.example_path(label)} hold it with other numbers: {what}; "
        "at most one of them is this run"
    )


def _studies_conflict(studies: list[PublishedStudy]) -> list[str]:
    """Where two studies hold one group fixed differently, or one domain under two designs."""
    problems = []
    for i, first in enumerate(studies):
        for other in studies[i + 1 :]:
            for group in sorted(set(first.study["holds_fixed"]) & set(other.study["holds_fixed"])):
                mine, theirs = first.study["holds_fixed"][group], other.study["holds_fixed"][group]
                for key in differences(mine, theirs):
                    problems.append(
                        f"{group}: {other.folder / STUDY} holds {key} {theirs.get(key, '(not set)')}, "
                        f"{first.folder / STUDY} {mine.get(key, '(not set)')}"
                    )
            for domain in sorted(set(first.settles) & set(other.settles)):
                if json.loads(first.settles[domain])["design"] != json.loads(other.settles[domain])["design"]:
                    problems.append(
                        f"{other.folder / SETTLE_DIR / f'{domain}.json'}: another make-settle design than "
                        f"{first.folder / SETTLE_DIR / f'{domain}.json'}; a design is fixed at its first look"
                    )
    return problems


def join(studies: list[PublishedStudy], local_root: Path, merged: Path, domains: list[str]) -> list[str]:
    """Lay out in `merged` the published runs of `studies` (as run folders) and links to the local runs of
    `domains`. Refused by name (StudyError): two studies holding one run with other numbers, one group fixed
    differently or one domain under two designs; a local run of a study's group that differs in what the study holds
    fixed; a local copy of a published run that does not agree with it within the study's tolerance (it is read from
    the study when it does). Returns one note per local run that reproduced a published one."""
    notes, problems = [], _studies_conflict(studies)
    holder: dict[str, PublishedStudy] = {}  # run -> the study it is read from: the first that holds it
    for published in studies:
        for label in published.labels:
            first = holder.setdefault(label, published)
            if first is published:
                materialize(published, label, merged)
            elif (why := copies_disagree(first, published, label)) is not None:
                problems.append(why)
        for domain, record in published.settles.items():
            if not (merged / domain / SETTLE_FILE).exists():
                write_text(merged / domain / SETTLE_FILE, record)
    for domain in domains:
        local_record, joined_record = local_root / domain / SETTLE_FILE, merged / domain / SETTLE_FILE
        if local_record.is_file() and not joined_record.exists():
            write_text(joined_record, local_record.read_text())
        elif local_record.is_file() and _design(local_record) != _design(joined_record):
            origin = next(study for study in studies if domain in study.settles)
            problems.append(
                f"{local_record}: another make-settle design than the study's "
                f"({origin.folder / SETTLE_DIR / f'{domain}.json'}); a design is fixed at its first look"
            )
        try:
            local = discover_runs(local_root, domain)
        except FileNotFoundError:
            continue
        for run in local:
            if run.label in holder:
                published = holder[run.label]
                if run.finished and (why := disagreement(published, run, published.tolerance)) is not None:
                    problems.append(why)
                elif run.finished:
                    notes.append(
                        f"{run.label}: the local run reproduces the published one within {published.tolerance:g} nats"
                    )
                continue
            holding = [study for study in studies if run.key.group_label in study.study["holds_fixed"]]
            if run.finished and not run.derived and holding:
                mine = fixed_properties(read_run_json(run, run.path / MANIFEST))
                theirs = holding[0].study["holds_fixed"][run.key.group_label]
                for key in differences(mine, theirs):
                    problems.append(
                        f"{run.label}: {key} {mine.get(key, '(not set)')}, the study has {theirs.get(key, '(not set)')}"
                    )
            target = run.key.folder(merged)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(run.path.resolve(), target_is_directory=True)
    if problems:
        raise StudyError(
            f"refusing to join {' and '.join(str(study.folder) for study in studies)}: a joining run must match what "
            "the study holds fixed and agree with the published copy of the same run:\n"
            + "\n".join(f"  {line}" for line in problems)
        )
    return notes


def joined_runs(
    local: Path, studies: list[PublishedStudy], scratch: Path, domains: list[str]
) -> tuple[Path, list[str]]:
    """The runs root to analyse: `local` itself, or with published studies (read_studies) `scratch`, laid out with
    the published runs as run folders and links to the local runs of `domains` (join); the notes of the local runs
    that reproduced a published one."""
    if not studies:
        return local, []
    return scratch, join(studies, local, scratch, domains)


# Where a run folder's files come from in a study: the record's parts, the metrics files
_RUN_FILES = {MANIFEST: "the manifest", DONE: "the done record", f"{METRICS}/{SUMMARY}": "the summary"}
_METRICS_FILE = re.compile(rf"{METRICS}/(.+)\.(per_example|per_position)\.csv")


def in_study_terms(text: str, scratch: Path) -> str:
    """`text` with every path of a materialised run's file under `scratch` (a temporary folder, gone once the
    command ends) replaced by the study's own file and the run, e.g. `docs/results/x/runs.json.gz (the manifest of
    jsb/nope/seed1)`."""

    def named(match: re.Match) -> str:
        path = Path(match[0])
        for folder in [path, *path.parents]:
            if folder == scratch or scratch not in folder.parents:
                break
            if folder.is_symlink():  # a local run linked in: its own path
                return str(Path(os.path.realpath(folder)) / path.relative_to(folder))
            try:
                done = json.loads((folder / DONE).read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(done, dict) or "published_run" not in done:
                continue
            study, label = Path(done["published"]), done["published_run"]
            inside = path.relative_to(folder).as_posix()
            if inside in _RUN_FILES:
                return f"{study / RUNS} ({_RUN_FILES[inside]} of {label})"
            if kind := _METRICS_FILE.fullmatch(inside):
                encoding = folder.parent.name
                name = (
                    _study_examples_name(study, encoding)
                    if kind[2] == "per_example"
                    else f"{PER_POSITION}/{encoding}.csv.gz"
                )
                return f"{study / name} ({label}, split {kind[1]})"
            return f"{study / RUNS} ({label})"
        return match[0]

    return re.sub(re.escape(str(scratch)) + r"/[^\s:,;()]+", named, text)


def _study_examples_name(study: Path, encoding: str) -> str:
    """The study's file of an encoding's per-example rows, by its format (read again: only an error names it)."""
    try:
        format_ = json.loads((study / STUDY).read_text()).get("format")
    except (OSError, ValueError, AttributeError):
        format_ = FORMAT
    return examples_name(format_, encoding)


@contextmanager
def joined_scratch(prefix: str) -> Iterator[Path]:
    """A temporary folder to lay studies out in (joined_runs). An error raised inside that names a file of a
    published run laid out there is re-raised naming the study's own file and the run instead (in_study_terms)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        try:
            yield Path(scratch)
        except Exception as error:
            if len(error.args) == 1 and isinstance(error.args[0], str):
                error.args = (in_study_terms(error.args[0], Path(scratch)),)
            raise


def add_with_option(parser: argparse.ArgumentParser, help: str) -> None:
    """The `--with STUDY ...` option of the commands that read published studies beside the local runs."""
    parser.add_argument("--with", dest="with_studies", nargs="+", type=Path, default=[], metavar="STUDY", help=help)
