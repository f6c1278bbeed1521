"""How a MAESTRO store was built: the phases' times, the tokenising, wall time and peak memory
(`<store>/preparation.json`), and the summary `make data-maestro` prints.

The record is kept apart from meta.json on purpose: meta.json describes the store, and is a function of the raw
files, the settings and the code only, so that two builds of one store (cold, from the cache, resumed after an
interruption, on another machine) give the same bytes in every file of it; how long a build took, how much of it
came from the token cache and how much memory it used differ from build to build. preparation.json is written
into the new store's folder after meta.json, so it is not one of the files meta.json lists and checks; it is
swapped in with the store and describes the build that made it.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from domains.atomic import write_text
from domains.maestro.performances import SPLITS
from domains.maestro.progress import human

PREPARATION_FILE = "preparation.json"
MAX_LISTED = 20  # skipped performances named one by one in the summary; meta.json and performances.csv hold all


class Stopwatch:
    """Consecutive phases of one preparation: `lap(name)` ends the phase that began at the previous lap."""

    def __init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self.began = self.last = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.last
        self.last = now

    @property
    def total(self) -> float:
        return self.last - self.began


def peak_memory_mib() -> dict[str, float]:
    """Peak resident memory of this process and of its largest finished child (a tokenising worker), in MiB."""
    unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return {
        "process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit / 2**20, 1),
        "largest_worker": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * unit / 2**20, 1),
    }


def preparation_record(watch: Stopwatch, tokenisation: dict[str, Any]) -> dict[str, Any]:
    """The record of a build that has just written its store: `watch`'s phases, whose sum is the wall time."""
    return {
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "wall_seconds": round(watch.total, 2),
        "phases_seconds": {name: round(seconds, 2) for name, seconds in watch.phases.items()},
        "tokenisation": tokenisation,
        "peak_memory_mib": peak_memory_mib(),
    }


def write_record(folder: Path, record: dict[str, Any]) -> None:
    """preparation.json, its keys in the order written (the phases in the order they ran)."""
    write_text(folder / PREPARATION_FILE, json.dumps(record, indent=2) + "\n")


def read_record(store: Path) -> dict[str, Any]:
    """The store's preparation.json; empty for a store built before it was written (or if it is unreadable:
    it is a record only, nothing reads the store through it)."""
    try:
        record = json.loads((store / PREPARATION_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def summary_lines(meta: dict[str, Any], record: dict[str, Any], built_now: bool) -> list[str]:
    """What `make data-maestro` prints after the split counts: the performances against the CSV, the split, the
    tokens and chunks per split, the skipped files with their reasons, and the build's record."""
    performances = meta["performances"]
    settings = meta.get("settings", {})
    lines = [
        f"performances: {performances['listed']} listed in the CSV, {performances['present']} present, "
        f"{performances['used']} used, {performances['skipped']} skipped, {performances['missing']} missing"
    ]
    csv_counts = performances.get("csv_per_split")  # stores built before it was recorded lack it
    per_split = {name: performances["per_split"][name] for name in SPLITS}
    if settings.get("split") == "official":
        line = "split: official (the CSV's split column)"
        if csv_counts:
            line += ": " + ", ".join(
                f"{name} {per_split[name]['performances']} of the CSV's {csv_counts[name]}" for name in SPLITS
            )
            if any(per_split[name]["performances"] != csv_counts[name] for name in SPLITS):
                line += " (the others are skipped or missing: performances.csv says which)"
        lines.append(line)
    else:
        lines.append(
            f"split: random 90/5/5 over the performances that tokenised, split_seed {settings.get('split_seed')} "
            "(the paper's protocol; domain.args.split=official takes the CSV's split column)"
        )
    lines.append(f"{'':6}{'performances':>13}{'tokens':>13}{'chunks':>9}{'chunk tokens':>14}")
    for name, counts in per_split.items():
        stored = meta["splits"][name]
        lines.append(
            f"{name:6}{counts['performances']:>13,}{counts['tokens']:>13,}{stored['examples']:>9,}{stored['tokens']:>14,}"
        )
    skipped = meta.get("skipped", {})
    lines.append(f"skipped: {len(skipped) or 'none'}")
    lines += [f"  {name}: {reason}" for name, reason in list(skipped.items())[:MAX_LISTED]]
    if len(skipped) > MAX_LISTED:
        lines.append(f"  ... and {len(skipped) - MAX_LISTED} more (meta.json and performances.csv list them all)")
    if performances["missing"]:
        lines.append(
            f"missing: {performances['missing']} performances the CSV lists are not in the unpacked folder "
            "(performances.csv names them)"
        )
        lines.append(
            f"note: a partial store, {performances['present']:,} of the {performances['listed']:,} performances: "
            "runs trained on it cannot join a study prepared from the whole set (every published MAESTRO study; "
            "`make train WITH=` refuses them); for the whole set, `POSBENCH_MIRROR=<the unpacked MAESTRO v3.0.0 "
            "set> make data-maestro`, or `make data-maestro` without POSBENCH_MIRROR to download it"
        )
    if not record:
        return lines + ["(no preparation.json: the store was built before its build was recorded)"]
    if not built_now:
        lines.append(f"the store was current, nothing was rebuilt; its build, finished {record['finished']}:")
    tokens = record["tokenisation"]
    line = f"tokenising: {tokens['tokenised']} tokenised, {tokens['from_cache']} from the cache"
    if tokens["tokenised"]:
        line += (
            f", {tokens['workers']} workers: {human(tokens['tokens_per_second'])} tokens/s, "
            f"{tokens['files_per_second']:.2f} files/s"
        )
    lines.append(line)
    phases = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in record["phases_seconds"].items())
    lines.append(f"phases: {phases}; wall time {record['wall_seconds']:.1f} s")
    memory = record["peak_memory_mib"]
    lines.append(
        f"peak memory: {memory['process']:,.0f} MiB (the preparation's process), "
        f"{memory['largest_worker']:,.0f} MiB (its largest worker)"
    )
    return lines
