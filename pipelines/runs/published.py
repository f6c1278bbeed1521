"""A published study: the evidence of every run, committed under docs/results/<name>/, so that a new encoding is
compared with the published runs without retraining them (`make compare WITH=docs/results/<name>`).

    study.json             what a joining run must match (`holds_fixed`: domain and its arguments, data hashes,
                           preset, model and trainer config but the encoding, effective batch, the training
                           stream's definition), the package versions and code commit it was produced at, the
                           tolerance two copies of a run must agree within, and the runs it holds
    runs.json.gz           per run: its manifest, metrics/summary.json and done.json
    per_example.csv.gz     run, split, example, nll, tokens, correct, exact     (every evaluation split)
    per_position/<encoding>.csv.gz
                           run, split, position, nll_sum, tokens   (one file per encoding: each stays small
                           however many seeds and encodings the study grows to)
    settle.json            the make-settle design and looks of a domain, when it has one (settle/<domain>.json)

CSV rather than Parquet: the files are small (a JSB study gzips to a few MB), CSV needs no new dependency (pyarrow
is 100+ MB) and reads in any tool; gzip is written with a zero timestamp, so an export reproduces byte for byte.
`materialize` turns the evidence back into run folders the analysis reads as it reads its own.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from domains.atomic import atomic_write, write_json, write_text
from pipelines.runs.layout import DONE, MANIFEST, METRICS, RunFolder, RunKey, discover_runs
from pipelines.runs.layout import SETTLE as SETTLE_FILE
from pipelines.runs.manifest import git_state, package_versions
from pipelines.runs.metrics import per_example_path, per_position_path, read_run_json, summary_path
from pipelines.runs.settings import differences, fixed_properties

STUDY = "study.json"
RUNS = "runs.json.gz"
PER_EXAMPLE = "per_example.csv.gz"
PER_POSITION = "per_position"  # a folder: <encoding>.csv.gz
SETTLE_DIR = "settle"
# Two copies of one run (a published one and a local one) agree when every per-example NLL differs by at most this
# many nats. Measured (README, "Compare your encoding with the published study"): the same CPU and thread count
# reproduce to about 2e-8; other thread counts reorder float sums and differ by up to about 1e-6.
TOLERANCE = 1e-5
STREAM = (
    "sample i of seed k is drawn from numpy.random.default_rng([k, i]); batch s holds samples s*B .. s*B+B-1 "
    "(B the batch per device; ranks take their share of a step's samples); pure function of (seed, step)"
)
EXAMPLE_HEADER = ["run", "split", "example", "nll", "tokens", "correct", "exact"]
POSITION_HEADER = ["run", "split", "position", "nll_sum", "tokens"]


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


def _read_rows(path: Path) -> list[list[str]]:
    with path.open("rb") as handle:
        text = gzip.decompress(handle.read()).decode()
    return list(csv.reader(io.StringIO(text)))[1:]


def _metric_rows(run: RunFolder, pattern: str) -> list[tuple[str, list[list[str]]]]:
    """(split, rows without the header) of the run's metrics files of one kind."""
    out = []
    for path in sorted((run.path / METRICS).glob(f"*.{pattern}.csv")):
        split = path.name.removesuffix(f".{pattern}.csv")
        lines = path.read_text().splitlines()[1:]
        out.append((split, [line.split(",") for line in lines if line]))
    return out


