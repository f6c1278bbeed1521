"""The seed-aware verdict of one encoding against another (SPEC 3): does A beat B for a new draw of seeds?

A training seed is the unit of replication. Everything here is a pure function of a domain's score array
`values[encoding, seed, example]` (pipelines.analysis.matrix.Evidence): each example's score (test NLL, or a task's
chance-normalised accuracy) under each trained network. Each seed's score is its mean over the examples; the test
examples are held fixed (the benchmark's test set), so every statement below is about a new draw of training seeds
on this test set.

For a pair (a, b), d = score(a) - score(b) in the metric's units (NLL: negative = a better):
- the seeds pair when both encodings finished at least 2 of the same seeds (seed k shares its data order across
  encodings); the pair then uses only those seeds, and d_s is seed s's difference. One shared seed: Δ is that
  seed's difference, without an interval. Otherwise (no common seed) the two encodings' seed scores are compared as
  independent samples (Welch's se on min(n_a, n_b) - 1 df).
- Δ: the mean of d_s (paired), or the difference of the two seed means (unpaired), with its t-interval:
  Δ +- t(df) se, df = n - 1 (paired) or min(n_a, n_b) - 1 (unpaired). Its coverage at 3, 5 and 10 seeds is simulated in
  tests/test_verdict_simulations.py (0.95 when the per-seed differences are close to normal, which averaging over
  the test examples makes them).
- p: the two-sided t-test of Δ = 0 on the same se and df (paired: scipy's ttest_rel; unpaired: the statistic of
  scipy's ttest_ind(equal_var=False) on min(n_a, n_b) - 1 df, not its Welch-Satterthwaite df).
- p_tost: two one-sided t-tests of |Δ| >= r (the region of practical equivalence, `Metric.equivalence`) on the same
  se and df: p_tost = max(P(T >= (Δ + r)/se), P(T <= (Δ - r)/se)). Equivalence at level alpha is p_tost < alpha,
  which is the (1 - 2 alpha) t-interval lying inside +-r.
- P(a better than b): paired, the share of seeds where a beats b (ties 1/2) with the Clopper-Pearson interval of that
  share (ties counted as losses for the lower bound and wins for the upper); unpaired, U / (n_a n_b) (rliable's
  definition), without an interval.
- the word: `open` when the pair has no test (one seed a side, one shared seed: no verdict yet, in no correction);
  `equivalent` when TOST rejects at the family's level (not Holm-adjusted: each equivalence claim is its
  own test at that level; it wins over a difference shown inside the region, which is practically none), else
  `better` / `worse` when the difference test rejects at the family's Holm-adjusted level, else `inconclusive`;
  under a make-settle design a pair stopped with |Δ| inside the region but not shown equivalent is `stopped` (a
  futility stop, pipelines.analysis.sequential). For an inconclusive pair,
  `seeds_needed`: the seeds per encoding a t-test at the family's first Holm level (alpha / m) needs for 80% power
  against a difference of the region's edge r (the smallest difference the suite calls practical, fixed in advance:
  not the observed Δ), from the pair's seed-level SD (itself an estimate from few seeds: a planning figure).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy import stats as sps

from pipelines.analysis.moderated import Prior

BOOTSTRAP_SEED = 20_261_201  # the fixed random numbers of the study's seed resampling (pipelines.analysis.study)
LEVEL = 0.95  # the interval every table shows beside Δ
POWER = 0.8  # the power `seeds_needed` plans for
MAX_SEEDS_NEEDED = 1000  # beyond this, seeds_needed reports "more than" this

VERDICTS = ("better", "worse", "equivalent", "stopped", "inconclusive", "open")
# no verdict yet: a pair without a test (one seed a side, or one shared seed), or an encoding that joined a designed
# study below its first look (pipelines.analysis.sequential.joined_verdicts); never counted in a correction
OPEN = "open"
DECIDED = ("better", "worse")  # a difference shown: the pair leaves the family at later looks
FUTILITY_POWER = 0.1  # futility: conditional power at the cap below this, even at the interval's far end
STOPPED_WORDS = "stopped for futility, not shown equivalent"  # how reports spell a futility stop
# ... and under each futility rule of a design (pipelines.analysis.design.FUTILITY_RULES)
# what happened, never a size (issue 64: "small |Δ|" sat beside the widest intervals of a page)
STOPPED_BY = {
    "small_delta": "stopped for futility (its design's rule: Δ's point estimate inside the region at that look, "
    "whatever its interval), not shown equivalent",
    "interval": "stopped for futility (the design's conditional power to decide it by its cap below its "
    "threshold), not shown equivalent",
}


# ------------------------------------------------------------------------------------------ the statistics


@dataclass(frozen=True)
class SeedContrast:
    """Δ of a against b over seeds with its standard error and degrees of freedom (see the module docstring)."""

    delta: float
    se: float
    df: float
    sd: float  # paired: SD of the per-seed differences; unpaired: pooled SD of the per-seed scores

    def t_and_p(self) -> tuple[float, float]:
        """(t, two-sided p) of Δ = 0. Zero se: equal means give t = 0, p = 1; unequal, t = +-inf, p = 0. No df: nan."""
        if not math.isfinite(self.df):
            return math.nan, math.nan
        if self.se == 0.0:
            return (0.0, 1.0) if self.delta == 0.0 else (math.copysign(math.inf, self.delta), 0.0)
        t = self.delta / self.se
        return t, float(2 * special.stdtr(self.df, -abs(t)))

    def interval(self, level: float) -> tuple[float, float]:
        """The two-sided t-interval at `level`: Δ +- t((1 + level) / 2, df) se; nan without df."""
        if not math.isfinite(self.df):
            return math.nan, math.nan
        half = float(special.stdtrit(self.df, (1 + level) / 2)) * self.se
        return self.delta - half, self.delta + half

    def tost_p(self, region: float) -> float:
        """TOST's p for |Δ| < region: the larger of the two one-sided p; nan without df."""
        if not math.isfinite(self.df):
            return math.nan
        if self.se == 0.0:
            return 0.0 if abs(self.delta) < region else 1.0
        lower = float(special.stdtr(self.df, -(self.delta + region) / self.se))  # H0: Δ <= -region
        upper = float(special.stdtr(self.df, (self.delta - region) / self.se))  # H0: Δ >= +region
        return max(lower, upper)


