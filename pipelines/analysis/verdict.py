"""The seed-aware verdict of one encoding against another (SPEC 3): does A beat B for a new draw of seeds?

A training seed is the unit of replication. Everything here is a pure function of a domain's score array
`values[encoding, seed, example]` (pipelines.analysis.matrix.Evidence): each example's score (test NLL, or a task's
chance-normalised accuracy) under each trained network.

For a pair (a, b), d = score(a) - score(b) in the metric's units (NLL: negative = a better):
- Δ: the mean over the pair's seeds of the per-seed mean differences (paired seeds) or the difference of the two
  encodings' seed means (unpaired), with a 95% crossed bootstrap interval: each replicate resamples the test
  examples once (shared by both encodings) and the seed indices (jointly when the seeds pair, one seed index
  for both encodings; independently otherwise), so the interval covers both sources of noise.
- the seed-level test: paired t-test on the per-seed mean differences (scipy's ttest_rel), or Welch's t-test on
  the per-seed means when the seeds do not pair; Holm over the family (pipelines.analysis.sequential).
- the probability of improvement P(a better than b) over seeds, U / (n_a n_b) (rliable's definition, ties 1/2),
  with a bootstrap interval from the same replicates.
- the verdict word: `better` / `worse` (a better or worse than b: the seed-level test rejects at the family's
  Holm-adjusted level), else `equivalent` (the interval at that level lies inside the region of practical
  equivalence +-r, `Metric.equivalence`), else `inconclusive`; for an inconclusive pair, the seeds per encoding a
  fixed-sample test at the family's first Holm level (alpha / m) would need for 80% power at the larger of |Δ|
  and r, from the pair's seed-level SD.

The bootstrap's random numbers are fixed (BOOTSTRAP_SEED): a report reproduces byte for byte. Example draws come
first, shared by every pair of a domain: `example_draws`, row r = replicate r; then each pair's seed draws from its
own generator (`pair_rng`, keyed by the two names, so adding an encoding changes no other pair's numbers).
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

BOOTSTRAP_REPLICATES = 10_000
BOOTSTRAP_SEED = 20_261_201
LEVEL = 0.95  # the interval every table shows
POWER = 0.8  # the power `seeds_needed` plans for
MAX_SEEDS_NEEDED = 1000  # beyond this, seeds_needed reports "more than" this
_CHUNK_VALUES = 4_000_000  # example indices drawn per chunk (replicates x examples): bounds the memory

VERDICTS = ("better", "worse", "equivalent", "inconclusive")


# ------------------------------------------------------------------------------------------- bootstrap draws


def example_draws(n_examples: int, replicates: int = BOOTSTRAP_REPLICATES) -> Iterator[np.ndarray]:
    """The bootstrap's example indices, in chunks of rows (replicate r resamples examples row r): drawn from
    default_rng([BOOTSTRAP_SEED, 0]) as int64 arrays of shape (rows, n_examples), chunk after chunk."""
    rng = np.random.default_rng([BOOTSTRAP_SEED, 0])
    rows = max(1, _CHUNK_VALUES // max(n_examples, 1))
    for first in range(0, replicates, rows):
        yield rng.integers(n_examples, size=(min(rows, replicates - first), n_examples))


def example_resampled_means(values: np.ndarray, replicates: int = BOOTSTRAP_REPLICATES) -> np.ndarray:
    """(replicates, E, S): each (encoding, seed)'s mean over replicate r's resampled examples, for a (E, S, N)
    array; a missing (encoding, seed) (nan throughout) stays nan."""
    n_enc, n_seeds, n_examples = values.shape
    flat = values.reshape(n_enc * n_seeds, n_examples).T  # (N, E*S)
    out = np.empty((replicates, n_enc * n_seeds))
    row = 0
    for draws in example_draws(n_examples, replicates):
        rows = draws.shape[0]
        offsets = (draws + n_examples * np.arange(rows)[:, None]).ravel()
        counts = np.bincount(offsets, minlength=rows * n_examples).reshape(rows, n_examples)
        out[row : row + rows] = counts @ flat / n_examples
        row += rows
    return out.reshape(replicates, n_enc, n_seeds)


def pair_rng(a: str, b: str) -> np.random.Generator:
    """The seed draws of the pair (a, b): a generator keyed by the two names, in that order."""
    return np.random.default_rng([BOOTSTRAP_SEED, 1, zlib.crc32(f"{a}\0{b}".encode())])


# ------------------------------------------------------------------------------------------ the statistics


def seed_level_test(a: np.ndarray, b: np.ndarray, paired: bool) -> tuple[float, float, float]:
    """(t, df, two-sided p) of the seed-level test on per-seed means: paired t on a - b (scipy's ttest_rel), or
    Welch's t (ttest_ind, equal_var=False). Zero spread: equal means give t = 0, p = 1; unequal, t = +-inf, p = 0.
    Fewer than 2 seeds a side (paired: 2 pairs): nan."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if paired:
        d = a - b
        if d.size < 2:
            return math.nan, math.nan, math.nan
        mean, sd, df = float(d.mean()), float(d.std(ddof=1)), d.size - 1
        se = sd / math.sqrt(d.size)
    else:
        if a.size < 2 or b.size < 2:
            return math.nan, math.nan, math.nan
        va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
        mean, se = float(a.mean() - b.mean()), math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1)) if se > 0 else float(a.size + b.size - 2)
    if se == 0.0:
        return (0.0, float(df), 1.0) if mean == 0.0 else (math.copysign(math.inf, mean), float(df), 0.0)
    t = mean / se
    return t, float(df), float(2 * sps.t.sf(abs(t), df))


