"""The seed-aware verdict in a report: its cells in a domain's table, the sentence that says what it is, every pair,
the variance components and the looks of a make-settle design. Renders what pipelines.analysis computed."""

from __future__ import annotations

import math

from pipelines.analysis.design import Design
from pipelines.analysis.results import DomainResult
from pipelines.analysis.sequential import FamilyResult
from pipelines.analysis.stats import PairedResult
from pipelines.analysis.verdict import LEVEL, POWER, STOPPED_BY, STOPPED_WORDS, PairVerdict
from pipelines.report.markdown import bold_if, markdown_table

AT_THE_CAP = "inconclusive at the cap"  # an open pair at its design's last look: no more seeds will be trained
PAPER_COLUMN = "paper 000 C.2: p (Holm), per example, conditional on the trained models"
# the one rule every table and figure marks by (its legend: MARKS_RULE)
MARKS_RULE = (
    "`*`: the reference better, `†`: the encoding better, by the verdict (the seed-level test at the level the "
    "verdict was decided at: 0.05 Holm-adjusted, or the look's alpha under make settle); no mark otherwise, whatever "
    "the p-value"
)


def marks(pair: PairVerdict | None) -> str:
    """`*` when the verdict is `worse` (the reference better), `†` when `better`; nothing otherwise (MARKS_RULE)."""
    if pair is None or pair.verdict not in ("better", "worse"):
        return ""
    return "*" if pair.verdict == "worse" else "†"


def paper_cell(test: PairedResult | None, digits: int) -> str:
    """Paper 000 C.2's per-example test of one baseline: its mean difference and Holm-adjusted p."""
    return f"{test.mean_diff:+.{digits}f}, p {test.p_holm:.3g}" if test else ""


def agreeing_digits(values: tuple[float, ...], digits: int, edges: tuple[float, ...]) -> int:
    """At least `digits`, and as many more as it takes for every value, rounded, to lie on the same side of every
    edge as it does unrounded (a bound of -0.00003 printed as -0.0000 beside `worse`, or 0.0049 as 0.005 beside
    `equivalent`, would contradict the word that was decided on the unrounded value)."""

    def agrees(d: int) -> bool:
        return all(v == e or (round(v, d) - e) * (v - e) > 0 for v in values if math.isfinite(v) for e in edges)

    while digits < 12 and not agrees(digits):
        digits += 1
    return digits


def interval_text(lo: float, hi: float, digits: int, region: float | None = None) -> str:
    """[lo, hi] with the digits that keep each bound on its side of 0 (and of +-region when given)."""
    if math.isnan(lo):
        return "[n/a]"
    edges = (0.0,) if region is None else (0.0, region, -region)
    digits = agreeing_digits((lo, hi), digits, edges)
    return f"[{lo:+.{digits}f}, {hi:+.{digits}f}]"


def delta_cell(pair: PairVerdict, digits: int) -> str:
    """Δ with the interval the verdict rests on first, its level and how it was set named (it excludes 0 exactly
    when the word is better or worse, but for an equivalent pair's, TOST's inside the region), then the marginal 95%
    t-interval, labelled."""
    level, lo, hi = pair.decision_interval()
    text = f"{pair.delta:+.{digits}f} {interval_text(lo, hi, digits, pair.region)}"
    if level != LEVEL:
        text += f" ({pair.decision_label()}); 95% {interval_text(pair.ci_lo, pair.ci_hi, digits, pair.region)}"
    mark = marks(pair)
    return text + (f" {mark}" if mark else "")


def capped(pair: PairVerdict, design: Design) -> bool:
    """An open pair at a sequential design's last look: the design buys it no more seeds."""
    return design.sequential and pair.verdict == "inconclusive" and pair.look == len(design.looks)


def verdict_label(pair: PairVerdict, family: FamilyResult | None) -> str:
    """The verdict as a table says it: the word, a futility stop spelled out, an open pair at a design's last look
    `inconclusive at the cap`, and under a design the look that decided it."""
    word = pair.verdict
    if pair.scope.startswith("below"):  # a joined encoding short of the first look: no verdict word yet
        return f"**open** ({pair.scope})"
    designed = family is not None and family.design.sequential
    if word == "stopped":
        word = STOPPED_BY[family.design.futility] if designed else STOPPED_WORDS
    elif designed and capped(pair, family.design):
        word = AT_THE_CAP
    text = f"**{word}**" + (f" (look {pair.look})" if designed and pair.look else "")
    if pair.scope == "joined":
        return text + ", joined: its own family over the design's looks, outside the study's"
    return text + (f", fixed sample outside the study's design ({pair.scope})" if pair.scope else "")


