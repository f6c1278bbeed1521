"""Tests of pipelines.stats (by hand and against scipy/statsmodels) and of pipelines.compare end to end."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from pipelines.compare import compare, main
from pipelines.stats import (
    chance_normalised,
    holm_adjust,
    mean_ci,
    mean_rank,
    paired_tests,
    ranks,
    seed_average,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# ------------------------------------------------------------------------------------------ statistics

# Paired example worked by hand: reference NLL r = [1, 2, 3, 4, 5] on 5 examples, three baselines with
#   b1: d = [0.1, 0.2, 0.3, 0.4, 0.5]   mean 0.3
#   b2: d = [0.2, -0.1, 0.0, 0.1, 0.3]  mean 0.1
#   b3: d = [0.3, 0.0, 0.4, 0.2, 0.1]   mean 0.2
# Every d has deviations {0, +-0.1, +-0.2} from its mean: sum of squares 0.10, variance 0.10 / 4 = 0.025,
# sd = 0.158114, se = sd / sqrt(5) = 0.0707107. So t = mean / se: b1 3*sqrt(2) = 4.242641,
# b2 sqrt(2) = 1.414214, b3 2*sqrt(2) = 2.828427.
# Two-sided p for df = 4 has the closed form p = 1 - (3/4) * u * (1 - t^2 / (12 (1 + t^2/4))),
# u = t / sqrt(1 + t^2/4):
#   b1: t^2 = 18: u = 4.242641 / sqrt(5.5) = 1.809068, 1 - 18/66 = 0.727273 -> p = 1 - 0.986764 = 0.013236
#   b2: t^2 = 2:  u = 1.414214 / sqrt(1.5) = 1.154701, 1 - 2/18 = 0.888889 -> p = 1 - 0.769800 = 0.230200
#   b3: t^2 = 8:  u = 2.828427 / sqrt(3)   = 1.632993, 1 - 8/36 = 0.777778 -> p = 1 - 0.952579 = 0.047421
# Holm over m = 3, ascending p: b1 3 * 0.013236 = 0.039707, b3 2 * 0.047421 = 0.094842,
# b2 1 * 0.230200 = 0.230200 (already increasing, the running max changes nothing).
# Significant after Holm: b1 only (b3 is below 0.05 raw, not after correction).
# 95% CI of b1's mean difference: t_{0.975, 4} = 2.776445, 0.3 +- 2.776445 * 0.0707107 = [0.103675, 0.496325].
REF = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
DIFFS = {
    "b1": np.array([0.1, 0.2, 0.3, 0.4, 0.5]),
    "b2": np.array([0.2, -0.1, 0.0, 0.1, 0.3]),
    "b3": np.array([0.3, 0.0, 0.4, 0.2, 0.1]),
}
HAND = {  # baseline: (mean difference, t, raw p, Holm p, significant), 6 decimals as worked above
    "b1": (0.3, 4.242641, 0.013236, 0.039707, True),
    "b2": (0.1, 1.414214, 0.230200, 0.230200, False),
    "b3": (0.2, 2.828427, 0.047421, 0.094842, False),
}


def test_paired_tests_by_hand_and_against_scipy_statsmodels():
    nll = {"ref": REF, **{name: REF + d for name, d in DIFFS.items()}}
    results = paired_tests(nll, ref="ref")

    assert [r.baseline for r in results] == ["b1", "b2", "b3"]
    for r in results:
        mean_diff, t, p, p_holm, significant = HAND[r.baseline]
        assert r.ref == "ref" and r.n == 5
        assert r.mean_diff == pytest.approx(mean_diff, abs=1e-12)
        assert r.t == pytest.approx(t, abs=1e-6)
        assert r.p == pytest.approx(p, abs=2e-6)
        assert r.p_holm == pytest.approx(p_holm, abs=2e-6)
        assert r.significant is significant
        assert r.ref_better is significant  # every baseline here is worse than the reference
        scipy_result = sps.ttest_rel(nll[r.baseline], REF)
        assert r.t == pytest.approx(scipy_result.statistic, rel=1e-9)
        assert r.p == pytest.approx(scipy_result.pvalue, rel=1e-9)

    b1 = results[0]
    assert (b1.ci_lo, b1.ci_hi) == (pytest.approx(0.103675, abs=1e-6), pytest.approx(0.496325, abs=1e-6))
    expected_holm = multipletests([r.p for r in results], method="holm")[1]
    np.testing.assert_allclose([r.p_holm for r in results], expected_holm, rtol=1e-12)


def test_holm_step_down_keeps_the_order_of_the_raw_p_values():
    # By hand, m = 4, ascending 0.01, 0.011, 0.04, 0.5 -> 4*0.01 = 0.04, 3*0.011 = 0.033 (raised to the
    # running max 0.04), 2*0.04 = 0.08, 1*0.5 = 0.5; back in input order [0.08, 0.04, 0.04, 0.5].
    p = np.array([0.04, 0.01, 0.011, 0.5])
    adjusted = holm_adjust(p)
    np.testing.assert_allclose(adjusted, [0.08, 0.04, 0.04, 0.5], rtol=1e-12)
    np.testing.assert_allclose(adjusted, multipletests(p, method="holm")[1], rtol=1e-12)
    order = np.argsort(p)
    assert np.all(np.diff(adjusted[order]) >= 0)
    assert np.all(adjusted >= p)
    # capped at 1, random p-values agree with statsmodels
    np.testing.assert_allclose(holm_adjust(np.array([0.6, 0.7])), [1.0, 1.0])
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.uniform(0, 0.2, size=rng.integers(1, 8))
        np.testing.assert_allclose(holm_adjust(p), multipletests(p, method="holm")[1], rtol=1e-12)


def test_paired_test_of_identical_encodings_is_not_significant():
    (result,) = paired_tests({"a": REF, "b": REF.copy()}, ref="a")
    assert (result.t, result.p, result.p_holm, result.significant) == (0.0, 1.0, 1.0, False)


def test_ranks_average_ties_by_hand():
    scores = {"a": 1.0, "b": 2.0, "c": 2.0, "d": 3.0}
    assert ranks(scores) == {"a": 1.0, "b": 2.5, "c": 2.5, "d": 4.0}
    assert ranks(scores, lower_is_better=False) == {"a": 4.0, "b": 2.5, "c": 2.5, "d": 1.0}
    with_nan = ranks({"a": 0.9, "b": math.nan, "c": 0.5}, lower_is_better=False)
    assert with_nan["a"] == 1.0 and with_nan["c"] == 2.0 and math.isnan(with_nan["b"])


def test_mean_rank_and_standard_error_by_hand():
    # lower is better. g1: x 1, y 2, z 3.  g2: y and z tie at 0.4 -> 1.5 each, x 3.  g3: x 1, z 2, y 3.
    # se = sqrt(var) / sqrt(3), var with ddof = 1:
    # x: [1, 3, 1]   mean 5/3,  deviations -2/3, 4/3, -2/3 -> var (24/9)/2 = 4/3, se = 2/3
    # y: [2, 1.5, 3] mean 13/6, deviations -1/6, -2/3, 5/6 -> var (7/6)/2 = 7/12, se = 0.440959
    # z: [3, 1.5, 2] mean 13/6, same deviations as y -> se 0.440959
    table = {
        "g1": {"x": 0.1, "y": 0.2, "z": 0.3},
        "g2": {"x": 0.5, "y": 0.4, "z": 0.4},
        "g3": {"x": 0.1, "y": 0.3, "z": 0.2},
    }
    result = mean_rank(table, lower_is_better=True)
    assert result["x"] == (pytest.approx(5 / 3), pytest.approx(2 / 3))
    assert result["y"] == (pytest.approx(13 / 6), pytest.approx(0.440959, abs=1e-6))
    assert result["z"] == (pytest.approx(13 / 6), pytest.approx(0.440959, abs=1e-6))

    single = mean_rank({"g1": {"x": 0.1, "y": 0.2}}, lower_is_better=True)
    assert single["x"][0] == 1.0 and math.isnan(single["x"][1])


def test_seed_average_aligns_by_id_and_rejects_mismatched_example_sets():
    per_seed = {0: np.array([1.0, 2.0, 3.0]), 1: np.array([5.0, 3.0, 4.0])}
    ids = {0: np.array([10, 20, 30]), 1: np.array([30, 10, 20])}
    np.testing.assert_allclose(seed_average(per_seed, ids), [2.0, 3.0, 4.0])
    np.testing.assert_allclose(seed_average(per_seed), [3.0, 2.5, 3.5])

    with pytest.raises(ValueError, match="different example sets"):
        seed_average(per_seed, {0: np.array([10, 20, 30]), 1: np.array([10, 20, 31])})
    with pytest.raises(ValueError, match="different example sets"):
        seed_average({0: np.array([1.0, 2.0]), 1: np.array([1.0, 2.0, 3.0])})


def test_mean_ci_and_chance_normalised():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    mean, lo, hi = mean_ci(x)
    expected = sps.t.interval(0.95, x.size - 1, loc=x.mean(), scale=sps.sem(x))
    assert mean == 3.5 and (lo, hi) == (pytest.approx(expected[0]), pytest.approx(expected[1]))
    assert chance_normalised(0.75, 0.5) == 0.5
    assert chance_normalised(0.1, 0.1) == 0.0


# --------------------------------------------------------------------------------------- run folders


def _write_run(run_dir, *, domain, pe, seed, task=None, chance=None, splits, finished=True):
    """A run folder in the train pipeline's format; `splits` maps a split to its summary entry."""
    (run_dir / "metrics").mkdir(parents=True)
    manifest = {
        "run": {"domain": domain, "task": task, "pe": pe, "pe_id": pe, "seed": seed, "preset": "tiny"},
        "chance": chance,
        "n_params": 1000,
        "tokens_per_s": 1.0,
        "data_hashes": {},
        "config": {},
        "git": {"sha": "0" * 40, "dirty": False},
        "packages": {},
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / "metrics" / "summary.json").write_text(json.dumps({"splits": splits}))
    if finished:
        (run_dir / "done.json").write_text(json.dumps({"finished": "2025-01-01T00:00:00"}))