def seed_contrast(a: np.ndarray, b: np.ndarray, paired: bool) -> SeedContrast:
    """Δ of the seed scores `a` against `b`: paired (a[i] and b[i] share a seed) or Welch. Fewer than 2 seeds a side
    (paired: 2 pairs): df and se are nan."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if paired:
        d = a - b
        if d.size < 2:
            return SeedContrast(float(d.mean()) if d.size else math.nan, math.nan, math.nan, math.nan)
        sd = float(d.std(ddof=1))
        return SeedContrast(float(d.mean()), sd / math.sqrt(d.size), float(d.size - 1), sd)
    delta = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return SeedContrast(delta, math.nan, math.nan, math.nan)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    # min(n_a, n_b) - 1 df, not Welch-Satterthwaite's: with 10 seeds against 2 and unequal variances Satterthwaite's
    # interval covered 0.897 and TOST said `equivalent` 0.072 of the time at 0.05; this rule covers 0.95-1.00 in
    # every layout simulated (tests/test_verdict_simulations.py)
    return SeedContrast(delta, se, float(min(a.size, b.size) - 1), _pooled_sd(a, b))


def seed_level_test(a: np.ndarray, b: np.ndarray, paired: bool) -> tuple[float, float, float]:
    """(t, df, two-sided p) of the seed-level test on per-seed scores: paired t on a - b (scipy's ttest_rel), or
    Welch's t (ttest_ind(equal_var=False)'s statistic) on min(n_a, n_b) - 1 df (seed_contrast). Zero spread: equal
    means give t = 0, p = 1; unequal, t = +-inf, p = 0. Fewer than 2 seeds a side (paired: 2 pairs): nan."""
    contrast = seed_contrast(a, b, paired)
    t, p = contrast.t_and_p()
    return t, contrast.df, p


def probability_of_improvement(a: np.ndarray, b: np.ndarray, higher_is_better: bool) -> float:
    """P(a better than b) for a seed of each drawn at random: U / (n_a n_b), ties counting 1/2 (rliable); for
    encodings whose seeds do not pair."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    diff = (a[:, None] - b[None, :]) * (1 if higher_is_better else -1)
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


