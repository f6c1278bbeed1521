"""The README's result tables, rendered from the published studies' summary.json, never copied by hand.

A table in a markdown file is rendered where a marker line stands right above it:

    <!-- table: across docs/results/study-cpu -->              the table across domains of a compared study
    <!-- table: verdicts docs/results/maestro-confirm maestro -->   one domain's verdicts against its reference
    <!-- table: paper-claims docs/results/study-cpu -->        paper 000's Figure 3 and 4 claims against the study
    <!-- table: friedman docs/results/study-cpu -->            its Friedman tests and Nemenyi critical differences
    <!-- table: settled docs/results/study-cpu -->             per domain: where its design stands, what it decided

`python -m pipelines.report.readme_tables README.md` says which marked tables differ from what their study renders
(exit 1), `--write` renders them in place (the file replaced whole, never half-written); tests/test_readme_tables.py
holds the README to its studies. Nothing here computes: every figure is read from summary.json as the study wrote
it (a table of a study's past state, before it grew, carries no marker: it is a record, not a rendering).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

from domains.atomic import write_text
from pipelines.analysis.verdict import level_text
from pipelines.report.markdown import fmt_mean_rank, markdown_table
from pipelines.report.page_tables import interval_text, number_text, p_cell
from pipelines.report.paper_claims import READERS_NAMES, claims_rows
from pipelines.report.verdicts import AT_THE_CAP

DECIDED = ("better", "worse", "equivalent")  # bold in a table: the verdicts that settle a pair
ABSENT = "—"
MARKER = re.compile(r"^<!-- table: (across|verdicts|paper-claims|friedman|settled) (\S+)(?: (\S+))? -->$")


def readers_name(domain: str) -> str:
    return READERS_NAMES.get(domain, domain)


def metric_heading(entry: dict) -> str:
    """ "test NLL ↓" or "norm. acc. ↑": the metric and which way is better, as summary.json declares it."""
    arrow = "↓" if entry["lower_is_better"] else "↑"
    return f"test NLL {arrow}" if "NLL" in entry["metric"] else f"norm. acc. {arrow}"


def digits_of(entry: dict) -> int:
    return 4 if entry["lower_is_better"] else 3


def verdict_words(entry: dict, record: dict) -> str:
    """The verdict as the study's answer words it: decided ones in bold, a futility stop spelled out, an open pair at
    the design's last look `inconclusive at the cap`; the look it was reached at."""
    word, look = record["verdict"], record.get("verdict_look")
    looks = (entry.get("verdict_design") or {}).get("looks") or []
    if word == "stopped":
        word = "stopped for futility"
    elif word == "inconclusive" and looks and record.get("pair_seeds") == looks[-1]:
        word = AT_THE_CAP
    text = f"**{word}**" if word in DECIDED else word
    return f"{text} (look {look})" if isinstance(look, int) and look else text


# ------------------------------------------------------------------------------------------- across domains


def domain_heading(name: str, entry: dict, first: bool) -> str:
    """The domain's column heading; a bridged study's says which domain it is ranked in."""
    bridged = entry.get("ranked_with")
    where = f"{name}, ranked in {readers_name(bridged)}" if bridged else readers_name(name)
    delta = f"Δ vs {entry['reference']}" if first or bridged else "Δ"
    return f"{where} {metric_heading(entry)} ({delta}, verdict)"


def domain_cell(entry: dict, encoding: str) -> str:
    """The encoding's score, its matched Δ to the reference and its verdict in one domain; — where not scored."""
    record = entry["encodings"].get(encoding)
    if record is None:
        return ABSENT
    score = number_text(record["score"], digits_of(entry))
    if encoding == entry["reference"]:
        return f"{score} (reference)"
    verdict = record["verdict"]
    return f"{score} (Δ {record['matched']:+.4f}, {f'**{verdict}**' if verdict in DECIDED else verdict})"


def rank_cell(record: dict | None) -> str:
    if record is None:
        return ABSENT
    se = record.get("se")  # None where summary.json had no spread (one domain)
    return fmt_mean_rank(record["mean"], math.nan if se is None else se)


def spread_cell(record: dict | None) -> str:
    if record is None:
        return ""
    lo, hi = record["ci_over_seeds"]
    if lo is None:  # a domain of one seed: nothing to resample (pipelines.analysis.study.MIN_RESAMPLED_SEEDS)
        return ABSENT
    return f"[{lo:.1f}, {hi:.1f}]; {record['p_rank_1']:.2f}"


def row_order(summary: dict) -> list[str]:
    """Every encoding of any domain: by mean rank, then by the NLL domains' mean rank, then by name."""
    names = {name for entry in summary["domains"].values() for name in entry["encodings"]}
    mean, nll = summary["mean_rank"], summary.get("mean_rank_nll_domains", {})

    def key(name: str) -> tuple:
        return (mean[name]["mean"] if name in mean else math.inf, nll[name]["mean"] if name in nll else math.inf, name)

    return sorted(names, key=key)


