"""Tests of pipelines.analysis.stats: by hand, and against scipy and statsmodels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from pipelines.analysis.stats import (
    cd_groups,
    chance_normalised,
    critical_difference,
    friedman,
    holm_adjust,
    mean_ci,
    mean_rank,
    nemenyi_q,
    paired_tests,
    ranks,
    seed_average,
    summarise_ranks,
)

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


def test_summarise_ranks_mixes_directions():
    # ranks computed per group in its own direction (an NLL domain, an accuracy domain), then averaged:
    # nll: a 1, b 2; accuracy 0.9 vs 0.5: b 1, a 2 -> both mean 1.5, se std([1, 2], ddof=1) / sqrt(2) = 0.5
    per_group = [ranks({"a": 0.4, "b": 0.6}), ranks({"a": 0.5, "b": 0.9}, lower_is_better=False)]
    assert summarise_ranks(per_group) == {"a": (1.5, 0.5), "b": (1.5, 0.5)}


# Friedman by hand (lower is better), N = 4 blocks, k = 3 treatments A, B, C:
#   block 1: 1, 2, 3 -> ranks 1, 2, 3      block 2: 1, 3, 2 -> ranks 1, 3, 2
#   block 3: 2, 2, 1 -> ranks 2.5, 2.5, 1  block 4: 1, 2, 3 -> ranks 1, 2, 3
# rank sums R = 5.5, 9.5, 9; sum R^2 = 30.25 + 90.25 + 81 = 201.5
# uncorrected chi2 = 12 / (N k (k+1)) * 201.5 - 3 N (k+1) = 0.25 * 201.5 - 48 = 2.375
# ties: one pair in block 3, t^3 - t = 6; C = 1 - 6 / (N k (k^2 - 1)) = 1 - 6 / 96 = 0.9375
# chi2 = 2.375 / 0.9375 = 2.533333; df 2: p = exp(-chi2 / 2) = 0.281767
# Iman-Davenport F = (N - 1) chi2 / (N (k - 1) - chi2) = 7.6 / 5.466667 = 1.390244 on (2, 6) df
# mean ranks R / N = 1.375, 2.375, 2.25
FRIEDMAN_SCORES = np.array([[1.0, 2.0, 3.0], [1.0, 3.0, 2.0], [2.0, 2.0, 1.0], [1.0, 2.0, 3.0]])


def test_friedman_by_hand_and_against_scipy():
    result = friedman(FRIEDMAN_SCORES)
    assert (result.n, result.k) == (4, 3)
    np.testing.assert_allclose(result.mean_ranks, [1.375, 2.375, 2.25])
    assert result.chi2 == pytest.approx(2.533333, abs=1e-6)
    assert result.p == pytest.approx(math.exp(-2.533333 / 2), abs=1e-6)
    assert result.f == pytest.approx(1.390244, abs=1e-6)
    assert result.p_f == pytest.approx(sps.f.sf(1.390244, 2, 6), abs=1e-6)
    # CD for k = 3, N = 4: 2.343 * sqrt(3 * 4 / 24) = 2.343 * 0.707107 = 1.6568
    assert result.cd == pytest.approx(1.6568, abs=1e-3)

    scipy_result = sps.friedmanchisquare(*FRIEDMAN_SCORES.T)
    assert result.chi2 == pytest.approx(scipy_result.statistic, rel=1e-12)
    assert result.p == pytest.approx(scipy_result.pvalue, rel=1e-12)
    # higher-is-better scores rank in the other direction: the negated matrix gives the same test
    flipped = friedman(-FRIEDMAN_SCORES, lower_is_better=False)
    assert flipped.chi2 == pytest.approx(result.chi2) and np.allclose(flipped.mean_ranks, result.mean_ranks)

    rng = np.random.default_rng(3)
    for _ in range(20):
        n, k = rng.integers(2, 9), rng.integers(3, 8)
        scores = rng.integers(0, 4, size=(n, k)).astype(float)  # many ties
        if np.all(scores == scores[:, :1]):
            continue
        expected = sps.friedmanchisquare(*scores.T)
        got = friedman(scores)
        assert got.chi2 == pytest.approx(expected.statistic, rel=1e-9)
        assert got.p == pytest.approx(expected.pvalue, rel=1e-9)


def test_friedman_degenerate_and_invalid_inputs():
    all_tied = friedman(np.ones((3, 4)))
    assert (all_tied.chi2, all_tied.p, all_tied.f) == (0.0, 1.0, 0.0)
    # perfect agreement of every block: chi2 = N (k - 1), the F form is infinite
    perfect = friedman(np.tile([1.0, 2.0, 3.0], (5, 1)))
    assert perfect.chi2 == pytest.approx(10.0) and math.isinf(perfect.f) and perfect.p_f == 0.0
    with pytest.raises(ValueError, match="at least 2 blocks"):
        friedman(np.ones((1, 3)))
    with pytest.raises(ValueError, match="complete"):
        friedman(np.array([[1.0, math.nan], [1.0, 2.0]]))


# Demšar (2006), table 5(a): Nemenyi q_0.05 for k = 2..10. Computed from the studentized range, the
# 7-treatment value is 2.94832: the table's 2.949 is the last digit off, so the match is to 1e-3.
DEMSAR_Q05 = [1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164]


def test_nemenyi_q_matches_the_published_table():
    for k, expected in enumerate(DEMSAR_Q05, start=2):
        assert nemenyi_q(k) == pytest.approx(expected, abs=1e-3)
    assert nemenyi_q(2) == pytest.approx(sps.norm.ppf(0.975), rel=1e-6)  # k = 2: the two-sided z
    # CD = q sqrt(k (k + 1) / (6 N)): k = 4, N = 3 -> 2.569 * sqrt(20 / 18) = 2.708
    assert critical_difference(4, 3) == pytest.approx(2.569 * math.sqrt(20 / 18), abs=1e-3)
    with pytest.raises(ValueError, match="at least 2 treatments"):
        nemenyi_q(1)


def test_cd_groups_are_the_maximal_runs_within_the_critical_difference():
    # sorted ranks 1.0, 1.5, 2.9, 3.0, 4.2 with CD 1.6: from 1.0 the reach is < 2.6 -> {0, 1};
    # from 1.5: < 3.1 -> {1, 2, 3}; from 2.9: < 4.5 -> {2, 3, 4}; from 3.0: {3, 4} is inside the last
    ranks_ = np.array([3.0, 1.0, 4.2, 1.5, 2.9])  # any order: groups index the sorted ranks
    assert cd_groups(ranks_, 1.6) == [(0, 1), (1, 3), (2, 4)]
    # a difference of exactly CD is significant (Demšar: "differ by at least the critical difference")
    assert cd_groups(np.array([1.0, 2.0]), 1.0) == []
    assert cd_groups(np.array([1.0, 2.0, 3.0]), 5.0) == [(0, 2)]
