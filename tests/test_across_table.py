"""The README's table across domains is rendered from study-cpu's summary.json (pipelines.report.across_table), not
copied by hand: the README holds it line for line, and the renderer writes what a reader expects of a hand-built
summary (the order, the cells, a bridged study's column)."""

from __future__ import annotations

import json

from pipelines.report.across_table import across_domains_table
from tests.sample_fixtures import REPO


def test_the_readme_holds_study_cpus_table_as_summary_json_renders_it():
    summary = json.loads((REPO / "docs" / "results" / "study-cpu" / "summary.json").read_text())
    table = across_domains_table(summary)
    readme = (REPO / "README.md").read_text().splitlines()
    assert table[0] in readme, "README.md has no table across domains with study-cpu's columns"
    start = readme.index(table[0])
    assert readme[start : start + len(table)] == table
    assert len(table) == 2 + len({name for entry in summary["domains"].values() for name in entry["encodings"]})


def _domain(metric, lower, scores, verdicts, **extra):
    return {
        "metric": metric,
        "lower_is_better": lower,
        "reference": "rope10k",
        "encodings": {
            name: {"score": score, "matched": score - scores["rope10k"], "verdict": verdicts.get(name, "")}
            for name, score in scores.items()
        },
        **extra,
    }


def test_a_hand_built_summary_renders_its_order_cells_and_bridged_column():
    summary = {
        "domains": {
            "jsb": _domain(
                "test NLL",
                True,
                {"rope10k": 0.8, "nope": 2.1, "alibi": 0.9},
                {"nope": "worse", "alibi": "inconclusive"},
            ),
            "synthetic": _domain(
                "chance-normalised test accuracy", False, {"rope10k": 0.5, "nope": 0.4}, {"nope": "inconclusive"}
            ),
            "jsb-patterns": _domain(
                "test NLL", True, {"rope10k": 0.81, "irope": 0.7}, {"irope": "better"}, ranked_with="jsb"
            ),
        },
        "mean_rank": {"rope10k": {"mean": 1.0, "se": 0.0, "ci_over_seeds": [1.0, 1.5], "p_rank_1": 0.9}},
        "mean_rank_nll_domains": {"rope10k": {"mean": 1.0, "se": None}, "alibi": {"mean": 2.0, "se": None}},
    }
    summary["mean_rank"]["nope"] = {"mean": 2.0, "se": 0.0, "ci_over_seeds": [1.5, 2.0], "p_rank_1": 0.1}
    assert across_domains_table(summary) == [
        "| encoding | JSB test NLL ↓ (Δ vs rope10k, verdict) | synthetic norm. acc. ↑ (Δ, verdict) "
        "| jsb-patterns, ranked in JSB test NLL ↓ (Δ vs rope10k, verdict) | mean rank ± SE (2 domains) "
        "| range over resampled seeds; P(rank 1) | mean rank, JSB ± SE |",
        "|---|---|---|---|---|---|---|",
        "| `rope10k` | 0.8000 (reference) | 0.500 (reference) | 0.8100 (reference) | 1.00 ± 0.00 | [1.0, 1.5]; 0.90 "
        "| 1.00 |",
        "| `nope` | 2.1000 (Δ +1.3000, **worse**) | 0.400 (Δ -0.1000, inconclusive) | — | 2.00 ± 0.00 "
        "| [1.5, 2.0]; 0.10 | — |",
        "| `alibi` | 0.9000 (Δ +0.1000, inconclusive) | — | — | — |  | 2.00 |",
        "| `irope` | — | — | 0.7000 (Δ -0.1100, **better**) | — |  | — |",
    ]