def export_study(runs_root: Path, domains: list[str], out: Path, tolerance: float = TOLERANCE) -> dict:
    """Write the evidence of every finished run of `domains` under `runs_root` into `out`; returns study.json."""
    out.mkdir(parents=True, exist_ok=True)
    records, examples, fixed, domain_runs = {}, [], {}, {}
    positions: dict[str, list[list[str]]] = {}  # encoding -> its runs' rows
    for domain in domains:
        runs = sorted((r for r in discover_runs(runs_root, domain) if r.finished), key=lambda r: r.label)
        domain_runs[domain] = [run.label for run in runs]
        for run in runs:
            manifest = read_run_json(run, run.path / MANIFEST)
            records[run.label] = {
                "manifest": manifest,
                "summary": read_run_json(run, summary_path(run.path)),
                "done": read_run_json(run, run.path / DONE),
            }
            examples += [
                [run.label, split, *row] for split, row_list in _metric_rows(run, "per_example") for row in row_list
            ]
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
        settle = runs_root / domain / SETTLE_FILE
        if settle.is_file():
            (out / SETTLE_DIR).mkdir(exist_ok=True)
            write_text(out / SETTLE_DIR / f"{domain}.json", settle.read_text())
    study = {
        "format": 1,
        "domains": domain_runs,
        "holds_fixed": fixed,
        "stream": STREAM,
        "tolerance_nats": tolerance,
        "produced_at": git_state(),
        "packages": package_versions(),
    }
    files = {
        RUNS: json.dumps(records, sort_keys=True, indent=1),
        PER_EXAMPLE: _csv_text(EXAMPLE_HEADER, examples),
        **{f"{PER_POSITION}/{name}.csv.gz": _csv_text(POSITION_HEADER, rows) for name, rows in positions.items()},
    }
    (out / PER_POSITION).mkdir(exist_ok=True)
    for stale in set((out / PER_POSITION).glob("*.csv.gz")) - {out / name for name in files}:
        stale.unlink()  # an encoding the study no longer holds
    for name, text in files.items():
        data = _gzip_bytes(text)
        atomic_write(out / name, lambda handle, data=data: handle.write(data), mode="wb")
    write_json(out / STUDY, study)
    return study


@dataclass
class PublishedStudy:
    """A study folder as read back: study.json, and its runs' records and metrics rows by run label."""

    folder: Path
    study: dict[str, Any]
    records: dict[str, dict]
    examples: dict[str, dict[str, list[list[str]]]]  # run -> split -> rows (example, nll, tokens, correct, exact)
    positions: dict[str, dict[str, list[list[str]]]]

    def key(self, label: str) -> RunKey:
        run = self.records[label]["manifest"]["run"]
        return RunKey(run["domain"], run.get("task") or None, run["pe_id"], int(run["seed"]))

    def nll(self, label: str, split: str = "test") -> dict[int, float]:
        return {int(row[0]): float(row[1]) for row in self.examples.get(label, {}).get(split, [])}


def read_study(folder: Path) -> PublishedStudy:
    """The published study in `folder`; StudyError naming the file when a piece is missing or damaged."""
    folder = Path(folder)
    try:
        study = json.loads((folder / STUDY).read_text())
        records = json.loads(gzip.decompress((folder / RUNS).read_bytes()))
        examples, positions = {}, {}
        if not (folder / PER_POSITION).is_dir():
            raise FileNotFoundError(2, "missing", str(folder / PER_POSITION))
        position_rows = [row for path in sorted((folder / PER_POSITION).glob("*.csv.gz")) for row in _read_rows(path)]
        for rows, target in ((_read_rows(folder / PER_EXAMPLE), examples), (position_rows, positions)):
            for label, split, *rest in rows:
                target.setdefault(label, {}).setdefault(split, []).append(rest)
    except FileNotFoundError as error:
        raise StudyError(f"{error.filename}: missing; {folder} is not a published study (make publish)") from None
    except (OSError, ValueError, EOFError) as error:
        raise StudyError(f"{folder}: a file of the study is damaged ({type(error).__name__}: {error})") from None
    missing = sorted(set(label for labels in study["domains"].values() for label in labels) - set(records))
    if missing:
        raise StudyError(f"{folder / RUNS}: no record of {', '.join(missing)}, which {STUDY} lists")
    return PublishedStudy(folder, study, records, examples, positions)


def materialize(published: PublishedStudy, label: str, runs_root: Path) -> Path:
    """Write one published run as a finished run folder under `runs_root` (what the analysis reads)."""
    key = published.key(label)
    folder = key.folder(runs_root)
    record = published.records[label]
    write_json(folder / MANIFEST, record["manifest"])
    write_json(summary_path(folder), record["summary"])
    for split, rows in published.examples.get(label, {}).items():
        write_text(per_example_path(folder, split), _csv_text(EXAMPLE_HEADER[2:], rows))
    for split, rows in published.positions.get(label, {}).items():
        write_text(per_position_path(folder, split), _csv_text(POSITION_HEADER[2:], rows))
    write_json(folder / DONE, {**record["done"], "published": str(published.folder)})
    return folder


def settle_record(published: PublishedStudy, domain: str) -> str | None:
    path = published.folder / SETTLE_DIR / f"{domain}.json"
    return path.read_text() if path.is_file() else None


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


