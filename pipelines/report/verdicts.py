"""The seed-aware verdict in a report: its cells in a domain's table, the sentence that says what it is, every pair,
the variance components and the looks of a make-settle design. Renders what pipelines.analysis computed."""

from __future__ import annotations

import math

from pipelines.analysis.results import DomainResult
from pipelines.analysis.stats import PairedResult, significance_stars
from pipelines.analysis.verdict import BOOTSTRAP_REPLICATES, LEVEL, POWER, PairVerdict
from pipelines.report.markdown import markdown_table

PAPER_COLUMN = "paper 000 C.2: p (Holm), per example, conditional on the trained models"


def marks(pair: PairVerdict | None) -> str:
    """Stars when the reference is better, daggers when the encoding is, from the seed-level test only."""
    if pair is None or pair.verdict not in ("better", "worse"):
        return ""
    stars = significance_stars(pair.p_holm) or "*"
    return stars if pair.verdict == "worse" else "†" * len(stars)


def paper_cell(test: PairedResult | None, digits: int) -> str:
    """Paper 000 C.2's per-example test of one baseline: its mean difference and Holm-adjusted p."""
    return f"{test.mean_diff:+.{digits}f}, p {test.p_holm:.3g}" if test else ""


def delta_cell(pair: PairVerdict, digits: int) -> str:
    mark = marks(pair)
    return f"{pair.delta:+.{digits}f} [{pair.ci_lo:+.{digits}f}, {pair.ci_hi:+.{digits}f}]" + (
        f" {mark}" if mark else ""
    )


def seeds_needed_cell(pair: PairVerdict) -> str:
    if pair.verdict != "inconclusive":
        return ""
    if pair.seeds_needed is None:
        return "n/a (no seed spread)"
    return f"> {pair.seeds_needed - 1}" if pair.seeds_needed > 1000 else str(pair.seeds_needed)


def verdict_cells(pair: PairVerdict | None, digits: int) -> list[str]:
    """Δ [CI], P(better), seed-level p (Holm), verdict, seeds needed."""
    if pair is None:
        return ["reference", "", "", "", ""]
    p = "n/a" if math.isnan(pair.p_holm) else f"{pair.p_holm:.3g}"
    poi = f"{pair.poi:.2f} [{pair.poi_lo:.2f}, {pair.poi_hi:.2f}]"
    return [delta_cell(pair, digits), poi, p, f"**{pair.verdict}**", seeds_needed_cell(pair)]


VERDICT_HEADER = ["Δ vs {ref} [95% CI over seeds and {blocks}s]", "P(better) over seeds", "p seed-level (Holm)"]
VERDICT_HEADER += ["verdict", "seeds needed"]


def verdict_header(result: DomainResult) -> list[str]:
    return [VERDICT_HEADER[0].format(ref=result.ref, blocks=result.blocks), *VERDICT_HEADER[1:]]