def paired_improvement(a: np.ndarray, b: np.ndarray, higher_is_better: bool, level: float = LEVEL):
    """(share, lo, hi): the share of paired seeds where a beats b (ties 1/2), with the Clopper-Pearson interval at
    `level` (ties count as losses for the lower bound, as wins for the upper)."""
    diff = (np.asarray(a, float) - np.asarray(b, float)) * (1 if higher_is_better else -1)
    n, wins, ties = diff.size, int((diff > 0).sum()), int((diff == 0).sum())
    tail = (1 - level) / 2
    lo = 0.0 if wins == 0 else float(special.betaincinv(wins, n - wins + 1, tail))
    hi = 1.0 if wins + ties == n else float(special.betaincinv(wins + ties + 1, n - wins - ties, 1 - tail))
    return (wins + 0.5 * ties) / n, lo, hi


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
    contrast: SeedContrast
    ci_lo: float  # the LEVEL t-interval
    ci_hi: float
    t: float
    p: float  # the difference test's raw two-sided p
    p_tost: float  # TOST's p for |Δ| < region
    poi: float  # P(a better than b) over seeds (paired: the share of seeds)
    poi_lo: float  # its Clopper-Pearson interval (paired); nan unpaired
    poi_hi: float
    region: float  # half width of the region of practical equivalence
    higher_is_better: bool
    variance: str = "per-pair"  # how the seed variance was estimated (pipelines.analysis.moderated.Prior.describe)
    own_sd: float = math.nan  # the SD of the pair's own seed differences (paired), before any moderation
    # set by the family (pipelines.analysis.sequential.decide)
    p_holm: float = math.nan
    alpha: float = math.nan  # the level this verdict was decided at
    verdict: str = "inconclusive"
    seeds_needed: int | None = None
    look: int | None = None  # the look of the design that decided it (1-based), None for a fixed-sample verdict
    # the level of the interval the verdict rests on (set by decide): better / worse at Holm rank j of m,
    # 1 - alpha / (m - j + 1); equivalent 1 - 2 alpha; open or stopped, the level at which Holm stopped
    decision_level: float = math.nan
    holm_rank: int = 0  # 1-based rank of its raw p in the family (0: not in a family)
    family_size: int = 0
    # planning: the probability that the design's next look shows the pair different (predictive_power)
    predictive_power: float = math.nan
    # outside a published design's own family (pipelines.analysis.sequential.seed_verdicts): "" (in it, or no
    # design), "joined" (an encoding that joined the study: its own family over the design's looks), or why the
    # pair is a fixed-sample comparison ("below the design's first look: 2 of 3 seeds")
    scope: str = ""

    @property
    def delta(self) -> float:
        return self.contrast.delta

    @property
    def df(self) -> float:
        return self.contrast.df

    @property
    def seed_sd(self) -> float:
        return self.contrast.sd

    @property
    def a_better(self) -> bool:
        return self.delta > 0 if self.higher_is_better else self.delta < 0

    def interval(self, level: float) -> tuple[float, float]:
        """The t-interval of Δ at `level`."""
        return self.contrast.interval(level)

    def decision_interval(self) -> tuple[float, float, float]:
        """(level, lo, hi): the interval the verdict rests on, at `decision_level` (Holm's level at the pair's
        rank, so that it excludes 0 exactly when the word is better or worse; for an `equivalent` pair the (1 - 2
        alpha) interval TOST used, inside the region, which may exclude 0 without a difference being shown); the
        LEVEL interval for a pair no family decided."""
        if math.isfinite(self.decision_level):
            return (self.decision_level, *self.interval(self.decision_level))
        return LEVEL, self.ci_lo, self.ci_hi

    def decision_label(self) -> str:
        """How its level was set, e.g. '98.9%: alpha 0.0125, Holm rank 3 of 12'; an equivalent pair's names the
        region its interval lies in ('90%: TOST at alpha 0.05, inside ±0.005': an unadjusted interval, which may
        exclude 0 where the difference is shown too small to matter)."""
        if not math.isfinite(self.decision_level):
            return f"{LEVEL:.0%}"
        level = level_text(self.decision_level)
        if self.verdict == "equivalent":
            return f"{level}: TOST at alpha {self.alpha:.4g}, inside ±{self.region:g}"
        return f"{level}: alpha {self.alpha:.4g}, Holm rank {self.holm_rank} of {self.family_size}"


