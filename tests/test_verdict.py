"""The seed-aware verdict's statistics against independent computations on fabricated scores with known answers:
scipy's ttest_rel, ttest_ind and mannwhitneyu, a plain-loop crossed bootstrap with the same random numbers,
statsmodels' power and Holm, a plain-loop rank bootstrap, variance components recovered from a simulation; and a
null simulation with a seed effect: the seed-level test keeps its error rate, the per-example test does not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestIndPower, TTestPower

from domains.base import Metric
from pipelines.analysis.matrix import Evidence
from pipelines.analysis.sequential import Comparator, decide, every_pair
from pipelines.analysis.stats import paired_tests
from pipelines.analysis.verdict import (
    example_draws,
    integrated_power,
    pair_rng,
    probability_of_improvement,
    seed_level_test,
    seeds_needed,
    t_test_power,
    variance_components,
)

NLL = Metric("test NLL", "NLL", "nats", higher_is_better=False, digits=4)


def evidence(values, encodings=None, seeds=None, metric=NLL):
    values = np.asarray(values, float)
    encodings = encodings or tuple(f"e{i}" for i in range(values.shape[0]))
    seeds = seeds or tuple(range(values.shape[1]))
    return Evidence("jsb", metric, tuple(encodings), tuple(seeds), tuple(range(values.shape[2])), values, "example")


def study(rng, n_enc=3, n_seeds=3, n_examples=40, seed_sd=0.02, shift=(0.0,)):
    """A fabricated study: example difficulty, a shift per (encoding, seed) of SD seed_sd, per-cell noise."""
    hardness = rng.normal(0.8, 0.3, n_examples)
    shifts = np.zeros(n_enc)
    shifts[: len(shift)] = shift
    seed_effect = rng.normal(0, seed_sd, (n_enc, n_seeds, 1))
    return hardness + shifts[:, None, None] + seed_effect + rng.normal(0, 0.05, (n_enc, n_seeds, n_examples))


def test_seed_level_test_is_scipys_paired_and_welch_t():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.8, 0.02, 5), rng.normal(0.81, 0.02, 5)
    t, df, p = seed_level_test(a, b, paired=True)
    ref = sps.ttest_rel(a, b)
    assert (t, df, p) == (pytest.approx(ref.statistic), 4, pytest.approx(ref.pvalue))
    c = rng.normal(0.85, 0.05, 7)
    t, df, p = seed_level_test(a, c, paired=False)
    ref = sps.ttest_ind(a, c, equal_var=False)
    assert (t, p) == (pytest.approx(ref.statistic), pytest.approx(ref.pvalue))
    va, vc = a.var(ddof=1) / 5, c.var(ddof=1) / 7
    assert df == pytest.approx((va + vc) ** 2 / (va**2 / 4 + vc**2 / 6))  # Welch-Satterthwaite by hand
    assert seed_level_test(a, a, paired=True) == (0.0, 4, 1.0)  # identical seeds: no evidence
    assert seed_level_test(a, a + 0.1, paired=True)[2] == 0.0  # a constant shift: certain
    assert all(math.isnan(v) for v in seed_level_test(a[:1], b[:1], paired=True))


@pytest.mark.parametrize("higher_is_better", [False, True])
def test_probability_of_improvement_is_u_over_n_a_n_b(higher_is_better):
    a, b = np.array([0.70, 0.75, 0.80, 0.80]), np.array([0.78, 0.80, 0.90])
    u = sps.mannwhitneyu(a, b, alternative="greater" if higher_is_better else "less").statistic
    if not higher_is_better:  # U counts a > b; the lower-is-better share is the complement's U
        u = sps.mannwhitneyu(b, a, alternative="greater").statistic
    assert probability_of_improvement(a, b, higher_is_better) == pytest.approx(u / (4 * 3))
    # by hand for NLL: a beats b in 7 of 12 pairs (0.70 and 0.75 beat all three, 0.80 beats 0.90 twice), 2 ties
    assert probability_of_improvement(a, b, False) == pytest.approx((3 + 3 + 1.5 + 1.5) / 12)


def plain_loop_bootstrap(values_a, values_b, a, b, replicates, paired):
    """The crossed bootstrap written out: per replicate, the shared example draw (row r of example_draws), then
    the pair's seed draws, and the mean of the resampled cells by direct indexing."""
    n_examples = values_a.shape[1]
    rows = np.concatenate(list(example_draws(n_examples, replicates)))
    rng = pair_rng(a, b)
    if paired:
        seeds = rng.integers(values_a.shape[0], size=(replicates, values_a.shape[0]))
        out = [(values_a[seeds[r]][:, rows[r]] - values_b[seeds[r]][:, rows[r]]).mean() for r in range(replicates)]
    else:
        sa = rng.integers(values_a.shape[0], size=(replicates, values_a.shape[0]))
        sb = rng.integers(values_b.shape[0], size=(replicates, values_b.shape[0]))
        out = [values_a[sa[r]][:, rows[r]].mean() - values_b[sb[r]][:, rows[r]].mean() for r in range(replicates)]
    return np.array(out)