def seeds_needed_cell(pair: PairVerdict) -> str:
    """Planning, not evidence: for an open pair under a design, its predictive power at the design's next look (the
    probability that look shows it different, over the Δ and seed SD its seeds make plausible); else the seeds per
    encoding that would detect the region's edge."""
    if pair.verdict != "inconclusive":
        return ""
    if math.isfinite(pair.predictive_power):
        return f"P(shown different at the next look) {pair.predictive_power:.2f} (planning)"
    if pair.seeds_needed is None:
        return "n/a (no seed spread)"
    return f"> {pair.seeds_needed - 1}" if pair.seeds_needed > 1000 else str(pair.seeds_needed)


def p_text(p: float) -> str:
    return "n/a" if math.isnan(p) else f"{p:.3g}"


def poi_cell(pair: PairVerdict) -> str:
    if math.isnan(pair.poi_lo):
        # one seed a side is no pairing to speak of, even when both runs share that seed
        single = len(pair.seeds_a) == len(pair.seeds_b) == 1
        return f"{pair.poi:.2f} ({'one seed each' if single else 'unpaired'})"
    return f"{pair.poi:.2f} [{pair.poi_lo:.2f}, {pair.poi_hi:.2f}]"


def verdict_cells(pair: PairVerdict | None, digits: int, family: FamilyResult | None = None) -> list[str]:
    """Δ [CI], P(better), difference p (Holm), TOST p, verdict, seeds needed."""
    if pair is None:
        return ["reference", "", "", "", "", ""]
    return [
        delta_cell(pair, digits),
        poi_cell(pair),
        p_text(pair.p_holm),
        p_text(pair.p_tost),
        verdict_label(pair, family),
        seeds_needed_cell(pair),
    ]


VERDICT_HEADER = [
    "Δ vs {ref} [decision interval (its level); then the 95% t-interval], test set fixed",
    "P(better): share of seeds [95% CI]",
    "p difference (Holm)",
    "p TOST (±{region:g})",
    "verdict",
    "planning: P(shown different at the next look), predictive (else seeds to detect ±{region:g})",
]


def verdict_header(result: DomainResult) -> list[str]:
    region = result.metric.equivalence
    return [VERDICT_HEADER[0].format(ref=result.ref), *[h.format(region=region) for h in VERDICT_HEADER[1:]]]


def family_of(result: DomainResult) -> FamilyResult | None:
    return result.verdicts.family if result.verdicts else None


def verdict_note(result: DomainResult) -> str:
    """What the verdict columns are."""
    verdicts = result.verdicts
    if verdicts is None or verdicts.family is None:
        return (verdicts.no_tests_reason if verdicts else result.no_tests_reason) or ""
    family = verdicts.family
    design = family.design
    unit = f"{result.metric.unit}" if result.per_example else "chance-normalised accuracy"
    region = result.metric.equivalence
    level = (
        f"Holm over the {len(family.verdicts)} baselines at alpha {design.alpha:g}"
        if not design.sequential
        else f"the group-sequential design of `make settle` (looks at {', '.join(map(str, design.looks))} seeds, "
        f"alpha {design.alpha:g} spent {design.level:.4g} per look, Holm within each look over the pairs not yet "
        "shown different; `Looks` below)"
    )
    return (
        f"**Verdict (the headline)**: does the encoding beat `{result.ref}` for a new draw of training seeds, on this "
        f"test set? Reference `{result.ref}`: {verdicts.ref_note}. Δ = score - score(`{result.ref}`) "
        f"({'lower' if not result.metric.higher_is_better else 'higher'} is better), the mean of the per-seed "
        "differences over the seeds both finished (paired by seed; Welch on the seed scores when fewer than 2 "
        f"pair), with its {LEVEL:.0%} t-interval (n - 1 df), which holds the test {result.blocks}s fixed: its "
        "coverage is 0.95-0.96 at 3, 5 and 10 seeds by simulation (tests/test_verdict_simulations.py), and it is not "
        f"an interval for other test sets. p difference: the t-test of Δ = 0 on the same seeds, {level}. p TOST: two "
        f"one-sided t-tests of |Δ| >= {region:g} ({unit}, the region of practical equivalence); `equivalent` when "
        "it is below the level (at most that rate of false equivalence claims by simulation), and the interval "
        "printed is then the (1 - 2 alpha) one the decision used. The first interval printed is the one the verdict "
        "rests on, at the level it was decided (better / worse at Holm rank j of m: 1 - alpha / (m - j + 1); open "
        "pairs at the level where Holm stopped), so among the words that rest on the difference test it excludes 0 "
        "exactly when the word is better or worse; an `equivalent` pair's is TOST's, inside the region, and may "
        "exclude 0 (a difference shown too small to matter: not a better or worse); the marginal 95% interval "
        "follows, labelled. Seed variance: under a design, each pair's variance of seed differences borrows "
        "strength from the other encodings of its family, the design's own or the joined one (limma's moderated t, "
        "Smyth 2004, seeds as blocks; its df capped at the pooled residual df) where the simulations hold its rates "
        "(from 5 seeds, the encodings' variances alike, the reference no noisier than the rest: "
        "tests/test_moderated_simulations.py), else the pair's own n - 1 df. "
        f"`{STOPPED_WORDS}`: a futility stop of the design, not a finding. Planning: an open pair's predictive "
        "power, the probability that the design's next look shows it different (its test there, at the level Holm "
        "will test it at), averaged over the Δ and seed variance its seeds and its family's other pairs make "
        "plausible (calibrated by simulation: tests/test_settle_simulations.py). P(better): the share of paired "
        f"seeds where the encoding beats `{result.ref}`, with its Clopper-Pearson interval. {MARKS_RULE}. Seeds to "
        f"detect: per encoding, for {POWER:.0%} power at the family's first Holm level against a difference of "
        f"±{region:g} (fixed in advance, not the observed Δ), from the pair's seed SD (itself an estimate from few "
        "seeds)."
    )