def probability_of_improvement(a: np.ndarray, b: np.ndarray, higher_is_better: bool) -> float:
    """P(a better than b) for a seed of each drawn at random: U / (n_a n_b), ties counting 1/2 (rliable)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    diff = (a[:, None] - b[None, :]) * (1 if higher_is_better else -1)
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


def _resampled_poi(ma: np.ndarray, mb: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """P(a better than b) of every replicate, from (R, n_a) and (R, n_b) resampled seed means."""
    diff = (ma[:, :, None] - mb[:, None, :]) * (1 if higher_is_better else -1)
    return ((diff > 0) + 0.5 * (diff == 0)).mean(axis=(1, 2))


def t_test_power(df: np.ndarray, nc: np.ndarray, crit: np.ndarray) -> np.ndarray:
    """P(|T'| > crit) for T' noncentral t (df, nc): scipy's nct, and where it returns nan (large nc at few degrees of
    freedom) the same probability as an integral over the chi-square's quantiles u (Gauss-Legendre, 256 nodes):
    int_0^1 Phi(nc - crit sqrt(V(u)/df)) + Phi(-nc - crit sqrt(V(u)/df)) du, V(u) the chi-square(df) quantile."""
    df, nc, crit = (np.broadcast_to(np.asarray(x, float), np.shape(df)) for x in (df, nc, crit))
    power = np.asarray(sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc), float)
    bad = ~np.isfinite(power)
    if bad.any():
        power[bad] = integrated_power(df[bad], nc[bad], crit[bad])
    return power


@functools.cache
def _gauss_legendre() -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(256)


def integrated_power(df: np.ndarray, nc: np.ndarray, crit: np.ndarray) -> np.ndarray:
    """t_test_power's integral over the chi-square quantiles (see there), for 1-D arrays."""
    nodes, weights = _gauss_legendre()
    u = (nodes + 1) / 2
    k, c, delta = df[:, None], crit[:, None], nc[:, None]
    scale = c * np.sqrt(sps.chi2.ppf(u[None, :], k) / k)
    return ((sps.norm.cdf(delta - scale) + sps.norm.cdf(-delta - scale)) * weights / 2).sum(axis=1)


def seeds_needed(effect: float, sd: float, alpha: float, paired: bool, power: float = POWER) -> int | None:
    """The seeds per encoding a two-sided t-test at `alpha` needs to detect `effect` with `power`, for a seed-level
    SD `sd` (paired: of the per-seed differences; unpaired: of each encoding's per-seed means, equal n). The power
    is the noncentral t's mass beyond +-t(1 - alpha/2, df), as statsmodels' TTestPower / TTestIndPower compute it.
    None when the SD is 0 or not finite (no noise estimate); MAX_SEEDS_NEEDED + 1 when even that many fall short."""
    if not (math.isfinite(sd) and sd > 0 and math.isfinite(effect) and effect > 0):
        return None
    d = effect / sd

    def first_enough(n: np.ndarray) -> int | None:
        df, nc = (n - 1, d * np.sqrt(n)) if paired else (2 * n - 2, d * np.sqrt(n / 2))
        enough = np.flatnonzero(t_test_power(df, nc, sps.t.ppf(1 - alpha / 2, df)) >= power)
        return int(n[enough[0]]) if enough.size else None

    # the normal approximation puts the answer at or just above n0; search a window there, then the rest
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    n0 = int(np.clip(math.ceil((z / d) ** 2 * (1 if paired else 2)) - 3, 2, MAX_SEEDS_NEEDED))
    window = np.arange(n0, min(n0 + 64, MAX_SEEDS_NEEDED + 1))
    found = first_enough(window)
    if found == n0 and n0 > 2:
        found = first_enough(np.arange(2, n0 + 1))
    elif found is None and window[-1] < MAX_SEEDS_NEEDED:
        found = first_enough(np.arange(window[-1] + 1, MAX_SEEDS_NEEDED + 1))
    return MAX_SEEDS_NEEDED + 1 if found is None else found


