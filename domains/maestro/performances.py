"""performances.csv: one row per performance the MAESTRO CSV lists, in the CSV's order, and its check against it.

A row's `split` is train, val or test (with the performance's tokens, its first chunk in that split and its
number of chunks), `skipped` (present but not tokenisable: `skipped` holds the reason) or `missing` (listed by the
CSV but not in an unpacked folder, which may hold only some performances). `check_against_index` makes sure, before
a store is written, that the rows account for every performance the CSV lists exactly once, so that none is
dropped silently, and, with the official split, that each is in its CSV split.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from domains.atomic import write_text
from domains.maestro.archive import Performance

PERFORMANCES_FILE = "performances.csv"
COLUMNS = ["midi_filename", "split", "csv_split", "sha256", "tokens", "first_chunk", "chunks", "skipped"]
SPLITS = ("train", "val", "test")
SKIPPED, MISSING = "skipped", "missing"
MISSING_REASON = "not in the unpacked folder"


def write_performances(path: Path, rows: list[dict[str, Any]]) -> None:
    table = io.StringIO()
    writer = csv.DictWriter(table, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, table.getvalue())


def check_against_index(rows: list[dict[str, Any]], index: list[Performance], split_mode: str, origin: str) -> None:
    """Raise ValueError naming the performance unless every one `index` (the CSV at `origin`) lists has exactly one
    row, in train, val or test (with split_mode `official`: its CSV split) or skipped or missing with a reason,
    and every row is a performance the CSV lists."""
    listed = {performance.midi_filename for performance in index}
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["midi_filename"] not in listed:
            raise ValueError(f"{origin}: the store would have a row for {row['midi_filename']}, which it does not list")
        rows_of.setdefault(row["midi_filename"], []).append(row)
    for performance in index:
        found = rows_of.get(performance.midi_filename, [])
        where = f"{origin}: {performance.midi_filename} (CSV split {performance.csv_split})"
        if not found:
            raise ValueError(
                f"{where} is in no split of the store and not recorded as skipped or missing: it would be dropped "
                "silently; the store is not written"
            )
        if len(found) > 1:
            splits = ", ".join(row["split"] for row in found)
            raise ValueError(f"{where} has {len(found)} rows in the store ({splits}); a performance is in one split")
        split = found[0]["split"]
        if split in (SKIPPED, MISSING):
            if not found[0].get("skipped"):
                raise ValueError(f"{where} is recorded as {split} without a reason")
        elif split not in SPLITS:
            raise ValueError(f"{where} is in split {split!r}, expected one of {', '.join(SPLITS + (SKIPPED, MISSING))}")
        elif split_mode == "official" and split != performance.csv_split:
            raise ValueError(f"{where} is in {split}; the official split puts it in {performance.csv_split}")