def level_text(level: float) -> str:
    """A confidence level in percent with the significant digits that keep it below 100% (99.98%, never "100%")."""
    digits = 3
    while digits < 12 and f"{100 * level:.{digits}g}" == "100" and level < 1:
        digits += 1
    return f"{100 * level:.{digits}g}%"


def compare_pair(
    a: str,
    b: str,
    values_a: np.ndarray,
    values_b: np.ndarray,
    seeds_a: list[int],
    seeds_b: list[int],
    *,
    region: float,
    higher_is_better: bool,
    prior: Prior | None = None,
) -> PairVerdict:
    """The statistics of a against b (undecided: the family sets p_holm and the verdict).

    values_*: (seeds, N) per-example scores of each encoding's seeds (in the order of seeds_*); the seeds pair when
    both encodings finished at least 2 of the same seeds, and the pair then uses only those. `prior`: the blocked
    analysis's prior at those seeds (pipelines.analysis.moderated); where it is used, the pair's variance of seed
    differences is moderated toward it and its df are d0 + n - 1."""
    common = [s for s in seeds_a if s in seeds_b]
    paired = len(common) >= 2
    if common:  # matched seeds: one shared seed gives Δ on that seed (no interval), never against other seeds
        values_a = values_a[[seeds_a.index(s) for s in common]]
        values_b = values_b[[seeds_b.index(s) for s in common]]
        seeds_a = seeds_b = common
    means_a, means_b = values_a.mean(axis=1), values_b.mean(axis=1)
    contrast = seed_contrast(means_a, means_b, paired)
    own_sd = contrast.sd if paired else math.nan
    variance = "per-pair"
    if prior is not None and paired and prior.seeds == len(common) and math.isfinite(contrast.sd):
        variance = prior.describe()
        if prior.used:
            moderated, df = prior.moderate(contrast.sd**2, len(common) - 1)
            contrast = SeedContrast(contrast.delta, math.sqrt(moderated / len(common)), df, math.sqrt(moderated))
    t, p = contrast.t_and_p()
    ci_lo, ci_hi = contrast.interval(LEVEL)
    if paired:
        poi, poi_lo, poi_hi = paired_improvement(means_a, means_b, higher_is_better)
    else:
        poi, poi_lo, poi_hi = probability_of_improvement(means_a, means_b, higher_is_better), math.nan, math.nan
    return PairVerdict(
        a=a,
        b=b,
        seeds_a=tuple(seeds_a),
        seeds_b=tuple(seeds_b),
        paired=paired,
        contrast=contrast,
        ci_lo=ci_lo,
        ci_hi=ci_hi,
        t=t,
        p=p,
        p_tost=contrast.tost_p(region),
        poi=poi,
        poi_lo=poi_lo,
        poi_hi=poi_hi,
        region=region,
        higher_is_better=higher_is_better,
        variance=variance,
        own_sd=own_sd,
    )


def _pooled_sd(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 2 or b.size < 2:
        return math.nan
    return math.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2))


def conditional_power(pair: PairVerdict, cap: int, alpha: float, effect: float | None = None) -> float:
    """Planning, not evidence: the power of the test at `cap` seeds (two-sided, at `alpha`) given the seeds so far,
    if the true Δ were the current estimate and the seed SD the current one (the 'current trend'). With n seeds
    now and the N - n to come drawing a mean difference of Δ, the final mean is Δ on N seeds, and the test rejects
    when |n Δ + (N - n) X| > c sd sqrt(N), X ~ N(Δ, sd^2 / (N - n)), with c the normal quantile: the most generous
    critical value, since the cap's test may borrow degrees of freedom (pipelines.analysis.moderated), so that a
    pair stops only when even that test would not decide it:
    CP = Phi((N Δ - c sd sqrt N) / (sd sqrt(N - n))) + Phi((-N Δ - c sd sqrt N) / (sd sqrt(N - n)))."""
    n = len(pair.seeds_a)
    sd, delta = pair.seed_sd, pair.delta
    theta = delta if effect is None else effect  # the mean difference the seeds to come are drawn with
    if not (pair.paired and math.isfinite(sd) and sd > 0 and cap > n):
        return math.nan
    c = float(special.ndtri(1 - alpha / 2))
    spread = sd * math.sqrt(cap - n)
    edge = c * sd * math.sqrt(cap)
    final = n * delta + (cap - n) * theta
    return float(special.ndtr((final - edge) / spread) + special.ndtr((-final - edge) / spread))