@dataclass(frozen=True)
class PairVerdict:
    """Encoding `a` against `b` over seeds (see the module docstring). `delta` = score(a) - score(b)."""

    a: str
    b: str
    seeds_a: tuple[int, ...]
    seeds_b: tuple[int, ...]
    paired: bool
    delta: float
    ci_lo: float  # the LEVEL crossed bootstrap interval
    ci_hi: float
    t: float
    df: float
    p: float  # the seed-level test's raw two-sided p
    seed_sd: float  # paired: SD of the per-seed differences; unpaired: pooled SD of the per-seed means
    poi: float  # P(a better than b) over seeds
    poi_lo: float
    poi_hi: float
    region: float  # half width of the region of practical equivalence
    higher_is_better: bool
    replicates: np.ndarray  # the bootstrap's Δ replicates (for intervals at other levels)
    # set by the family (pipelines.analysis.sequential.decide_family)
    p_holm: float = math.nan
    alpha: float = math.nan  # the level this verdict was decided at
    verdict: str = "inconclusive"
    seeds_needed: int | None = None
    look: int | None = None  # the look of the design that decided it (1-based), None for a fixed-sample verdict

    @property
    def a_better(self) -> bool:
        return self.delta > 0 if self.higher_is_better else self.delta < 0

    def interval(self, level: float) -> tuple[float, float]:
        """The crossed bootstrap percentile interval at `level`."""
        tail = 100 * (1 - level) / 2
        lo, hi = np.percentile(self.replicates, [tail, 100 - tail])
        return float(lo), float(hi)


def compare_pair(
    a: str,
    b: str,
    values_a: np.ndarray,
    values_b: np.ndarray,
    seeds_a: list[int],
    seeds_b: list[int],
    resampled_a: np.ndarray,
    resampled_b: np.ndarray,
    *,
    region: float,
    higher_is_better: bool,
) -> PairVerdict:
    """The statistics of a against b (undecided: the family sets p_holm and the verdict).

    values_*: (seeds, N) per-example scores; resampled_*: (R, seeds) example-resampled seed means (same seeds, same
    order); the seeds pair when both encodings have the same seeds (seed k shares its data order across encodings),
    and the pair then uses only the seeds both have."""
    common = [s for s in seeds_a if s in seeds_b]
    paired = len(common) >= 2
    if paired:
        ia, ib = [seeds_a.index(s) for s in common], [seeds_b.index(s) for s in common]
        values_a, values_b = values_a[ia], values_b[ib]
        resampled_a, resampled_b = resampled_a[:, ia], resampled_b[:, ib]
        seeds_a = seeds_b = common
    means_a, means_b = values_a.mean(axis=1), values_b.mean(axis=1)
    rng = pair_rng(a, b)
    replicates = resampled_a.shape[0]
    rows = np.arange(replicates)[:, None]
    if paired:
        pick = rng.integers(len(common), size=(replicates, len(common)))
        deltas = (resampled_a[rows, pick] - resampled_b[rows, pick]).mean(axis=1)
        delta = float((means_a - means_b).mean())
        seed_sd = float((means_a - means_b).std(ddof=1))
    else:
        pick_a = rng.integers(len(seeds_a), size=(replicates, len(seeds_a)))
        pick_b = rng.integers(len(seeds_b), size=(replicates, len(seeds_b)))
        deltas = resampled_a[rows, pick_a].mean(axis=1) - resampled_b[rows, pick_b].mean(axis=1)
        delta = float(means_a.mean() - means_b.mean())
        seed_sd = _pooled_sd(means_a, means_b)
    # P(improvement) compares two samples of seeds: their resampling is independent even where the seeds pair
    poi_a = resampled_a[rows, rng.integers(len(seeds_a), size=(replicates, len(seeds_a)))]
    poi_b = resampled_b[rows, rng.integers(len(seeds_b), size=(replicates, len(seeds_b)))]
    poi_replicates = _resampled_poi(poi_a, poi_b, higher_is_better)
    t, df, p = seed_level_test(means_a, means_b, paired)
    tail = 100 * (1 - LEVEL) / 2
    ci_lo, ci_hi = np.percentile(deltas, [tail, 100 - tail])
    poi_lo, poi_hi = np.percentile(poi_replicates, [tail, 100 - tail])
    return PairVerdict(
        a=a,
        b=b,
        seeds_a=tuple(seeds_a),
        seeds_b=tuple(seeds_b),
        paired=paired,
        delta=delta,
        ci_lo=float(ci_lo),
        ci_hi=float(ci_hi),
        t=t,
        df=df,
        p=p,
        seed_sd=seed_sd,
        poi=probability_of_improvement(means_a, means_b, higher_is_better),
        poi_lo=float(poi_lo),
        poi_hi=float(poi_hi),
        region=region,
        higher_is_better=higher_is_better,
        replicates=deltas,
    )


