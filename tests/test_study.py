"""Tests of the cross-domain study (summary.md/csv/json and its figures) on a constructed set of runs whose every
number is known (tests/run_fixtures.py), and the command line `python -m pipelines.compare`."""

from __future__ import annotations

import html
import json
import os
import re
import sys
from collections import Counter

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from pipelines.analysis.study import analyse_loaded, load_study
from pipelines.compare import main
from pipelines.inspection.recency import LayerRecency, RecencyProfile
from pipelines.report import page_runs
from pipelines.report.study import write_study_report
from tests.browser import unpacked
from tests.run_fixtures import (
    CONTEXT,
    INSTANCE_TOKENS,
    assert_png,
    instance_correct,
    lm_domain,
    lm_tree,
    pair,
    read_csv,
    section,
    study,
    synthetic_tree,
    write_csv,
    write_instances,
    write_positions,
    write_run,
)

# ------------------------------------------------------------------------------------- command line


def test_compare_lm_without_the_default_reference_says_so(tmp_path, capsys):
    lm_tree(tmp_path / "runs")
    main(["--domain", "jsb", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "results")])
    printed = capsys.readouterr().out
    assert "# posbench comparison study" in printed
    assert str(tmp_path / "results" / "jsb" / "nll_by_position.png") in printed
    # the study takes the reference its one domain's verdict uses: the header, the gaps and the marks agree
    assert "; reference: `rope10k`;" in printed
    assert "| encoding | seed 0 | seed 1 | seed SD | matched Δ to rope10k | verdict |" in printed
    assert json.loads((tmp_path / "results" / "summary.json").read_text())["reference"] == "rope10k"
    per_domain = (tmp_path / "results" / "jsb" / "summary.md").read_text()
    assert "# jsb: test NLL by encoding" in per_domain
    assert "Reference `rope10k`: the SPEC's default, fixed before the first look." in per_domain
    # without the default, the reference is the first encoding of the roster order with runs, never the best
    lm_domain(tmp_path / "other", "jsb", {"alibi": np.ones(4), "nope": np.ones(4) + 0.5})
    main(["--domain", "jsb", "--runs", str(tmp_path / "other"), "--out", str(tmp_path / "r1")])
    capsys.readouterr()
    assert (
        "Reference `nope`: the first encoding of the roster order with runs: `rope10k`, the default, has none here."
        in (tmp_path / "r1" / "jsb" / "summary.md").read_text()
    )
    # a reference given by name that has no run: no tests, said so
    main(["--domain", "jsb", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "r2"), "--ref", "alibi"])
    assert "- jsb: No paired tests: `alibi` (given) has no finished run here" in capsys.readouterr().out


def test_the_command_line_refuses_with_a_clear_error(tmp_path, capsys):
    pair(tmp_path / "runs", max_steps=400)
    with pytest.raises(SystemExit) as exit_:
        main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "results")])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: refusing to compare") and "jsb/nope/seed0" in err