def test_crossed_bootstrap_equals_a_plain_loop_with_the_same_random_numbers():
    rng = np.random.default_rng(1)
    values = study(rng, n_enc=2, n_seeds=4, n_examples=30)
    comparator = Comparator(evidence(values), replicates=500)
    pair = comparator.pair("e1", "e0")
    loop = plain_loop_bootstrap(values[1], values[0], "e1", "e0", 500, paired=True)
    np.testing.assert_allclose(pair.replicates, loop, rtol=0, atol=1e-12)
    assert (pair.ci_lo, pair.ci_hi) == pytest.approx(tuple(np.percentile(loop, [2.5, 97.5])), abs=1e-12)
    assert pair.delta == pytest.approx(values[1].mean() - values[0].mean())
    assert pair.paired and pair.seeds_a == (0, 1, 2, 3)
    # a report reproduces byte for byte: the same evidence gives the same interval
    again = Comparator(evidence(values), replicates=500).pair("e1", "e0")
    assert (again.ci_lo, again.ci_hi, again.poi_lo) == (pair.ci_lo, pair.ci_hi, pair.poi_lo)


def test_seeds_that_do_not_pair_are_resampled_independently_and_tested_with_welch():
    rng = np.random.default_rng(2)
    values = study(rng, n_enc=2, n_seeds=4, n_examples=25)
    values[0, 2:] = np.nan  # e0 finished seeds 0, 1; e1 seeds 0..3: they share 2 seeds, which pair
    ev = evidence(values)
    comparator = Comparator(ev, replicates=300)
    paired = comparator.pair("e1", "e0")
    assert paired.paired and paired.seeds_a == (0, 1) and paired.seeds_b == (0, 1)
    values = study(rng, n_enc=2, n_seeds=6, n_examples=25)
    values[1, 4:], values[0, :4] = np.nan, np.nan  # e1 seeds 0..3, e0 seeds 4, 5: no common seed, Welch
    pair = Comparator(evidence(values), replicates=300).pair("e1", "e0")
    assert not pair.paired and pair.seeds_a == (0, 1, 2, 3) and pair.seeds_b == (4, 5)
    welch = sps.ttest_ind(values[1, :4].mean(axis=1), values[0, 4:].mean(axis=1), equal_var=False)
    assert pair.p == pytest.approx(welch.pvalue)
    loop = plain_loop_bootstrap(values[1, :4], values[0, 4:], "e1", "e0", 300, paired=False)
    np.testing.assert_allclose(pair.replicates, loop, atol=1e-12)