def across_domains_table(summary: dict) -> list[str]:
    """The markdown table of a compared study: a row per encoding, a column per domain, its mean ranks."""
    domains = summary["domains"]
    nll_domains = [name for name, entry in domains.items() if entry["lower_is_better"] and not entry.get("ranked_with")]
    blocks = len({entry.get("ranked_with") or name for name, entry in domains.items()})
    header = ["encoding"]
    header += [domain_heading(name, entry, i == 0) for i, (name, entry) in enumerate(domains.items())]
    header += [f"mean rank ± SE ({blocks} domains)", "range over resampled seeds; P(rank 1)"]
    with_nll = "mean_rank_nll_domains" in summary
    if with_nll:
        names = [readers_name(name) for name in nll_domains]
        listed = " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"
        header.append(f"mean rank, {listed} ± SE")
    rows = []
    for name in row_order(summary):
        mean = summary["mean_rank"].get(name)
        row = [f"`{name}`", *(domain_cell(entry, name) for entry in domains.values()), rank_cell(mean)]
        row.append(spread_cell(mean))
        if with_nll:
            row.append(rank_cell(summary["mean_rank_nll_domains"].get(name)))
        rows.append(row)
    return markdown_table(header, rows)


# ------------------------------------------------------------------------------------------- Friedman


def friedman_table(summary: dict) -> list[str]:
    """A row per Friedman test of a compared study (across the domains; across a domain's tasks): its blocks, the
    encodings ranked in every block, chi2_F and the Iman-Davenport F with their p, the Nemenyi critical difference,
    the widest gap between two mean ranks and the pairs the study's Nemenyi test separates (those sharing none of
    its not-separated groups, as paper_claims reads them). A test not run says why."""
    header = ["across", "blocks (N)", "encodings (k)", "chi2_F (df), p", "Iman-Davenport F (df), p"]
    header += ["Nemenyi CD at 0.05", "widest gap in mean rank", "pairs the CD separates"]
    rows = []
    for name, record in summary["friedman"].items():
        if "not_run" in record:
            rows.append([name, record["not_run"], *[""] * (len(header) - 2)])
            continue
        n, k, ranks = len(record["blocks"]), len(record["encodings"]), record["mean_ranks"]
        by_rank = sorted(ranks, key=lambda enc: (ranks[enc], enc))
        separated = [
            f"`{a}` ahead of `{b}`"
            for i, a in enumerate(by_rank)
            for b in by_rank[i + 1 :]
            if not any(a in group and b in group for group in record["not_separated"])
        ]
        rows.append(
            [
                name,
                f"{', '.join(record['blocks'])} ({n})",
                str(k),
                f"{record['chi2']:.2f} ({k - 1}), {record['p']:.3g}",
                f"{record['iman_davenport_f']:.2f} ({k - 1}, {(k - 1) * (n - 1)}), {record['p_f']:.3g}",
                f"{record['cd']:.2f}",
                f"{ranks[by_rank[-1]] - ranks[by_rank[0]]:.2f} (`{by_rank[0]}` to `{by_rank[-1]}`)",
                "; ".join(separated) or "none",
            ]
        )
    return markdown_table(header, rows)


# ------------------------------------------------------------------------------------------- what is settled

# the verdict columns of the settled table, in its order, and the words of their headings
SETTLED_COLUMNS = {
    "better": "better than the reference (Δ, look)",
    "worse": "worse (Δ, look)",
    "equivalent": "equivalent (Δ, look)",
    "stopped": "stopped for futility (Δ, look)",
    "inconclusive": "open",
}
OPEN_NAMED_UP_TO = 12  # past this many open pairs the cell gives their count, not their names


def settled_cell(entry: dict, verdict: str) -> str:
    """The encodings of one verdict in a domain, the most different first: `name` Δ (look k); open pairs by name
    (a count past OPEN_NAMED_UP_TO); an encoding outside the design, tested in a family of its own, `(joined)`."""
    records = [
        (name, record)
        for name, record in entry["encodings"].items()
        if name != entry["reference"] and record["verdict"] == verdict
    ]
    design = (entry.get("verdict_design") or {}).get("encodings")

    def named(name: str) -> str:
        return f"`{name}`" + (" (joined)" if design is not None and name not in design else "")

    if verdict == "inconclusive":
        if len(records) > OPEN_NAMED_UP_TO:
            return f"{len(records)} of {len(entry['encodings']) - 1}"
        return ", ".join(named(name) for name, _ in sorted(records)) or "none"
    ordered = sorted(records, key=lambda item: (-abs(item[1]["delta"]), item[0]))
    cells = [f"{named(name)} {record['delta']:+.3f} (look {record['verdict_look']})" for name, record in ordered]
    return ", ".join(cells) or "none"