def local_metrics(run: RunFolder) -> dict[str, dict[int, float]]:
    """{split: {example: nll}} of a local run's per-example files."""
    out = {}
    for split, rows in _metric_rows(run, "per_example"):
        out[split] = {int(row[0]): float(row[1]) for row in rows}
    return out


def disagreement(published: PublishedStudy, run: RunFolder, tolerance: float) -> str | None:
    """Why a local copy of a published run does not agree with it (the largest per-example difference over every
    split, with its split and example), or None when every split agrees within `tolerance` nats."""
    mine = local_metrics(run)
    worst = None
    for split in sorted(set(mine) | set(published.examples.get(run.label, {}))):
        diff, example = largest_difference(mine.get(split, {}), published.nll(run.label, split))
        if worst is None or diff > worst[0]:
            worst = (diff, split, example)
    if worst is None or worst[0] <= tolerance:
        return None
    diff, split, example = worst
    if math.isinf(diff):
        return f"{run.label}: scores other {split} examples than the published run"
    return (
        f"{run.label}: {split} example {example} differs from the published run by {diff:.3g} nats (tolerance "
        f"{tolerance:g}); the local run is not the published one (another machine, precision or code?)"
    )


def join(published: PublishedStudy, local_root: Path, merged: Path, domains: list[str]) -> list[str]:
    """Lay out in `merged` the published runs (as run folders) and links to the local runs of `domains`: a local
    run of a study domain that differs in what the study holds fixed is refused by name (StudyError); a local copy
    of a published run must agree with it within the study's tolerance (else StudyError showing the difference)
    and is then read from the study. Returns one note per local run that reproduced a published one."""
    tolerance = float(published.study.get("tolerance_nats", TOLERANCE))
    notes, problems = [], []
    for domain, labels in published.study["domains"].items():
        for label in labels:
            materialize(published, label, merged)
        record = settle_record(published, domain)
        if record is not None:
            write_text(merged / domain / SETTLE_FILE, record)
    for domain in domains:
        local_record, joined_record = local_root / domain / SETTLE_FILE, merged / domain / SETTLE_FILE
        if local_record.is_file() and not joined_record.exists():
            write_text(joined_record, local_record.read_text())
        elif local_record.is_file() and _design(local_record) != _design(joined_record):
            problems.append(
                f"{local_record}: another make-settle design than the study's "
                f"({published.folder / SETTLE_DIR / f'{domain}.json'}); a design is fixed at its first look"
            )
        try:
            local = discover_runs(local_root, domain)
        except FileNotFoundError:
            continue
        labels = set(published.study["domains"].get(domain, []))
        fixed = published.study["holds_fixed"]
        for run in local:
            if run.label in labels:
                if run.finished and (why := disagreement(published, run, tolerance)) is not None:
                    problems.append(why)
                elif run.finished:
                    notes.append(f"{run.label}: the local run reproduces the published one within {tolerance:g} nats")
                continue
            if run.finished and not run.derived and run.key.group_label in fixed:
                mine = fixed_properties(read_run_json(run, run.path / MANIFEST))
                theirs = fixed[run.key.group_label]
                for key in differences(mine, theirs):
                    problems.append(
                        f"{run.label}: {key} {mine.get(key, '(not set)')}, the study has {theirs.get(key, '(not set)')}"
                    )
            target = run.key.folder(merged)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(run.path.resolve(), target_is_directory=True)
    if problems:
        raise StudyError(
            f"refusing to join {published.folder}: a joining run must match what the study holds fixed and agree "
            "with the published copy of the same run:\n" + "\n".join(f"  {line}" for line in problems)
        )
    return notes


def joined_runs(
    local: Path, studies: list[PublishedStudy], scratch: Path, domains: list[str]
) -> tuple[Path, list[str]]:
    """The runs root to analyse: `local` itself, or with published studies (read_study) `scratch`, laid out with
    the published runs as run folders and links to the local runs of `domains` (join); the notes of the local runs
    that reproduced a published one."""
    if not studies:
        return local, []
    notes = []
    for published in studies:
        notes += join(published, local, scratch, domains)
    return scratch, notes


def add_with_option(parser: argparse.ArgumentParser, help: str) -> None:
    """The `--with STUDY ...` option of the commands that read published studies beside the local runs."""
    parser.add_argument("--with", dest="with_studies", nargs="+", type=Path, default=[], metavar="STUDY", help=help)
