"""The study page's detail tables (pipelines.report.html), the ones summary.md has beyond the leaderboard: each seed's
score, the extrapolation tests past the training length, a task domain's accuracy by task and length, and the
Friedman/Nemenyi tests. Each table is {"domain", "title", "summary" (the line a closed table shows), "note",
"columns": [(key, header, title)], "rows":
[{"domain", "encoding", "cells": {key: Cell}}]}, every number read from the summary.json object.
"""

from __future__ import annotations

import math

from pipelines.analysis.verdict import level_text
from pipelines.report.page_tables import (
    VERDICT_ORDER,
    Cell,
    better_first,
    group_label,
    interval_text,
    number_text,
    p_cell,
)
from pipelines.report.study_markdown import unranked_text
from pipelines.report.verdicts import agreeing_digits

ENCODING = ("encoding", "encoding", "")


def _row(domain: str, encoding: str, cells: dict[str, Cell]) -> dict:
    return {"domain": domain, "encoding": encoding, "cells": {"encoding": Cell(encoding, encoding), **cells}}


def _verdict_cell(word: str, verdict: str, title: str = "") -> Cell:
    return Cell(
        word, verdict, title=title, css=f"verdict {verdict}" if verdict else "", order=VERDICT_ORDER.get(verdict)
    )


def seed_tables(summary: dict) -> list[dict]:
    """Per domain: each encoding's score on each seed it finished, their SD over seeds, the matched Δ to the
    reference (the verdict's Δ) and the verdict word."""
    tables = []
    for name, domain in summary["domains"].items():
        records = domain["encodings"]
        seeds = sorted({int(seed) for record in records.values() for seed in (record.get("seeds") or {})})
        if not seeds:
            continue
        digits = 3 if not domain["lower_is_better"] else 4
        higher = not domain["lower_is_better"]
        ref = domain["reference"]
        rows = []
        for encoding, record in records.items():
            scores = record.get("seeds") or {}
            cells = {
                f"seed{seed}": Cell(
                    number_text(scores.get(str(seed)), digits),
                    scores.get(str(seed)),
                    order=better_first(scores.get(str(seed)), higher),
                )
                for seed in seeds
            }
            verdict = record["verdict"] or ("reference" if encoding == ref else "")
            cells |= {
                "sd": Cell(number_text(record.get("seed_sd"), digits), record.get("seed_sd")),
                "matched": Cell(
                    number_text(record.get("matched"), digits, signed=True),
                    record.get("matched"),
                    order=better_first(record.get("matched"), higher),
                ),
                "verdict": _verdict_cell(verdict, verdict),
            }
            rows.append(_row(name, encoding, cells))
        way = "(better →)" if higher else "(← better)"
        columns = [
            ENCODING,
            *[(f"seed{seed}", f"seed {seed}", f"the seed's own {domain['metric']}") for seed in seeds],
            ("sd", "seed SD", "standard deviation of the encoding's scores over its seeds"),
            ("matched", f"matched Δ {way}", f"mean per-seed difference to {ref} on the seeds both finished"),
            ("verdict", "verdict", "the seed-aware verdict against the reference"),
        ]
        note = (
            f"{domain['metric']} of each seed; a gap between two encodings' seed means is no evidence by itself: the "
            f"verdict tests the per-seed differences to {ref} on matched seeds."
        )
        summary_line = f"{len(rows)} encodings over seeds {', '.join(map(str, seeds))}"
        tables.append(
            {"domain": name, "title": name, "note": note, "columns": columns, "rows": rows, "summary": summary_line}
        )
    return tables


# the test's columns first (what a phone's first screen holds), the descriptive pooled NLL after
EXTRAPOLATION_COLUMNS = [
    ENCODING,
    ("verdict", "verdict", "better or worse: the Holm p below 0.05; equivalent: TOST"),
    (
        "delta",
        "Δ past L [the verdict's interval, its level] (← better)",
        "per-seed difference to the reference past L, with the t-interval its verdict rests on at the level printed "
        "beside it, each row's own (its Holm rank's: it excludes 0 exactly when the verdict is better or worse; "
        "TOST's for an equivalent pair), so widths compare only between rows of one level; the 95% t-interval, one "
        "level for every row, on hover",
    ),
    ("region", "equiv.", "the region of practical equivalence TOST tests past L (±, nats)"),
    ("p_holm", "p (Holm)", "the t-test, Holm-adjusted over the split's encodings at 0.05"),
    ("nll_past", "pooled NLL past L (← better)", "mean NLL at positions >= L, seeds pooled: descriptive"),
    ("seeds", "seeds", "seeds the encoding evaluated the split on"),
]