def pairs_section(result: DomainResult) -> list[str]:
    """The secondary family: every pair, fixed sample, Holm over all pairs."""
    verdicts = result.verdicts
    if verdicts is None or not verdicts.pairs:
        return []
    digits = result.metric.digits
    rows = [
        [
            f"`{pair.a}`",
            f"`{pair.b}`",
            str(len(pair.seeds_a)) if pair.paired else f"{len(pair.seeds_a)} / {len(pair.seeds_b)}",
            delta_cell(pair, digits),
            poi_cell(pair),
            p_text(pair.p_holm),
            p_text(pair.p_tost),
            pair.verdict,
        ]
        for pair in verdicts.pairs
    ]
    tested = [pair for pair in verdicts.pairs if pair.family_size]
    own = [pair for pair in tested if verdicts.members is None or {pair.a, pair.b} <= set(verdicts.members)]
    families = (
        f"Holm-corrected over all {len(tested)} pairs with a test"
        if len(own) == len(tested)
        else f"Holm-corrected over the study's own {len(own)} pairs with a test, and apart over the "
        f"{len(tested) - len(own)} with an encoding that joined the study (a joined encoding moves no p-value of "
        "the study's own pairs)"
    )
    return [
        "## Every pair (secondary family)",
        "",
        f"Each pair on the seeds both finished (paired by seed), Δ = score(a) - score(b) with the interval the "
        f"word rests on (its level: Holm's at the pair's rank; TOST's (1 - 2 alpha) one, inside the region, for "
        f"`equivalent`) and its {LEVEL:.0%} t-interval (the test set fixed), the difference test {families} at "
        "alpha 0.05, TOST at 0.05 (fixed sample: not part of any make-settle design); a pair without a test (one "
        f"seed) is `open` and in no correction; the verdict is a's. {MARKS_RULE}.",
        "",
        *markdown_table(
            ["a", "b", "seeds", PAIR_DELTA, "P(a better)", "p difference (Holm)", "p TOST", "verdict"], rows
        ),  # fmt: skip
        "",
    ]


def variance_section(result: DomainResult) -> list[str]:
    verdicts = result.verdicts
    if verdicts is None:
        return []
    lines = ["## Where the noise lives (variance components)", ""]
    if isinstance(verdicts.variance, str):
        return [*lines, f"{verdicts.variance}.", ""]
    seeds = len(result.seeds.used)
    rows = [[name, f"{value:.3g}", f"{math.sqrt(value):.3g}"] for name, value in verdicts.variance.items()]
    return [
        *lines,
        f"Method-of-moments estimates on the crossed (encoding x seed x {result.blocks}) scores of the {seeds} seeds "
        f"every encoding finished, every factor random (a negative estimate shows as 0). `encoding x seed` is "
        "what moves an encoding's score from one training seed to the next beyond what moves every encoding: the "
        "noise a per-example test cannot see.",
        "",
        *markdown_table(["component", "variance", "SD"], rows),
        "",
    ]


