"""Joining published studies with the local runs: materialize turns a published run's evidence back into a run
folder the analysis reads as it reads its own; join (joined_runs) lays the runs of one or more studies out beside
the local ones, refusing runs that contradict each other (disagreement, copies_disagree); joined_scratch and
in_study_terms name a study's own files in an error; add_with_option is the commands' `--with STUDY ...` option.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from domains.atomic import write_json, write_text
from pipelines.runs.layout import DONE, MANIFEST, METRICS, TRAIN_METRICS, RunFolder, discover_runs
from pipelines.runs.layout import SETTLE as SETTLE_FILE
from pipelines.runs.metrics import (
    SUMMARY,
    per_example_path,
    per_position_path,
    read_run_json,
    run_file_error,
    summary_path,
)
from pipelines.runs.published_format import (
    EXAMPLE_HEADER,
    FORMAT,
    PER_POSITION,
    POSITION_HEADER,
    RUNS,
    SETTLE_DIR,
    STUDY,
    PublishedStudy,
    StudyError,
    csv_text,
    examples_name,
    metric_rows,
    settle_text,
)
from pipelines.runs.published_training import training_file, write_training_log
from pipelines.runs.settings import differences, fixed_properties
from pipelines.runs.tolerance import copy_tolerance, machine_problem


def materialize(published: PublishedStudy, label: str, runs_root: Path) -> Path:
    """Write one published run as a finished run folder under `runs_root` (what the analysis reads); its done.json
    names the study and the run (in_study_terms names them instead of this folder)."""
    key = published.key(label)
    folder = key.folder(runs_root)
    record = published.records[label]
    write_json(folder / MANIFEST, record["manifest"])
    write_json(summary_path(folder), record["summary"])
    for split, rows in published.examples.get(label, {}).items():
        write_text(per_example_path(folder, split), csv_text(EXAMPLE_HEADER[2:], rows))
    for split, rows in published.positions.get(label, {}).items():
        write_text(per_position_path(folder, split), csv_text(POSITION_HEADER[2:], rows))
    if label in published.training:
        write_training_log(folder, published.training[label])
    write_json(folder / DONE, {**record["done"], "published": str(published.folder), "published_run": label})
    return folder


def settle_record(published: PublishedStudy, domain: str) -> str | None:
    return published.settles.get(domain)


def _design(path: Path) -> Any:
    """The design of a settle record settle_text has checked."""
    return json.loads(path.read_text())["design"]


def _link_record(joined: Path, record: Path) -> None:
    """Lay a settle record out in the joined folder as a link to the file itself, not a copy: whatever later refuses
    it (read_design) names that file (in_study_terms follows the link)."""
    joined.parent.mkdir(parents=True, exist_ok=True)
    joined.symlink_to(record.resolve())


def _lay_out_record(joined: Path, published: PublishedStudy, domain: str) -> None:
    """Lay a study's settle record of `domain` out in the joined folder: a link to the study's own file (_link_record)
    where that file holds it; its text where it does not (a study read back before it is written, by publish)."""
    record = published.folder / SETTLE_DIR / f"{domain}.json"
    if record.is_file() and record.read_text() == published.settles[domain]:
        _link_record(joined, record)
    else:
        write_text(joined, published.settles[domain])


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
    for split, rows in metric_rows(run, "per_example"):
        out[split] = {int(row[0]): float(row[1]) for row in rows}
    return out


def disagreement(published: PublishedStudy, run: RunFolder) -> tuple[str | None, float]:
    """(why a local copy of a published run does not agree with it, else None; the tolerance it was held to): the
    largest per-example difference over every split, with its split and example, against the bound of the
    conditions the two were trained under (pipelines.runs.tolerance: 0 on the recorded machine, the study's
    tolerance at another thread count, the cross-machine bound on another CPU or for a record without its machine)."""
    recorded, local = published.records[run.label]["manifest"], read_run_json(run, run.path / MANIFEST)
    if problem := machine_problem(local):
        raise run_file_error(run, run.path / MANIFEST, problem)
    tolerance, condition = copy_tolerance(recorded, local, published.tolerance)
    diff, split, example = worst_difference(local_metrics(run), published.metrics(run.label))
    if diff <= tolerance:
        return None, tolerance
    if math.isinf(diff):
        return f"{run.label}: scores other {split} examples than the published run", tolerance
    return (
        f"{run.label}: {split} example {example} differs from the published run by {diff:.3g} nats (tolerance "
        f"{tolerance:g}: {condition}); the local run is not the published one (another machine, precision or code?)"
    ), tolerance


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
    differently or one domain under two designs; a damaged local settle record; a local run of a study's group that
    differs in what the study holds fixed; a local copy of a published run that does not agree with it within the
    bound of the conditions the two were trained under (pipelines.runs.tolerance; it is read from the study when it
    does). Returns one note per local run that reproduced a published one."""
    notes, problems = [], _studies_conflict(studies)
    holder: dict[str, PublishedStudy] = {}  # run -> the study it is read from: the first that holds it
    for published in studies:
        for label in published.labels:
            first = holder.setdefault(label, published)
            if first is published:
                materialize(published, label, merged)
            elif (why := copies_disagree(first, published, label)) is not None:
                problems.append(why)
        for domain in published.settles:  # checked when the study was read (settle_text)
            if not (merged / domain / SETTLE_FILE).exists():
                _lay_out_record(merged / domain / SETTLE_FILE, published, domain)
    for domain in domains:
        local_record, joined_record = local_root / domain / SETTLE_FILE, merged / domain / SETTLE_FILE
        if local_record.is_file():
            settle_text(local_record, local_record.read_bytes())  # a damaged record is refused by its own name
        if local_record.is_file() and not joined_record.exists():
            _link_record(joined_record, local_record)
        elif local_record.is_file() and _design(local_record) != _design(joined_record):
            origin = next(study for study in studies if domain in study.settles)
            problems.append(
                f"{local_record}: another make-settle design than the study's "
                f"({origin.folder / SETTLE_DIR / f'{domain}.json'}); a design is fixed at its first look"
            )
        elif local_record.is_file() and local_record.resolve() != joined_record.resolve():
            # the same design: the local record holds its later looks (make settle WITH= records them there)
            joined_record.unlink()
            _link_record(joined_record, local_record)
        try:
            local = discover_runs(local_root, domain)
        except FileNotFoundError:
            continue
        for run in local:
            if run.label in holder:
                published = holder[run.label]
                why, tolerance = disagreement(published, run) if run.finished else (None, 0.0)
                if why is not None:
                    problems.append(why)
                elif run.finished:
                    notes.append(f"{run.label}: the local run reproduces the published one within {tolerance:g} nats")
                    log = run.path / TRAIN_METRICS
                    if run.label not in published.training and log.is_file():
                        # published without its log (before format 4): the reproducing run's own log joins it
                        write_text(run.key.folder(merged) / TRAIN_METRICS, log.read_text())
                continue
            holding = [study for study in studies if run.key.group_label in study.study["holds_fixed"]]
            if run.finished and not run.derived and holding:
                mine = fixed_properties(read_run_json(run, run.path / MANIFEST))
                theirs = holding[0].study["holds_fixed"][run.key.group_label]
                changed = differences(mine, theirs)
                for key in changed:
                    problems.append(
                        f"{run.label}: {key} {mine.get(key, '(not set)')}, the study has {theirs.get(key, '(not set)')}"
                    )
                if any(key.startswith("data_hashes.") for key in changed):
                    problems.append(
                        f"{run.label}: trained on other data than the study's runs (a store prepared from other "
                        f"files, such as part of the set's: `make data-{run.domain}` prints how many of how many); "
                        "prepare the data the study was prepared from and train it again (`make train WITH=<study>` "
                        "refuses such a store before it trains)"
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


def runs_label(*folders: Path) -> Path:
    """What a study records as its runs: the local runs folder, then the studies joined to it, as `runs + docs/..`.
    An absolute folder is named relative to the working folder where it lies inside it, else by its own name: a
    published study names no folder of the machine it was built on."""

    def shown(folder: Path) -> str:
        if not folder.is_absolute():
            return str(folder)
        try:
            return str(folder.relative_to(Path.cwd()))
        except ValueError:
            return folder.name

    return Path(" + ".join(map(shown, folders)))


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
            if inside == TRAIN_METRICS:
                return f"{study / training_file(folder.parent.name)} ({label})"
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
