"""Statistics behind every comparison table (SPEC section 3, "Evaluation and statistics").

SPEC 3: "average each test example over seeds; for each baseline b, paired two-sided t-test on
`d_i = NLL_i(b) - NLL_i(ref)` [...]; Holm correction over the baselines of one domain [...]; 95%
within-example intervals. Mean rank of each encoding across domains with its standard error across
domains."

Pure numpy/scipy: importable without matplotlib.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


def seed_average(per_seed: Mapping[int, np.ndarray], example_ids: Mapping[int, np.ndarray] | None = None) -> np.ndarray:
    """Mean of each example over seeds (SPEC 3: "average each test example over seeds").

    `per_seed` maps a seed to its per-example values. Without `example_ids` the arrays must already be
    aligned (the same example at the same index), so they must have the same length. With `example_ids`
    (seed -> ids, in the same order as that seed's values) every seed is first put in ascending id order,
    and all seeds must hold exactly the same ids; the result is then in ascending id order.
    Raises ValueError when the example sets differ.
    """
    if not per_seed:
        raise ValueError("no seeds to average")
    aligned = {}
    for seed, values in per_seed.items():
        values = np.asarray(values, dtype=float)
        ids = np.arange(values.size) if example_ids is None else np.asarray(example_ids[seed])
        if values.ndim != 1 or ids.shape != values.shape:
            raise ValueError(f"seed {seed}: expected one value per example id, got shapes {values.shape}")
        order = np.argsort(ids, kind="stable")
        if np.any(np.diff(ids[order]) == 0):
            raise ValueError(f"seed {seed}: duplicate example ids")
        aligned[seed] = (ids[order], values[order])

    first_seed, (first_ids, _) = next(iter(aligned.items()))
    for seed, (ids, _) in aligned.items():
        if not np.array_equal(ids, first_ids):
            raise ValueError(
                f"seed {seed} and seed {first_seed} scored different example sets "
                f"({ids.size} and {first_ids.size} examples)"
            )
    return np.mean([values for _, values in aligned.values()], axis=0)


def _t_half_width(sd: float, n: int, level: float) -> float:
    """Half width of the two-sided t-interval for a mean of `n` values with standard deviation `sd`."""
    return sps.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n)


def mean_ci(x: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lo, hi): mean of `x` with its two-sided t-interval over the examples (df = n - 1).

    The bounds are nan for a single example.
    """
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        raise ValueError("mean_ci of an empty array")
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan, math.nan
    half = _t_half_width(float(x.std(ddof=1)), x.size, level)
    return mean, mean - half, mean + half


def within_example_ci(scores: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(means, lo, hi) per row of a (K encodings, N examples) matrix: the within-example interval of SPEC 3.

    Cousineau's normalisation with Morey's correction: each example's score minus that example's mean over the K
    encodings, plus the grand mean, so the spread between examples (some test chorales are simply harder) leaves
    the interval and what remains is how consistently one encoding differs from the others;
    interval = mean +- t(0.975, N-1) * sqrt(K/(K-1)) * sd / sqrt(N), sd over the normalised scores of that encoding.
    The means are the plain means. The bounds are nan with a single encoding or a single example.
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or scores.size == 0:
        raise ValueError(f"within_example_ci needs a non-empty (encodings, examples) matrix, got shape {scores.shape}")
    k, n = scores.shape
    means = scores.mean(axis=1)
    if k < 2 or n < 2:
        nan = np.full(k, math.nan)
        return means, nan, nan.copy()
    normalised = scores - scores.mean(axis=0, keepdims=True) + scores.mean()
    sd = normalised.std(axis=1, ddof=1)
    half = sps.t.ppf(0.5 + level / 2, n - 1) * math.sqrt(k / (k - 1)) * sd / math.sqrt(n)
    return means, means - half, means + half


@dataclass(frozen=True)
class PairedResult:
    """Paired comparison of one baseline against the reference on the same (seed-averaged) examples.

    `mean_diff` is the mean of d_i = NLL_i(baseline) - NLL_i(ref): positive means the reference has the
    lower NLL. `p` is the raw two-sided paired t-test p-value, `p_holm` its Holm adjustment over the
    baselines of the domain, `significant` is `p_holm < 0.05`.
    """

    baseline: str
    ref: str
    n: int
    mean_diff: float
    ci_lo: float
    ci_hi: float
    t: float
    p: float
    p_holm: float
    significant: bool

    @property
    def ref_better(self) -> bool:
        """The reference is significantly better than the baseline (lower NLL, adjusted p < 0.05)."""
        return self.significant and self.mean_diff > 0


def _paired_t(d: np.ndarray) -> tuple[float, float]:
    """(t, two-sided p) of the one-sample t-test of `d` against 0, i.e. scipy.stats.ttest_rel.

    Zero spread: identical pairs (all d_i = 0) give t = 0, p = 1 (scipy returns nan, which would poison
    the Holm step-down); a constant non-zero difference gives t = +-inf, p = 0 as scipy does.
    """
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0.0:
        return (0.0, 1.0) if mean == 0.0 else (math.copysign(math.inf, mean), 0.0)
    t = mean / (sd / math.sqrt(d.size))
    return t, float(2 * sps.t.sf(abs(t), d.size - 1))


def holm_adjust(p: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values, in the input order.

    With the m p-values sorted ascending p_(0) <= ... <= p_(m-1), the adjusted value of p_(k) is
    max_{j <= k} min(1, (m - j) * p_(j)): each factor shrinks by one per step and the running maximum
    keeps the adjusted values in the same order as the raw ones. Same as statsmodels
    `multipletests(method="holm")` (SPEC 3: "`method="holm"`, not statsmodels' default").
    """
    p = np.asarray(p, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted


def paired_tests(nll: Mapping[str, np.ndarray], ref: str, level: float = 0.95) -> list[PairedResult]:
    """Paired two-sided t-test of every baseline against `ref`, Holm-corrected over the baselines.

    `nll` maps an encoding to its per-example NLL (seed-averaged), all aligned on the same examples.
    For each baseline b != ref: d_i = NLL_i(b) - NLL_i(ref); see matched_paired_tests."""
    if ref not in nll:
        raise KeyError(f"reference {ref!r} not among {sorted(nll)}")
    return matched_paired_tests({name: (values, nll[ref]) for name, values in nll.items() if name != ref}, ref, level)


def matched_paired_tests(
    pairs: Mapping[str, tuple[np.ndarray, np.ndarray]], ref: str, level: float = 0.95
) -> list[PairedResult]:
    """Paired two-sided t-test of every baseline against `ref`, Holm-corrected over the baselines, each on its own
    pair of aligned per-example arrays (baseline, reference): the reference seed-averaged over the seeds it shares
    with that baseline, so that no pair compares different seed sets.

    For each baseline b: d_i = NLL_i(b) - NLL_i(ref); the result holds the mean difference with its `level`
    t-interval, the raw p-value, the Holm-adjusted p-value over all baselines given here and whether the adjusted p
    is below 0.05. Results follow the order of `pairs`.
    """
    rows = []
    for baseline, (values, ref_values) in pairs.items():
        values, ref_values = np.asarray(values, dtype=float), np.asarray(ref_values, dtype=float)
        if values.shape != ref_values.shape:
            raise ValueError(f"{baseline!r} has {values.size} examples, {ref!r} has {ref_values.size}")
        if values.size < 2:
            raise ValueError("a paired t-test needs at least two examples")
        d = values - ref_values
        mean_diff, lo, hi = mean_ci(d, level)
        t, p = _paired_t(d)
        rows.append((baseline, d.size, mean_diff, lo, hi, t, p))

    adjusted = holm_adjust(np.array([row[-1] for row in rows]))
    return [
        PairedResult(baseline, ref, n, mean_diff, lo, hi, t, p, float(p_holm), bool(p_holm < 0.05))
        for (baseline, n, mean_diff, lo, hi, t, p), p_holm in zip(rows, adjusted, strict=True)
    ]


def ranks(scores: Mapping[str, float], lower_is_better: bool = True) -> dict[str, float]:
    """Rank of each entry, 1 = best; tied scores share the average of the ranks they span.

    NaN scores (an encoding not evaluated on that split, or with no finished run) are not ranked: they
    get a NaN rank and do not push the others down.
    """
    names = list(scores)
    values = np.array([scores[name] for name in names], dtype=float)
    scored = ~np.isnan(values)
    keys = values[scored] if lower_is_better else -values[scored]
    result = dict.fromkeys(names, math.nan)
    for name, rank in zip(np.array(names)[scored], sps.rankdata(keys, method="average"), strict=True):
        result[str(name)] = float(rank)
    return result


def mean_rank(table: Mapping[str, Mapping[str, float]], lower_is_better: bool = True) -> dict[str, tuple[float, float]]:
    """Mean rank of each encoding over groups, with its standard error across groups.

    `table` maps a group (a domain, or a task of the synthetic domain) to {encoding: score}. Encodings
    are ranked within each group (`ranks`); see `summarise_ranks` for the mean and its standard error.
    SPEC 3: "Mean rank of each encoding across domains with its standard error across domains."
    """
    return summarise_ranks([ranks(scores, lower_is_better) for scores in table.values()])


def summarise_ranks(per_group: Iterable[Mapping[str, float]]) -> dict[str, tuple[float, float]]:
    """(mean, standard error) of each encoding's within-group ranks over the groups where it was ranked.

    The standard error is std(ddof=1) / sqrt(n_groups), nan with a single group (both nan with none).
    Takes ranks already computed per group, so groups may rank in different directions (NLL, accuracy).
    """
    per_group = list(per_group)
    encodings = dict.fromkeys(name for group in per_group for name in group)
    result = {}
    for name in encodings:
        r = np.array([group[name] for group in per_group if not math.isnan(group.get(name, math.nan))])
        if r.size == 0:
            result[name] = (math.nan, math.nan)
            continue
        se = float(r.std(ddof=1) / math.sqrt(r.size)) if r.size > 1 else math.nan
        result[name] = (float(r.mean()), se)
    return result


def chance_normalised(acc, chance):
    """Chance-normalised accuracy (acc - chance) / (1 - chance): 0 at chance, 1 when perfect (SPEC 2)."""
    return (acc - chance) / (1 - chance)


# ------------------------------------------------------------------- Friedman test and Nemenyi CD
# Beyond SPEC 3: Demšar (2006), "Statistical comparisons of classifiers over multiple data sets". The
# blocks are the domains (or the synthetic tasks), the treatments the encodings.


@dataclass(frozen=True)
class FriedmanResult:
    """Friedman test of k treatments over n blocks, with the Iman-Davenport F form Demšar recommends
    (the chi-square approximation is conservative for few blocks) and the Nemenyi critical difference.

    `mean_ranks[j]` is treatment j's mean within-block rank (1 = best, ties averaged); two treatments
    whose mean ranks differ by at least `cd` differ at level `alpha` (Nemenyi).
    """

    n: int
    k: int
    mean_ranks: np.ndarray
    chi2: float
    p: float
    f: float
    p_f: float
    alpha: float
    cd: float


def friedman(scores: np.ndarray, lower_is_better: bool = True, alpha: float = 0.05) -> FriedmanResult:
    """Friedman test on an (n blocks, k treatments) score matrix without missing values.

    chi2 = [12 / (n k (k+1)) * sum_j R_j^2 - 3 n (k+1)] / C with R_j the rank sum of treatment j and the
    tie correction C = 1 - sum over tied groups (t^3 - t) / (n k (k^2 - 1)), as scipy.stats.friedmanchisquare;
    df = k - 1. Iman-Davenport F = (n - 1) chi2 / (n (k - 1) - chi2) on (k - 1, (k - 1)(n - 1)) df.
    Needs n >= 2 blocks and k >= 2 treatments (scipy insists on k >= 3; the formula does not).
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2 or scores.shape[0] < 2 or scores.shape[1] < 2:
        raise ValueError(f"the Friedman test needs at least 2 blocks x 2 treatments, got shape {scores.shape}")
    if np.isnan(scores).any():
        raise ValueError("the Friedman test needs a complete score matrix (no nan)")
    n, k = scores.shape
    rank = sps.rankdata(scores if lower_is_better else -scores, method="average", axis=1)
    rank_sums = rank.sum(axis=0)
    ties = sum(float(np.sum(counts**3 - counts)) for counts in (np.unique(row, return_counts=True)[1] for row in rank))
    correction = 1.0 - ties / (n * k * (k * k - 1))
    if correction == 0.0:  # every block ties every treatment: no evidence of any difference
        chi2 = 0.0
    else:
        chi2 = float((12.0 / (n * k * (k + 1)) * np.sum(rank_sums**2) - 3.0 * n * (k + 1)) / correction)
    denominator = n * (k - 1) - chi2
    f = math.inf if denominator <= 0 else (n - 1) * chi2 / denominator
    p_f = 0.0 if math.isinf(f) else float(sps.f.sf(f, k - 1, (k - 1) * (n - 1)))
    return FriedmanResult(
        n=n,
        k=k,
        mean_ranks=rank_sums / n,
        chi2=chi2,
        p=float(sps.chi2.sf(chi2, k - 1)),
        f=f,
        p_f=p_f,
        alpha=alpha,
        cd=critical_difference(k, n, alpha),
    )


def nemenyi_q(k: int, alpha: float = 0.05) -> float:
    """Nemenyi's q_alpha for k treatments: the studentized range quantile at 1 - alpha with infinite df,
    divided by sqrt(2) (Demšar 2006, table 5a: 1.960, 2.343, 2.569, ... for k = 2, 3, 4, ...)."""
    if k < 2:
        raise ValueError(f"the Nemenyi test needs at least 2 treatments, got {k}")
    return float(sps.studentized_range.ppf(1.0 - alpha, k, np.inf) / math.sqrt(2.0))


def critical_difference(k: int, n: int, alpha: float = 0.05) -> float:
    """Nemenyi critical difference of mean ranks: CD = q_alpha sqrt(k (k + 1) / (6 n))."""
    return nemenyi_q(k, alpha) * math.sqrt(k * (k + 1) / (6.0 * n))


def cd_groups(mean_ranks: np.ndarray, cd: float) -> list[tuple[int, int]]:
    """Maximal runs of treatments, in ascending mean-rank order, whose spread is below `cd`.

    Returns (first, last) index pairs into `np.sort(mean_ranks)`, each with last > first: the bars of a
    critical-difference diagram, joining treatments that the Nemenyi test does not separate. A run
    contained in another is dropped.
    """
    ordered = np.sort(np.asarray(mean_ranks, dtype=float))
    # last[i]: the furthest treatment within cd of treatment i (ordered ranks are ascending)
    last = np.searchsorted(ordered, ordered + cd, side="left") - 1
    groups, reach = [], -1
    for first, end in enumerate(last):
        if end > first and end > reach:  # not contained in the previous group
            groups.append((first, int(end)))
            reach = end
    return groups
