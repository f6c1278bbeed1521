"""The blocked analysis (pipelines.analysis.moderated): its prior against an independent computation of Smyth's
formulas, and the rates it is stated to hold, simulated through the code that computes the verdicts
(pipelines.analysis.sequential.primary_family and Comparator.pair) at 3, 5 and 10 seeds, each printed:

- with each published study's own per-encoding seed SDs (JSB, MAESTRO, synthetic: unequal by up to 350x) as
  independent seed effects, and with the covariance of its encodings' seed scores (encodings that move together on
  a seed, as MAESTRO's rotary ones do on seed 1): the 95% interval's coverage and make settle's family-wise error
  under the global null;
- with equal variances (the JSB-like per-seed difference SD 0.014 of tests/test_verdict_simulations.py): the power
  at the first look against 3 per-seed SDs, and of the whole design against one per-seed SD, beside the per-pair
  test's (today's before the blocked analysis).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, special

from domains.base import Metric
from pipelines.analysis.design import Design
from pipelines.analysis.matrix import Evidence
from pipelines.analysis.moderated import MIN_SEEDS, blocked_prior, fit_prior, residual_variances
from pipelines.analysis.sequential import Comparator, decide, primary_family
from pipelines.analysis.verdict import conditional_power

NLL = Metric("test NLL", "NLL", "nats", higher_is_better=False, digits=4)
STUDIES = Path(__file__).resolve().parents[1] / "docs" / "results"
# every published study whose seed SDs the verdict is simulated under, and its domain: the confirmatory studies'
# profiles are their own (maestro-confirm's FoX has ten times the median seed SD)
PUBLISHED = {
    "jsb-cpu": "jsb",
    "jsb-confirm": "jsb",
    "maestro-cpu": "maestro",
    "maestro-confirm": "maestro",
    "synthetic-cpu": "synthetic",
}


def monte_carlo_bound(rate: float, studies: int) -> float:
    return rate + 3 * math.sqrt(rate * (1 - rate) / studies)


def smyth_by_root_finding(variances: np.ndarray, nu: float) -> tuple[float, float]:
    """Smyth (2004) eq. 6.2's moments, solved with a bracketing root finder instead of the Newton iteration."""
    z = np.log(variances)
    e = z - special.digamma(nu / 2) + np.log(nu / 2)
    target = e.var(ddof=1) - special.polygamma(1, nu / 2)
    if target <= 0:
        return math.inf, float(np.exp(e.mean()))
    half = optimize.brentq(lambda x: special.polygamma(1, x) - target, 1e-8, 1e8, xtol=1e-14, rtol=1e-14)
    d0 = 2 * half
    return d0, float(np.exp(e.mean() + special.digamma(d0 / 2) - np.log(d0 / 2)))


@pytest.mark.parametrize("nu", [2.0, 4.0, 9.0])
def test_the_prior_agrees_with_smyths_moments_solved_independently(nu):
    rng = np.random.default_rng(40)
    for spread in (0.3, 1.0, 2.0):
        variances = np.exp(rng.normal(0, spread, 25)) * rng.chisquare(nu, 25) / nu
        d0, s0 = fit_prior(variances, nu)
        d0_ref, s0_ref = smyth_by_root_finding(variances, nu)
        if math.isinf(d0_ref):
            assert math.isinf(d0) and s0 == pytest.approx(s0_ref, rel=1e-12)
        else:
            assert d0 == pytest.approx(d0_ref, rel=1e-7) and s0 == pytest.approx(s0_ref, rel=1e-7)


def test_the_prior_recovers_the_degrees_of_freedom_it_was_drawn_with():
    """Variances drawn from a scaled inverse chi-square prior (d0 10, s0^2 2), each observed on 4 df: the moments
    recover d0 and s0^2 over 20,000 of them."""
    rng = np.random.default_rng(41)
    sigma2 = 10 * 2.0 / rng.chisquare(10, 20_000)
    observed = sigma2 * rng.chisquare(4, 20_000) / 4
    d0, s0 = fit_prior(observed, 4.0)
    assert d0 == pytest.approx(10, rel=0.1) and s0 == pytest.approx(2.0, rel=0.03)