UNCORRECTED = "95%, before Holm"  # the label of a 95% interval shown where a row records no verdict's interval


def past_interval(entry: dict) -> tuple[object, object, str]:
    """(lo, hi, label) of the interval the page shows beside an extrapolation row's verdict: the verdict's own (its
    level, `past_decision_*`), which excludes 0 exactly when the word is better or worse; for a summary.json written
    before rows recorded it, the 95% t-interval labelled UNCORRECTED, never passed off as the verdict's."""
    lo, hi, level = entry.get("past_decision_lo"), entry.get("past_decision_hi"), entry.get("past_decision_level")
    if isinstance(lo, int | float) and isinstance(hi, int | float) and isinstance(level, float):
        return lo, hi, level_text(level)
    return entry.get("past_delta_lo"), entry.get("past_delta_hi"), UNCORRECTED


def _past_delta_cell(entry: dict, is_ref: bool) -> Cell:
    if is_ref:
        return Cell("", None)
    lo, hi, label = past_interval(entry)
    # the digits that keep each bound on its side of 0: -0.00003 printed -0.0000 beside `worse` would contradict it
    digits = agreeing_digits(tuple(v for v in (lo, hi) if isinstance(v, int | float)), 4, (0.0,))
    shown = interval_text(lo, hi, digits, signed=True)
    t = interval_text(entry.get("past_delta_lo"), entry.get("past_delta_hi"), 4, signed=True)
    return Cell(
        number_text(entry["past_delta"], 4, signed=True),
        entry["past_delta"],
        lo,
        hi,
        title=f"the 95% t-interval, before Holm: {t}" if t else "",
        sub=f"{shown} {label}" if shown else "",
    )


def _region_cell(region) -> Cell:
    """The equivalence region a row's TOST tested (±); nothing for a row without a test or a summary.json written
    before rows recorded it."""
    if not isinstance(region, int | float) or not math.isfinite(region):
        return Cell("", None)
    return Cell(f"±{region:g}", region)


def extrapolation_tables(summary: dict) -> list[dict]:
    """Per (domain, task, split) scored past the training length: each encoding's pooled NLL past L and its test
    against the reference there (Δ, 95% t-interval, Holm p, verdict), as summary.md's extrapolation section."""
    groups: dict[tuple, list[dict]] = {}
    for entry in summary["extrapolation"]:
        if entry.get("status") == "ok":
            groups.setdefault((entry["domain"], entry["group"], entry["split"]), []).append(entry)
    tables = []
    for (domain, group, split), entries in groups.items():
        first = entries[0]
        rows = []
        for entry in entries:
            is_ref = entry["encoding"] == entry["ref"]
            verdict = "reference" if is_ref else entry.get("past_verdict") or ""
            cells = {
                "seeds": Cell(str(entry["seeds"]), entry["seeds"]),
                "nll_past": Cell(number_text(entry["nll_past"], 4), entry["nll_past"]),
                "delta": _past_delta_cell(entry, is_ref),
                "region": _region_cell(entry.get("past_region")),
                "p_holm": Cell(p_cell(entry.get("past_p_holm")), entry.get("past_p_holm")),
                "verdict": _verdict_cell(verdict, verdict),
            }
            rows.append(_row(domain, entry["encoding"], cells))
        window = f"L {first['context']} → window {first['length']}; reference {first['ref']}"
        title = f"{group_label(domain, group)}, {split} ({window})"
        table = {"domain": domain, "title": title, "note": "", "columns": EXTRAPOLATION_COLUMNS, "rows": rows}
        tables.append({**table, "summary": _verdict_summary(entries)})
    return tables


TASK_NOTE = (
    "Token accuracy on the output span, mean over seeds; beneath, chance-normalised: (acc - chance) / (1 - chance)."
)


def _verdict_summary(entries: list[dict]) -> str:
    """The split's verdicts in words: those better and worse than the reference named, the rest counted."""
    words: dict[str, list[str]] = {}
    for entry in entries:
        if entry["encoding"] != entry["ref"]:
            words.setdefault(entry.get("past_verdict") or "not tested", []).append(entry["encoding"])
    named = [f"{word}: {', '.join(words.pop(word))}" for word in ("better", "worse") if word in words]
    counted = [
        f"{len(names)} {word}" for word, names in sorted(words.items(), key=lambda w: VERDICT_ORDER.get(w[0], 9))
    ]
    return "; ".join(named + counted)