def _write_csv(path, header, rows):
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _read_csv(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _section(markdown, title):
    """The text of one `## title` section."""
    return markdown.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _assert_png(path):
    assert path.read_bytes()[:8] == PNG_SIGNATURE


EXAMPLE_IDS = [3, 7, 11, 15, 19, 23]


def _lm_tree(root):
    """jsb: rope10k and nope x seeds 0, 1; returns per-example NLL as {encoding: {seed: {id: nll}}}."""
    rng = np.random.default_rng(1)
    values = {}
    for pe, offset in (("rope10k", 0.45), ("nope", 1.1)):
        values[pe] = {}
        for seed in (0, 1):
            nll = {i: offset + rng.uniform(0, 0.2) for i in EXAMPLE_IDS}
            values[pe][seed] = nll
            run_dir = root / "jsb" / pe / f"seed{seed}"
            entry = {"nll": 0.0, "accuracy": 0.5, "exact_match": 0.0, "examples": 6, "tokens": 60}
            _write_run(run_dir, domain="jsb", pe=pe, seed=seed, splits={"test": entry})
            order = EXAMPLE_IDS if seed == 0 else EXAMPLE_IDS[::-1]  # rows in any order: aligned by id
            _write_csv(
                run_dir / "metrics" / "test.per_example.csv",
                ["example", "nll", "tokens", "correct", "exact"],
                [[i, repr(nll[i]), 10, 5, 0] for i in order],
            )
            _write_csv(
                run_dir / "metrics" / "test.per_position.csv",
                ["position", "nll_sum", "tokens"],
                [[p, offset * 6 + p, 6] for p in range(1, 5)],
            )
    return values


def test_compare_lm_domain_end_to_end(tmp_path):
    values = _lm_tree(tmp_path / "runs")
    out = tmp_path / "results" / "jsb"
    summary = compare(tmp_path / "runs", "jsb", out, ref="rope10k")

    assert summary == out / "summary.md"
    # independent computation: average each example id over the seeds, then over the examples
    avg = {pe: np.array([np.mean([values[pe][s][i] for s in (0, 1)]) for i in EXAMPLE_IDS]) for pe in values}
    rows = {row["encoding"]: row for row in _read_csv(out / "summary.csv")}
    assert list(rows) == ["rope10k", "nope"]  # best rank first
    for pe, x in avg.items():
        row = rows[pe]
        lo, hi = sps.t.interval(0.95, x.size - 1, loc=x.mean(), scale=sps.sem(x))
        assert float(row["nll"]) == pytest.approx(x.mean(), rel=1e-12)
        assert (float(row["ci_lo"]), float(row["ci_hi"])) == (pytest.approx(lo), pytest.approx(hi))
        seed_means = [np.mean(list(values[pe][s].values())) for s in (0, 1)]
        assert float(row["seed_min"]) == pytest.approx(min(seed_means))
        assert float(row["seed_max"]) == pytest.approx(max(seed_means))
        assert (row["seeds"], row["examples"]) == ("2", "6")
    assert (rows["rope10k"]["rank"], rows["nope"]["rank"]) == ("1.0", "2.0")

    test = sps.ttest_rel(avg["nope"], avg["rope10k"])
    nope = rows["nope"]
    assert float(nope["mean_diff"]) == pytest.approx(np.mean(avg["nope"] - avg["rope10k"]))
    assert float(nope["p"]) == pytest.approx(test.pvalue, rel=1e-9)
    assert float(nope["p_holm"]) == pytest.approx(test.pvalue, rel=1e-9)  # one baseline: Holm = raw
    assert nope["significant"] == "True" and rows["rope10k"]["p"] == ""

    markdown = summary.read_text()
    assert f"**{avg['rope10k'].mean():.4f}**" in markdown
    assert f"**{avg['nope'].mean():.4f}**" not in markdown
    nope_line = next(line for line in markdown.splitlines() if "`nope`" in line)
    assert " *" in nope_line and f"{test.pvalue:.3g}" in nope_line
    assert "Δ vs rope10k" in markdown
    assert _section(markdown, "Missing runs").strip() == "None."
    for name in ("nll.png", "nll_by_position.png"):
        _assert_png(out / name)
    assert sorted(p.name for p in out.iterdir()) == [
        "nll.png",
        "nll_by_position.png",
        "summary.csv",
        "summary.md",
    ]  # no temporary files left behind


def test_compare_lm_without_the_default_reference_says_so(tmp_path, capsys):
    _lm_tree(tmp_path / "runs")
    main(["--domain", "jsb", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "results")])
    printed = capsys.readouterr().out
    assert "# jsb: test NLL by encoding" in printed
    assert "No paired tests: `darope`" in printed
    assert str(tmp_path / "results" / "jsb" / "nll_by_position.png") in printed


