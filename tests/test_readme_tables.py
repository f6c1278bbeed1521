"""The README's result tables are rendered from the studies' summary.json (pipelines.report.readme_tables), not copied
by hand: the README holds every marked table line for line, and the renderers write what a reader expects of a
hand-built summary (the order, the cells, a bridged study's column, the verdict words)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from pipelines.report.readme_tables import (
    across_domains_table,
    friedman_table,
    main,
    render_tables,
    settled_table,
    verdicts_table,
)
from tests.sample_fixtures import REPO


def test_the_readme_holds_every_marked_table_as_its_study_renders_it():
    readme = (REPO / "README.md").read_text()
    again, stale = render_tables(readme, REPO)
    assert stale == [] and again == readme
    assert "<!-- table: across docs/results/study-cpu -->" in readme.splitlines()
    summary = json.loads((REPO / "docs" / "results" / "study-cpu" / "summary.json").read_text())
    table = across_domains_table(summary)
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


def _verdict_domain():
    base = {"within_lo": 0, "within_hi": 0, "p_better_lo": 0.09, "p_better_hi": 0.99, "decision_level": 0.9875}
    records = {
        "rope10k": {"rank": 2.0, "score": 0.8, "seeds": {"10": 0.8, "11": 0.8, "12": 0.8}, "verdict": ""},
        "irope": {
            "rank": 1.0,
            "score": 0.7,
            "delta": -0.1,
            "decision_lo": -0.15,
            "decision_hi": -0.05,
            "verdict": "better",
        },
        "nope": {
            "rank": 4.0,
            "score": 2.1,
            "delta": 1.3,
            "decision_lo": 1.2,
            "decision_hi": 1.4,
            "verdict": "inconclusive",
        },
        "lerope": {
            "rank": 3.0,
            "score": 0.8,
            "delta": 0.001,
            "decision_lo": -0.02,
            "decision_hi": 0.02,
            "verdict": "stopped",
        },
    }
    for name, record in records.items():
        if name != "rope10k":
            record.update(base, p_better=0.67, seed_p_holm=0.0123, p_tost=0.5, pair_seeds=3 if name != "nope" else 10)
            record["verdict_look"] = 1 if name != "nope" else 4
    return {
        "metric": "test NLL",
        "lower_is_better": True,
        "reference": "rope10k",
        "equivalence_region": 0.005,
        "verdict_design": {"looks": [3, 5, 8, 10]},
        "encodings": records,
    }


def test_a_domains_verdict_table_orders_by_rank_and_words_each_verdict_as_the_answer_does():
    assert verdicts_table({"domains": {"jsb": _verdict_domain()}}, "jsb") == [
        "| rank | encoding | test NLL ↓ (own seeds) | seeds | Δ vs rope10k [decision interval, its level] "
        "| P(better) [95% CI] | p difference (Holm) | p TOST (±0.005) | verdict (look) |",
        "|---|---|---|---|---|---|---|---|---|",
        "| 1 | `irope` | **0.7000** | 3 | -0.1000 [-0.1500, -0.0500] (98.8%) | 0.67 [0.09, 0.99] | 0.0123 | 0.5 "
        "| **better** (look 1) |",
        "| 2 | `rope10k` | 0.8000 | 3 | reference |  |  |  |  |",
        "| 3 | `lerope` | 0.8000 | 3 | +0.0010 [-0.0200, +0.0200] (98.8%) | 0.67 [0.09, 0.99] | 0.0123 | 0.5 "
        "| stopped for futility (look 1) |",
        "| 4 | `nope` | 2.1000 | 10 | +1.3000 [+1.2000, +1.4000] (98.8%) | 0.67 [0.09, 0.99] | 0.0123 | 0.5 "
        "| inconclusive at the cap (look 4) |",
    ]


def test_a_hand_built_summary_settles_each_pair_in_its_column_the_most_different_first():
    domain = _verdict_domain()
    domain["verdict_design"]["encodings"] = ["irope", "nope", "lerope"]
    domain["encodings"]["fox"] = {**domain["encodings"]["lerope"], "delta": -0.003, "verdict": "stopped"}
    domain["encodings"]["xpos"] = {**domain["encodings"]["irope"], "delta": -0.2, "verdict_look": 2}
    for name, sd in (("irope", 0.02), ("nope", 0.5), ("lerope", 0.01), ("fox", 0.04), ("xpos", 0.03)):
        domain["encodings"][name]["seed_sd"] = sd
    domain.update(status="look 2 of 4", next_runs=["rope10k/seed13", "nope/seed13"], tasks=None)
    summary = {"domains": {"jsb": domain}, "cost": {"domains": {"jsb": {"core_hours": 1.25, "runs": 17}}}}
    assert settled_table(summary)[2] == (
        "| JSB | look 2 of 4, reference `rope10k` | `xpos` (joined) -0.200 (look 2), `irope` -0.100 (look 1) | none "
        "| none | `fox` (joined) -0.003 (look 1), `lerope` +0.001 (look 1) | `nope` | 0.030 | 1.2 (17) | 2 runs |"
    )  # the median of 0.01, 0.02, 0.03, 0.04, 0.5; 1.25 core-hours to one decimal as Python rounds it (1.2)


def test_the_settled_table_names_each_domains_pairs_as_the_studys_answer_lists_them():
    """The answer (pipelines.report.answer, from the looks' pair verdicts) and the table (from the per-encoding records)
    are written by separate code: per domain they name the same encodings per verdict, the same cost and next runs."""
    summary = json.loads((REPO / "docs" / "results" / "study-cpu" / "summary.json").read_text())
    rows = settled_table(summary)[2:]
    lines = {"better": "- better than", "worse": "- worse:", "equivalent": "- equivalent", "stopped": "- stopped"}
    for row, (name, entry) in zip(rows, summary["domains"].items(), strict=True):
        cells = row.split(" | ")
        answer = entry["answer"].splitlines()
        for column, (verdict, start) in enumerate(lines.items(), start=2):
            said = next((line for line in answer if line.startswith(start)), "")
            said = said.split(":", 1)[-1] if said else ""
            assert set(re.findall(r"`(\w+)`", said)) - {entry["reference"]} == set(
                re.findall(r"`(\w+)`", cells[column])
            ), (
                name,
                verdict,
            )
        # open: the answer names the design's open pairs (a joined family's by count), the table every open pair
        said = next((line for line in answer if line.startswith(("- open:", "- inconclusive at"))), "")
        said = set(re.findall(r"`(\w+)`", said.split(":", 1)[-1])) if said else set()
        named = set(re.findall(r"`(\w+)`", cells[6]))
        counted = re.fullmatch(r"(\d+) of \d+", cells[6])
        assert said <= named if named else int(counted.group(1)) >= len(said) if counted else not said, name
        spent = next(line for line in answer if line.startswith("- spent"))
        hours, runs = re.search(r"spent ([\d.]+) core-hours on (\d+) trained runs", spent).groups()
        assert cells[-2] == f"{hours} ({runs})", name
        needs = next((line for line in answer if "next look needs" in line), "")
        assert cells[-1].startswith(re.search(r"needs (\d+ runs)", needs).group(1) if needs else "nothing"), name


def _nemenyi_q(k: int, alpha: float = 0.05) -> float:
    """The studentized range's 1 - alpha quantile at infinite df over sqrt 2, by its integral
    P(range <= q) = k ∫ φ(z) (Φ(z + q) - Φ(z))^(k-1) dz on a grid and bisection (not the suite's computation)."""
    from scipy.special import ndtr

    z = np.linspace(-9.0, 9.0, 20001)
    phi = np.exp(-z * z / 2) / math.sqrt(2 * math.pi)

    def below(q: float) -> float:
        return float(np.trapezoid(k * phi * (ndtr(z + q) - ndtr(z)) ** (k - 1), z))

    lo, hi = 0.0, 10.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if below(mid) < 1 - alpha else (lo, mid)
    return lo / math.sqrt(2)


def test_the_friedman_table_states_the_tests_the_study_ran_as_an_independent_computation_gives_them():
    """study-cpu's Friedman table against a computation of its own from the mean ranks summary.json records
    (Demsar 2006): chi2_F = 12N/(k(k+1)) (sum R^2 - k(k+1)^2/4), which the study's tie correction can only raise;
    p, F_F = (N-1) chi2_F / (N(k-1) - chi2_F) and its p from the recorded chi2_F; CD = q_0.05 sqrt(k(k+1)/(6N));
    the separated pairs those that share no group of the study's own not-separated list."""
    from scipy.stats import chi2 as chi2_dist
    from scipy.stats import f as f_dist

    summary = json.loads((REPO / "docs" / "results" / "study-cpu" / "summary.json").read_text())
    rows = [line.split(" | ") for line in friedman_table(summary)[2:]]
    tested = {name: record for name, record in summary["friedman"].items() if "not_run" not in record}
    assert tested and len(rows) == len(summary["friedman"])
    for name, record in tested.items():
        (row,) = [row for row in rows if row[0] == f"| {name}"]
        ranks, n, chi2 = record["mean_ranks"], len(record["blocks"]), record["chi2"]
        k = len(ranks)
        untied = 12 * n / (k * (k + 1)) * (sum(r * r for r in ranks.values()) - k * (k + 1) ** 2 / 4)
        assert untied - 1e-9 <= chi2 <= untied * 1.05, (name, untied, chi2)
        f = (n - 1) * chi2 / (n * (k - 1) - chi2)
        assert row[2] == str(k)
        assert row[3] == f"{chi2:.2f} ({k - 1}), {chi2_dist.sf(chi2, k - 1):.3g}"
        assert row[4] == f"{f:.2f} ({k - 1}, {(k - 1) * (n - 1)}), {f_dist.sf(f, k - 1, (k - 1) * (n - 1)):.3g}"
        assert row[5] == f"{_nemenyi_q(k) * math.sqrt(k * (k + 1) / (6 * n)):.2f}"
        assert row[6].startswith(f"{max(ranks.values()) - min(ranks.values()):.2f} (")
        apart = [
            (a, b)
            for a in ranks
            for b in ranks
            if ranks[a] < ranks[b] and not any(a in group and b in group for group in record["not_separated"])
        ]
        stated = row[7].removesuffix(" |")
        assert stated == "none" if not apart else len(stated.split("; ")) == len(apart)
        for a, b in apart:
            assert f"`{a}` ahead of `{b}`" in stated


def test_a_hand_built_friedman_record_renders_its_hand_computed_figures():
    # 4 blocks, 3 encodings ranked 1, 2, 3 in every block: chi2_F = 12*4/(3*4) * (1 + 4 + 9 - 3*16/4) = 8
    record = {
        "blocks": ["a", "b", "c", "d"],
        "encodings": ["x", "y", "z"],
        "mean_ranks": {"x": 1.0, "y": 2.0, "z": 3.0},
        "chi2": 8.0,
        "p": 0.0183,
        "iman_davenport_f": math.inf,
        "p_f": 0.0,
        "cd": 1.66,
        "not_separated": [["x", "y"], ["y", "z"]],
    }
    summary = {"friedman": {"domains": record, "synthetic tasks": {"not_run": "fewer than 2 tasks"}}}
    assert friedman_table(summary)[2:] == [
        "| domains | a, b, c, d (4) | 3 | 8.00 (2), 0.0183 | inf (2, 6), 0 | 1.66 | 2.00 (`x` to `z`) "
        "| `x` ahead of `z` |",
        "| synthetic tasks | fewer than 2 tasks |  |  |  |  |  |  |",
    ]


def test_write_renders_a_stale_marked_table_in_place_and_the_check_names_it(tmp_path, capsys, monkeypatch):
    study = tmp_path / "docs" / "results" / "one"
    study.mkdir(parents=True)
    (study / "summary.json").write_text(json.dumps({"domains": {"jsb": _verdict_domain()}}))
    marker = "<!-- table: verdicts docs/results/one jsb -->"
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{marker}\n| rank | old |\n|---|---|\n| 1 | `irope` |\n\nafter\n")
    monkeypatch.chdir(tmp_path)
    assert main([str(readme)]) == 1
    assert f"README.md: stale: {marker}" in capsys.readouterr().err
    assert main([str(readme), "--write"]) == 0
    table = verdicts_table({"domains": {"jsb": _verdict_domain()}}, "jsb")
    assert readme.read_text() == "# x\n\n" + "\n".join([marker, *table]) + "\n\nafter\n"
    assert main([str(readme)]) == 0
    readme.write_text(f"{marker.replace('jsb', 'maestro')}\n")
    with pytest.raises(SystemExit) as exit_:
        main([str(readme)])
    assert exit_.value.code == 1
    assert f"{study / 'summary.json'}: no domain 'maestro' (it holds jsb)" in capsys.readouterr().err