def test_residual_variances_are_each_encodings_seed_variance_once_the_seed_blocks_are_removed():
    """Equal variances: the centred residual variance times E / (E - 1) is unbiased for each encoding's; a seed
    shift shared by every encoding leaves it unchanged."""
    rng = np.random.default_rng(42)
    draws = rng.normal(0, 1.5, (20_000, 8, 5))
    shifted = draws + rng.normal(0, 10, (20_000, 1, 5))
    mean = np.mean([residual_variances(table) for table in draws[:5000]], axis=0)
    assert mean == pytest.approx(np.full(8, 2.25), rel=0.03)
    assert residual_variances(shifted[0]) == pytest.approx(residual_variances(draws[0]), rel=1e-9)


def test_the_prior_is_not_used_where_the_simulations_do_not_hold_its_rates():
    rng = np.random.default_rng(43)
    table = rng.normal(0, 0.01, (13, 5))
    assert blocked_prior(table[:, :3], 0).reason.startswith("3 seeds")
    assert blocked_prior(table[:4], 0).reason.startswith("4 encodings")
    noisy_reference = table.copy()
    noisy_reference[0] *= 20
    assert (
        "reference" in blocked_prior(noisy_reference, 0).reason or "differ" in blocked_prior(noisy_reference, 0).reason
    )
    spread = table * np.exp(rng.normal(0, 2, (13, 1)))
    assert not blocked_prior(spread, 0).used


# ------------------------------------------------------------------------------------------ the simulations