SKIP_REASON = "learned absolute table of length 256 cannot be evaluated at 2048"
# accuracy per (task, encoding, seed) for test, test_2x, test_8x (None = skipped)
ACCURACY = {
    ("parity", "rope10k", 0): (0.9, 0.7, 0.55),
    ("parity", "rope10k", 1): (0.8, 0.6, 0.65),
    ("parity", "ape_learned", 0): (0.7, 0.5, None),
    ("parity", "ape_learned", 1): (0.6, 0.52, None),
    ("reverse_string", "rope10k", 0): (0.95, 0.2, 0.2),
    ("reverse_string", "rope10k", 1): (0.05, 0.05, 0.05),  # unfinished: must not count
    ("reverse_string", "ape_learned", 0): (0.5, 0.3, None),
    ("reverse_string", "ape_learned", 1): (0.6, 0.2, None),
}
CHANCE = {"parity": 0.5, "reverse_string": 0.1}


def _synthetic_tree(root):
    for (task, pe, seed), accuracies in ACCURACY.items():
        splits = {
            split: {"skipped": SKIP_REASON}
            if acc is None
            else {"nll": 1.0 - acc, "accuracy": acc, "exact_match": 0.0, "examples": 4, "tokens": 40}
            for split, acc in zip(("test", "test_2x", "test_8x"), accuracies, strict=True)
        }
        _write_run(
            root / "synthetic" / task / pe / f"seed{seed}",
            domain="synthetic",
            task=task,
            pe=pe,
            seed=seed,
            chance=CHANCE[task],
            splits=splits,
            finished=(task, pe, seed) != ("reverse_string", "rope10k", 1),
        )