# --------------------------------------------------------------------------------------------- study
# A constructed study whose every number is known. Seed k adds E[k] * sigma to every example of a run,
# so each example's seed average is exactly the value below while the seeds' own means spread by sigma
# (seed SD = sigma).
#
# jsb (N = 5) and maestro (N = 5), reference darope with NLL r_i; baselines r_i + d_i with the d of
# tests/test_stats.py's worked example (B1: raw p 0.013236, B2: 0.230200, B3: 0.047421) and NOPE_D
# (t = 30.4, p < 1e-5). Holm over the 3 baselines of each domain, by hand:
#   jsb:     nope (3 x ~7e-6) ***, rope10k = r + B1: 2 x 0.013236 = 0.026472 *, hope = r + B2: 0.230200
#   maestro: nope ***, rope10k = r - B1 (better than darope): 0.026472 †, hope = r + B3: 0.047421 *
# Means: jsb darope 0.7, hope 0.8, rope10k 1.0, nope 1.71 -> ranks 1, 2, 3, 4
#        maestro rope10k 1.3, darope 1.6, hope 1.8, nope 2.61 -> ranks 1, 2, 3, 4 (rope10k, darope, ...)
# Intervals are within-example (SPEC 3, Cousineau-Morey over the K = 4 scored encodings); by hand for jsb darope:
# the example means over the 4 encodings are r + (B1 + B2 + NOPE_D) / 4, so darope's normalised values are
# grand mean - (B1 + B2 + NOPE_D) / 4 = grand mean - [0.325, 0.3, 0.3, 0.375, 0.4625], sd 0.068693, half width
# t_{0.975,4} * sqrt(4/3) * sd / sqrt(5) = 2.776445 * 1.154701 * 0.030720 = 0.0985 (between examples: 0.1963)
#
# synthetic: parity (chance 0.5) and needle (chance 0.1), seed-averaged test accuracy and its
# chance-normalised value (acc - chance) / (1 - chance):
#   rope10k 0.90 -> 0.8 and 0.91 -> 0.9: mean 0.85      darope 0.80 -> 0.6 and 0.82 -> 0.8: mean 0.70
#   hope    0.70 -> 0.4 and 0.55 -> 0.5: mean 0.45      nope   0.60 -> 0.2 and 0.28 -> 0.2: mean 0.20
# ranks 1, 2, 3, 4 for rope10k, darope, hope, nope.
#
# Mean rank over the 3 domains (se = std(ddof=1) / sqrt(3)):
#   darope [1, 2, 2] 1.67 ± 0.33; rope10k [3, 1, 1] 1.67 ± 0.67; hope [2, 3, 3] 2.67 ± 0.33; nope 4.00 ± 0.00
# over the 2 NLL domains: darope 1.50 ± 0.50, rope10k 2.00 ± 1.00, hope 2.50 ± 0.50, nope 4.00 ± 0.00
# Friedman over the domains: rank sums 5, 5, 8, 12 -> chi2 = 12 / (3 * 4 * 5) * 258 - 3 * 3 * 5 = 6.6,
# CD = 2.569 * sqrt(4 * 5 / (6 * 3)) = 2.708. Over the 2 tasks: same order in both, chi2 = N (k - 1) = 6.
R = {"jsb": np.array([0.5, 0.8, 0.6, 0.9, 0.7]), "maestro": np.array([1.4, 1.7, 1.5, 1.8, 1.6])}
B1 = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
B2 = np.array([0.2, -0.1, 0.0, 0.1, 0.3])
B3 = np.array([0.3, 0.0, 0.4, 0.2, 0.1])
NOPE_D = np.array([1.0, 1.1, 0.9, 1.0, 1.05])
DIFFS = {
    "jsb": {"darope": 0 * B1, "rope10k": B1, "hope": B2, "nope": NOPE_D},
    "maestro": {"darope": 0 * B1, "rope10k": -B1, "hope": B3, "nope": NOPE_D},
}
SIGMA = {("jsb", "hope"): 0.2}  # else 0.05; jsb hope's gap 0.1 is inside its seed spread
E = (-1.0, 0.0, 1.0)
IDS = np.array([2, 5, 7, 11, 13])
ENCODING_PARAMETERS = {"darope": 520, "hope": 0, "nope": 0, "rope10k": 0, "rope10k+yarn": 0}
PAST_NLL = {"darope": 2.0, "hope": 2.5, "nope": 3.0, "rope10k": 4.0, "rope10k+yarn": 1.5}  # at positions >= L
SYNTHETIC_ACC = {
    "parity": {"rope10k": 0.90, "darope": 0.80, "hope": 0.70, "nope": 0.60},
    "needle": {"rope10k": 0.91, "darope": 0.82, "hope": 0.55, "nope": 0.28},
}
SYNTHETIC_CHANCE = {"parity": 0.5, "needle": 0.1}


def _long_split(run_dir, pe, split, factor):
    """A split scored at factor x L: NLL 1.0 inside the training length, PAST_NLL[pe] past it."""
    positions = np.arange(1, factor * CONTEXT)
    write_positions(run_dir, split, positions, np.where(positions >= CONTEXT, PAST_NLL[pe], 1.0))


def _study_tree(root, preset="tiny"):
    for domain, diffs in DIFFS.items():
        for pe in [*diffs, *(["rope10k+yarn"] if domain == "maestro" else [])]:
            trained = pe.split("+")[0]
            for seed, e in enumerate(E):
                nll = R[domain] + diffs[trained] + e * SIGMA.get((domain, trained), 0.05)
                run_dir = root / domain / pe / f"seed{seed}"
                splits = {"test": {"nll": float(nll.mean()), "accuracy": 0.5, "examples": 5, "tokens": 50}}
                if domain == "maestro":
                    splits["test_4x"] = {"nll": 2.0, "accuracy": 0.3, "examples": 5, "tokens": 200}
                write_run(
                    run_dir,
                    domain=domain,
                    pe=pe,
                    seed=seed,
                    splits=splits,
                    preset=preset,
                    encoding_parameters=ENCODING_PARAMETERS[pe],
                )
                order = np.roll(np.arange(5), seed)  # rows in any order: aligned by example id
                write_csv(
                    run_dir / "metrics" / "test.per_example.csv",
                    ["example", "nll", "tokens", "correct", "exact"],
                    [[IDS[i], repr(float(nll[i])), 10, 5, 0] for i in order],
                )
                # jsb's test chorales run past the context (sliding windows): not an extrapolation split
                write_positions(run_dir, "test", np.arange(1, CONTEXT + 5), float(nll.mean()))
                if domain == "maestro":
                    _long_split(run_dir, pe, "test_4x", 4)
    # a failed encoding and an unfinished domain: both must be listed
    (root / "jsb" / "pope" / "seed0").mkdir(parents=True)
    (root / "jsb" / "pope" / "seed0" / "failed.json").write_text('{"error": "RuntimeError: out of memory", "step": 7}')
    (root / "hrg" / "darope" / "seed0").mkdir(parents=True)

    for task, accuracy in SYNTHETIC_ACC.items():
        for pe in [*accuracy, "rope10k+yarn"]:
            trained = pe.split("+")[0]
            for seed, e in enumerate(E):
                acc = accuracy[trained] + 0.02 * e
                run_dir = root / "synthetic" / task / pe / f"seed{seed}"
                splits = {
                    "test": {"nll": 1 - acc, "accuracy": acc, "examples": 4, "tokens": 400},
                    "test_2x": {"nll": 1.0, "accuracy": acc / 2, "examples": 4, "tokens": 80},
                }
                write_run(
                    run_dir,
                    domain="synthetic",
                    task=task,
                    pe=pe,
                    seed=seed,
                    chance=SYNTHETIC_CHANCE[task],
                    splits=splits,
                    preset=preset,
                    encoding_parameters=ENCODING_PARAMETERS[pe],
                )
                write_instances(run_dir, acc, pe, seed)
                write_positions(run_dir, "test", np.arange(1, CONTEXT), 1 - acc)
                _long_split(run_dir, pe, "test_2x", 2)