def study_profile(study: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(encodings, the reference first; each one's seed SD over its published seeds; the covariance of their seed
    scores over the seeds all of them finished, plus a tenth of each variance on its diagonal so that it is not
    singular) from the published study's summary.json."""
    domain = PUBLISHED[study]
    summary = json.loads((STUDIES / study / "summary.json").read_text())["domains"][domain]
    seeds = {name: {int(k): v for k, v in row["seeds"].items()} for name, row in summary["encodings"].items()}
    ref = summary["reference"]
    names = [ref, *sorted(name for name in seeds if name != ref)]
    sds = np.array([np.std(list(seeds[name].values()), ddof=1) for name in names])
    common = sorted(set.intersection(*(set(seeds[name]) for name in names)))
    covariance = np.cov(np.array([[seeds[name][s] for s in common] for name in names]))
    return names, sds, covariance + np.diag(0.1 * np.diag(covariance) + 1e-10)


def simulated(rng, seeds: int, sds: np.ndarray | None = None, covariance: np.ndarray | None = None) -> Evidence:
    """A null study: every encoding equal, each (encoding, seed) moved by an independent shift of the encoding's SD
    (or a draw from `covariance`), every seed by a shared one; two examples (the verdicts read seed means)."""
    if covariance is not None:
        shifts = (np.linalg.cholesky(covariance) @ rng.normal(size=(covariance.shape[0], seeds)))[:, :, None]
    else:
        shifts = rng.normal(size=(sds.size, seeds, 1)) * sds[:, None, None]
    values = 2.0 + shifts + rng.normal(0, 0.01, (1, seeds, 1)) + rng.normal(0, 1e-4, (shifts.shape[0], seeds, 2))
    names = tuple(f"e{i:02d}" for i in range(values.shape[0]))
    return Evidence("jsb", NLL, names, tuple(range(seeds)), (0, 1), values, "example")


@pytest.mark.slow
@pytest.mark.parametrize("study", sorted(PUBLISHED))
@pytest.mark.parametrize("model", ["independent", "covariance"])
def test_coverage_and_the_designs_family_wise_error_hold_under_each_studys_heterogeneity(study, model, shown_figures):
    rng = np.random.default_rng(44)
    _, sds, covariance = study_profile(study)
    kwargs = {"covariance": covariance} if model == "covariance" else {"sds": sds}
    studies, lines = 400, []
    for seeds in (3, MIN_SEEDS, 10):
        covered = total = used = 0
        for _ in range(studies):
            comparator = Comparator(simulated(rng, seeds, **kwargs))
            for name in comparator.evidence.encodings[1:]:
                pair = comparator.pair(name, "e00", moderated=True)
                covered += pair.ci_lo <= 0.0 <= pair.ci_hi
                total += 1
            used += comparator.prior(tuple(range(seeds)), "e00").used
        rate = covered / total
        lines.append(f"{seeds} seeds: coverage {rate:.3f} (prior used in {used / studies:.2f} of studies)")
        assert 0.93 <= rate <= 0.97, lines[-1]
    design = Design.grow([0, 1, 2], 10, ref="e00", ref_rule="default")
    errors = 0
    for _ in range(studies):
        family = primary_family(Comparator(simulated(rng, 10, **kwargs)), design, "e00", plan_seeds=False)
        errors += any(pair.verdict in ("better", "worse") for pair in family.verdicts.values())
    fwer = errors / studies
    with shown_figures():
        print(
            f"\n{study} seed SDs ({model}, {len(sds)} encodings, {studies} studies a cell): "
            + "; ".join(lines)
            + f"; make settle's family-wise error {fwer:.3f}"
        )
    assert fwer <= monte_carlo_bound(0.05, studies)


def equal_variances(rng, seeds: int, shift: float, encodings: int = 13, pair_sd: float = 0.014) -> Evidence:
    sds = np.full(encodings, pair_sd / math.sqrt(2))
    evidence = simulated(rng, seeds, sds=sds)
    evidence.values[1] += shift
    return evidence


def runs_spent(family) -> int:
    """The runs a design trained: every encoding's first look, then each look's called encodings and the reference."""
    looks = family.looks
    runs = (len(family.verdicts) + 1) * len(looks[0].seeds)
    for before, after in zip(looks, looks[1:], strict=False):
        runs += (len(before.calls_for) + 1) * (len(after.seeds) - len(before.seeds))
    return runs


@pytest.mark.slow
def test_power_of_the_blocked_analysis_against_the_per_pair_test(shown_figures):
    """Equal variances, 13 encodings, one baseline worse: at the first look against 3 per-seed SDs (where the
    blocked analysis keeps the per-pair test, MIN_SEEDS) and by look 2; over the whole design against one SD, with
    the runs it spent. The suite's design (blocked, futility on the interval) against today's before it (per-pair,
    futility on a small |Δ|) and the blocked analysis with the old futility rule (what the interval rule costs in
    runs and buys in power). The design's power must be at least double the per-pair design's 0.19."""
    rng = np.random.default_rng(45)
    rules = {
        "suite": (True, "interval"),
        "per-pair, small |Δ|": (False, "small_delta"),
        "small |Δ|": (True, "small_delta"),
    }
    designs = {
        name: Design.grow([0, 1, 2], 10, ref="e00", ref_rule="default", futility=f) for name, (_, f) in rules.items()
    }
    studies, pair_sd = 300, 0.014
    found, first, second, runs = ({name: 0 for name in rules} for _ in range(4))
    for _ in range(studies):
        whole = equal_variances(rng, 10, pair_sd)
        three = equal_variances(rng, 10, 3 * pair_sd)
        for name, (blocked, _) in rules.items():
            family = primary_family(Comparator(whole, blocked), designs[name], "e00", plan_seeds=False)
            found[name] += family.verdicts["e01"].verdict == "worse"
            runs[name] += runs_spent(family)
            looks = primary_family(Comparator(three, blocked), designs[name], "e00", plan_seeds=False).looks
            first[name] += looks[0].pairs["e01"].verdict == "worse"
            second[name] += any(look.pairs.get("e01") and look.pairs["e01"].verdict == "worse" for look in looks[:2])
    with shown_figures():
        print(f"\npower, equal variances (per-seed difference SD {pair_sd}, 13 encodings, {studies} studies):")
        for name in rules:
            print(
                f"  {name}: Δ = 3 SDs at look 1 (3 seeds) {first[name] / studies:.2f}, by look 2 (5 seeds) "
                f"{second[name] / studies:.2f}; Δ = 1 SD over the design {found[name] / studies:.2f}, "
                f"{runs[name] / studies:.0f} runs a study"
            )
    assert found["suite"] / studies >= 2 * 0.19 and second["suite"] / studies >= 0.8
    assert found["suite"] >= 2 * found["per-pair, small |Δ|"] - 0.05 * studies


def test_the_interval_futility_rule_stops_only_what_its_interval_shows_the_cap_cannot_decide():
    """A pair at Δ about 0 whose seeds spread widely is not stopped at 3 seeds (its 95% interval reaches far: fox on
    JSB, Δ +0.0047 [-0.097, +0.107], stopped under the small-|Δ| rule); the same pair with its spread measured on 8
    seeds is; the small-|Δ| rule stops both."""
    from pipelines.analysis.verdict import futile

    rng = np.random.default_rng(48)
    for seeds, stops in ((3, False), (8, True)):
        stopped = 0
        for _ in range(50):
            evidence = simulated(rng, seeds, sds=np.full(2, 0.03))
            evidence.values[1] += 0.001
            pair = Comparator(evidence).pair("e01", "e00")
            stopped += futile(pair, "interval", 10, 0.0125 / 12)
        assert (stopped >= 40) if stops else (stopped == 0), (seeds, stopped)


def test_a_decision_interval_excludes_zero_exactly_when_the_word_is_better_or_worse():
    """Families of 12 baselines with effects from none to large, at 3, 5 and 10 seeds: each pair's decision interval
    (its level from its Holm rank) excludes 0 if and only if its verdict is better or worse, and an equivalent pair's
    lies inside the region."""
    rng = np.random.default_rng(46)
    seen = set()
    for seeds in (3, 5, 10):
        for _ in range(60):
            evidence = simulated(rng, seeds, sds=np.full(13, 0.01))
            evidence.values[1:] += rng.choice([0.0, 0.002, 0.01, 0.03, -0.05], 12)[:, None, None]
            comparator = Comparator(evidence)
            pairs = decide([comparator.pair(n, "e00", moderated=True) for n in evidence.encodings[1:]], 0.0125, 1)
            for pair in pairs:
                level, lo, hi = pair.decision_interval()
                seen.add(pair.verdict)
                assert (lo > 0 or hi < 0) == (pair.verdict in ("better", "worse")), (pair.verdict, level, lo, hi)
                if pair.verdict == "equivalent":
                    assert -pair.region < lo and hi < pair.region and level == pytest.approx(1 - 2 * 0.0125)
    assert {"better", "worse", "inconclusive"} <= seen


def test_conditional_power_agrees_with_a_simulated_continuation():
    """The closed form against drawing the remaining seeds' differences and testing at the cap, the current SD
    held fixed and the normal critical value (the test the formula states)."""
    from scipy import stats as sps

    rng = np.random.default_rng(47)
    evidence = simulated(rng, 3, sds=np.full(13, 0.01))
    evidence.values[1] += 0.012
    pair = Comparator(evidence).pair("e01", "e00")
    cap, alpha = 10, 0.0125 / 12
    n, sd, delta = len(pair.seeds_a), pair.seed_sd, pair.delta
    c = sps.norm.ppf(1 - alpha / 2)
    rest = rng.normal(delta, sd, (400_000, cap - n)).sum(axis=1)
    simulated_power = np.mean(np.abs(n * delta + rest) > c * sd * math.sqrt(cap))
    assert conditional_power(pair, cap, alpha) == pytest.approx(simulated_power, abs=0.004)


@pytest.mark.slow
def test_encodings_joining_a_designed_study_spend_one_budget_as_they_grow(shown_figures):
    """Three equal encodings join a designed study (13 encodings, looks at 3, 5, 8, 10 seeds) and grow seed by seed
    from 1 to 10: a `better` or `worse` for any of them at any stage is a family-wise error. Below the first look they
    get no verdict word, so the joined family's looks are its only tests (the provisional fixed-sample comparison
    they had before spent a second 0.05: 0.100 by the independent audit)."""
    from pipelines.analysis.sequential import joined_verdicts

    rng = np.random.default_rng(49)
    family = tuple(f"e{i:02d}" for i in range(1, 13))
    design = Design.grow([0, 1, 2], 10, ref="e00", ref_rule="default", encodings=family)
    newcomers = ["e13", "e14", "e15"]
    studies, errors = 400, 0
    for _ in range(studies):
        full = simulated(rng, 10, sds=np.full(16, 0.01))
        wrong = False
        for held in (1, 2, 3, 5, 8, 10):
            values = full.values.copy()
            values[13:, held:] = np.nan  # the newcomers hold their first `held` seeds
            ev = Evidence(full.domain, full.metric, full.encodings, full.seeds, full.example_ids, values, "example")
            joined, provisional = joined_verdicts(Comparator(ev), design, "e00", newcomers)
            pairs = [*(joined.verdicts.values() if joined else []), *provisional.values()]
            wrong |= any(pair.verdict in ("better", "worse") for pair in pairs)
        errors += wrong
    rate = errors / studies
    with shown_figures():
        print(f"\njoined encodings grown from 1 to 10 seeds ({studies} studies): family-wise error {rate:.3f}")
    assert rate <= monte_carlo_bound(0.05, studies)
