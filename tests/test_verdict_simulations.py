"""The error rates and coverage the reports state, simulated at the seed counts the suite runs (3, 5, 10), through
the code that computes them (pipelines.analysis.sequential and .verdict), each printed:

- equivalence (TOST) at a true Δ on the region's edge: `equivalent` at most alpha (+ Monte Carlo error);
- the 95% t-interval's coverage of Δ on the test set the study holds, under a seed-dominated model and one with
  example and encoding x example components;
- make settle's family-wise error under the global null (13 equal encodings, the reference fixed in advance, the
  rule exactly as the code's families apply it, the design run as make settle trains it: after the first look only
  the reference and the open pairs' encodings get seeds), and the family-wise error of the earlier rule that took
  the best encoding at the first look as the reference (the design's power as make settle trains it is in
  tests/test_settle_simulations.py).

Scores are simulated per (encoding, seed, example) as a study's Evidence; each test takes well under a minute."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from domains.base import Metric
from pipelines.analysis.design import Design
from pipelines.analysis.matrix import Evidence
from pipelines.analysis.sequential import Comparator, decide
from tests.simulation_fixtures import as_settle_trains

NLL = Metric("test NLL", "NLL", "nats", higher_is_better=False, digits=4)  # region of practical equivalence 0.005
REGION = NLL.equivalence
SEED_COUNTS = (3, 5, 10)


def monte_carlo_bound(rate: float, studies: int) -> float:
    """rate plus three binomial standard errors: what a simulated rate may exceed its bound by, by chance."""
    return rate + 3 * math.sqrt(rate * (1 - rate) / studies)


def evidence(values: np.ndarray) -> Evidence:
    names = tuple(f"e{i:02d}" for i in range(values.shape[0]))
    seeds, examples = range(values.shape[1]), range(values.shape[2])
    return Evidence("jsb", NLL, names, tuple(seeds), tuple(examples), values, "example")


def pair_study(rng, seeds: int, delta: float, pair_sd: float, examples: int = 20) -> np.ndarray:
    """Two encodings on one test set: the second is the first plus `delta` plus a per-seed difference of SD about
    `pair_sd`; both share each seed's shift and the examples' difficulty (the per-example noise adds 0.0006 to the
    per-seed difference's SD)."""
    base = rng.normal(0.8, 0.3, examples)[None, :] + rng.normal(0, 0.01, (seeds, 1))
    noise = rng.normal(0, 0.002, (2, seeds, examples))
    shift = rng.normal(0, pair_sd / math.sqrt(2), (2, seeds, 1))
    values = base[None] + noise + shift
    values[1] += delta
    return values


def verdict(values: np.ndarray, alpha: float) -> str:
    return decide([Comparator(evidence(values)).pair("e01", "e00")], alpha, None, plan_seeds=False)[0].verdict


@pytest.mark.parametrize("pair_sd", [0.001, 0.014])
def test_equivalence_at_the_region_edge_is_declared_at_most_alpha_of_the_time(pair_sd, shown_figures):
    """True Δ on the edge of ±0.005 (either side): `equivalent` is a false claim. TOST at alpha keeps it at most
    alpha: close to alpha where the per-seed differences are tight (SD 0.001), far below where they are as loose as
    on JSB (0.014), where equivalence is out of reach at these seed counts (the old rule, a 98.75% crossed-bootstrap
    interval inside the region, said it 4.5-5.5% of the time at 3 seeds with alpha 0.0125). Power to declare
    equivalence at Δ = 0 is printed."""
    rng = np.random.default_rng(31)
    studies, alpha = 3000, 0.05
    lines = []
    for seeds in SEED_COUNTS:
        false_claims = sum(
            verdict(pair_study(rng, seeds, REGION * (1 if k % 2 else -1), pair_sd), alpha) == "equivalent"
            for k in range(studies)
        )
        power = np.mean([verdict(pair_study(rng, seeds, 0.0, pair_sd), alpha) == "equivalent" for _ in range(500)])
        rate = false_claims / studies
        lines.append(f"{seeds} seeds: equivalent at the edge {rate:.4f}, at Δ = 0 {power:.3f}")
        assert rate <= monte_carlo_bound(alpha, studies), lines[-1]
    with shown_figures():
        head = f"\nTOST at alpha {alpha}, per-seed difference SD {pair_sd} ({studies} studies a cell): "
        print(head + "; ".join(lines))


def crossed_study(rng, seeds: int, examples: int, components: dict[str, float]) -> tuple[np.ndarray, float, float]:
    """Two encodings, Δ = 0.02 apart on average over examples drawn anew per study; returns the scores, Δ on this
    study's test set (what the interval is about: the examples fixed) and Δ over the population of examples."""
    sd = {name: math.sqrt(value) for name, value in components.items()}
    hardness = rng.normal(0.8, sd["example"], examples)
    by_example = rng.normal(0, sd["encoding x example"], (2, examples))
    by_seed = rng.normal(0, sd["encoding x seed"], (2, seeds, 1)) + rng.normal(0, sd["seed"], (1, seeds, 1))
    seed_example = rng.normal(0, sd["seed x example"], (1, seeds, examples))
    values = hardness + by_example[:, None, :] + by_seed + seed_example
    values = values + rng.normal(0, sd["residual"], values.shape)
    values[1] += 0.02
    on_this_test_set = 0.02 + float(by_example[1].mean() - by_example[0].mean())
    return values, on_this_test_set, 0.02


# variances: the close rope pairs of the JSB study (seeds dominate) and the study's own components (SPEC 3's
# variance table: encoding x seed 0.015^2, seed 0.009^2, chorales 0.126^2, encoding x chorale 0.03^2)
SEED_DOMINATED = {
    "example": 0.01,
    "encoding x example": 1e-6,
    "encoding x seed": 0.02**2,
    "seed": 0.009**2,
    "seed x example": 1e-6,
    "residual": 0.005**2,
}
JSB_LIKE = {
    "example": 0.126**2,
    "encoding x example": 0.03**2,
    "encoding x seed": 0.015**2,
    "seed": 0.009**2,
    "seed x example": 0.02**2,
    "residual": 0.03**2,
}


@pytest.mark.parametrize("model", ["seed-dominated", "with example components"])
def test_the_t_interval_covers_delta_on_the_test_set_95_percent_at_3_5_and_10_seeds(model, shown_figures):
    """The headline interval (the seed-level t-interval on the paired differences) covers Δ on the study's test set
    0.93-0.97 of the time (the crossed bootstrap it replaces covered 0.74 / 0.83 / 0.90 at 3 / 5 / 10 seeds when
    seeds dominate). Δ over a population of other test examples is not what it covers; that rate is printed."""
    rng = np.random.default_rng(32)
    components = SEED_DOMINATED if model == "seed-dominated" else JSB_LIKE
    studies, lines = 3000, []
    for seeds in SEED_COUNTS:
        covered = population = 0
        for _ in range(studies):
            values, target, mean_target = crossed_study(rng, seeds, 77, components)
            pair = Comparator(evidence(values)).pair("e01", "e00")
            covered += pair.ci_lo <= target <= pair.ci_hi
            population += pair.ci_lo <= mean_target <= pair.ci_hi
        rate = covered / studies
        lines.append(f"{seeds} seeds {rate:.3f} (of Δ over other test sets {population / studies:.3f})")
        assert 0.93 <= rate <= 0.97, lines[-1]
    with shown_figures():
        print(f"\n95% t-interval coverage, {model} ({studies} studies a cell, 77 examples): " + "; ".join(lines))


def null_family(rng, encodings: int, seeds: int, pair_sd: float, shift: dict[int, float] | None = None) -> Evidence:
    """`encodings` encodings on one test set, equal but for `shift` (encoding index -> Δ), each (encoding, seed)
    moved by a shift of SD pair_sd / sqrt(2) (so a pair's per-seed differences have SD pair_sd) and every seed by a
    shared one; two examples suffice (the tests see per-seed means)."""
    values = rng.normal(0, 0.009, (1, seeds, 1)) + rng.normal(0, pair_sd / math.sqrt(2), (encodings, seeds, 1))
    values = values + rng.normal(0, 0.001, (encodings, seeds, 2)) + 0.8
    for index, delta in (shift or {}).items():
        values[index] += delta
    return evidence(values)


def settle_rejects(ev: Evidence, ref: str, design: Design) -> dict[str, str]:
    """Each baseline's final word under `design` with `ref` as its reference, the design run as make settle trains
    it (tests/simulation_fixtures.as_settle_trains: after the first look only the reference and the open pairs'
    encodings get the next look's seeds)."""
    members = [name for name in ev.encodings if name != ref]
    family = as_settle_trains(ev, replace(design, ref=ref, encodings=tuple(members)), members).family
    return {name: pair.verdict for name, pair in family.verdicts.items()}


def best_at_first_look(ev: Evidence, seeds: tuple[int, ...]) -> str:
    """The earlier rule: the encoding with the lowest NLL on the first look's seeds."""
    columns = [ev.seeds.index(s) for s in seeds]
    return ev.encodings[int(np.argmin(ev.values[:, columns].mean(axis=(1, 2))))]


@pytest.mark.parametrize("pair_sd", [0.024, 0.014, 0.006])
def test_settles_family_wise_error_under_the_global_null_is_at_most_alpha(pair_sd, shown_figures):
    """13 equal encodings (12 baselines), looks at 3, 5, 8, 10 seeds, alpha 0.05, the reference fixed in advance:
    a `better` or `worse` anywhere is a family-wise error. The rule exactly as the code's families apply it (Holm
    over the pairs not yet shown different at alpha / 4 per look, futility stops), as make settle trains it. The
    earlier rule, the best encoding at the first look as the reference, is simulated on the first 300 of the same
    studies and printed (0.058-0.085 by the issue's own simulation)."""
    rng = np.random.default_rng(33)
    studies, chosen_studies = 1000, 300
    design = Design.grow([0, 1, 2], 10, ref="e00", ref_rule="default")
    fixed = chosen = 0
    for k in range(studies):
        ev = null_family(rng, 13, 10, pair_sd)
        fixed += any(word in ("better", "worse") for word in settle_rejects(ev, "e00", design).values())
        if k < chosen_studies:
            ref = best_at_first_look(ev, design.look_seeds(0))
            chosen += any(word in ("better", "worse") for word in settle_rejects(ev, ref, design).values())
    rate, data_rate = fixed / studies, chosen / chosen_studies
    with shown_figures():
        print(
            f"\nsettle under the global null (13 encodings, per-seed difference SD {pair_sd}, {studies} studies): "
            f"family-wise error {rate:.3f} with the reference fixed in advance, {data_rate:.3f} with the best "
            f"encoding at the first look ({chosen_studies} studies)"
        )
    assert rate <= monte_carlo_bound(0.05, studies)


@pytest.mark.parametrize("sds", [(0.02, 0.005), (0.005, 0.02)])
def test_a_pair_that_shares_no_seed_covers_and_tost_holds_with_10_seeds_against_2(sds, shown_figures):
    """The reference on seeds 0-9, an encoding on seeds 10-11 (no seed pairs): Welch's se on min(n_a, n_b) - 1 df
    covers Δ at least 0.93 of the time and TOST says `equivalent` at a true Δ on the region's edge at most alpha
    (Welch-Satterthwaite's df covered 0.897 and said it 0.072 of the time with unequal variances)."""
    rng = np.random.default_rng(35)
    studies, alpha = 3000, 0.05
    covered = false_equivalent = 0
    for k in range(studies):
        values = np.full((2, 12, 2), 0.8) + rng.normal(0, 1e-4, (2, 12, 2))
        values[0, :10] += rng.normal(0, sds[0], (10, 1))
        values[1, 10:] += rng.normal(0, sds[1], (2, 1)) + REGION * (1 if k % 2 else -1)
        values[0, 10:] = np.nan
        values[1, :10] = np.nan
        ev = Evidence("jsb", NLL, ("e00", "e01"), tuple(range(12)), (0, 1), values, "example")
        pair = Comparator(ev).pair("e01", "e00")
        assert not pair.paired
        covered += pair.ci_lo <= REGION * (1 if k % 2 else -1) <= pair.ci_hi
        false_equivalent += decide([pair], alpha, None, plan_seeds=False)[0].verdict == "equivalent"
    coverage, rate = covered / studies, false_equivalent / studies
    with shown_figures():
        print(
            f"\nno shared seed, 10 vs 2 seeds, seed SDs {sds}: coverage {coverage:.3f}, "
            f"equivalent at the edge {rate:.3f}"
        )
    assert coverage >= 0.93 and rate <= monte_carlo_bound(alpha, studies)
