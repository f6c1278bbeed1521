"""A published study's format: the evidence of every run, committed under docs/results/<name>/, so that a new encoding
is compared with the published runs without retraining them (`make compare WITH=docs/results/<name>`). This module
holds the names of its files, its constants, StudyError and PublishedStudy (a study as read back); reading one
strictly is pipelines.runs.published_read, publishing one pipelines.runs.published_export, joining local runs with
one pipelines.runs.published_join.

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
    training/<encoding>.csv.gz
                           run, step, train_loss, val_loss, lr, grad_norm   (the runs' training logs, where kept)
    settle/<domain>.json   the make-settle design and looks of a domain, when it has one

One file per encoding: each stays small however many seeds, tasks and encodings the study grows to (a repository
takes files of at most 2 MB: the synthetic study's 337,500 per-example rows gzip to 3 MB in one file, about 0.2 MB
per encoding). CSV rather than Parquet: CSV needs no new dependency (pyarrow is 100+ MB) and reads in any tool; gzip
is written with a zero timestamp, so an export reproduces byte for byte.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.runs.layout import METRICS, RunFolder, RunKey

STUDY = "study.json"
RUNS = "runs.json.gz"
PER_EXAMPLE = "per_example"  # a folder: <encoding>.csv.gz
PER_EXAMPLE_FILE = "per_example.csv.gz"  # formats 1 and 2: every run's per-example rows in one file
PER_POSITION = "per_position"  # a folder: <encoding>.csv.gz
SETTLE_DIR = "settle"
FILES = "files"  # study.json's {file: sha256} of every other file of the study
# 4: the runs' training logs too (pipelines.runs.published_training); 3: one per-example file per encoding; 2: the
# per-example rows in one file (PER_EXAMPLE_FILE); 1: that, and no `files` (read with a warning)
FORMAT = 4
READABLE_FORMATS = (1, 2, 3, FORMAT)
PER_ENCODING_FORMATS = (3, FORMAT)  # the formats with one per-example file per encoding
# A study's tolerance (study.json): two copies of one run trained on the same CPU at other thread counts agree when
# every per-example NLL differs by at most this many nats (other thread counts reorder float sums: about 1e-7
# measured). The same machine and threads give the same bits; another CPU is held to pipelines.runs.tolerance's
# cross-machine bound (README, "make reproduce", has the measurements).
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
POSITION_FILE_PATTERN = re.compile(rf"{PER_POSITION}/([^/]+)\.csv\.gz")
EXAMPLE_FILE_PATTERN = re.compile(rf"{PER_EXAMPLE}/([^/]+)\.csv\.gz")
SETTLE_FILE_PATTERN = re.compile(rf"{SETTLE_DIR}/([^/]+)\.json")


class StudyError(ValueError):
    """A published study is damaged, or a local run cannot join it; the message names the file or the run."""


# What Design.from_json reads of a settle record's design (pipelines.analysis.design), by the type it must have
_DESIGN_KEYS = {"seeds": list, "looks": list, "alpha": (int, float)}


def settle_text(path: Path, raw: bytes) -> str:
    """A settle record's text, once it is one make settle wrote: a JSON object with its design (with the seeds,
    looks and alpha read_design reads) and its looks. Checked where the record is read, so that StudyError names
    `path`, the file itself: the commands read it later from a copy in a temporary folder (read_design checks the
    design's rules)."""
    try:
        record = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError) as error:
        raise StudyError(f"{path}: damaged, not a settle record ({type(error).__name__}: {error})") from None
    if not isinstance(record, dict) or not isinstance(record.get("design"), dict):
        raise StudyError(f"{path}: no design: not a settle record written by make settle")
    if not isinstance(record.get("looks"), list):
        raise StudyError(f"{path}: no looks: not a settle record written by make settle")
    for key, kind in _DESIGN_KEYS.items():
        value = record["design"].get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise StudyError(f"{path}: its design has no {key}: not a settle record written by make settle")
    if problem := looks_disagree(record["design"], record["looks"]):
        raise StudyError(f"{path}: {problem}: a design is fixed at its first look; was the record edited?")
    return raw.decode()