@functools.cache
def _quantile_nodes(nodes: int = 48) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes on (0, 1) and their weights (summing to 1): an integral over a distribution's quantiles."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    return (x + 1) / 2, w / 2


@functools.cache
def _chi2_over_df(df: float) -> tuple[np.ndarray, np.ndarray]:
    """(chi2(df) / df at the quadrature's nodes, their weights); one node at 1 for an infinite df."""
    if math.isinf(df):
        return np.ones(1), np.ones(1)
    u, weight = _quantile_nodes()
    return 2 * special.gammaincinv(df / 2, u) / df, weight


@dataclass(frozen=True)
class NextTest:
    """The test a design's next look will run on a pair, as far as the current look can tell: on `seeds` seeds at
    level `alpha`; the per-pair t-test (d0 = 0), or the moderated one of a prior with d0 and s0^2 whose df are
    capped at `residual_df` (pipelines.analysis.moderated)."""

    seeds: int
    alpha: float
    d0: float = 0.0
    s0_squared: float = math.nan
    residual_df: float = math.inf


@dataclass(frozen=True)
class Belief:
    """What a family's pairs together say about one pair's true Δ and seed variance, before its own seeds: Δ ~ N(0,
    `spread`) (infinite: flat), and the variance of a seed difference scaled inverse chi-square with `variance_df`
    df and scale `variance` (0 df: the reference prior 1 / sigma^2). pipelines.analysis.sequential.family_belief
    fits them by the method of moments across the family's pairs."""

    spread: float = math.inf
    variance_df: float = 0.0
    variance: float = math.nan


def predictive_power(n: int, delta: float, sd: float, test: NextTest, belief: Belief = Belief()) -> float:
    """Planning, not evidence: the probability that `test` (the next look's two-sided t-test of Δ = 0) rejects,
    given the pair's n seed differences so far (mean `delta`, SD `sd`), averaged over what Δ and the pair's seed
    variance sigma^2 may be (Bayesian predictive power) under `belief`: given the seeds so far, sigma^2 ~ df_post v
    / chi2(df_post) with df_post = variance_df + n - 1 and v = (variance_df variance + (n - 1) sd^2) / df_post
    (infinite variance_df: sigma^2 = variance), and Δ ~ N(B delta, B sigma^2 / n), B = spread / (spread + sigma^2 /
    n) (1 when flat); the m = N - n new differences ~ N(Δ, sigma^2).

    Exact up to quadrature: the new differences' mean is mu + s z with z ~ N(0, 1) (mu = B delta,
    s^2 = sigma^2 (1 / m + B / n)) and W ~ chi2(m - 1) their own sum of squares over sigma^2; the final mean is
    (n delta + m (mu + s z)) / N and the final sum of squares (n - 1) sd^2 + sigma^2 W + (n m / N) (mu - delta + s
    z)^2, and the test rejects where N mean^2 exceeds c^2 times its variance (per pair: the final sum of squares
    over N - 1; moderated: (d0 2 s0^2 + that sum) / (d0 + N - 1), or 2 s0^2 at d0 = inf), c its t quantile: where a
    quadratic in z is positive, whose normal probability is closed form. sigma^2 and W are integrated over their
    quantiles (Gauss-Legendre). nan when it cannot be computed (fewer than 2 seeds, no spread, no seed to come)."""
    total, nu, d0 = test.seeds, n - 1, test.d0
    m = total - n
    if not (n >= 2 and m >= 1 and math.isfinite(sd) and math.isfinite(delta)):
        return math.nan
    if math.isinf(belief.variance_df):
        posterior_df, posterior = math.inf, belief.variance
    else:
        posterior_df = belief.variance_df + nu
        posterior = ((belief.variance_df * belief.variance if belief.variance_df else 0.0) + nu * sd**2) / posterior_df
    if not posterior > 0:
        return math.nan
    r, r_weight = _chi2_over_df(posterior_df)  # posterior / sigma^2 at its quantiles
    # W: the new differences' own sum of squares over sigma^2 (it does not enter a test whose variance is 2 s0^2)
    w, w_weight = _chi2_over_df(m - 1) if m > 1 and not math.isinf(d0) else (np.ones(1), np.ones(1))
    sigma2, w = posterior / r[:, None], w[None, :] * (m - 1)
    spread = belief.spread
    shrink = np.ones_like(sigma2) if math.isinf(spread) else spread / (spread + sigma2 / n)
    mu, s = shrink * delta, np.sqrt(sigma2 * (1 / m + shrink / n))
    # the final mean p + q z, and h (g + s z)^2 the part of the final sum of squares the new mean moves
    p, q, h, g = (n * delta + m * mu) / total, m * s / total, n * m / total, mu - delta
    if math.isinf(d0):  # the moderated variance is 2 s0^2 whatever the seeds: reject where N mean^2 > c^2 2 s0^2
        c2 = float(special.stdtrit(test.residual_df, 1 - test.alpha / 2)) ** 2
        quad, lin, const = total * q * q, 2 * total * p * q, total * p * p - c2 * 2 * test.s0_squared
    else:  # reject where N K mean^2 > c^2 (d0 2 s0^2 + final sum of squares), K = d0 + N - 1
        c2 = float(special.stdtrit(min(d0 + total - 1, test.residual_df), 1 - test.alpha / 2)) ** 2
        k, prior_part = d0 + total - 1, (d0 * 2 * test.s0_squared if d0 else 0.0)
        quad = total * k * q * q - c2 * h * s * s
        lin = 2 * total * k * p * q - 2 * c2 * h * g * s
        const = total * k * p * p - c2 * (prior_part + nu * sd**2 + sigma2 * w + h * g * g)
    mass = _normal_mass_where_positive(quad, lin, const)
    return float((mass * r_weight[:, None] * w_weight[None, :]).sum())