def _pooled_sd(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 2 or b.size < 2:
        return math.nan
    return math.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2))


def verdict_word(pair: PairVerdict, p_holm: float, alpha: float) -> str:
    """better / worse when the seed-level test rejects at `alpha` after Holm; equivalent when the (1 - alpha)
    interval lies inside +-region; else inconclusive."""
    if math.isfinite(p_holm) and p_holm < alpha and pair.delta != 0:
        return "better" if pair.a_better else "worse"
    lo, hi = pair.interval(1 - alpha)
    if -pair.region <= lo and hi <= pair.region:
        return "equivalent"
    return "inconclusive"


# ------------------------------------------------------------------------------------- variance components


VARIANCE_COMPONENTS = ("encoding", "seed", "example", "encoding x seed", "encoding x example", "seed x example")


def variance_components(values: np.ndarray) -> dict[str, float]:
    """Variance components of a complete (E encodings, S seeds, N examples) array, one score per cell, by the
    method of moments on the crossed three-way ANOVA (every factor random): the expected mean squares
      MS_e  = s2 + S s2_ei + N s2_es + S N s2_e      MS_es = s2 + N s2_es
      MS_s  = s2 + E s2_si + N s2_es + E N s2_s      MS_ei = s2 + S s2_ei
      MS_i  = s2 + E s2_si + S s2_ei + E S s2_i      MS_si = s2 + E s2_si
      MS_residual = s2 (the three-way interaction, confounded with the error)
    solved for the components; a negative estimate is reported as 0 (the usual truncation). Needs E, S, N >= 2."""
    values = np.asarray(values, float)
    e, s, n = values.shape
    if min(e, s, n) < 2 or not np.isfinite(values).all():
        raise ValueError(f"variance components need a complete array of at least 2 x 2 x 2, got {values.shape}")
    grand = values.mean()
    m_e, m_s, m_i = values.mean(axis=(1, 2)), values.mean(axis=(0, 2)), values.mean(axis=(0, 1))
    m_es, m_ei, m_si = values.mean(axis=2), values.mean(axis=1), values.mean(axis=0)
    ss_e = s * n * ((m_e - grand) ** 2).sum()
    ss_s = e * n * ((m_s - grand) ** 2).sum()
    ss_i = e * s * ((m_i - grand) ** 2).sum()
    ss_es = n * ((m_es - m_e[:, None] - m_s[None, :] + grand) ** 2).sum()
    ss_ei = s * ((m_ei - m_e[:, None] - m_i[None, :] + grand) ** 2).sum()
    ss_si = e * ((m_si - m_s[:, None] - m_i[None, :] + grand) ** 2).sum()
    residual = (
        values
        - m_es[:, :, None]
        - m_ei[:, None, :]
        - m_si[None, :, :]
        + m_e[:, None, None]
        + m_s[None, :, None]
        + m_i[None, None, :]
        - grand
    )
    ms = {
        "e": ss_e / (e - 1),
        "s": ss_s / (s - 1),
        "i": ss_i / (n - 1),
        "es": ss_es / ((e - 1) * (s - 1)),
        "ei": ss_ei / ((e - 1) * (n - 1)),
        "si": ss_si / ((s - 1) * (n - 1)),
        "r": (residual**2).sum() / ((e - 1) * (s - 1) * (n - 1)),
    }
    s2 = ms["r"]
    s2_es, s2_ei, s2_si = (ms["es"] - s2) / n, (ms["ei"] - s2) / s, (ms["si"] - s2) / e
    components = {
        "encoding": (ms["e"] - s2 - s * s2_ei - n * s2_es) / (s * n),
        "seed": (ms["s"] - s2 - e * s2_si - n * s2_es) / (e * n),
        "example": (ms["i"] - s2 - e * s2_si - s * s2_ei) / (e * s),
        "encoding x seed": s2_es,
        "encoding x example": s2_ei,
        "seed x example": s2_si,
        "residual": s2,
    }
    return {name: max(0.0, float(value)) for name, value in components.items()}