def _holm(domain):
    """Holm-adjusted p of each baseline against darope, from scipy and statsmodels."""
    baselines = [pe for pe in DIFFS[domain] if pe != "darope"]
    ref = R[domain]
    raw = [sps.ttest_rel(ref + DIFFS[domain][pe], ref).pvalue for pe in baselines]
    return dict(zip(baselines, multipletests(raw, method="holm")[1], strict=True))


def _within_half_width(scores, pe):
    """Half width of `pe`'s 95% within-example interval over {encoding: scores per example} (Cousineau-Morey)."""
    matrix = np.array(list(scores.values()))
    k, n = matrix.shape
    normalised = matrix - matrix.mean(axis=0) + matrix.mean()
    sd = normalised[list(scores).index(pe)].std(ddof=1)
    return sps.t.ppf(0.975, n - 1) * np.sqrt(k / (k - 1)) * sd / np.sqrt(n)


def _nll_cell(domain, pe, bold=False, mark=""):
    scores = {name: R[domain] + d for name, d in DIFFS[domain].items()}
    text = f"{scores[pe].mean():.4f} ± {_within_half_width(scores, pe):.4f}"
    return (f"**{text}**" if bold else text) + (f" {mark}" if mark else "")


def _accuracy_cell(pe, bold=False, mark=""):
    scores = {
        name: np.array([(SYNTHETIC_ACC[t][name] - c) / (1 - c) for t, c in SYNTHETIC_CHANCE.items()])
        for name in SYNTHETIC_ACC["parity"]
    }
    text = f"{scores[pe].mean():.3f} ± {_within_half_width(scores, pe):.3f}"
    return (f"**{text}**" if bold else text) + (f" {mark}" if mark else "")


RANK_CI = object()  # the mean rank's interval over seeds and P(rank 1): checked by its form and its bounds


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """(results folder, summary.md text) of the constructed study at the tiny preset, written once."""
    root = tmp_path_factory.mktemp("study")
    _study_tree(root / "runs")
    summary = study(root / "runs", None, root / "results", ref="darope")
    assert summary == root / "results" / "summary.md"
    return root / "results", summary.read_text()


