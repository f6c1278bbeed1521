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
table says which exploratory claims it has tested so far. Refused by name (check_replication): two studies with
other references; a confirmatory study whose reference was chosen from its data (or whose choice is unrecorded):
it confirms nothing; a study set against itself, or against a study of the same settings sharing its seeds (the same
runs replicate nothing); two studies at other settings (the model, the budget, the data: summary.json's `settings`,
or for a study published before they were recorded, what its study.json holds fixed), unless --other-settings is
given, and then the table opens with each setting that differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domains.atomic import write_text
from pipelines.analysis.design import REF_RULES
from pipelines.report.markdown import markdown_table
from pipelines.runs.settings import differences

# how a reference fixed before the study's scores were read is recorded (summary.json's reference_rule)
FIXED_IN_ADVANCE = (REF_RULES["given"], REF_RULES["default"])

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


def recorded_settings(summary: dict[str, Any], folder: Path, domain: str) -> dict[str, Any] | None:
    """What the study's runs of `domain` were trained with: summary.json's `settings`, else (a study published before
    they were recorded) the settings its study.json holds fixed for every group of the domain; None when neither
    says."""
    settings = summary["domains"][domain].get("settings")
    if settings:
        return settings
    try:
        groups = json.loads((folder / "study.json").read_text())["holds_fixed"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    held = [fixed for group, fixed in groups.items() if group.split("/")[0] == domain and isinstance(fixed, dict)]
    if not held:
        return None
    return {key: value for key, value in held[0].items() if all(other.get(key, value) == value for other in held)}


def check_replication(
    folders: tuple[Path, Path], studies: tuple[dict, dict], domain: str, other_settings: bool = False
) -> list[str]:
    """ValueError, naming the study, when the second study cannot be the first one's replication (the module
    docstring); else the lines the table opens with: the settings the two differ in, where --other-settings
    allowed them."""
    exploratory, confirmatory = (summary["domains"][domain] for summary in studies)
    if Path(folders[0]).resolve() == Path(folders[1]).resolve():
        raise ValueError(f"{folders[0]}: a study is not its own replication; name a study of new seeds")
    rule = confirmatory.get("reference_rule") or ""
    if rule not in FIXED_IN_ADVANCE:
        how = rule.split(":")[0].split(" (")[0] if rule else "chosen by no recorded rule"
        raise ValueError(
            f"{folders[1]}: its reference `{confirmatory['reference']}` was {how}: a "
            "study whose reference was not fixed before its scores were read confirms nothing (its family-wise "
            "error is not held); swap the two, or confirm with a study designed in advance"
        )
    settings = [
        recorded_settings(summary, Path(folder), domain) for summary, folder in zip(studies, folders, strict=True)
    ]
    if None in settings:
        unknown = folders[settings.index(None)]
        if not other_settings:
            raise ValueError(
                f"{unknown}: records no settings of its {domain} runs (no `settings` in summary.json, no study.json): "
                "whether the two studies trained the same model is unknown; re-publish it, or pass --other-settings"
            )
        return [
            f"the settings of {unknown}'s {domain} runs are not recorded: the two may differ in model or budget",
            "",
        ]
    changed = differences(*settings)
    if not changed:
        shared = sorted(set(_seeds(exploratory)) & set(_seeds(confirmatory)))
        if shared:
            raise ValueError(
                f"{folders[1]}: trains {domain} at {folders[0]}'s settings on its seeds {', '.join(map(str, shared))}: "
                "the same runs replicate nothing; a replication trains new seeds"
            )
        return []
    shown = [f"{key} {settings[0].get(key, '(not set)')} / {settings[1].get(key, '(not set)')}" for key in changed]
    if not other_settings:
        raise ValueError(
            f"{folders[1]} trains {domain} at other settings than {folders[0]} ({'; '.join(shown)}): its verdicts "
            "answer another question; pass --other-settings to set them side by side anyway"
        )
    return [f"at other settings (exploratory / confirmatory): {'; '.join(shown)}", ""]


def _seeds(domain: dict[str, Any]) -> list[int]:
    seeds = domain.get("seeds") or {}
    return [*seeds.get("expected", []), *seeds.get("used", [])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exploratory", type=Path, required=True, help="a study folder (its summary.json)")
    parser.add_argument("--confirmatory", type=Path, required=True, help="a study folder (its summary.json)")
    parser.add_argument("--domain", default="jsb")
    parser.add_argument("--out", type=Path, default=None, help="write the table here (markdown) instead of stdout")
    parser.add_argument(
        "--other-settings",
        action="store_true",
        help="compare two studies trained at other settings (named at the table's head) instead of refusing",
    )
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
        head = check_replication(
            (args.exploratory, args.confirmatory), tuple(studies), args.domain, args.other_settings
        )
        lines = head + replication_table(compare_verdicts(*studies, args.domain))
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