def test_seeds_needed_is_statsmodels_power_solved_and_rounded_up():
    for effect, sd, alpha in [(0.02, 0.023, 0.05 / 12), (0.01, 0.01, 0.05), (0.005, 0.02, 0.01)]:
        paired = seeds_needed(effect, sd, alpha, paired=True)
        assert paired == math.ceil(TTestPower().solve_power(effect / sd, alpha=alpha, power=0.8))
        unpaired = seeds_needed(effect, sd, alpha, paired=False)
        assert unpaired == math.ceil(TTestIndPower().solve_power(effect / sd, alpha=alpha, power=0.8))
    # by hand: a difference of one SD, paired, alpha 0.05 needs 10 seeds (power 0.803 at 10, 0.764 at 9)
    assert seeds_needed(1.0, 1.0, 0.05, paired=True) == 10
    assert seeds_needed(1.0, 0.0, 0.05, paired=True) is None
    # where scipy's noncentral t gives nan (a large effect at few seeds), the power is integrated over the
    # chi-square; checked against the noncentral t where both exist, and by the minimal n being monotone
    df, nc = np.array([1.0, 2.0, 4.0, 9.0, 30.0]), np.array([3.0, 4.0, 2.5, 3.0, 1.0])
    crit = sps.t.ppf(1 - 0.0125 / 2, df)
    exact = sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc)
    assert np.isfinite(exact).all() and integrated_power(df, nc, crit) == pytest.approx(exact, abs=1e-5)
    big, crit2 = np.array([8.66]), sps.t.ppf(1 - 0.0125 / 2, np.array([2.0]))  # 5 SD at 3 seeds
    assert np.isnan(sps.nct.cdf(-crit2, 2, big)).all()  # scipy's lower tail fails here; its upper tail does not
    assert t_test_power(np.array([2.0]), big, crit2) == pytest.approx(sps.nct.sf(crit2, 2, big), abs=1e-4)
    needed = [seeds_needed(d, 1.0, 0.0125, paired=True) for d in np.linspace(0.5, 6, 40)]
    assert needed == sorted(needed, reverse=True) and needed[-1] >= 3


def test_holm_over_the_family_is_statsmodels_holm_and_the_words_follow_it():
    rng = np.random.default_rng(3)
    values = study(rng, n_enc=5, n_seeds=6, n_examples=30, shift=(0.0, 0.08, 0.0, 0.002, 0.03))
    values[3] = values[0] + 0.001 + rng.normal(0, 0.0005, values[0].shape)  # e3: e0 plus almost nothing
    comparator = Comparator(evidence(values), replicates=2000)
    pairs = decide([comparator.pair(b, "e0") for b in ("e1", "e2", "e3", "e4")], 0.05, None)
    raw = [pair.p for pair in pairs]
    assert [pair.p_holm for pair in pairs] == pytest.approx(list(multipletests(raw, method="holm")[1]))
    words = {pair.a: pair.verdict for pair in pairs}
    assert words["e1"] == "worse"  # 0.08 nats worse on every seed
    assert words["e3"] in ("equivalent", "worse")  # within 0.001: inside the +-0.005 region (or significant)
    assert all(p.verdict in ("better", "worse") for p in pairs if p.p_holm < 0.05)
    for pair in pairs:
        if pair.verdict == "equivalent":
            lo, hi = pair.interval(0.95)
            assert lo >= -0.005 and hi <= 0.005
        if pair.verdict == "inconclusive":
            assert pair.seeds_needed is not None and pair.seeds_needed >= 2
    assert len(every_pair(comparator)) == 10


def test_variance_components_recover_a_simulated_design():
    rng = np.random.default_rng(4)
    e, s, n = 6, 40, 60
    truth = {"encoding": 0.04, "seed": 0.01, "example": 0.09, "encoding x seed": 0.0025, "residual": 0.0016}
    values = (
        rng.normal(0, math.sqrt(truth["encoding"]), (e, 1, 1))
        + rng.normal(0, math.sqrt(truth["seed"]), (1, s, 1))
        + rng.normal(0, math.sqrt(truth["example"]), (1, 1, n))
        + rng.normal(0, math.sqrt(truth["encoding x seed"]), (e, s, 1))
        + rng.normal(0, math.sqrt(truth["residual"]), (e, s, n))
    )
    estimates = variance_components(values)
    for name in ("seed", "example", "encoding x seed", "residual"):
        assert estimates[name] == pytest.approx(truth[name], rel=0.35), name
    assert estimates["encoding x example"] < 2e-4 and estimates["seed x example"] < 2e-4  # absent: near 0
    # the ANOVA decomposition is exact: the sums of squares add up to the total (by a plain computation)
    grand = values.mean()
    total = ((values - grand) ** 2).sum()
    m_es = values.mean(axis=2)
    within_cells = ((values - m_es[:, :, None]) ** 2).sum()
    between_cells = n * ((m_es - grand) ** 2).sum()
    assert within_cells + between_cells == pytest.approx(total)
    with pytest.raises(ValueError, match="at least 2 x 2 x 2"):
        variance_components(values[:1])