def settled_table(summary: dict) -> list[str]:
    """A row per domain of a compared study (a bridged study its own row): where its design stands, its pairs with
    the reference by verdict (decided, stopped, open), the median seed SD of a paired Δ, what it cost and what its
    next look trains, each as the study recorded it."""
    header = ["domain", "where its design stands", *SETTLED_COLUMNS.values()]
    header += ["median seed SD of a paired Δ", "core-hours (runs)", "the next look trains"]
    rows = []
    for name, entry in summary["domains"].items():
        bridged = entry.get("ranked_with")
        where = f"{name} (ranked in {readers_name(bridged)})" if bridged else readers_name(name)
        sds = [
            record["seed_sd"]
            for encoding, record in entry["encodings"].items()
            if encoding != entry["reference"] and isinstance(record.get("seed_sd"), float)
        ]
        cost = summary["cost"]["domains"].get(name)
        spent = f"{cost['core_hours']:.1f} ({cost['runs']})" if cost else ABSENT
        pending = len(entry.get("next_runs") or [])
        tasks = len((entry.get("tasks") or {}).get("chance", {}))
        if not pending:
            nxt = "nothing (the design's end)" if "complete" in entry["status"] else "nothing"
        elif tasks:
            nxt = f"{pending * tasks} runs ({pending} encoding-seeds x {tasks} tasks)"
        else:
            nxt = f"{pending} runs"
        row = [where, f"{entry['status']}, reference `{entry['reference']}`"]
        row += [settled_cell(entry, verdict) for verdict in SETTLED_COLUMNS]
        row += [f"{statistics.median(sds):.3f}" if sds else ABSENT, spent, nxt]
        rows.append(row)
    return markdown_table(header, rows)


# ------------------------------------------------------------------------------------------- one domain


def verdicts_table(summary: dict, domain: str) -> list[str]:
    """One domain's encodings by rank: score over their own seeds, the Δ to the reference with the interval the
    verdict rests on (its level), P(better), the Holm and TOST p-values, the verdict and its look."""
    entry = summary["domains"][domain]
    digits, ref = digits_of(entry), entry["reference"]
    records = sorted(entry["encodings"].items(), key=lambda item: (item[1]["rank"], item[0]))
    header = ["rank", "encoding", f"{metric_heading(entry)} (own seeds)", "seeds"]
    header += [f"Δ vs {ref} [decision interval, its level]", "P(better) [95% CI]", "p difference (Holm)"]
    header += [f"p TOST (±{entry['equivalence_region']:g})", "verdict (look)"]
    rows = []
    for i, (name, record) in enumerate(records):
        score = number_text(record["score"], digits)
        row = [f"{record['rank']:g}", f"`{name}`", f"**{score}**" if i == 0 else score]
        if name == ref:
            rows.append([*row, str(len(record["seeds"])), "reference", "", "", "", ""])
            continue
        decision = interval_text(record.get("decision_lo"), record.get("decision_hi"), digits, signed=True)
        level = record.get("decision_level")
        delta = f"{number_text(record['delta'], digits, signed=True)} {decision}"
        delta += f" ({level_text(level)})" if isinstance(level, float) else ""
        p_better = f"{record['p_better']:.2f} {interval_text(record['p_better_lo'], record['p_better_hi'], 2)}"
        row += [str(record["pair_seeds"]), delta, p_better, p_cell(record["seed_p_holm"]), p_cell(record["p_tost"])]
        rows.append([*row, verdict_words(entry, record)])
    return markdown_table(header, rows)


# ------------------------------------------------------------------------------------------- a markdown file


def rendered(kind: str, study: Path, domain: str | None) -> list[str]:
    """The table a marker names, from its study's summary.json (the study's path relative to the working folder)."""
    path = study / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: cannot read the study's summary: {error}") from error
    if kind == "across":
        return across_domains_table(summary)
    if kind == "paper-claims":
        header = ["paper 000", "claim", "domain", "at CPU scale", "what the study decides (Δ [interval], verdict)"]
        return markdown_table(header, claims_rows(summary))
    if kind == "friedman":
        return friedman_table(summary)
    if kind == "settled":
        return settled_table(summary)
    if domain not in summary["domains"]:
        raise ValueError(f"{path}: no domain {domain!r} (it holds {', '.join(summary['domains'])})")
    return verdicts_table(summary, domain)


def render_tables(text: str, root: Path) -> tuple[str, list[str]]:
    """`text` with every marked table rendered afresh from its study (studies relative to `root`), and the markers
    whose table differed."""
    lines, out, stale = text.splitlines(), [], []
    i = 0
    while i < len(lines):
        out.append(lines[i])
        marker = MARKER.match(lines[i])
        i += 1
        if not marker:
            continue
        kind, study, domain = marker.groups()
        table = rendered(kind, root / study, domain)
        end = i
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        if lines[i:end] != table:
            stale.append(lines[i - 1])
        out += table
        i = end
    return "\n".join(out) + ("\n" if text.endswith("\n") else ""), stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("markdown", type=Path, help="a markdown file with marked tables (README.md)")
    parser.add_argument("--write", action="store_true", help="render the marked tables in place")
    args = parser.parse_args(argv)
    try:
        text = args.markdown.read_text()
        new, stale = render_tables(text, Path.cwd())
    except (OSError, ValueError) as error:
        parser.exit(1, f"error: {error}\n")
    if args.write:
        if new != text:
            write_text(args.markdown, new)
        print(f"{args.markdown}: {len(stale)} table(s) rendered afresh" + "".join(f"\n  {m}" for m in stale))
        return 0
    for marker in stale:
        print(f"{args.markdown}: stale: {marker}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
