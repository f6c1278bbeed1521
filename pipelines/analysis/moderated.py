"""The blocked analysis: each pair's seed variance borrows strength from the domain's other encodings (SPEC 3).

Seeds are blocks: seed k shares its data order across every encoding of a domain. At a look's seeds, the table
y[e, s] of the encodings that finished all of them (at least MIN_ENCODINGS) is centred on each seed's mean over the
encodings (the block), and each encoding's residual variance v_e = E / (E - 1) sum_s (r_es - mean_s r_es)^2 / (n - 1)
estimates its own seed variance with nu = n - 1 degrees of freedom (E / (E - 1) undoes the centring's shrinkage
when the variances are equal). Their prior is fitted as limma does (Smyth 2004, section 6.2, method of moments on
log variances):

    e_e = log v_e - digamma(nu / 2) + log(nu / 2)
    trigamma(d0 / 2) = var(e) - trigamma(nu / 2)          (d0 = inf when the right side is <= 0)
    s0^2 = exp(mean(e) + digamma(d0 / 2) - log(d0 / 2))   (exp(mean(e)) when d0 = inf)

Each pair's variance of seed-paired differences s_d^2 (nu df) is then moderated toward the prior's mean for a
difference of two encodings, 2 s0^2:  s~^2 = (d0 2 s0^2 + nu s_d^2) / (d0 + nu), on min(d0 + nu, (E - 1)(n - 1))
degrees of freedom; at d0 = inf the formula's limit, s~^2 = 2 s0^2 on (E - 1)(n - 1) df. The cap is limma's
(squeezeVar's df.total is at most the pooled residual df): the moderated variance is estimated from the table's
(E - 1)(n - 1) residual degrees of freedom, and no more; uncapped, an infinite or large d0 gave a t on d0 + nu df
that held no look's rate with 6-8 encodings (tests/test_moderated_simulations.py prints both). The pair's own
differences keep what is particular to it (two encodings that move together on a seed); the prior only adds
degrees of freedom.

The table is the family's: the encodings of one verdict family (a design's own baselines and its reference, or the
encodings that joined it and the reference) that hold the look's seeds, never another family's, so that an
encoding joining a study moves no variance, df or verdict of the study's own pairs (pipelines.analysis.sequential).

Pooling can lie when the variances differ (on MAESTRO KERPLE's seed SD is 0.0003, rope10k's 0.106), and every pair
holds the reference. So the prior is used only where the simulations in tests/test_moderated_simulations.py, run
with each published study's own per-encoding seed SDs and seed covariances, hold the rates (coverage 0.93-0.97,
the design's family-wise error at most 0.05):
- at least MIN_SEEDS seeds (at 3 seeds a heterogeneity this strong cannot be told from chance: the moderated test's
  error per look was 0.02-0.08 against its 0.0125; there the per-pair test is kept);
- d0 >= MIN_PRIOR_DF (the encodings' variances agree well enough to be pooled);
- the reference's own residual variance within the prior's upper REF_QUANTILE bound (v_ref / s0^2 below the
  F(nu, d0) quantile): a reference much noisier than the others would make every pair's prior too small.
Otherwise `Prior.reason` says why, and the pairs use their own n - 1 degrees of freedom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special
from scipy import stats as sps

MIN_SEEDS = 5
MIN_ENCODINGS = 6
MIN_PRIOR_DF = 8.0
REF_QUANTILE = 0.95


def trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x, x > 0: Newton's iteration on 1 / trigamma (Smyth 2004's), from y = 0.5 + 1 / x."""
    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(special.polygamma(1, y))
        step = tri * (1.0 - tri / x) / float(special.polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def fit_prior(variances: np.ndarray, nu: float) -> tuple[float, float]:
    """(d0, s0^2) of the scaled inverse chi-square prior of variances each on `nu` df (see the module docstring);
    d0 = inf when the variances spread no more than chance alone would make them."""
    v = np.asarray(variances, float)
    if v.size < 2 or np.any(v <= 0) or not np.all(np.isfinite(v)):
        raise ValueError(f"a prior needs at least 2 positive finite variances, got {v.tolist()}")
    e = np.log(v) - special.digamma(nu / 2) + math.log(nu / 2)
    excess = float(e.var(ddof=1)) - float(special.polygamma(1, nu / 2))
    if excess <= 0:
        return math.inf, float(math.exp(e.mean()))
    d0 = 2.0 * trigamma_inverse(excess)
    return d0, float(math.exp(e.mean() + special.digamma(d0 / 2) - math.log(d0 / 2)))


def residual_variances(table: np.ndarray) -> np.ndarray:
    """Each encoding's seed variance from a complete (E encodings, n seeds) table of seed scores, the seeds' block
    means removed (see the module docstring)."""
    table = np.asarray(table, float)
    e = table.shape[0]
    residual = table - table.mean(axis=0, keepdims=True)
    return residual.var(axis=1, ddof=1) * e / (e - 1)


@dataclass(frozen=True)
class Prior:
    """The fitted prior at one set of seeds, and whether the pairs use it (`reason` empty) or not (why)."""

    seeds: int
    encodings: int
    d0: float  # math.inf, nan when not fitted
    s0_squared: float
    reason: str = ""

    @property
    def used(self) -> bool:
        return not self.reason

    @property
    def residual_df(self) -> float:
        """The pooled residual degrees of freedom of the table, (E - 1)(n - 1): the most a moderated variance has."""
        return float((self.encodings - 1) * (self.seeds - 1))

    def moderate(self, pair_variance: float, nu: float) -> tuple[float, float]:
        """(the moderated variance of a pair's seed differences, its degrees of freedom): see the module docstring;
        d0 = inf gives the formula's limit, 2 s0^2, and the df are capped at the pooled residual df."""
        df = min(self.d0 + nu, self.residual_df)
        if math.isinf(self.d0):
            return 2 * self.s0_squared, df
        return (self.d0 * 2 * self.s0_squared + nu * pair_variance) / (self.d0 + nu), df

    def describe(self) -> str:
        if math.isnan(self.d0):
            return f"per-pair test ({self.reason})"
        d0 = "inf" if math.isinf(self.d0) else f"{self.d0:.1f}"
        s0 = math.sqrt(self.s0_squared)
        head = f"prior d0 {d0}, s0 {s0:.4g} over {self.encodings} encodings x {self.seeds} seeds"
        return f"moderated ({head})" if self.used else f"per-pair test ({self.reason}; {head})"


def reference_bound(nu: float, d0: float) -> float:
    """The REF_QUANTILE quantile of F(nu, d0), the ratio of one encoding's residual variance to s0^2 under the prior;
    at d0 = inf the F's limit chi-square(nu) / nu (scipy's F is nan on an infinite df)."""
    if math.isinf(d0):
        return float(sps.chi2.ppf(REF_QUANTILE, nu) / nu)
    return float(sps.f.ppf(REF_QUANTILE, nu, d0))


def blocked_prior(table: np.ndarray, ref_row: int | None, min_seeds: int = MIN_SEEDS) -> Prior:
    """The prior of a complete (E, n) table of seed scores, row `ref_row` the reference (None: no reference guard),
    with the rules of the module docstring (`min_seeds`: a forecast of the prior a later look with more seeds will
    fit, from fewer seeds now, lowers it)."""
    table = np.asarray(table, float)
    e, n = table.shape
    nan = math.nan
    if n < min_seeds:
        return Prior(n, e, nan, nan, f"{n} seeds: the moderated test holds its rates from {MIN_SEEDS}")
    if e < MIN_ENCODINGS:
        return Prior(n, e, nan, nan, f"{e} encodings hold these seeds: a prior needs {MIN_ENCODINGS}")
    variances = residual_variances(table)
    if np.any(variances <= 0):
        return Prior(n, e, nan, nan, "an encoding's seed scores do not vary")
    nu = n - 1.0
    d0, s0_squared = fit_prior(variances, nu)
    if d0 < MIN_PRIOR_DF:
        return Prior(n, e, d0, s0_squared, f"the encodings' seed variances differ too much to pool (d0 {d0:.1f})")
    if ref_row is not None:
        bound = reference_bound(nu, d0)
        if variances[ref_row] / s0_squared > bound:
            ratio = variances[ref_row] / s0_squared
            return Prior(n, e, d0, s0_squared, f"the reference's seed variance is {ratio:.1f} x the prior's")
    return Prior(n, e, d0, s0_squared)