def test_compare_synthetic_end_to_end(tmp_path):
    _synthetic_tree(tmp_path / "runs")
    out = tmp_path / "results" / "synthetic"
    summary = compare(tmp_path / "runs", "synthetic", out)

    rows = {(r["task"], r["encoding"], r["split"]): r for r in _read_csv(out / "summary.csv")}
    assert len(rows) == 2 * 2 * 3
    for (task, pe, split), row in rows.items():
        index = ("test", "test_2x", "test_8x").index(split)
        finished = [s for s in (0, 1) if (task, pe, s) != ("reverse_string", "rope10k", 1)]
        accs = [ACCURACY[task, pe, s][index] for s in finished]
        if None in accs:
            assert (row["status"], row["accuracy"], row["seeds"]) == ("n/a", "", "0")
            continue
        acc = float(np.mean(accs))
        assert row["status"] == "ok" and row["seeds"] == str(len(finished))
        assert float(row["accuracy"]) == pytest.approx(acc)
        assert float(row["chance_normalised"]) == pytest.approx((acc - CHANCE[task]) / (1 - CHANCE[task]))
        assert float(row["nll"]) == pytest.approx(1.0 - acc)
    assert float(rows["reverse_string", "rope10k", "test"]["accuracy"]) == pytest.approx(0.95)

    markdown = summary.read_text()
    test = _section(markdown, "test")
    # parity rope10k: acc 0.85, normalised (0.85 - 0.5) / 0.5 = 0.7, best of its task
    assert "| parity | 0.5 | 0.650 (0.300) | **0.850 (0.700)** |" in test
    # reverse_string rope10k: seed 0 only, 0.95 -> (0.95 - 0.1) / 0.9 = 0.944
    assert "| reverse_string | 0.1 | 0.550 (0.500) | **0.950 (0.944)** |" in test
    # ranks: rope10k first on both tasks
    assert "| mean rank |  | 2.00 ± 0.00 | **1.00 ± 0.00** |" in test
    # test_2x: parity rope10k first (0.65 > 0.51), reverse_string ape_learned first (0.25 > 0.2):
    # both encodings [1, 2] -> mean 1.5, se std([1, 2], ddof=1) / sqrt(2) = 0.5
    assert "| mean rank |  | **1.50 ± 0.50** | **1.50 ± 0.50** |" in _section(markdown, "test_2x")
    test_8x = _section(markdown, "test_8x")
    assert "| parity | 0.5 | n/a | **0.600 (0.200)** |" in test_8x
    assert "| mean rank |  | n/a | **1.00 ± 0.00** |" in test_8x
    assert f"n/a for `ape_learned` (parity, reverse_string): {SKIP_REASON}" in test_8x

    missing = _section(markdown, "Missing runs")
    assert "synthetic/reverse_string/rope10k/seed1: unfinished (no done.json)" in missing
    assert len(missing.strip().splitlines()) == 1
    _assert_png(out / "accuracy.png")


def test_compare_raises_on_an_empty_domain(tmp_path):
    with pytest.raises(FileNotFoundError, match="maestro"):
        compare(tmp_path / "runs", "maestro", tmp_path / "results" / "maestro")
    (tmp_path / "runs" / "hrg" / "nope" / "seed0").mkdir(parents=True)  # never finished
    with pytest.raises(FileNotFoundError, match="no finished run"):
        compare(tmp_path / "runs", "hrg", tmp_path / "results" / "hrg")
    assert not (tmp_path / "results").exists()


def test_a_failed_run_is_reported_with_its_error(tmp_path):
    from pipelines.compare import discover_runs, missing_runs

    for pe in ("rope10k", "nope"):
        (tmp_path / "jsb" / pe / "seed0").mkdir(parents=True)
    (tmp_path / "jsb" / "rope10k" / "seed0" / "done.json").write_text("{}")
    (tmp_path / "jsb" / "nope" / "seed0" / "failed.json").write_text('{"error": "NonFiniteLossError: loss is nan"}')
    assert missing_runs(discover_runs(tmp_path, "jsb")) == ["jsb/nope/seed0: failed (NonFiniteLossError: loss is nan)"]