def test_null_simulation_the_seed_level_test_keeps_its_error_rate_the_per_example_test_does_not(capsys):
    """2,000 studies in which two encodings are equal but each (encoding, seed) shifts by a seed effect (SD 0.02,
    as on JSB), over 77 examples with 3 seeds: the seed-level paired t-test rejects at about alpha = 0.05; the
    per-example paired t-test of paper 000 C.2 (examples averaged over seeds) rejects far more often."""
    rng = np.random.default_rng(5)
    studies, seed_rejects, example_rejects = 2000, 0, 0
    for _ in range(studies):
        values = study(rng, n_enc=2, n_seeds=3, n_examples=77, seed_sd=0.02)
        _, _, p = seed_level_test(values[0].mean(axis=1), values[1].mean(axis=1), paired=True)
        seed_rejects += p < 0.05
        paper = paired_tests({"a": values[0].mean(axis=0), "b": values[1].mean(axis=0)}, "b")[0]
        example_rejects += paper.p < 0.05
    seed_rate, example_rate = seed_rejects / studies, example_rejects / studies
    with capsys.disabled():
        print(
            f"\nnull simulation ({studies} studies, 3 seeds, 77 examples, seed SD 0.02): rejection at alpha 0.05: "
            f"seed-level {seed_rate:.3f}, per-example {example_rate:.3f}"
        )
    assert 0.03 <= seed_rate <= 0.07
    assert example_rate > 0.5


def test_the_rank_bootstrap_equals_a_plain_loop(tmp_path):
    from pipelines.analysis.study import rank_uncertainty
    from pipelines.analysis.verdict import BOOTSTRAP_SEED

    class Entry:
        def __init__(self, seeds):
            self.seed_scores = dict(enumerate(seeds))

    class Result:
        def __init__(self, entries, higher):
            self.entries = entries
            self.metric = Metric("m", "m", "u", higher_is_better=higher, digits=3)

    results = [
        Result({"a": Entry([0.70, 0.72, 0.80]), "b": Entry([0.75, 0.74, 0.73]), "c": Entry([0.9, 0.95, 0.9])}, False),
        Result({"a": Entry([0.5, 0.6]), "b": Entry([0.62, 0.61]), "c": Entry([0.2, 0.3])}, True),
    ]
    got = rank_uncertainty(results, replicates=400)
    rng = np.random.default_rng([BOOTSTRAP_SEED, 2])
    names = ["a", "b", "c"]
    totals = np.zeros((400, 3))
    for result in results:
        draws = {}
        for name in names:
            seeds = np.array(list(result.entries[name].seed_scores.values()))
            draws[name] = seeds[rng.integers(seeds.size, size=(400, seeds.size))].mean(axis=1)
        for r in range(400):
            scores = [draws[name][r] * (-1 if result.metric.higher_is_better else 1) for name in names]
            totals[r] += sps.rankdata(scores)
    mean = totals / 2
    for j, name in enumerate(names):
        lo, hi = np.percentile(mean[:, j], [2.5, 97.5])
        best = np.mean([(mean[r, j] == mean[r].min()) / (mean[r] == mean[r].min()).sum() for r in range(400)])
        assert got[name] == pytest.approx((lo, hi, best))
    assert sum(p for _, _, p in got.values()) == pytest.approx(1.0)
