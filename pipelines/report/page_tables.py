"""The study page's tables (pipelines.report.html): its cells (Cell, the number formats, the verdict words), the
leaderboard, the mean rank across domains and make settle's looks; every number from the summary.json object.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace

from pipelines.analysis.results import DomainResult
from pipelines.analysis.study import Study
from pipelines.analysis.verdict import level_text
from pipelines.report.answer import JOINED_MARK
from pipelines.report.page_ranks import bridged_encodings
from pipelines.report.verdicts import STOPPED_WORDS, capped, family_of, verdict_label


@dataclass(frozen=True)
class Cell:
    """One table cell: its text, the value it sorts by (data-value: the summary's own number, written exactly), an
    optional interval (data-lo, data-hi) and a title shown on hover."""

    text: str
    value: object = None
    lo: object = None
    hi: object = None
    title: str = ""
    css: str = ""
    sub: str = ""  # shown under the value (its interval)
    order: object = None  # what the column sorts by when not the value itself (data-order)

    @property
    def value_attr(self) -> str:
        return _attr(self.value)

    @property
    def order_attr(self) -> str:
        return _attr(self.order)

    @property
    def lo_attr(self) -> str:
        return _attr(self.lo)

    @property
    def hi_attr(self) -> str:
        return _attr(self.hi)


def _attr(value) -> str:
    """A number as its exact JSON text (repr of a float), a string as it is, nothing for a missing value."""
    if value is None or value == "":
        return ""
    return json.dumps(value) if isinstance(value, int | float) else str(value)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def number_text(value, digits: int, signed: bool = False) -> str:
    if not _is_number(value):
        return ""
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def interval_text(lo, hi, digits: int, signed: bool = False) -> str:
    if not isinstance(lo, int | float) or not isinstance(hi, int | float):
        return ""
    return f"[{number_text(lo, digits, signed)}, {number_text(hi, digits, signed)}]"


def df_text(df, variance) -> str:
    """What a difference test's p rests on, printed beside it: `moderated, 1,004 df` where the pair's seed variance
    was moderated toward its family's (limma's moderated t: the df add the family's pooled ones), else `4 df`, the
    pair's own; nothing where the test has no df."""
    if not _is_number(df) or not math.isfinite(df):
        return ""
    shown = f"{df:,.0f}" if abs(df - round(df)) < 1e-6 else f"{df:,.1f}"
    return f"moderated, {shown} df" if str(variance or "").startswith("moderated") else f"{shown} df"


def group_label(domain: str, group: str) -> str:
    """Where a result sits: the domain, or `domain/task` for a task of a domain with tasks."""
    return domain if group == domain else f"{domain}/{group}"


def p_cell(value) -> str:
    """A p-value or variance to 3 significant digits (verdicts.p_text's form), nothing where summary.json has none."""
    return f"{value:.3g}" if isinstance(value, int | float) else ""


def plain_label(result: DomainResult, encoding: str) -> tuple[str, str]:
    """(the verdict as a table cell says it, the whole label) for one encoding, in summary.md's words
    (verdict_label) without its markdown."""
    entry = result.entries.get(encoding)
    if result.ref is None:
        return "", ""
    if encoding == result.ref:
        rule = result.verdicts.ref_note.replace("`", "") if result.verdicts else ""
        return "reference", f"the reference: {rule}" if rule else "the reference"
    if entry is None or entry.verdict is None:
        return "", ""
    pair, family = entry.verdict, family_of(result)
    label = verdict_label(pair, family).replace("**", "")
    word = verdict_label(replace(pair, scope=""), family).replace("**", "")  # the scope shortened below
    design = family.design if family is not None else None
    if design is not None and pair.verdict == "inconclusive" and pair.look and not capped(pair, design):
        word = f"open (look {pair.look} of {len(design.looks)})"  # "inconclusive" in an open study reads as final
    if pair.scope == "joined":
        word += ", joined family"  # its own family over the design's looks: said, not only on hover
    return word, label


# ------------------------------------------------------------------------------------------- leaderboard


def _seed_count(record: dict) -> int:
    return len(record["seeds"]) if isinstance(record.get("seeds"), dict) else 0


def by_rank(encodings: dict[str, dict]) -> list[str]:
    """A domain's encodings best first: by the domain's own rank (the matched rule), those without a rank last, ties
    by name. Not the order across domains: a domain's block read in another's order buried its best rows (issue 64:
    study-cpu's JSB `irope`, better, 14th of 27 under five worse rows)."""

    def key(name: str) -> tuple:
        rank = encodings[name].get("rank")
        return (0, rank, name) if _is_number(rank) else (1, 0, name)

    return sorted(encodings, key=key)


def leaderboard_rows(study: Study, summary: dict) -> list[dict]:
    """One row per (domain, encoding), the domains in the study's order, each domain's rows best first (by_rank):
    every number from summary.json's record."""
    rows = []
    for result in study.results:
        domain = summary["domains"][result.domain]
        digits, region = result.metric.digits, domain["equivalence_region"]
        higher = result.metric.higher_is_better
        for encoding in by_rank(domain["encodings"]):
            record = domain["encodings"][encoding]
            word, label = plain_label(result, encoding)
            is_ref = encoding == domain["reference"]
            joined = encoding in joined_encodings(result)
            verdict = record["verdict"] or ("reference" if is_ref else "")
            rows.append(
                {
                    "domain": result.domain,
                    "encoding": encoding,
                    "cells": {
                        "domain": Cell(result.domain, result.domain),
                        "encoding": Cell(
                            encoding + (" (ref)" if is_ref else ""),
                            encoding,
                            sub=JOINED_MARK if joined else "",
                            title=JOINED_TITLE if joined else "",
                        ),
                        "score": Cell(
                            number_text(record["score"], digits),
                            record["score"],
                            record["within_lo"],
                            record["within_hi"],
                            title=f"{record['interval']} interval",
                            sub=interval_text(record["within_lo"], record["within_hi"], digits),
                            order=better_first(record["score"], higher),
                        ),
                        "verdict": Cell(
                            word, verdict, title=label, css=f"verdict {verdict}", order=VERDICT_ORDER.get(verdict)
                        ),
                        "delta": Cell(
                            number_text(record["delta"], digits, signed=True),
                            record["delta"],
                            record.get("decision_lo"),
                            record.get("decision_hi"),
                            title=_t_interval_title(record, digits),
                            sub=_decision_text(record, digits),
                            order=better_first(record["delta"], higher),
                        ),
                        "region": Cell(f"±{region:g}", region),
                        "p_holm": Cell(
                            p_cell(record["seed_p_holm"]),
                            record["seed_p_holm"],
                            title=str(record.get("seed_variance") or ""),
                            sub=df_text(record.get("seed_df"), record.get("seed_variance"))
                            if _is_number(record["seed_p_holm"])
                            else "",
                        ),
                        "p_tost": Cell(p_cell(record["p_tost"]), record["p_tost"]),
                        "p_better": Cell(
                            number_text(record["p_better"], 2),
                            record["p_better"],
                            sub=interval_text(record.get("p_better_lo"), record.get("p_better_hi"), 2),
                        ),
                        "seeds": Cell(str(record["seeds_used"]), _seed_count(record)),
                        "rank": Cell(number_text(record["rank"], 1).removesuffix(".0"), record["rank"]),
                    },
                }
            )
    return rows


def joined_encodings(result: DomainResult) -> set[str]:
    """The encodings that joined the domain's study after its design was fixed: tested in a family of their own."""
    verdicts = result.verdicts
    return set(verdicts.joined.verdicts) if verdicts is not None and verdicts.joined is not None else set()


JOINED_TITLE = (
    "joined the study after its design was fixed: tested against the reference in a family of its own over the "
    "design's looks (its own Holm), apart from the study's encodings"
)

# the top of the leaderboard the page opens on (issue 64: a reader's first screen shows the first rows of a ranked
# table, as the peer boards do): a page of one domain its best 5 rows; of several, each domain's best 3 (a phone
# shows the first domain's 3, the leaderboard's first rows, and each other's best, so that its first screen still
# reaches the answer)
TOP_ROWS_ONE_DOMAIN = 5
TOP_ROWS_FIRST_DOMAIN = 3
TOP_ROWS_OTHER_DOMAIN = 3
# a phone's first screen holds the groups of this many domains: past them, the answer would start below it
PHONE_TOP_DOMAINS = 3


def short_word(word: str) -> str:
    """A verdict cell's word without its look or family (`better (look 2), joined family` -> `better`): the top of
    the leaderboard's, whose full label is on hover and the encoding's family beside its name."""
    return re.split(r" \(|, ", word, maxsplit=1)[0]


def top_of_leaderboard(study: Study, rows: list[dict], summary: dict) -> list[dict]:
    """Per domain, its first leaderboard rows (best first, as the leaderboard lists them) with what a reader needs
    to read their Δ: the reference, the metric (its short name) and which way is better, and how many rows the
    full table has. On a page of several domains the rows past each other domain's first are marked `more`, and the
    domains past the first PHONE_TOP_DOMAINS `phone_hidden`: a phone's first screen leaves them out (the
    stylesheet), the answer below lists every domain."""
    short = {result.domain: result.metric.short for result in study.results}
    groups: dict[str, dict] = {}
    for row in rows:
        domain = summary["domains"][row["domain"]]
        if row["domain"] not in groups:
            shown = (
                TOP_ROWS_ONE_DOMAIN
                if len(summary["domains"]) == 1
                else TOP_ROWS_FIRST_DOMAIN
                if not groups
                else TOP_ROWS_OTHER_DOMAIN
            )
            groups[row["domain"]] = {
                "domain": row["domain"],
                "ref": domain["reference"] or "",
                "metric": short.get(row["domain"], domain["metric"]),
                "way": "lower is better" if domain["lower_is_better"] else "higher is better",
                "shown": shown,
                "first": not groups,
                "phone_hidden": len(groups) >= PHONE_TOP_DOMAINS,
                "count": 0,
                "rows": [],
            }
        group = groups[row["domain"]]
        group["count"] += 1
        if len(group["rows"]) < group["shown"]:
            group["rows"].append({**row, "word": short_word(row["cells"]["verdict"].text)})
    return list(groups.values())


def _decision_text(record: dict, digits: int) -> str:
    """The decision interval, the one the verdict rests on, with its level: "[lo, hi] 99.9%"."""
    text = interval_text(record.get("decision_lo"), record.get("decision_hi"), digits, signed=True)
    level = record.get("decision_level")
    return f"{text} {level_text(level)}" if text and isinstance(level, float) else text


def _t_interval_title(record: dict, digits: int) -> str:
    t = interval_text(record["delta_lo"], record["delta_hi"], digits, signed=True)
    return (
        "the decision interval: the verdict's own (the look's alpha at the Holm level of its rank; for an "
        f"equivalent pair TOST's (1 - 2 alpha) interval); the plain 95% t-interval over seeds is {t}"
        if t
        else ""
    )


# the verdict column sorts from what is best for the encoding to what is worst, not alphabetically
VERDICT_ORDER = {"better": 0, "reference": 1, "equivalent": 2, "inconclusive": 3, "open": 3, "stopped": 4, "worse": 5}
SORTS_BETTER_FIRST = "; sorting puts the better first, in each domain's own direction, within each domain"


def better_first(value, higher_is_better: bool):
    """The sort key that puts the better value first when ascending (a score or Δ of a higher-is-better metric
    negated); None for a missing value."""
    if not _is_number(value):
        return None
    return -value if higher_is_better else value


def direction(study: Study) -> str:
    """`← better` (every domain's metric lower-is-better), `better →` (every one higher), or the sort's promise."""
    higher = {result.metric.higher_is_better for result in study.results}
    if len(higher) != 1:
        return "(sorts better first)"
    return "(better →)" if higher.pop() else "(← better)"


def leaderboard_columns(study: Study) -> list[tuple[str, str, str]]:
    """The leaderboard's (key, header, title): the score and Δ headers say which way is better; a one-domain
    study has no domain column (a constant column pushed the verdict and Δ off a phone's screen)."""
    way = direction(study)
    return [
        (key, f"{name} {way}" if key in ("score", "delta") else name, title + (SORTS_BETTER_FIRST if key in (
            "score", "delta") else ""))
        for key, name, title in LEADERBOARD_COLUMNS
        if key != "domain" or len(study.results) > 1
    ]  # fmt: skip


# the answer's columns first (the verdict and its Δ, what a phone's first screen holds), the descriptive score after
LEADERBOARD_COLUMNS = [
    ("domain", "domain", ""),
    ("encoding", "encoding", ""),
    (
        "verdict",
        "verdict",
        "the seed-aware verdict against the domain's reference (summary.md's words); sorts from better to worse",
    ),
    (
        "delta",
        "Δ vs ref [decision interval, its level]",
        "mean per-seed difference on the seeds both finished, with the interval the verdict rests on at the level "
        "printed beside it: each row's own (its Holm rank's, or TOST's 90%), so widths compare only between rows of "
        "one level; the plain 95% t-interval, one level for every row, on hover",
    ),
    (
        "score",
        "score [95% within]",
        "the domain's metric over the encoding's own seeds, its within-example interval: the trained networks held "
        "fixed, the spread over test examples only, not over training seeds (the verdict's Δ carries that)",
    ),
    ("region", "equiv.", "the region of practical equivalence TOST tests (±)"),
    (
        "p_holm",
        "p (Holm) [its test's df]",
        "the difference test's p, Holm-adjusted within the verdict's family; beneath, the test's degrees of freedom: "
        "`moderated` where the pair's seed variance borrows the family's (see the glossary), else the pair's own",
    ),
    ("p_tost", "p TOST", "two one-sided tests of |Δ| ≥ the region"),
    (
        "p_better",
        "P(better) [95%]",
        "share of paired seeds where the encoding beats the reference, its 95% interval (Clopper-Pearson)",
    ),
    ("seeds", "seeds", "the encoding's own finished seeds (k/expected when fewer)"),
    ("rank", "rank", "within the domain by the matched rule (Δ to the reference on matched seeds)"),
]


# summary.json's null spread: no domain of fewer than 2 seeds is resampled (pipelines.analysis.study)
NOT_RESAMPLED = "—"
NOT_RESAMPLED_WHY = "not resampled where a domain holds fewer than 2 seeds"


def mean_rank_rows(summary: dict) -> list[dict]:
    """The mean rank's rows, best first; an encoding ranked in some domain by a bridged Δ says where, beside its name
    (its P(rank 1) rests in part on a Δ read across settings)."""
    bridged = bridged_encodings(summary)
    rows = []
    for encoding, record in summary["mean_rank"].items():
        lo, hi = record["ci_over_seeds"]
        where = ", ".join(f"{domain} from {study}" for domain, study in bridged.get(encoding, {}).items())
        rows.append(
            {
                "encoding": encoding,
                "cells": {
                    "encoding": Cell(
                        encoding,
                        encoding,
                        sub=f"(bridged: {where})" if where else "",
                        title=BRIDGED_TITLE if where else "",
                    ),
                    "mean_rank": Cell(number_text(record["mean"], 2), record["mean"]),
                    "se": Cell(number_text(record["se"], 2), record["se"]),
                    "range": Cell(interval_text(lo, hi, 2) or NOT_RESAMPLED, lo, lo, hi, title=NOT_RESAMPLED_WHY),
                    "p_rank_1": Cell(number_text(record["p_rank_1"], 2) or NOT_RESAMPLED, record["p_rank_1"]),
                    "domains": Cell(str(record["domains"]), record["domains"]),
                },
            }
        )
    return sorted(rows, key=lambda row: (row["cells"]["mean_rank"].value, row["encoding"]))


BRIDGED_TITLE = (
    "ranked in that domain by its Δ to the bridged study's own reference runs, at other settings, as if a Δ carried "
    "over: no run of it at the domain's own settings"
)

MEAN_RANK_COLUMNS = [
    ("encoding", "encoding", ""),
    ("mean_rank", "mean rank", "rank within each domain, mean over the domains (1 = best)"),
    ("se", "SE", "standard error across domains"),
    ("range", "2.5-97.5% over resampled seeds", "Bayesian bootstrap over each domain's seeds (descriptive)"),
    ("p_rank_1", "P(rank 1)", "share of resamples where the encoding's mean rank is the best"),
    ("domains", "domains", ""),
]
# a study of one domain: the rank is the domain's own, with no spread across domains to show
ONE_DOMAIN_RANK_COLUMNS = [
    ("encoding", "encoding", ""),
    ("mean_rank", "rank", "rank by the matched rule (1 = best), as in the leaderboard"),
    ("range", "2.5-97.5% over resampled seeds", "Bayesian bootstrap over the domain's seeds (descriptive)"),
    ("p_rank_1", "P(rank 1)", "share of resamples where the encoding ranks first"),
]


def looks_tables(study: Study, summary: dict) -> list[dict]:
    """Per domain with a make-settle design: each look's seeds (and those it added) and alpha, and per baseline its
    p (Holm) against that alpha, TOST p and word at each look; the look that decided it marked."""
    tables = []
    for result in study.results:
        domain = summary["domains"][result.domain]
        design = domain.get("verdict_design") or {}
        if design.get("fixed_sample") or not design or not domain.get("looks"):
            continue
        for family, looks in (("the design's family", domain["looks"]), ("joined", domain.get("joined_looks", []))):
            if not looks:
                continue
            seen: set[int] = set()
            columns = []
            for look in looks:
                added = [seed for seed in look["seeds"] if seed not in seen]
                seen |= set(look["seeds"])
                columns.append(
                    {
                        "look": look["look"],
                        "seeds": len(look["seeds"]),
                        "added": ", ".join(map(str, added)),
                        "alpha": look["alpha"],
                        "calls_for": ", ".join(look["calls_for"]),
                    }
                )
            baselines = list(dict.fromkeys(name for look in looks for name in look["pairs"]))
            rows = []
            for name in baselines:
                record = domain["encodings"].get(name, {})
                final = plain_label(result, name)[0] or record.get("verdict", "")
                # the look that decided the pair; none while it is open (its last look so far decided nothing)
                decided = None if final.startswith("open") else record.get("verdict_look")
                cells = []
                for look in looks:
                    pair = look["pairs"].get(name)
                    if pair is None:
                        earlier = isinstance(decided, int) and decided < look["look"]
                        cells.append({"absent": f"decided at look {decided}" if earlier else "not in this look"})
                        continue
                    word = STOPPED_WORDS if pair["verdict"] == "stopped" else pair["verdict"]
                    cells.append(
                        {
                            "p_holm": p_cell(pair["p_holm"]),
                            "p_holm_value": _attr(pair["p_holm"]),
                            "alpha": f"{look['alpha']:.4g}",
                            "p_tost": p_cell(pair["p_tost"]),
                            "df": df_text(pair.get("df"), pair.get("variance")),
                            "variance": str(pair.get("variance") or ""),
                            "seeds": pair["seeds"],
                            "word": word,
                            "verdict": pair["verdict"],
                            "decided": decided == look["look"],
                            "absent": "",
                        }
                    )
                rows.append({"encoding": name, "cells": cells, "final": final, "verdict": record.get("verdict", "")})
            tables.append(
                {"domain": result.domain, "family": family, "ref": domain["reference"], "looks": columns, "rows": rows}
            )
    return tables
