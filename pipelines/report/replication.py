"""Whether an exploratory study's verdicts hold in a confirmatory one: `python -m pipelines.report.replication`.

    python -m pipelines.report.replication --exploratory docs/results/jsb-cpu --confirmatory docs/results/jsb-confirm
                                           [--domain jsb] [--out FILE]

Reads the two studies' summary.json (what their reports rendered; nothing is recomputed) and sets each encoding's
verdict against the shared reference side by side, with its look, seeds and Δ in each. Per encoding, one word:

    holds       decided in both, to the same claim: better in both, worse in both, or no difference in both
                (equivalent, or stopped for futility: neither will show a difference)
    flips       decided in both, to other claims (better in one, worse in the other; a difference in one, none in
                the other)
    not yet     decided in the exploratory study, still open in the confirmatory one (it may hold or flip later)
    new         open in the exploratory study, decided in the confirmatory one
    open        open in both

The confirmatory study is the one to believe (its design and reference were fixed before its scores existed); the
table says which exploratory claims it has tested so far. Both studies must compare against the same reference
encoding, else the comparison is refused by name.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domains.atomic import write_text
from pipelines.report.markdown import markdown_table

DECIDED = ("better", "worse", "equivalent", "stopped")  # a verdict that ends a pair's testing
OPEN = ("inconclusive", "open", "")


@dataclass(frozen=True)
class Held:
    encoding: str
    word: str  # holds, flips, not yet, new, open
    exploratory: dict[str, Any]
    confirmatory: dict[str, Any]


def settled(entry: dict[str, Any]) -> str | None:
    """The word that decided the encoding's pair ("stopped" for futility), or None while it is open."""
    verdict = str(entry.get("verdict") or "")
    word = verdict.split()[0] if verdict else ""
    return word if word in DECIDED else None


CLAIM = {"better": "better", "worse": "worse", "equivalent": "no difference", "stopped": "no difference"}


def held_word(was: str | None, now: str | None) -> str:
    """The module docstring's word for an exploratory and a confirmatory decision (None: open)."""
    if was and now:
        return "holds" if CLAIM[was] == CLAIM[now] else "flips"
    return "not yet" if was else "new" if now else "open"


def compare_verdicts(exploratory: dict[str, Any], confirmatory: dict[str, Any], domain: str) -> list[Held]:
    """One row per encoding the two studies both compare with their reference in `domain` (summary.json dicts)."""
    first, second = exploratory["domains"][domain], confirmatory["domains"][domain]
    if first["reference"] != second["reference"]:
        raise ValueError(
            f"{domain}: the exploratory study's reference is {first['reference']}, the confirmatory one's "
            f"{second['reference']}: their verdicts answer different questions"
        )
    rows = []
    for encoding in sorted(set(first["encodings"]) & set(second["encodings"]) - {first["reference"]}):
        a, b = first["encodings"][encoding], second["encodings"][encoding]
        was, now = settled(a), settled(b)
        rows.append(Held(encoding, held_word(was, now), a, b))
    return rows


def _cell(entry: dict[str, Any]) -> str:
    verdict = str(entry.get("verdict") or "open")
    look = f"look {entry['verdict_look']}, " if entry.get("verdict_look") else ""
    delta = entry.get("delta")
    shown = f"{delta:+.4f}" if isinstance(delta, int | float) else "n/a"
    return f"{verdict} ({look}{entry.get('seeds_used') or '?'} seeds), Δ {shown}"


def replication_table(rows: list[Held]) -> list[str]:
    """The markdown lines: a count per word, then the table (the words that test a claim first)."""
    order = {"flips": 0, "holds": 1, "not yet": 2, "new": 3, "open": 4}
    counts = {word: sum(row.word == word for row in rows) for word in order}
    lines = ["; ".join(f"{word}: {count}" for word, count in counts.items()) + f" (of {len(rows)} encodings)", ""]
    table = [
        [f"`{row.encoding}`", row.word, _cell(row.exploratory), _cell(row.confirmatory)]
        for row in sorted(rows, key=lambda row: (order[row.word], row.encoding))
    ]
    return lines + markdown_table(["encoding", "held?", "exploratory study", "confirmatory study"], table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exploratory", type=Path, required=True, help="a study folder (its summary.json)")
    parser.add_argument("--confirmatory", type=Path, required=True, help="a study folder (its summary.json)")
    parser.add_argument("--domain", default="jsb")
    parser.add_argument("--out", type=Path, default=None, help="write the table here (markdown) instead of stdout")
    args = parser.parse_args(argv)
    studies = []
    for folder in (args.exploratory, args.confirmatory):
        path = folder / "summary.json"
        try:
            summary = json.loads(path.read_text())
            summary["domains"][args.domain]["encodings"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            parser.exit(1, f"error: {path}: no {args.domain} verdicts to read ({type(error).__name__}: {error})\n")
        studies.append(summary)
    try:
        lines = replication_table(compare_verdicts(*studies, args.domain))
    except ValueError as error:
        parser.exit(1, f"error: {error}\n")
    text = "\n".join(lines) + "\n"
    if args.out:
        write_text(args.out, text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