def _normal_mass_where_positive(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """P(a z^2 + b z + c > 0) for z ~ N(0, 1), elementwise: outside the roots where a > 0, between them where a < 0,
    a half line where a = 0."""
    a, b, c = np.broadcast_arrays(*(np.asarray(x, float) for x in (a, b, c)))
    with np.errstate(divide="ignore", invalid="ignore"):
        disc = b * b - 4 * a * c
        root = np.sqrt(np.maximum(disc, 0.0))
        one, two = (-b - root) / (2 * a), (-b + root) / (2 * a)
        between = special.ndtr(np.maximum(one, two)) - special.ndtr(np.minimum(one, two))
        quadratic = np.where(disc <= 0, (a > 0).astype(float), np.where(a > 0, 1 - between, between))
        # a = 0: b z + c > 0, z beyond -c / b on b's side
        linear = np.where(b != 0, special.ndtr(c / np.abs(b)), (c > 0).astype(float))
    return np.where(a == 0, linear, quadratic)


def futile(pair: PairVerdict, rule: str, cap: int, alpha: float) -> bool:
    """Whether an open pair stops for futility under a design's rule (pipelines.analysis.design.FUTILITY_RULES).
    "interval": even if the true Δ were the end of the pair's 95% interval farthest from 0, the test at the cap
    would decide it with conditional power below FUTILITY_POWER (a stop on the current estimate's conditional power
    cut the design's power against one per-seed SD from 0.46 to 0.32 in simulation). "small_delta", the rule of
    designs recorded before it: |Δ| inside the region, a point estimate whatever its interval."""
    if rule == "small_delta":
        return abs(pair.delta) < pair.region
    far = pair.ci_hi if abs(pair.ci_hi) >= abs(pair.ci_lo) else pair.ci_lo
    power = conditional_power(pair, cap, alpha, effect=far)
    return math.isfinite(power) and power < FUTILITY_POWER


def verdict_word(pair: PairVerdict, p_holm: float, alpha: float) -> str:
    """open when the pair has no test (no verdict yet); equivalent when TOST rejects |Δ| >= region at `alpha`
    (whether or not the difference test also rejects: a difference shown to be inside the region is practically
    none); else better / worse when the difference test rejects at `alpha` after Holm; else inconclusive."""
    if not (math.isfinite(pair.p) or math.isfinite(pair.p_tost)):
        return OPEN
    if math.isfinite(pair.p_tost) and pair.p_tost < alpha:
        return "equivalent"
    if math.isfinite(p_holm) and p_holm < alpha and pair.delta != 0:
        return "better" if pair.a_better else "worse"
    return "inconclusive"
