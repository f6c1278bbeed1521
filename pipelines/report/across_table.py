"""The README's table across domains, rendered from a compared study's summary.json (`make compare`'s output).

The README shows each domain's score, Δ and verdict beside the mean rank; it is this table, not a hand copy of it:
`python -m pipelines.report.across_table docs/results/study-cpu` prints it, and tests/test_published.py checks the
README holds it line for line. Nothing here computes: every figure is read from summary.json as the study wrote it.

Rows: the encodings ranked in every domain by their mean rank, then those ranked in the NLL domains only by that
mean rank, then the rest by name (ties by name).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from pipelines.report.markdown import markdown_table

READERS_NAMES = {"jsb": "JSB", "maestro": "MAESTRO", "hrg": "GRCh38", "sleep_edf": "Sleep-EDF"}
DECIDED = ("better", "worse", "equivalent")  # bold in the table: the verdicts that settle a pair
ABSENT = "—"


def readers_name(domain: str) -> str:
    return READERS_NAMES.get(domain, domain)


def metric_heading(entry: dict) -> str:
    """ "test NLL ↓" or "norm. acc. ↑": the metric and which way is better, as summary.json declares it."""
    arrow = "↓" if entry["lower_is_better"] else "↑"
    return f"test NLL {arrow}" if "NLL" in entry["metric"] else f"norm. acc. {arrow}"


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
    digits = 4 if entry["lower_is_better"] else 3
    score = f"{record['score']:.{digits}f}"
    if encoding == entry["reference"]:
        return f"{score} (reference)"
    verdict = record["verdict"]
    return f"{score} (Δ {record['matched']:+.4f}, {f'**{verdict}**' if verdict in DECIDED else verdict})"


def rank_cell(record: dict | None) -> str:
    if record is None:
        return ABSENT
    se = record.get("se")  # None where summary.json had no spread (one domain)
    return f"{record['mean']:.2f}" if se is None or math.isnan(se) else f"{record['mean']:.2f} ± {se:.2f}"


def spread_cell(record: dict | None) -> str:
    if record is None:
        return ""
    lo, hi = record["ci_over_seeds"]
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
        header.append(f"mean rank, {' and '.join(readers_name(name) for name in nll_domains)} ± SE")
    rows = []
    for name in row_order(summary):
        mean = summary["mean_rank"].get(name)
        row = [f"`{name}`", *(domain_cell(entry, name) for entry in domains.values()), rank_cell(mean)]
        row.append(spread_cell(mean))
        if with_nll:
            row.append(rank_cell(summary["mean_rank_nll_domains"].get(name)))
        rows.append(row)
    return markdown_table(header, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study", type=Path, help="a compared study's folder (it holds summary.json)")
    args = parser.parse_args(argv)
    print("\n".join(across_domains_table(json.loads((args.study / "summary.json").read_text()))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
