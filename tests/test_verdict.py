"""The seed-aware verdict's statistics against independent computations on fabricated scores with known answers:
scipy's ttest_rel, ttest_ind, t.interval and mannwhitneyu, statsmodels' TOST (ttost_paired, ttost_ind), exact
binomial interval, power and Holm, a plain-loop rank bootstrap, variance components recovered from a simulation;
and a null simulation with a seed effect: the seed-level test keeps its error rate, the per-example test does not.
The error rates and coverage at 3, 5 and 10 seeds are simulated in tests/test_verdict_simulations.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestIndPower, TTestPower
from statsmodels.stats.proportion import proportion_confint
from statsmodels.stats.weightstats import ttost_paired

from domains.base import Metric
from pipelines.analysis.matrix import Evidence
from pipelines.analysis.sequential import Comparator, decide, every_pair
from pipelines.analysis.stats import paired_tests
from pipelines.analysis.variance import variance_components
from pipelines.analysis.verdict import (
    integrated_power,
    paired_improvement,
    probability_of_improvement,
    seed_level_test,
    seeds_needed,
    t_test_power,
)
from pipelines.report.verdicts import poi_cell

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
    # Welch's t on min(n_a, n_b) - 1 df (Satterthwaite's df undercovered with unbalanced seeds: the simulations)
    ref = sps.ttest_ind(a, c, equal_var=False)
    va, vc = a.var(ddof=1) / 5, c.var(ddof=1) / 7
    assert t == pytest.approx(ref.statistic) and t == pytest.approx((a.mean() - c.mean()) / math.sqrt(va + vc))
    assert df == 4 and p == pytest.approx(2 * sps.t.sf(abs(t), 4))
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


def test_the_interval_and_tost_are_scipys_t_interval_and_statsmodels_tost():
    """Paired: Δ is the mean per-seed difference, its interval scipy's t.interval on the differences, p ttest_rel's,
    p_tost statsmodels' ttost_paired against ±0.005; the (1 - 2 alpha) interval lies inside the region exactly when
    TOST rejects at alpha."""
    rng = np.random.default_rng(1)
    values = study(rng, n_enc=2, n_seeds=4, n_examples=30, seed_sd=0.002)
    pair = Comparator(evidence(values)).pair("e1", "e0")
    d = values[1].mean(axis=1) - values[0].mean(axis=1)
    assert pair.paired and pair.seeds_a == (0, 1, 2, 3)
    assert pair.delta == pytest.approx(d.mean())
    expected = sps.t.interval(0.95, 3, loc=d.mean(), scale=sps.sem(d))
    assert (pair.ci_lo, pair.ci_hi) == pytest.approx(expected)
    assert pair.p == pytest.approx(sps.ttest_rel(values[1].mean(axis=1), values[0].mean(axis=1)).pvalue)
    tost = ttost_paired(values[1].mean(axis=1), values[0].mean(axis=1), -0.005, 0.005)[0]
    assert pair.p_tost == pytest.approx(tost)
    for alpha in (0.05, 0.0125, 0.2):
        lo, hi = pair.interval(1 - 2 * alpha)
        assert (pair.p_tost < alpha) == (lo > -0.005 and hi < 0.005)
    # by hand: differences +0.001, +0.002, +0.003 -> mean 0.002, sd 0.001, se 0.000577; the upper one-sided test
    # t = (0.002 - 0.005) / 0.000577 = -5.196 on 2 df: p = 0.0176; the lower t = 12.12: p = 0.00337
    hand = np.array([[[0.801]], [[0.802]], [[0.803]]]).reshape(1, 3, 1)
    ev = evidence(np.concatenate([np.full((1, 3, 1), 0.8), hand]))
    pair = Comparator(ev).pair("e1", "e0")
    assert pair.p_tost == pytest.approx(0.0176, abs=1e-4)


def test_seeds_that_do_not_pair_are_tested_with_welch_and_welch_tost():
    rng = np.random.default_rng(2)
    values = study(rng, n_enc=2, n_seeds=4, n_examples=25)
    values[0, 2:] = np.nan  # e0 finished seeds 0, 1; e1 seeds 0..3: they share 2 seeds, which pair
    paired = Comparator(evidence(values)).pair("e1", "e0")
    assert paired.paired and paired.seeds_a == (0, 1) and paired.seeds_b == (0, 1)
    values = study(rng, n_enc=2, n_seeds=6, n_examples=25)
    values[1, 4:], values[0, :4] = np.nan, np.nan  # e1 seeds 0..3, e0 seeds 4, 5: no common seed, Welch
    pair = Comparator(evidence(values)).pair("e1", "e0")
    assert not pair.paired and pair.seeds_a == (0, 1, 2, 3) and pair.seeds_b == (4, 5)
    a, b = values[1, :4].mean(axis=1), values[0, 4:].mean(axis=1)
    se = math.sqrt(a.var(ddof=1) / 4 + b.var(ddof=1) / 2)
    t = (a.mean() - b.mean()) / se
    assert t == pytest.approx(sps.ttest_ind(a, b, equal_var=False).statistic) and pair.df == 1  # min(4, 2) - 1
    assert pair.p == pytest.approx(2 * sps.t.sf(abs(t), 1))
    lower, upper = sps.t.sf((a.mean() - b.mean() + 0.005) / se, 1), sps.t.cdf((a.mean() - b.mean() - 0.005) / se, 1)
    assert pair.p_tost == pytest.approx(max(lower, upper))
    assert math.isnan(pair.poi_lo) and pair.poi == pytest.approx(probability_of_improvement(a, b, False))


def test_p_better_says_one_seed_each_not_unpaired_for_two_single_runs_of_one_seed():
    rng = np.random.default_rng(3)
    values = study(rng, n_enc=2, n_seeds=3, n_examples=25)
    values[:, 1:] = np.nan  # both encodings finished seed 0 only: nothing to pair, but nothing unpaired either
    single = Comparator(evidence(values)).pair("e1", "e0")
    assert not single.paired and single.seeds_a == single.seeds_b == (0,)
    assert poi_cell(single) == f"{single.poi:.2f} (one seed each)" and single.poi in (0.0, 1.0)
    values = study(rng, n_enc=2, n_seeds=6, n_examples=25)
    values[1, 4:], values[0, :4] = np.nan, np.nan  # seeds 0..3 against 4, 5
    assert poi_cell(Comparator(evidence(values)).pair("e1", "e0")).endswith(" (unpaired)")


def test_paired_improvement_is_the_share_of_seeds_with_the_exact_binomial_interval():
    a = np.array([0.70, 0.75, 0.80, 0.81, 0.79])
    b = np.array([0.72, 0.74, 0.82, 0.83, 0.80])  # NLL: a better on seeds 0, 2, 3, 4 (4 of 5)
    share, lo, hi = paired_improvement(a, b, higher_is_better=False)
    assert share == 0.8
    assert (lo, hi) == pytest.approx(proportion_confint(4, 5, alpha=0.05, method="beta"))
    share, lo, hi = paired_improvement(a, a, higher_is_better=False)  # every seed a tie: 1/2, the whole range
    assert (share, lo, hi) == (0.5, 0.0, 1.0)


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
    comparator = Comparator(evidence(values))
    pairs = decide([comparator.pair(b, "e0") for b in ("e1", "e2", "e3", "e4")], 0.05, None)
    raw = [pair.p for pair in pairs]
    assert [pair.p_holm for pair in pairs] == pytest.approx(list(multipletests(raw, method="holm")[1]))
    words = {pair.a: pair.verdict for pair in pairs}
    assert words["e1"] == "worse"  # 0.08 nats worse on every seed
    assert words["e3"] == "equivalent"  # e0 + 0.001 on every seed: inside the +-0.005 region, shown by TOST
    for pair in pairs:
        if pair.verdict == "equivalent":  # TOST at 0.05: the 90% interval inside the region
            assert pair.p_tost < 0.05
            level, lo, hi = pair.decision_interval()
            assert level == pytest.approx(0.9) and lo > -0.005 and hi < 0.005
        elif pair.p_holm < 0.05:
            assert pair.verdict in ("better", "worse")
        if pair.verdict == "inconclusive":  # planned for the region's edge at the first Holm level
            assert pair.seeds_needed == seeds_needed(0.005, pair.seed_sd, 0.05 / 4, paired=True)
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


def test_null_simulation_the_seed_level_test_keeps_its_error_rate_the_per_example_test_does_not(shown_figures):
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
    with shown_figures():
        print(
            f"\nnull simulation ({studies} studies, 3 seeds, 77 examples, seed SD 0.02): rejection at alpha 0.05: "
            f"seed-level {seed_rate:.3f}, per-example {example_rate:.3f}"
        )
    assert 0.03 <= seed_rate <= 0.07
    assert example_rate > 0.5


def test_the_rank_bootstrap_equals_a_plain_loop():
    """The mean rank's spread and P(rank 1): per replicate one Dirichlet weight per seed of each domain, each
    encoding's Δ to the reference the weighted mean of its per-seed differences on the seeds both finished,
    recomputed here seed by seed in plain loops with the same random numbers."""
    from pipelines.analysis.study import rank_uncertainty
    from pipelines.analysis.verdict import BOOTSTRAP_SEED

    class Result:  # what rank_uncertainty reads of a DomainResult
        def __init__(self, domain, values, higher, ref):
            self.domain, self.ranked_with = domain, None  # a domain of its own, no bridged study
            self.below_first_look = False  # past its design's first look (or no design): ranked
            self.metric = Metric("m", "m", "u", higher_is_better=higher, digits=3)
            self.evidence = evidence(np.asarray(values, float)[:, :, None], ("a", "b", "c"), metric=self.metric)
            self.entries = dict.fromkeys(("a", "b", "c"))
            self.ref = ref

    nan = math.nan
    results = [
        Result("d1", [[0.70, 0.72, 0.80], [0.75, 0.74, 0.73], [0.9, 0.95, nan]], False, "a"),  # c lacks seed 2
        Result("d2", [[0.5, 0.6, nan], [0.62, 0.61, 0.6], [0.2, 0.3, 0.25]], True, "b"),
    ]
    got = rank_uncertainty(results, replicates=300)
    rng = np.random.default_rng([BOOTSTRAP_SEED, 2])
    totals = np.zeros((300, 3))
    for result in results:
        weights = rng.dirichlet(np.ones(3), size=300)
        per_seed = result.evidence.values[:, :, 0]
        ref = per_seed["abc".index(result.ref)]
        for r in range(300):
            scores = []
            for j in range(3):
                both = [s for s in range(3) if not np.isnan(per_seed[j, s]) and not np.isnan(ref[s])]
                w = weights[r, both]
                scores.append(float(np.sum(w * (per_seed[j, both] - ref[both])) / w.sum()))
            sign = -1 if result.metric.higher_is_better else 1
            totals[r] += sps.rankdata([sign * v for v in scores])
    mean = totals / 2
    for j, name in enumerate("abc"):
        lo, hi = np.percentile(mean[:, j], [2.5, 97.5])
        best = np.mean([(mean[r, j] == mean[r].min()) / (mean[r] == mean[r].min()).sum() for r in range(300)])
        assert got[name] == pytest.approx((lo, hi, best))
    assert sum(p for _, _, p in got.values()) == pytest.approx(1.0)


def test_the_rank_bootstrap_of_a_bridged_study_draws_its_own_seed_weights():
    """A study bridged into d1 (other settings, its own reference runs: pipelines.analysis.bridge) ranks its
    encoding c in d1 by c's Δ to its own a, resampled with weights of its own (other trainings, whatever their seeds
    are called); recomputed in plain loops with the same random numbers, drawn d1, the bridge, then d2."""
    from pipelines.analysis.study import rank_uncertainty
    from pipelines.analysis.verdict import BOOTSTRAP_SEED

    class Result:  # what rank_uncertainty reads of a DomainResult
        def __init__(self, domain, names, values, ranked_with=None):
            self.domain, self.ranked_with, self.ref = domain, ranked_with, "a"
            self.below_first_look = False  # past its design's first look (or no design): ranked
            self.metric = NLL
            self.evidence = evidence(np.asarray(values, float)[:, :, None], names)
            self.entries = dict.fromkeys(names)

    d1 = Result("d1", ("a", "b"), [[0.70, 0.72, 0.80], [0.75, 0.70, 0.79]])
    bridge = Result("d1-other", ("a", "c"), [[0.60, 0.66, 0.61, 0.65], [0.58, 0.69, 0.60, 0.62]], ranked_with="d1")
    d2 = Result("d2", ("a", "b", "c"), [[0.5, 0.6, 0.55], [0.52, 0.58, 0.56], [0.49, 0.63, 0.54]])
    got = rank_uncertainty([d1, bridge, d2], replicates=200)
    rng = np.random.default_rng([BOOTSTRAP_SEED, 2])
    w1, wb, w2 = (rng.dirichlet(np.ones(n), size=200) for n in (3, 4, 3))

    def delta(result, name, w):
        per_seed = result.evidence.values[:, :, 0]
        diff = per_seed[result.evidence.encodings.index(name)] - per_seed[0]
        return float(np.sum(w * diff) / w.sum())

    mean = np.zeros((200, 3))
    for r in range(200):
        first = [0.0, delta(d1, "b", w1[r]), delta(bridge, "c", wb[r])]  # a, b from d1; c from the bridge
        second = [0.0, delta(d2, "b", w2[r]), delta(d2, "c", w2[r])]
        mean[r] = (sps.rankdata(first) + sps.rankdata(second)) / 2
    for j, name in enumerate("abc"):
        lo, hi = np.percentile(mean[:, j], [2.5, 97.5])
        best = np.mean([(mean[r, j] == mean[r].min()) / (mean[r] == mean[r].min()).sum() for r in range(200)])
        assert got[name] == pytest.approx((lo, hi, best))


def test_printed_bounds_keep_the_side_of_zero_and_of_the_region_the_decision_saw():
    from pipelines.report.verdicts import interval_text

    assert interval_text(-0.0063, -0.00002, 4) == "[-0.00630, -0.00002]"  # not "-0.0000" beside `better`
    assert interval_text(0.00004, 0.0049996, 4, region=0.005) == "[+0.0000400, +0.0049996]"  # inside +-0.005
    assert interval_text(-0.0123, 0.0456, 4, region=0.005) == "[-0.0123, +0.0456]"


def test_a_one_look_design_is_a_fixed_sample_at_its_maximum():
    from pipelines.analysis.design import Design

    design = Design.grow([0, 1, 2], 5, looks=1, ref="rope10k")
    assert design.looks == (5,) and design.seeds == (0, 1, 2, 3, 4) and design.level == 0.05
    with pytest.raises(ValueError, match="at least one look"):
        Design.grow([0, 1, 2], 5, looks=0, ref="rope10k")


def test_the_matched_delta_that_ranks_is_over_every_shared_seed_and_the_row_keeps_its_looks():
    """An encoding shown worse at an early look that went on to hold 8 seeds: its verdict row keeps that look's Δ,
    and the Δ that ranks it is over all 8 seeds it shares with the reference (SPEC 3; jsb-cpu's pope: +0.0927 over
    its deciding look's seeds, +0.0959 over its 8)."""
    from pipelines.analysis.design import Design
    from pipelines.analysis.sequential import matched_scores, seed_verdicts

    rng = np.random.default_rng(66)
    values = study(rng, n_enc=3, n_seeds=10, seed_sd=0.004, shift=(0.0, 0.05, 0.0))
    values[1, 8:] = np.nan  # e1 holds seeds 0-7
    design = Design.grow([0, 1, 2], 10, ref="e0", ref_rule="default", encodings=("e1", "e2"))
    ev = evidence(values)
    verdicts = seed_verdicts(ev, None, design)
    pair = verdicts.verdicts()["e1"]
    per_seed = values.mean(axis=2)
    assert pair.verdict == "worse" and pair.look in (1, 2)
    assert pair.delta == pytest.approx(np.mean(per_seed[1, : len(pair.seeds_a)] - per_seed[0, : len(pair.seeds_a)]))
    assert matched_scores(ev, verdicts)["e1"] == pytest.approx(np.mean(per_seed[1, :8] - per_seed[0, :8]), rel=1e-12)


def test_a_level_is_printed_with_the_digits_that_keep_it_below_100_percent():
    """jsb-cpu's every-pair table labelled 99.98% intervals "100%"."""
    from pipelines.analysis.verdict import level_text

    assert [level_text(x) for x in (0.95, 0.9, 0.99875, 0.9979167, 0.99983, 0.999996)] == [
        "95%",
        "90%",
        "99.9%",
        "99.8%",
        "99.98%",
        "99.9996%",
    ]