def test_study_summary_table(tiny_study):
    out, markdown = tiny_study

    # Holm by hand (see above) and from statsmodels, and the stars they give
    jsb, maestro = _holm("jsb"), _holm("maestro")
    assert jsb["rope10k"] == pytest.approx(0.026472, abs=2e-6) and jsb["hope"] == pytest.approx(0.2302, abs=1e-4)
    assert maestro["rope10k"] == pytest.approx(0.026472, abs=2e-6)
    assert maestro["hope"] == pytest.approx(0.047421, abs=2e-6)
    assert jsb["nope"] < 0.001 and maestro["nope"] < 0.001
    assert _nll_cell("jsb", "darope", bold=True) == "**0.7000 ± 0.0985**"  # by hand, above

    table = section(markdown, "Test results by domain and encoding")
    header = (
        "| encoding | jsb (NLL ↓) | maestro (NLL ↓) | synthetic (norm. acc. ↑) | mean rank | "
        "range over resampled seeds; P(rank 1) | mean rank (NLL domains) |"
    )
    expected_rows = [
        [
            "`darope` (ref)",
            _nll_cell("jsb", "darope", bold=True),
            _nll_cell("maestro", "darope"),
            _accuracy_cell("darope"),
            "**1.67 ± 0.33**",
            RANK_CI,
            "1.50 ± 0.50",
        ],
        [
            "`rope10k`",
            _nll_cell("jsb", "rope10k", mark="*"),
            _nll_cell("maestro", "rope10k", bold=True, mark="†"),
            _accuracy_cell("rope10k", bold=True, mark="†"),
            "**1.67 ± 0.67**",
            RANK_CI,
            "2.00 ± 1.00",
        ],
        [
            "`hope`",
            _nll_cell("jsb", "hope"),
            _nll_cell("maestro", "hope", mark="*"),
            _accuracy_cell("hope", mark="*"),
            "2.67 ± 0.33",
            RANK_CI,
            "2.50 ± 0.50",
        ],
        [
            "`nope`",
            _nll_cell("jsb", "nope", mark="*"),
            _nll_cell("maestro", "nope", mark="*"),
            _accuracy_cell("nope", mark="*"),
            "4.00 ± 0.00",
            RANK_CI,
            "4.00 ± 0.00",
        ],
        ["`pope`", "missing", "—", "—", "—", "", "n/a"],
    ]
    lines = [line for line in table.splitlines() if line.startswith("|")]
    assert lines[0] == header
    pattern = re.compile(r"\[(\d\.\d\d), (\d\.\d\d)\]; (\d\.\d\d)")
    p_best = 0.0
    for line, row in zip(lines[2:], expected_rows, strict=True):
        cells = line.strip("| ").split(" | ")
        assert [cell for cell, want in zip(cells, row, strict=True) if want != RANK_CI] == [
            want for want in row if want != RANK_CI
        ]
        if RANK_CI in row:  # the mean rank's interval over seeds holds its mean rank; P(rank 1) sums to 1
            lo, hi, p = map(float, pattern.fullmatch(cells[row.index(RANK_CI)]).groups())
            mean = float(cells[row.index(RANK_CI) - 1].strip("*").split(" ± ")[0])
            assert 1 <= lo <= mean <= hi <= 4
            p_best += p
    assert p_best == pytest.approx(1.0, abs=0.02)
    assert "rope10k+yarn" not in table  # YaRN is the rope run itself at the training length

    # the same numbers in summary.csv
    # the per-example tests stay as paper 000's column; the marks come from the seed-level test: seed k shifts
    # every encoding by the same E[k] sigma, so each baseline's per-seed differences to darope are constant
    # (p = 0, ***) but for jsb hope, whose seeds spread 4 times wider: differences 0.1 + 0.15 E[k], t = 1.15
    rows = {(r["domain"], r["encoding"]): r for r in read_csv(out / "summary.csv")}
    assert float(rows["jsb", "rope10k"]["paper_p_holm"]) == pytest.approx(jsb["rope10k"], rel=1e-9)
    assert (rows["jsb", "rope10k"]["mark"], rows["maestro", "rope10k"]["mark"]) == ("*", "†")
    assert rows["jsb", "nope"]["mark"] == "*" and rows["jsb", "hope"]["mark"] == ""
    hope = sps.ttest_rel([0.6, 0.8, 1.0], [0.65, 0.7, 0.75])
    assert float(rows["jsb", "hope"]["seed_p"]) == pytest.approx(hope.pvalue, rel=1e-9)
    assert rows["jsb", "hope"]["verdict"] == "inconclusive" and rows["jsb", "rope10k"]["verdict"] == "worse"
    assert rows["maestro", "rope10k"]["verdict"] == "better"
    assert float(rows["jsb", "darope"]["score"]) == pytest.approx(0.7)
    seeds = dict(pair.split(":") for pair in rows["jsb", "darope"]["seeds"].split(";"))
    assert {int(k): float(v) for k, v in seeds.items()} == pytest.approx({0: 0.65, 1: 0.7, 2: 0.75})
    assert float(rows["synthetic", "rope10k"]["score"]) == pytest.approx(0.85)
    assert (float(rows["all", "darope"]["score"]), float(rows["all", "darope"]["se"])) == (
        pytest.approx(5 / 3),
        pytest.approx(1 / 3),
    )
    assert ("all", "pope") not in rows  # no score anywhere: no mean rank
    # what ranks them: the Δ to the reference on matched seeds (here every encoding has seeds 0-2)
    assert float(rows["jsb", "hope"]["matched"]) == pytest.approx(0.1) and float(rows["jsb", "darope"]["matched"]) == 0
    assert (rows["jsb", "hope"]["seeds_used"], rows["jsb", "darope"]["seeds_used"]) == ("3", "3")

    # and in summary.json, which is strict JSON (no NaN)
    text = (out / "summary.json").read_text()
    assert "NaN" not in text
    data = json.loads(text)
    rank = data["mean_rank"]["rope10k"]
    assert (rank["mean"], rank["se"], rank["domains"]) == (pytest.approx(5 / 3), pytest.approx(2 / 3), 3)
    assert data["domains"]["jsb"]["encodings"]["rope10k"]["paper_p_holm"] == pytest.approx(jsb["rope10k"])
    assert set(data["domains"]["jsb"]["variance_components"]) >= {"seed", "example", "encoding x seed", "residual"}
    assert len(data["domains"]["jsb"]["pairs"]) == 6  # every pair of the 4 encodings
    assert data["domains_without_finished_runs"] == ["hrg"]

    # the per-domain report marks by the same rule
    per_domain = (out / "jsb" / "summary.md").read_text().splitlines()
    rope = next(line for line in per_domain if line.startswith("| 3 | `rope10k` |"))
    assert "] * |" in rope and "| **worse** |" in rope and rope.endswith("| +0.3000, p 0.0265 |")
    assert any(line.startswith("| 4 | `nope` |") and "] * |" in line for line in per_domain)

    for name in ("figure3.png", "nll_by_position.png", "cd_domains.png", "cd_synthetic_tasks.png"):
        assert_png(out / name)
    for domain in ("maestro", "synthetic"):
        assert_png(out / domain / "extrapolation.png")
    assert not (out / "jsb" / "extrapolation.png").exists()  # sliding windows at L are not extrapolation


