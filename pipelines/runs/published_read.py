"""Reading a published study (pipelines.runs.published_format) strictly: read_study, read_studies (`--with`),
parse_study, and the checks of its records, rows and summaries.

A study is what others join, cite and grow, so it is read strictly (`read_study`): only the files study.json lists, each
against its sha256; every record is the run it is listed as (its manifest's key), holds fixed what study.json says, and
its summary is its rows' (the mean per-example NLL, the examples, the tokens); every value is one a model can score. A
refusal names the study's file, the run and what is wrong. A study written before the checksums (format 1) is read with
the same checks but the checksums, with a warning: `make publish WITH=<study> STUDY=<study>` re-publishes it with them.
A study of format 2 holds every run's per-example rows in one file, per_example.csv.gz; it is read as such, and
re-publishing it writes the current format. Publishing (`export_study`) builds the whole study in memory, reads it back
with the same checks, and only then writes it, all or nothing.
"""

from __future__ import annotations

import gc
import gzip
import json
import math
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.runs.published_format import (
    EXAMPLE_FILE_PATTERN,
    EXAMPLE_HEADER,
    FILES,
    FORMAT,
    MAX_NLL,
    PER_ENCODING_FORMATS,
    PER_EXAMPLE_FILE,
    PER_POSITION,
    POSITION_FILE_PATTERN,
    POSITION_HEADER,
    READABLE_FORMATS,
    RUNS,
    SETTLE_DIR,
    SETTLE_FILE_PATTERN,
    STUDY,
    SUMMARY_TOLERANCE,
    TOLERANCE,
    PublishedStudy,
    StudyError,
    check_tolerance,
    example_file,
    gzipped_csv_rows,
    record_key,
    settle_text,
    sha256,
)
from pipelines.runs.published_training import TRAINING_FILE_PATTERN, parse_training
from pipelines.runs.settings import differences, fixed_properties
from pipelines.runs.tolerance import machine_problem


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

    with collector_paused():
        published = parse_study(folder, study, read)
    check_reported_designs(published)
    return published


# what a design is, as its settle record and the report's summary.json both state it
DESIGN_FIELDS = ("seeds", "looks", "alpha", "ref", "encodings")


def check_reported_designs(published: PublishedStudy) -> None:
    """StudyError when a settle record of the study says another design than the report published beside it
    (summary.json's verdict_design of that domain): the design an edited record states, with its checksums
    recomputed, is not the one the study's looks were taken under. A folder without summary.json is not checked."""
    path = published.folder / "summary.json"
    if not published.settles or not path.is_file():
        return
    try:
        reported = json.loads(path.read_text())["domains"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise StudyError(f"{path}: damaged, not a study's summary ({type(error).__name__}: {error})") from None
    for domain, text in published.settles.items():
        design = json.loads(text)["design"]
        other = (reported.get(domain) or {}).get("verdict_design") if isinstance(reported, dict) else None
        if not isinstance(other, dict):
            continue
        differ = [key for key in DESIGN_FIELDS if key in other and design.get(key) != other[key]]
        if differ:
            shown = "; ".join(f"{key} {design.get(key)!r} (summary.json: {other[key]!r})" for key in differ)
            raise StudyError(
                f"{published.folder / SETTLE_DIR / f'{domain}.json'}: another design than the study's report states: "
                f"{shown}; a design is fixed at its first look: was the record edited?"
            )


@contextmanager
def collector_paused() -> Iterator[None]:
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
    if format_ in PER_ENCODING_FORMATS:  # every encoding's per-example file listed: a run without rows is named
        unlisted = [example_file(name) for name in sorted(_encodings(records)) if example_file(name) not in listed]
        if unlisted:
            raise StudyError(
                f"{folder / STUDY}: `{FILES}` does not list {', '.join(unlisted)}, the per-example "
                "rows of runs it holds"
            )
    examples: dict[str, dict[str, list[list[str]]]] = {}
    positions: dict[str, dict[str, list[list[str]]]] = {}
    settles, training = {}, {}
    for name in listed:
        if name == PER_EXAMPLE_FILE:
            examples.update(_rows(folder, name, load(name), records, "per_example", None))
        elif match := EXAMPLE_FILE_PATTERN.fullmatch(name):
            examples.update(_rows(folder, name, load(name), records, "per_example", match[1]))
        elif match := POSITION_FILE_PATTERN.fullmatch(name):
            positions.update(_rows(folder, name, load(name), records, "per_position", match[1]))
        elif match := SETTLE_FILE_PATTERN.fullmatch(name):
            settles[match[1]] = settle_text(folder / name, load(name))
        elif match := TRAINING_FILE_PATTERN.fullmatch(name):
            training.update(parse_training(folder, name, load(name), records, match[1]))
    published = PublishedStudy(folder, study, records, examples, positions, settles, training)
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
    # format 2: the per-example rows in one file; formats 3 and 4: one per encoding; format 4: the training logs
    per_encoding = study["format"] in PER_ENCODING_FORMATS
    examples_file = EXAMPLE_FILE_PATTERN.fullmatch if per_encoding else {PER_EXAMPLE_FILE}.__contains__
    logs = TRAINING_FILE_PATTERN.fullmatch if study["format"] == FORMAT else lambda name: None
    for name in files:
        settle = SETTLE_FILE_PATTERN.fullmatch(name)
        if name == RUNS or examples_file(name) or POSITION_FILE_PATTERN.fullmatch(name) or logs(name):
            continue
        if settle and settle[1] in study["domains"]:
            continue
        raise StudyError(f"{where}: lists {name!r}, which is no file of a study of {', '.join(study['domains'])}")
    for name in (RUNS,) if per_encoding else (RUNS, PER_EXAMPLE_FILE):
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
        if problem := machine_problem(record["manifest"]):
            raise StudyError(f"{where}: its manifest's {problem}")
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
    rows = gzipped_csv_rows(path, raw, header)

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