def task_tables(summary: dict) -> list[dict]:
    """Per task domain and split: each encoding's token accuracy on every task (chance-normalised beneath) and its
    mean rank by accuracy over the tasks, as the domain's summary.md."""
    tables = []
    for name, domain in summary["domains"].items():
        tasks = domain.get("tasks")
        if not tasks:
            continue
        for split, encodings in tasks["splits"].items():
            task_names = list(next(iter(encodings.values()))["tasks"]) if encodings else []
            rows = []
            for encoding, record in encodings.items():
                cells = {}
                for task in task_names:
                    cell = record["tasks"][task]
                    ok = cell["status"] == "ok"
                    cells[task] = Cell(
                        number_text(cell["accuracy"], 3) if ok else cell["status"],
                        cell["accuracy"] if ok else None,
                        title=cell["note"],
                        sub=f"({number_text(cell['chance_normalised'], 3)})" if ok else "",
                        order=better_first(cell["accuracy"], True) if ok else None,
                    )
                rank, se = record["mean_rank"], record["mean_rank_se"]
                cells["mean_rank"] = Cell(
                    number_text(rank, 2), rank, sub=f"± {number_text(se, 2)}" if isinstance(se, float) else ""
                )
                rows.append(_row(name, encoding, cells))
            columns = [
                ENCODING,
                *[
                    (task, f"{task} (better →)", f"token accuracy; chance {tasks['chance'][task]:.3g}")
                    for task in task_names
                ],
                ("mean_rank", "mean rank (← better)", "rank by accuracy within each task, mean over tasks ± SE"),
            ]
            ranked = {e: r["mean_rank"] for e, r in encodings.items() if isinstance(r["mean_rank"], float)}
            best = min(ranked, key=lambda e: (ranked[e], e)) if ranked else None
            line = f"best by mean rank over the tasks: {best} ({ranked[best]:.2f})" if best else "no encoding ranked"
            table = {"domain": name, "title": f"{name}, {split}", "note": TASK_NOTE, "columns": columns, "rows": rows}
            tables.append({**table, "summary": line})
    return tables


def friedman_tables(summary: dict, across_domains: bool = True) -> list[dict]:
    """Per block family (the domains, unless not `across_domains`; a task domain's tasks): the Friedman and
    Iman-Davenport tests, the Nemenyi critical difference and each encoding's mean rank, with the groups the test
    does not separate."""
    tables = []
    for name, outcome in summary["friedman"].items():
        if name == "domains" and not across_domains:
            continue
        left_out = summary.get("domains_not_ranked") if name == "domains" else None  # absent from older studies
        unranked = f" {unranked_text(left_out).replace('`', '')}" if left_out else ""
        if "not_run" in outcome:
            why = outcome["not_run"]  # "not run: needs ...", as summary.md words it
            tables.append({"domain": "", "title": f"Across {name}", "note": f"{why[:1].upper()}{why[1:]}.{unranked}",
                            "columns": [], "rows": [], "summary": "not run"})  # fmt: skip
            continue
        k, blocks = len(outcome["encodings"]), outcome["blocks"]
        chi2, f, cd = (number_text(outcome[key], 3) or "n/a" for key in ("chi2", "iman_davenport_f", "cd"))
        p, p_f = (p_cell(outcome[key]) or "n/a" for key in ("p", "p_f"))
        note = (
            f"N = {len(blocks)} blocks ({', '.join(blocks)}), k = {k}: chi2_F = {chi2} (df {k - 1}), p = {p}; "
            f"Iman-Davenport F = {f} (df {k - 1}, {(k - 1) * (len(blocks) - 1)}), p = {p_f}; Nemenyi CD = "
            f"{cd} at {outcome['alpha']:g}. Not separated: "
            + "; ".join("{" + ", ".join(group) + "}" for group in outcome["not_separated"])
            + (
                f". Left out (not scored in every block): {', '.join(outcome['left_out'])}"
                if outcome["left_out"]
                else ""
            )
            + "."
        )
        note += unranked
        ranks = outcome["mean_ranks"]
        rows = [
            _row("", encoding, {"mean_rank": Cell(number_text(rank, 2), rank)})
            for encoding, rank in sorted(ranks.items(), key=lambda item: (item[1], item[0]))
        ]
        columns = [ENCODING, ("mean_rank", "mean rank (← better)", "Friedman's rank over the blocks (1 = best)")]
        line = f"over {len(blocks)} blocks: Friedman p = {p}, Iman-Davenport p = {p_f}, Nemenyi CD = {cd}"
        table = {"domain": "", "title": f"Across {name}", "note": note, "columns": columns, "rows": rows}
        tables.append({**table, "summary": line})
    return tables