def test_study_friedman_seed_spread_extrapolation_and_missing_runs(tiny_study):
    out, markdown = tiny_study

    friedman = section(markdown, "Friedman test and Nemenyi critical difference (beyond the paper)")
    # blocks: one per domain as the mean rank has them, each by its matched scores (the synthetic domain's mean
    # chance-normalised accuracy, negated); darope, rope10k, hope, nope
    data = json.loads((out / "summary.json").read_text())
    names = ["darope", "rope10k", "hope", "nope"]
    matched = {d: [data["domains"][d]["encodings"][n]["matched"] for n in names] for d in ("jsb", "maestro")}
    synthetic = [-data["domains"]["synthetic"]["encodings"][n]["matched"] for n in names]
    scores = np.array([matched["jsb"], matched["maestro"], synthetic])
    expected = sps.friedmanchisquare(*scores.T)
    assert f"chi2_F = {expected.statistic:.3f} (df 3), p = {expected.pvalue:.3g}" in friedman
    assert "N = 3: jsb, maestro, synthetic; k = 4" in friedman
    assert "CD = 2.708" in friedman  # 2.569 * sqrt(20 / 18)
    assert "**Across synthetic tasks** (N = 2: needle, parity; k = 4): chi2_F = 6.000 (df 3)" in friedman
    assert "CD = 3.317" in friedman  # 2.569 * sqrt(20 / 12)
    assert "Left out (not scored in every block): `pope`" not in friedman  # pope has no score at all
    ranks = sps.rankdata(scores, axis=1).mean(axis=0)
    assert data["friedman"]["domains"]["mean_ranks"] == pytest.approx(dict(zip(names, ranks, strict=True)))

    seeds = section(markdown, "Per-seed scores")
    jsb = seeds.split("### jsb", 1)[1].split("###", 1)[0]
    assert "| encoding | seed 0 | seed 1 | seed 2 | seed SD | matched Δ to darope | verdict |" in jsb
    assert "| `darope` | 0.6500 | 0.7000 | 0.7500 | 0.0500 | reference |  |" in jsb
    assert "| `hope` | 0.6000 | 0.8000 | 1.0000 | 0.2000 | +0.1000 | **inconclusive** |" in jsb
    assert "| `nope` | 1.6600 | 1.7100 | 1.7600 | 0.0500 | +1.0100 | **worse** |" in jsb
    synthetic = seeds.split("### synthetic", 1)[1]
    # seed k shifts both tasks' accuracy by 0.02 E[k]: normalised by 0.5 and 0.9, mean shift 0.031111 E[k]
    assert "| `rope10k` | 0.819 | 0.850 | 0.881 | 0.031 | +0.150 | **better** |" in synthetic

    # past L: every seed of an encoding scores the same past-L NLL, so each seed-paired difference is exact (p 0)
    extrapolation = section(markdown, "Extrapolation past the training length")
    maestro = extrapolation.split("### maestro, `test_4x` (L 16 → window 64; reference `darope`)", 1)[1]
    maestro = maestro.split("###", 1)[0]
    header = "| encoding | seeds | pooled NLL past L | Δ past L vs reference [95% CI] | p (Holm) | verdict |"
    assert header in maestro
    assert "| `darope` | 3 | 2.0000 | reference |  |  |" in maestro
    assert "| `hope` | 3 | 2.5000 | +0.5000 [+0.5000, +0.5000] | 0 | worse |" in maestro
    assert "| `rope10k+yarn` | 3 | 1.5000 | -0.5000 [-0.5000, -0.5000] | 0 | better |" in maestro
    assert "### synthetic/needle, `test_2x` (L 16 → window 32; reference `darope`)" in extrapolation
    assert "### jsb" not in extrapolation
    rows = read_csv(out / "extrapolation.csv")
    assert len(rows) == 3 * 5  # maestro test_4x + two synthetic tasks' test_2x, 5 entries each
    assert {float(r["nll_within"]) for r in rows} == {1.0}
    yarn = next(r for r in rows if r["domain"] == "maestro" and r["encoding"] == "rope10k+yarn")
    assert (float(yarn["past_delta"]), yarn["past_seeds"], yarn["past_verdict"]) == (-0.5, "3", "better")

    missing = section(markdown, "Missing runs").strip().splitlines()
    assert missing == [
        "- jsb/pope/seed0: failed (RuntimeError: out of memory)",
        "- jsb/pope/seed1: no run folder",
        "- jsb/pope/seed2: no run folder",
        "- hrg/darope/seed0: unfinished (no done.json)",
    ]
    assert "- hrg: no finished run yet" in markdown

    # the per-domain synthetic report keeps YaRN off the in-distribution split only
    per_domain = (out / "synthetic" / "summary.md").read_text()
    assert "`rope10k+yarn`" not in section(per_domain, "test") and "`rope10k+yarn`" in section(per_domain, "test_2x")