def verdict_note(result: DomainResult) -> str:
    """What the verdict columns are."""
    verdicts = result.verdicts
    if verdicts is None or verdicts.family is None:
        return (verdicts.no_tests_reason if verdicts else result.no_tests_reason) or ""
    family = verdicts.family
    design = family.design
    unit = f"{result.metric.unit}" if result.per_example else "chance-normalised accuracy"
    level = (
        f"Holm over the {len(family.verdicts)} baselines at alpha {design.alpha:g}"
        if not design.sequential
        else f"the group-sequential design of `make settle` (looks at {', '.join(map(str, design.looks))} seeds, "
        f"alpha {design.alpha:g} spent {design.level:.4g} per look, Holm within each look; `Looks` below)"
    )
    return (
        f"**Verdict (the headline)**: does the encoding beat `{result.ref}` for a new draw of training seeds? Δ = "
        f"score - score(`{result.ref}`) ({'lower' if not result.metric.higher_is_better else 'higher'} is better), "
        f"the mean over the seeds both finished of the per-seed differences; its {LEVEL:.0%} interval is a crossed "
        f"bootstrap ({BOOTSTRAP_REPLICATES:,} replicates resampling the {result.blocks}s and the seed indices "
        "together). p: a paired t-test on the per-seed mean differences (Welch when the seeds do not pair), "
        f"{level}; `*`/`†`: `{result.ref}` / the encoding better, from this test only. P(better): the share of "
        f"seed pairs where the encoding beats `{result.ref}` (U / (n_a n_b)). `equivalent`: the interval lies inside "
        f"the region of practical equivalence ±{result.metric.equivalence:g} ({unit}); `seeds needed`: per encoding, "
        f"for {POWER:.0%} power at the family's first Holm level, for the larger of |Δ| and the region's edge."
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
            f"{pair.delta:+.{digits}f} [{pair.ci_lo:+.{digits}f}, {pair.ci_hi:+.{digits}f}]",
            f"{pair.poi:.2f}",
            "n/a" if math.isnan(pair.p_holm) else f"{pair.p_holm:.3g}",
            pair.verdict,
        ]
        for pair in verdicts.pairs
    ]
    return [
        "## Every pair (secondary family)",
        "",
        f"Each pair on the seeds both finished (paired by seed), Δ = score(a) - score(b) with its {LEVEL:.0%} "
        "crossed bootstrap interval, the seed-level test Holm-corrected over all "
        f"{len(rows)} pairs at alpha 0.05 (fixed sample: not part of any make-settle design); the verdict is a's.",
        "",
        *markdown_table(["a", "b", "seeds", "Δ [95% CI]", "P(a better)", "p (Holm)", "verdict"], rows),
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


def looks_section(result: DomainResult) -> list[str]:
    verdicts = result.verdicts
    if verdicts is None or verdicts.family is None or not verdicts.family.design.sequential:
        return []
    family = verdicts.family
    lines = ["## Looks (make settle)", ""]
    for look in family.looks:
        decided = {w: [name for name, p in look.pairs.items() if p.verdict == w] for w in ("better", "worse")}
        decided["equivalent"] = [name for name, p in look.pairs.items() if p.verdict == "equivalent"]
        text = "; ".join(f"{w}: {', '.join(f'`{n}`' for n in names)}" for w, names in decided.items() if names)
        # at the design's last look an open pair gets no more seeds: it stays inconclusive
        open_pairs = "calls for more seeds" if look.number < len(family.design.looks) else "inconclusive at the cap"
        lines.append(
            f"- look {look.number} at {len(look.seeds)} seeds (alpha {look.alpha:.4g}): {text or 'nothing decided'}; "
            f"{open_pairs}: {', '.join(f'`{n}`' for n in look.calls_for) or 'none'}."
        )
    pending = sorted({name for name, _ in family.next_runs})
    if family.next_runs:
        status = f"open: the next look needs {len(family.next_runs)} runs ({', '.join(f'`{n}`' for n in pending)})"
    elif family.looks[-1].calls_for:
        count = len(family.looks[-1].calls_for)
        status = f"the design's last look is reached; {count} pair{'s stay' if count > 1 else ' stays'} inconclusive"
    else:
        status = "settled: every pair is decided or inside the region"
    return [*lines, "", f"Status: {status}.", ""]


PAIRS_HEADER = ["a", "b", "seeds_a", "seeds_b", "paired", "delta", "delta_lo", "delta_hi", "p_a_better", "t", "df"]
PAIRS_HEADER += ["p", "p_holm", "verdict"]


def verdict_record(pair) -> dict:
    """The seed-aware verdict of one encoding against the reference, as CSV/JSON fields (empty for the reference)."""
    if pair is None:
        return dict.fromkeys(VERDICT_FIELDS, "")
    return {
        "verdict": pair.verdict,
        "delta": pair.delta,
        "delta_lo": pair.ci_lo,
        "delta_hi": pair.ci_hi,
        "p_better": pair.poi,
        "p_better_lo": pair.poi_lo,
        "p_better_hi": pair.poi_hi,
        "seed_t": pair.t,
        "seed_df": pair.df,
        "seed_p": pair.p,
        "seed_p_holm": pair.p_holm,
        "verdict_alpha": pair.alpha,
        "verdict_look": pair.look if pair.look is not None else "",
        "pair_seeds": len(pair.seeds_a) if pair.paired else f"{len(pair.seeds_a)}/{len(pair.seeds_b)}",
        "paired": pair.paired,
        "seed_sd_of_difference": pair.seed_sd,
        "seeds_needed": pair.seeds_needed if pair.seeds_needed is not None else "",
    }


VERDICT_FIELDS = (
    "verdict",
    "delta",
    "delta_lo",
    "delta_hi",
    "p_better",
    "p_better_lo",
    "p_better_hi",
    "seed_t",
    "seed_df",
    "seed_p",
    "seed_p_holm",
    "verdict_alpha",
    "verdict_look",
    "pair_seeds",
    "paired",
    "seed_sd_of_difference",
    "seeds_needed",
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
            pair.verdict,
        ]
        for pair in result.verdicts.pairs
    ]


def task_verdict_section(result: DomainResult) -> list[str]:
    """The domain's score per encoding with its seed-aware verdict against the reference."""
    if not result.entries:
        return []
    digits = result.metric.digits
    header = ["encoding", result.metric.short, f"{result.interval} CI", "seeds", *verdict_header(result)]
    header.append(f"{PAPER_COLUMN}: Δ, p")
    rows = []
    for name, entry in sorted(result.entries.items(), key=lambda item: -item[1].score):
        pair = None if name == result.ref else entry.verdict
        cells = verdict_cells(pair, digits) if result.ref else ["", "", "", "", ""]
        rows.append(
            [
                f"`{name}`",
                f"{entry.score:.{digits}f}",
                f"[{entry.ci_lo:.{digits}f}, {entry.ci_hi:.{digits}f}]",
                str(len(entry.seed_scores)),
                *cells,
                paper_cell(entry.test, digits),
            ]
        )
    return ["## Verdict: the domain's score", "", verdict_note(result), "", *markdown_table(header, rows), ""]