def looks_disagree(design: dict, looks: list) -> str | None:
    """Where a settle record's design contradicts itself or the looks recorded under it, else None: each look tests
    at alpha / K (linear spending over K looks), which the design states (alpha_per_look) and each look records. An
    alpha edited after the looks (say 0.05 to 0.2, checksums recomputed) would decide pairs a look early."""
    if not design["looks"]:
        return None
    level = design["alpha"] / len(design["looks"])
    stated = design.get("alpha_per_look", level)
    if not isinstance(stated, int | float) or not math.isclose(stated, level, rel_tol=1e-9):
        count = len(design["looks"])
        return f"its design's alpha_per_look {stated!r} is not its alpha {design['alpha']:g} over {count} looks"
    for look in looks:
        recorded = look.get("alpha") if isinstance(look, dict) else None
        if recorded is not None and not (isinstance(recorded, int | float) and math.isclose(recorded, level)):
            return (
                f"its design tests each look at alpha {level:g} (alpha {design['alpha']:g} over "
                f"{len(design['looks'])} looks), but look {look.get('look', '?')} was recorded at {recorded!r}"
            )
    return None


def csv_text(header: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def gzipped_csv_rows(path: Path, raw: bytes, header: list[str]) -> list[list[str]]:
    """The rows (without the header) of a study's gzipped CSV file `path`, whose bytes are `raw`; StudyError naming
    the file when it is no gzipped CSV or its header is not `header`."""
    try:
        head, *rows = list(csv.reader(io.StringIO(gzip.decompress(raw).decode()))) or [None]
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as error:
        raise StudyError(f"{path}: damaged, not gzipped CSV ({type(error).__name__}: {error})") from None
    if head != header:
        raise StudyError(f"{path}: header {head}, expected {','.join(header)}")
    return rows


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_tolerance(tolerance: Any, where: str) -> float:
    """The tolerance as a float; StudyError naming `where` unless it is a finite positive number of nats (with an
    infinite one any copy of a run would "reproduce" it)."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 < tolerance < math.inf:
        raise StudyError(f"{where}: the tolerance must be a finite positive number of nats, got {tolerance!r}")
    return float(tolerance)


def metric_rows(run: RunFolder, pattern: str) -> list[tuple[str, list[list[str]]]]:
    """(split, rows without the header) of the run's metrics files of one kind."""
    out = []
    for path in sorted((run.path / METRICS).glob(f"*.{pattern}.csv")):
        split = path.name.removesuffix(f".{pattern}.csv")
        lines = path.read_text().splitlines()[1:]
        out.append((split, [line.split(",") for line in lines if line]))
    return out


def example_file(encoding: str) -> str:
    """The study's file of an encoding's per-example rows (format 3)."""
    return f"{PER_EXAMPLE}/{encoding}.csv.gz"


@dataclass
class PublishedStudy:
    """A study folder as read back: study.json, and its runs' records and metrics rows by run label."""

    folder: Path
    study: dict[str, Any]
    records: dict[str, dict]
    examples: dict[str, dict[str, list[list[str]]]]  # run -> split -> rows (example, nll, tokens, correct, exact)
    positions: dict[str, dict[str, list[list[str]]]]
    settles: dict[str, str] = field(default_factory=dict)  # domain -> the text of its settle record
    training: dict[str, list[list[str]]] = field(default_factory=dict)  # run -> its training log's rows (format 4)

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
    return example_file(encoding) if format_ in PER_ENCODING_FORMATS else PER_EXAMPLE_FILE


def record_key(record: dict) -> RunKey:
    run = record["manifest"]["run"]
    return RunKey(run["domain"], run.get("task") or None, run["pe_id"], int(run["seed"]))