def test_the_synthetic_domain_carries_the_papers_per_example_column(tiny_study):
    """Paper 000 C.2's test on a domain with tasks: over the test instances of both tasks, each instance's
    chance-normalised token accuracy averaged over the seeds, against scipy's ttest_rel and statsmodels' Holm."""
    out, _ = tiny_study
    rows = {row["encoding"]: row for row in read_csv(out / "synthetic" / "summary.csv") if row["task"] == "all"}
    study_rows = {(r["domain"], r["encoding"]): r for r in read_csv(out / "summary.csv")}
    ref = study_rows["synthetic", "nope"]["ref"]
    assert ref == "darope"

    def instances(pe):  # needle then parity (tasks sorted), 4 instances each
        per_task = []
        for task in sorted(SYNTHETIC_ACC):
            chance = SYNTHETIC_CHANCE[task]
            accuracy = [
                instance_correct(SYNTHETIC_ACC[task][pe] + 0.02 * e, pe, seed) / INSTANCE_TOKENS
                for seed, e in enumerate(E)
            ]
            per_task.append((np.mean(accuracy, axis=0) - chance) / (1 - chance))
        return np.concatenate(per_task)

    baselines = ["hope", "nope", "rope10k"]
    tests = {pe: sps.ttest_rel(instances(pe), instances(ref)) for pe in baselines}
    holm = dict(zip(baselines, multipletests([t.pvalue for t in tests.values()], method="holm")[1], strict=True))
    assert rows[ref]["paper_p_holm"] == ""
    for pe in baselines:
        diff = float(np.mean(instances(pe) - instances(ref)))
        assert float(rows[pe]["paper_mean_diff"]) == pytest.approx(diff)
        assert float(rows[pe]["paper_p"]) == pytest.approx(tests[pe].pvalue)
        assert float(rows[pe]["paper_p_holm"]) == pytest.approx(holm[pe])

    markdown = (out / "synthetic" / "summary.md").read_text()
    verdict = section(markdown, "Verdict: the domain's score")
    assert "paper 000 C.2: p (Holm), per example, conditional on the trained models: Δ, p |" in verdict
    nope = next(line for line in verdict.splitlines() if line.startswith("| 4 | `nope` |"))
    diff = np.mean(instances("nope") - instances(ref))
    assert nope.endswith(f" | {diff:+.3f}, p {holm['nope']:.3g} |")
    assert "over the 8 test instances of the 2 tasks" in verdict and "never the verdict" in verdict
    assert float(study_rows["synthetic", "nope"]["paper_p_holm"]) == pytest.approx(holm["nope"])


def test_paper_values_only_at_the_paper_preset(tiny_study, tmp_path):
    out, tiny = tiny_study
    paper_section = section(tiny, "Paper 000's published values")
    assert "- jsb: preset `tiny`" in paper_section and "- maestro: preset `tiny`" in paper_section
    assert "not comparable; omitted" in paper_section
    assert "0.4547" not in tiny and "1.4180" not in tiny
    assert all(row["paper"] == "" for row in read_csv(out / "summary.csv"))

    _study_tree(tmp_path / "paper" / "runs", preset="paper")
    paper = study(tmp_path / "paper" / "runs", None, tmp_path / "paper" / "results").read_text()
    table = [line for line in section(paper, "Paper 000's published values").splitlines() if line.startswith("| ")]
    assert table[1:] == [  # ours from the construction above; the paper's from SPEC 3
        "| jsb | `darope` | 0.7000 | 0.4547 | +0.2453 |",
        "| jsb | `hope` | 0.8000 | 0.4567 | +0.3433 |",
        "| jsb | `nope` | 1.7100 | 1.1634 | +0.5466 |",
        "| maestro | `darope` | 1.6000 | 1.4180 | +0.1820 |",
        "| maestro | `hope` | 1.8000 | 1.4289 | +0.3711 |",
        "| maestro | `nope` | 2.6100 | 1.5075 | +1.1025 |",
    ]
    rows = {(r["domain"], r["encoding"]): r for r in read_csv(tmp_path / "paper" / "results" / "summary.csv")}
    assert rows["jsb", "darope"]["paper"] == "0.4547" and rows["jsb", "rope10k"]["paper"] == ""


def test_study_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run folders under"):
        study(tmp_path / "runs", None, tmp_path / "results")
    (tmp_path / "runs" / "hrg" / "nope" / "seed0").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no finished run"):
        study(tmp_path / "runs", None, tmp_path / "results")
    with pytest.raises(FileNotFoundError, match="'jsb'"):
        study(tmp_path / "runs", ["jsb"], tmp_path / "results")
    with pytest.raises(SystemExit):
        main(["--domains", "all-present", "jsb"])