PAIR_DELTA = "Δ [decision interval (its level); then the 95% t-interval]"
PAIRS_HEADER = ["a", "b", "seeds_a", "seeds_b", "paired", "delta", "delta_lo", "delta_hi", "p_a_better", "t", "df"]
PAIRS_HEADER += ["p", "p_holm", "p_tost", "verdict"]


def verdict_record(pair: PairVerdict | None) -> dict:
    """The seed-aware verdict of one encoding against the reference, as CSV/JSON fields (empty for the reference).
    delta_lo/hi: the 95% t-interval; decision_lo/hi at decision_level: the interval the verdict rests on."""
    if pair is None:
        return dict.fromkeys(VERDICT_FIELDS, "")
    level, lo, hi = pair.decision_interval()
    return {
        "verdict": pair.verdict,
        "delta": pair.delta,
        "delta_lo": pair.ci_lo,
        "delta_hi": pair.ci_hi,
        "decision_level": level,
        "decision_lo": lo,
        "decision_hi": hi,
        "p_better": pair.poi,
        "p_better_lo": pair.poi_lo,
        "p_better_hi": pair.poi_hi,
        "seed_t": pair.t,
        "seed_df": pair.df,
        "seed_p": pair.p,
        "seed_p_holm": pair.p_holm,
        "p_tost": pair.p_tost,
        "verdict_alpha": pair.alpha,
        "verdict_look": pair.look if pair.look is not None else "",
        "pair_seeds": len(pair.seeds_a) if pair.paired else f"{len(pair.seeds_a)}/{len(pair.seeds_b)}",
        "paired": pair.paired,
        "seed_sd_of_difference": pair.seed_sd,
        "seeds_needed": pair.seeds_needed if pair.seeds_needed is not None else "",
        "decision_label": pair.decision_label(),
        "seed_variance": pair.variance,
        "predictive_power": pair.predictive_power,
    }


VERDICT_FIELDS = (
    "verdict",
    "delta",
    "delta_lo",
    "delta_hi",
    "decision_level",
    "decision_lo",
    "decision_hi",
    "p_better",
    "p_better_lo",
    "p_better_hi",
    "seed_t",
    "seed_df",
    "seed_p",
    "seed_p_holm",
    "p_tost",
    "verdict_alpha",
    "verdict_look",
    "pair_seeds",
    "paired",
    "seed_sd_of_difference",
    "seeds_needed",
    "decision_label",
    "seed_variance",
    "predictive_power",
)


def pair_rows(result: DomainResult) -> list[list]:
    return [
        [
            pair.a,
            pair.b,
            " ".join(map(str, pair.seeds_a)),
            " ".join(map(str, pair.seeds_b)),
            pair.paired,
            pair.delta,
            pair.ci_lo,
            pair.ci_hi,
            pair.poi,
            pair.t,
            pair.df,
            pair.p,
            pair.p_holm,
            pair.p_tost,
            pair.verdict,
        ]
        for pair in result.verdicts.pairs
    ]


def task_verdict_section(result: DomainResult) -> list[str]:
    """The domain's score per encoding with its seed-aware verdict against the reference, ranked by the matched
    rule (Δ to the reference on the seeds both finished)."""
    if not result.entries:
        return []
    digits = result.metric.digits
    header = ["rank", "encoding", f"{result.metric.short} (own seeds)", f"{result.interval} CI", "seeds"]
    header += [*verdict_header(result), f"{PAPER_COLUMN}: Δ, p"]
    rank, best = result.ranks(), result.best()
    rows = []
    for name, entry in result.entries.items():
        pair = None if name == result.ref else entry.verdict
        cells = verdict_cells(pair, digits, family_of(result)) if result.ref else [""] * 6
        rows.append(
            [
                f"{rank[name]:g}",
                f"`{name}`",
                bold_if(f"{entry.score:.{digits}f}", name == best),
                f"[{entry.ci_lo:.{digits}f}, {entry.ci_hi:.{digits}f}]",
                str(len(entry.seed_scores)),
                *cells,
                paper_cell(entry.test, digits),
            ]
        )
    return ["## Verdict: the domain's score", "", verdict_note(result), "", *markdown_table(header, rows), ""]