def test_synthetic_only_study_with_an_incomplete_encoding(tmp_path):
    synthetic_tree(tmp_path / "runs")
    run_dir = tmp_path / "runs" / "synthetic" / "parity" / "hope" / "seed0"  # hope ran on parity only
    entry = {"nll": 0.5, "accuracy": 0.75, "exact_match": 0.0, "examples": 4, "tokens": 40}
    write_run(run_dir, domain="synthetic", task="parity", pe="hope", seed=0, chance=0.5, splits={"test": entry})
    summary = study(tmp_path / "runs", ["synthetic"], tmp_path / "results", ref="rope10k")
    markdown = summary.read_text()

    # seed 1 of reverse_string rope10k is unfinished, so seed 0 alone is compared: parity rope10k 0.9 -> 0.8,
    # reverse_string 0.95 -> 0.944; ape_learned 0.7 -> 0.4, 0.5 -> 0.444: means 0.872 and 0.422; two tasks: ranks
    # 1 and 2, a single domain: no standard error
    table = [line for line in section(markdown, "Test results by domain and encoding").splitlines() if "|" in line]
    # rope10k is scored over seed 0, the only one it finished on both tasks; ape_learned over seeds 0 and 1:
    # parity 0.7, 0.6 -> 0.4, 0.2 and reverse_string 0.5, 0.6 -> 0.444, 0.556: 0.400
    assert table[0] == "| encoding | synthetic (norm. acc. ↑) | mean rank | range over resampled seeds; P(rank 1) |"
    assert table[2].startswith("| `rope10k` (ref) | **0.872 ± ") and " (1 seed) | **1.00** | " in table[2]
    assert table[3].startswith("| `ape_learned` | 0.400 ± ") and " (2 seeds) | 2.00 | " in table[3]
    assert table[4] == "| `hope` | incomplete (test results on 1 of 2 tasks) | — |  |"
    assert "(NLL domains)" not in markdown and "## Paper 000's published values" not in markdown

    friedman = section(markdown, "Friedman test and Nemenyi critical difference (beyond the paper)")
    assert "**Across domains**: not run: needs at least 2 domains; here 1" in friedman
    assert "**Across synthetic tasks** (N = 2: parity, reverse_string; k = 2)" in friedman
    assert "Left out (not scored in every block): `hope`." in friedman
    assert not (tmp_path / "results" / "cd_domains.png").exists()
    assert_png(tmp_path / "results" / "cd_synthetic_tasks.png")
    assert "synthetic/parity/hope/seed1: no run folder" in section(markdown, "Missing runs")


OPENED: list[str] | None = None  # the audit hook's record while a test listens (None: not listening)


def _record_opens(event, args):
    if OPENED is not None and event == "open" and isinstance(args[0], str | bytes | os.PathLike):
        OPENED.append(os.fsdecode(args[0]))


def test_a_comparison_opens_each_run_file_once(tmp_path):
    """Every statistic of a comparison reads the runs through one memo per run folder: over the whole constructed
    study (two NLL domains, a domain with tasks and YaRN rows, extrapolation splits, a failed run), each file under
    the runs folder is opened once (sys.addaudithook counts the opens)."""
    global OPENED
    _study_tree(tmp_path / "runs")
    sys.addaudithook(_record_opens)  # an audit hook cannot be removed: it records only while OPENED is a list
    OPENED = []
    try:
        study(tmp_path / "runs", None, tmp_path / "results", ref="darope")
        opened = [path for path in OPENED if path.startswith(str(tmp_path / "runs"))]
    finally:
        OPENED = None
    counts = Counter(opened)
    assert len(counts) > 100 and max(counts.values()) == 1, counts.most_common(3)


def test_the_analysis_and_the_report_are_functions_of_the_loaded_runs(tmp_path):
    """Load once, then no return to the run folders: the constructed study (two NLL domains, a domain with tasks and
    YaRN rows, extrapolation splits, a failed run, an unfinished domain) with a training log and an inspection added,
    loaded, then its runs folder moved away, is analysed and rendered to the same summary, study data and page as the
    study read in place; and every file of the runs folder was opened while loading, none after."""
    global OPENED
    root = tmp_path / "runs"
    _study_tree(root)
    log = root / "jsb" / "darope" / "seed0" / "logs" / "metrics.csv"
    log.parent.mkdir(parents=True)
    log.write_text("step,train/loss,val/loss\n1,3.5,\n2,3.25,\n2,,3.4\n")
    layer = LayerRecency(np.array([4.0, 3, 2, 1]), np.array([2.5, 1.0, 0.4, 0.1]), np.ones(4), np.ones(4), 1.0, 1.0)
    profile = RecencyProfile([layer], context=4, window=4, wavelength=1.5, wavelength_source="s", reference=2.0)
    for run in ("darope/seed0", "nope/seed1"):
        inspection = root / "jsb" / run / "inspect" / "test.json"
        inspection.parent.mkdir(parents=True)
        inspection.write_text(json.dumps({"split": "test", "recency": profile.as_json()}))
    # both reports in a folder of the same name: a study is named by its folder (summary.json's study record)
    in_place = study(root, None, tmp_path / "in_place" / "study", ref="darope")

    sys.addaudithook(_record_opens)
    OPENED = []
    try:
        loaded = load_study(root, None)
        opened_loading = [path for path in OPENED if path.startswith(str(root))]
        root.rename(tmp_path / "moved")  # nothing under the runs folder can be opened from here on
        OPENED = []
        analysed = analyse_loaded(root, loaded, "darope")
        from_loaded = write_study_report(analysed, tmp_path / "from_loaded" / "study")
        opened_after = [path for path in OPENED if path.startswith(str(root))]
    finally:
        OPENED = None
    assert len(set(opened_loading)) > 100 and opened_after == []
    for name in ("summary.md", "summary.json", "summary.csv", "index.html"):
        assert (from_loaded.parent / name).read_bytes() == (in_place.parent / name).read_bytes(), name
    page = (from_loaded.parent / "index.html").read_text()
    runs = {run["label"]: run for run in unpacked(page, "runs-data")}
    assert [2, 3.25] in [row[1:] for row in runs["jsb/darope/seed0"]["train"]]  # the training log, loaded, on the page
    # the one-run view holds every finished run's test examples, a YaRN entry's included
    records = {record["label"]: record for record in page_runs.run_records(analysed)}
    assert records["maestro/rope10k+yarn/seed0"]["total_examples"] == 5
    assert records["maestro/rope10k+yarn/seed0"]["ref"] == "maestro/darope/seed0"
    far_mass = json.loads((from_loaded.parent / "summary.json").read_text())["attention_by_distance"]["far_mass"]
    assert [(row["encoding"], row["seeds"]) for row in far_mass] == [("darope", [0]), ("nope", [1])]


def test_a_domain_of_one_seed_has_no_spread_over_resampled_seeds(tmp_path):
    """A study of one seed (a design's first look still training, published in slices) ranks its encodings by their
    Δ on that seed, but has nothing to resample: no range and no P(rank 1) (resampling one seed gives every
    replicate the same ranks: a zero-width range and P(rank 1) = 1.00); with a second seed both are there."""
    from pipelines.report.page_tables import mean_rank_rows

    x = np.array([0.2, 1.4, 0.6, 2.5])
    nll = {"rope10k": x, "darope": x - 0.01, "nope": x + 0.3}
    lm_domain(tmp_path / "one", "jsb", nll, seeds=(10,), seed_step=0.0)
    summary = study(tmp_path / "one", ["jsb"], tmp_path / "one_out")
    table = [line for line in section(summary.read_text(), "Test results by domain and encoding").splitlines()]
    rows = {line.split(" | ")[0]: line for line in table if line.startswith("| `")}
    assert rows["| `darope`"].endswith("| **1.00** | — |") and rows["| `nope`"].endswith("| 3.00 | — |")
    record = json.loads((tmp_path / "one_out" / "summary.json").read_text())
    assert {name: (r["ci_over_seeds"], r["p_rank_1"]) for name, r in record["mean_rank"].items()} == dict.fromkeys(
        nll, ([None, None], None)
    )
    cells = {row["encoding"]: row["cells"] for row in mean_rank_rows(record)}
    assert {name: (c["range"].text, c["p_rank_1"].text) for name, c in cells.items()} == dict.fromkeys(nll, ("—", "—"))

    lm_domain(tmp_path / "two", "jsb", nll, seeds=(10, 11), seed_step=0.01)
    record = json.loads(study(tmp_path / "two", ["jsb"], tmp_path / "two_out").with_name("summary.json").read_text())
    assert record["mean_rank"]["darope"]["p_rank_1"] == 1.0 and record["mean_rank"]["nope"]["ci_over_seeds"] == [3, 3]


def test_a_domain_below_its_designs_first_look_joins_no_cross_domain_rank(tmp_path):
    """A designed study's slice (hrg: its design recorded, then rope10k and hope on seed 10 of the first look's seeds
    10-12) compared beside domains past their first look (jsb and maestro, seeds 0-2 of four encodings) left only
    the encodings all hold in the mean rank and the Friedman test: a rank of one seed's scores. It ranks nowhere and
    says why; the mean ranks and the test are jsb's and maestro's. Alone, it still ranks itself."""
    from pipelines import settle as settle_module

    x = np.array([0.2, 1.4, 0.6, 2.5])
    for domain, shift in (("jsb", 0.0), ("maestro", 0.1)):
        nll = {"rope10k": x, "darope": x - 0.05, "hope": x + 0.02 + shift, "nope": x + 0.3}
        lm_domain(tmp_path / "runs", domain, nll, seeds=(0, 1, 2), seed_step=0.01)
    design = ["--domain", "hrg", "--runs", str(tmp_path / "runs"), "--encodings", "hope", "nope"]
    assert settle_module.main([*design, "--seeds", "10", "11", "12", "--record"]) == 0
    lm_domain(tmp_path / "runs", "hrg", {"rope10k": x, "hope": x - 0.1}, seeds=(10,), seed_step=0.0)

    summary = study(tmp_path / "runs", ["jsb", "maestro", "hrg"], tmp_path / "out")
    record = json.loads(summary.with_name("summary.json").read_text())
    why = "its design's first look is not reached: no pair tested, encodings on unequal seeds"
    assert record["domains_not_ranked"] == {"hrg": why}
    assert f"Not ranked: `hrg` ({why})." in summary.read_text()
    # the mean rank over jsb and maestro, of all four encodings; the test over those 2 blocks
    assert {name: (r["mean"], r["domains"]) for name, r in record["mean_rank"].items()} == {
        "darope": (1.0, 2), "rope10k": (2.0, 2), "hope": (3.0, 2), "nope": (4.0, 2)
    }  # fmt: skip
    test = record["friedman"]["domains"]
    assert test["blocks"] == ["jsb", "maestro"] and test["left_out"] == []
    assert sorted(test["encodings"]) == ["darope", "hope", "nope", "rope10k"]
    page = html.unescape((tmp_path / "out" / "index.html").read_text())
    assert f"Not ranked: hrg ({why})." in page

    alone = json.loads(study(tmp_path / "runs", ["hrg"], tmp_path / "alone").with_name("summary.json").read_text())
    assert alone["domains_not_ranked"] == {}
    assert {name: r["mean"] for name, r in alone["mean_rank"].items()} == {"hope": 1.0, "rope10k": 2.0}
