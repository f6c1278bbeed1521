"""The cross-domain study (SPEC section 3): results/summary.{md,csv,json} and the study figures.

Runs pipelines.compare on every domain (writing results/<domain>/) and collects, across the domains: the
domain x encoding table with significance stars and the mean rank across domains (paper 000, Figure 3), a
Friedman test with the Nemenyi critical difference, each seed's own score with the seed spread, NLL past the
training length, and the paper's published values at the paper preset.

Writes into the output folder: summary.md, summary.csv, summary.json (strict JSON: NaN becomes null),
figure3.png, nll_by_position.png (LM domains), cd_domains.png and cd_synthetic_tasks.png (when the Friedman
test ran), extrapolation.csv (when a split past the training length was scored). A study file this
comparison does not produce is removed, so none from an earlier comparison is left beside the new report.

    python -m pipelines.compare [--domains all-present | DOMAIN ...] [--runs runs] [--out results] [--ref darope]

Every file is written atomically.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from domains.atomic import write_json, write_text
from pipelines.compare import (
    DEFAULT_REF,
    EXTRAPOLATION_FIGURE,
    DomainResult,
    Entry,
    compare_domain,
    plot_positions,
)
from pipelines.runs import (
    DOMAINS,
    SYNTHETIC,
    IncomparableRunsError,
    bold_if,
    discover_runs,
    encoding_colours,
    fmt_mean_rank,
    markdown_table,
    missing_runs,
    missing_section,
    present_domains,
    save_figure,
    write_csv,
)
from pipelines.stats import FriedmanResult, cd_groups, friedman, significance_stars, summarise_ranks

ALL_PRESENT = "all-present"
PAPER_PRESET = "paper"
# SPEC 3: the paper's published test NLL (mean of 3 seeds), per encoding id and domain.
PAPER_NLL = {
    "darope": {"jsb": 0.4547, "maestro": 1.4180, "hrg": 4.3153, "sleep_edf": 4.2235},
    "hope": {"jsb": 0.4567, "maestro": 1.4289, "hrg": 4.3164, "sleep_edf": 4.2255},
    "nope": {"jsb": 1.1634, "maestro": 1.5075, "hrg": 4.3494, "sleep_edf": 4.4320},
    "pope": {"hrg": 4.3127},
}
FIGURE3 = "figure3.png"
POSITIONS_FIGURE = "nll_by_position.png"
CD_FIGURES = {"domains": "cd_domains.png", "synthetic tasks": "cd_synthetic_tasks.png"}
EXTRAPOLATION_CSV = "extrapolation.csv"


# --------------------------------------------------------------------------------------------- study


@dataclass
class Study:
    """Everything summary.md, summary.csv and summary.json report."""

    runs_root: Path
    ref: str
    results: list[DomainResult]
    unfinished_domains: dict[str, list[str]]  # domain -> its missing-run lines (no finished run at all)
    order: list[str]  # encodings, best mean rank first
    mean_rank: dict[str, tuple[float, float]]
    ranked_in: dict[str, int]  # encoding -> number of domains where it was ranked
    nll_mean_rank: dict[str, tuple[float, float]] | None  # over the NLL domains only, when synthetic is present
    friedman: dict[str, BlockTest | str]  # "domains", "synthetic tasks" -> the test or why it was not run

    @property
    def domains(self) -> list[str]:
        return [result.domain for result in self.results]


@dataclass(frozen=True)
class BlockTest:
    """A Friedman test over named blocks (domains or tasks) and the encodings scored in every block."""

    result: FriedmanResult
    encodings: list[str]  # in the order of result.mean_ranks
    blocks: list[str]
    left_out: list[str]  # encodings missing from some block

    def by_rank(self) -> list[str]:
        return [self.encodings[i] for i in np.argsort(self.result.mean_ranks, kind="stable")]

    def not_separated(self) -> list[list[str]]:
        """The groups of encodings (best first) whose mean ranks lie within the critical difference."""
        ordered = self.by_rank()
        return [ordered[first : last + 1] for first, last in cd_groups(self.result.mean_ranks, self.result.cd)]


def _complete_matrix(table: dict[str, dict[str, float]]) -> tuple[np.ndarray, list[str], list[str]]:
    """(blocks x encodings score matrix, encodings scored in every block, encodings left out)."""
    everywhere = [
        enc
        for enc in dict.fromkeys(e for row in table.values() for e in row)
        if all(not math.isnan(row.get(enc, math.nan)) for row in table.values())
    ]
    left_out = sorted({e for row in table.values() for e in row} - set(everywhere))
    matrix = np.array([[row[enc] for enc in everywhere] for row in table.values()], dtype=float).reshape(
        len(table), len(everywhere)
    )
    return matrix, everywhere, left_out


def _friedman_over(table: dict[str, dict[str, float]], lower_is_better: list[bool], blocks: str) -> BlockTest | str:
    """The Friedman test over the blocks of `table` (block -> encoding -> score), or why it was not run.

    `lower_is_better` is per block, so domains of different metrics (NLL, accuracy) share one test: each
    block is ranked in its own direction, and ranks are all the Friedman test uses."""
    matrix, encodings, left_out = _complete_matrix(table)
    if len(table) < 2 or len(encodings) < 2:
        return (
            f"not run: needs at least 2 {blocks} and 2 encodings scored in every one; "
            f"here {len(table)} and {len(encodings)}"
        )
    oriented = np.where(np.array(lower_is_better)[:, None], matrix, -matrix)  # negate the higher-is-better blocks
    return BlockTest(friedman(oriented, lower_is_better=True), encodings, list(table), left_out)


def build_study(runs_root: Path, domains: list[str] | None, out: Path, ref: str | None) -> Study:
    """Run every domain's comparison (writing results/<domain>/) and collect the cross-domain statistics."""
    names = present_domains(runs_root) if domains is None else list(domains)
    if not names:
        raise FileNotFoundError(f"no run folders under {runs_root} for any domain of {', '.join(DOMAINS)}")
    results, unfinished = [], {}
    for domain in names:
        runs = discover_runs(runs_root, domain)
        if not any(run.finished for run in runs):
            unfinished[domain] = missing_runs(runs)
            continue
        results.append(compare_domain(domain, runs, Path(out) / domain, ref))
    if not results:
        raise FileNotFoundError(f"no finished run under {runs_root} for {', '.join(names)}")

    per_domain_ranks = [result.ranks() for result in results]
    # every trained encoding with a run folder anywhere gets a row, even without a single score
    seen = sorted({encoding for result in results for encoding in result.seen})
    rank = {encoding: (math.nan, math.nan) for encoding in seen} | summarise_ranks(per_domain_ranks)
    ranked_in = {enc: sum(not math.isnan(r.get(enc, math.nan)) for r in per_domain_ranks) for enc in rank}
    order = sorted(rank, key=lambda enc: (math.isnan(rank[enc][0]), rank[enc][0], enc))
    nll_results = [result for result in results if result.domain != SYNTHETIC]
    nll_mean_rank = None
    if nll_results and len(nll_results) < len(results):
        nll_mean_rank = summarise_ranks(result.ranks() for result in nll_results)

    tests = {
        "domains": _friedman_over(
            {result.domain: result.scores() for result in results},
            [result.lower_is_better for result in results],
            "domains",
        )
    }
    synthetic = next((result for result in results if result.domain == SYNTHETIC), None)
    if synthetic is not None:
        tasks = synthetic.task_accuracy
        tests["synthetic tasks"] = _friedman_over(tasks, [False] * len(tasks), "tasks")
    return Study(
        runs_root=Path(runs_root),
        ref=ref or DEFAULT_REF,
        results=results,
        unfinished_domains=unfinished,
        order=order,
        mean_rank=rank,
        ranked_in=ranked_in,
        nll_mean_rank=nll_mean_rank,
        friedman=tests,
    )


# ------------------------------------------------------------------------------------ study: markdown


def _study_cell(result: DomainResult, encoding: str, best: float) -> str:
    entry = result.entries.get(encoding)
    if entry is None:
        if encoding in result.incomplete:
            return f"incomplete ({result.incomplete[encoding]})"
        return "missing" if encoding in result.seen else "—"
    digits = 4 if result.lower_is_better else 3
    text = f"{entry.score:.{digits}f}"
    if not math.isnan(entry.ci_lo):
        text += f" ± {(entry.ci_hi - entry.ci_lo) / 2:.{digits}f}"
    text = bold_if(text, entry.score == best)
    test = entry.test
    if test is not None and test.significant:
        # stars: the reference is significantly better (paper 000's marker); daggers: this encoding is better
        mark = significance_stars(test.p_holm)
        text += " " + (mark if test.mean_diff > 0 else "†" * len(mark))
    return text


def _table_section(study: Study) -> list[str]:
    header = ["encoding"]
    for result in study.results:
        arrow = "↓" if result.lower_is_better else "↑"
        header.append(f"{result.domain} ({'NLL' if result.lower_is_better else 'norm. acc.'} {arrow})")
    header.append("mean rank")
    if study.nll_mean_rank is not None:
        header.append("mean rank (NLL domains)")
    best_rank = np.nanmin([study.mean_rank[e][0] for e in study.order] + [math.inf])
    refs = {result.ref for result in study.results if result.ref}
    rows = []
    for encoding in study.order:
        name = f"`{encoding}`" + (" (ref)" if encoding in refs else "")
        cells = []
        for result in study.results:
            scores = result.scores()
            best = (min if result.lower_is_better else max)(scores.values()) if scores else math.nan
            cells.append(_study_cell(result, encoding, best))
        mean, se = study.mean_rank[encoding]
        text = fmt_mean_rank(mean, se)
        if 0 < study.ranked_in[encoding] < len(study.results):
            text += f" ({study.ranked_in[encoding]} of {len(study.results)} domains)"
        cells.append(bold_if(text, mean == best_rank))
        if study.nll_mean_rank is not None:
            cells.append(fmt_mean_rank(*study.nll_mean_rank.get(encoding, (math.nan, math.nan))))
        rows.append([name, *cells])

    nll = [r.domain for r in study.results if r.domain != SYNTHETIC]
    lines = ["## Test results by domain and encoding"]
    if nll:
        lines += [
            "",
            f"{', '.join(nll)}: mean test NLL in nats (each test example averaged over its seeds, then over the "
            "examples) ± the half width of its 95% t-interval over the examples (SPEC 3). Paired two-sided t-tests "
            "against the reference on the seed-averaged examples, Holm-corrected over the baselines of each "
            "domain: `*` p < 0.05, `**` p < 0.01, `***` p < 0.001 when the reference has the lower NLL (paper "
            "000, Figure 3); `†`, `††`, `†††` at the same levels when the encoding beats the reference.",
        ]
    if any(r.domain == SYNTHETIC for r in study.results):
        lines += [
            "",
            "synthetic: token accuracy on each task's test split (seed-averaged), chance-normalised "
            "`(acc - chance) / (1 - chance)` and averaged over the tasks (paper 000, Figure 4) ± the half width "
            "of its 95% t-interval over the tasks; higher is better; no paired tests. It enters the mean rank as "
            "one domain, as each non-text domain does in paper 000's Figure 3 (ranking inside a task by "
            "accuracy or by chance-normalised accuracy is the same); the Friedman test over its tasks is below.",
        ]
    lines += [
        "",
        "Best per domain in bold. Mean rank: rank within each domain (1 = best, ties averaged), mean over the "
        "domains where the encoding has a score ± its standard error across domains"
        + (
            "; `mean rank (NLL domains)` leaves the synthetic domain out, as paper 000's Figure 3 does."
            if study.nll_mean_rank is not None
            else "."
        )
        + " `missing`: runs exist but none finished; `—`: not run in that domain; `incomplete`: not every "
        "synthetic task has a result.",
        "",
    ]
    notes = [f"- {r.domain}: {r.ref_note}" for r in study.results if r.domain != SYNTHETIC and r.ref is None]
    return [*lines, *markdown_table(header, rows), "", *notes, *([""] if notes else [])]


def _friedman_section(study: Study) -> list[str]:
    lines = [
        "## Friedman test and Nemenyi critical difference (beyond the paper)",
        "",
        "Friedman's test of equal mean ranks over blocks (the domains; the synthetic tasks), with the "
        "Iman-Davenport F form that Demšar (2006) recommends for few blocks; two encodings whose mean ranks "
        "differ by at least the Nemenyi critical difference CD = q_0.05 sqrt(k (k + 1) / (6 N)) differ at the "
        "0.05 level. Only encodings scored in every block take part, so these mean ranks can differ from the "
        "table's.",
        "",
    ]
    for name, outcome in study.friedman.items():
        if isinstance(outcome, str):
            lines += [f"**Across {name}**: {outcome}.", ""]
            continue
        result = outcome.result
        lines += [
            f"**Across {name}** (N = {result.n}: {', '.join(outcome.blocks)}; k = {result.k}): "
            f"chi2_F = {result.chi2:.3f} "
            f"(df {result.k - 1}), p = {result.p:.3g}; Iman-Davenport F = {result.f:.3f} "
            f"(df {result.k - 1}, {(result.k - 1) * (result.n - 1)}), p = {result.p_f:.3g}; "
            f"CD = {result.cd:.3f}. Figure: `{CD_FIGURES[name]}`.",
            "",
        ]
        mean_ranks = dict(zip(outcome.encodings, result.mean_ranks, strict=True))
        lines += markdown_table(
            ["encoding", "mean rank"], [[f"`{enc}`", f"{mean_ranks[enc]:.2f}"] for enc in outcome.by_rank()]
        )
        groups = ["{" + ", ".join(f"`{enc}`" for enc in group) + "}" for group in outcome.not_separated()]
        lines += ["", f"Not separated by the Nemenyi test: {'; '.join(groups) or 'none'}."]
        if outcome.left_out:
            lines.append(f"Left out (not scored in every block): {', '.join(f'`{e}`' for e in outcome.left_out)}.")
        lines.append("")
    return lines


def _seed_section(study: Study) -> list[str]:
    lines = [
        "## Per-seed spread",
        "",
        "Each seed's own score (LM domains: its mean test NLL; synthetic: its mean chance-normalised accuracy over "
        "the tasks), their standard deviation over seeds, and the gap of the seed-averaged score to the "
        "reference (score minus the reference's: worse when positive for NLL, better for accuracy). ⚠ marks a "
        "gap smaller than the larger seed standard deviation of the two encodings: a new draw of seeds could "
        "reverse the order, which the paired test (it treats the seed-averaged examples as fixed) cannot see; "
        "more seeds are needed to separate them.",
        "",
    ]
    for result in study.results:
        ref = result.entries.get(study.ref)
        seeds = sorted({s for entry in result.entries.values() for s in entry.seed_scores})
        digits = 4 if result.lower_is_better else 3
        header = ["encoding", *[f"seed {s}" for s in seeds], "seed SD"]
        if ref is not None:
            header += [f"gap to {study.ref}", ""]
        rows = []
        for encoding in [e for e in study.order if e in result.entries]:
            entry = result.entries[encoding]
            row = [
                f"`{encoding}`",
                *[f"{entry.seed_scores[s]:.{digits}f}" if s in entry.seed_scores else "" for s in seeds],
            ]
            row.append("" if math.isnan(entry.seed_sd) else f"{entry.seed_sd:.{digits}f}")
            if ref is not None:
                gap = "reference" if encoding == study.ref else f"{entry.score - ref.score:+.{digits}f}"
                row += [gap, "" if encoding == study.ref else _spread_flag(entry, ref)]
            rows.append(row)
        note = [] if ref is not None else [f"`{study.ref}` has no score here: no gaps to judge.", ""]
        lines += [f"### {result.domain}", "", *note, *markdown_table(header, rows), ""]
    return lines


def _spread_flag(entry: Entry, ref: Entry) -> str:
    """A warning when the gap to the reference is within the seed spread, or cannot be judged (one seed)."""
    spread = max(entry.seed_sd, ref.seed_sd)
    if math.isnan(spread):
        return "⚠ one seed: spread unknown"
    return "⚠ within seed spread" if abs(entry.score - ref.score) < spread else ""


def _extrapolation_rows(study: Study) -> list[dict]:
    rows = []
    for result in study.results:
        for curve in result.extrapolation:
            rows.append(
                {
                    "domain": result.domain,
                    "group": curve.group,
                    "split": curve.split,
                    "context": curve.context,
                    "length": curve.length,
                    "encoding": curve.encoding,
                    "status": curve.status,
                    "seeds": curve.seeds,
                    "nll_within": curve.mean_nll(past=False) if curve.status == "ok" else math.nan,
                    "nll_past": curve.mean_nll(past=True) if curve.status == "ok" else math.nan,
                    "note": curve.note,
                }
            )
    return rows


def _extrapolation_section(study: Study) -> list[str]:
    rows = _extrapolation_rows(study)
    lines = ["## Extrapolation past the training length", ""]
    if not rows:
        return [*lines, "No split longer than the training context was evaluated.", ""]
    encodings = list(dict.fromkeys(row["encoding"] for row in rows))
    cells = defaultdict(dict)
    for row in rows:
        cells[row["domain"], row["group"], row["split"], row["context"], row["length"]][row["encoding"]] = row
    table = []
    for (domain, group, split, context, length), by_encoding in cells.items():
        values = [r["nll_past"] for r in by_encoding.values() if r["status"] == "ok"]
        best = np.nanmin(values) if values and not np.all(np.isnan(values)) else math.nan
        row = [domain if domain == group else f"{domain}/{group}", split, f"{context} → {length}"]
        for encoding in encodings:
            cell = by_encoding.get(encoding)
            if cell is None:
                row.append("—")
            elif cell["status"] != "ok":
                row.append(cell["status"])
            else:
                row.append(bold_if(f"{cell['nll_past']:.4f}", cell["nll_past"] == best))
        table.append(row)
    notes = sorted({(row["encoding"], row["note"]) for row in rows if row["status"] == "n/a"})
    figures = ", ".join(f"`{r.domain}/{EXTRAPOLATION_FIGURE}`" for r in study.results if r.extrapolation)
    return [
        *lines,
        "Mean NLL (nats, token-weighted, seeds pooled) over the positions at or past the training context L on "
        "every split scored at a longer window; best per row in bold. `+yarn`: the rope run evaluated with YaRN "
        f"at s = window / L (SPEC 1). Per-position curves: {figures}; all values in `extrapolation.csv`.",
        "",
        *markdown_table(["domain", "split", "L → window", *[f"`{e}`" for e in encodings]], table),
        "",
        *[f"- n/a for `{encoding}`: {note}" for encoding, note in notes],
        *([""] if notes else []),
    ]


def _paper_section(study: Study) -> list[str]:
    nll = [result for result in study.results if result.domain != SYNTHETIC]
    if not nll:
        return []
    lines = ["## Paper 000's published values", ""]
    at_paper = [result for result in nll if result.preset == PAPER_PRESET]
    other = [result for result in nll if result.preset != PAPER_PRESET]
    if at_paper:
        rows = []
        for result in at_paper:
            for encoding, values in PAPER_NLL.items():
                if result.domain not in values:
                    continue
                paper = values[result.domain]
                entry = result.entries.get(encoding)
                ours = "missing" if entry is None else f"{entry.score:.4f}"
                diff = "" if entry is None else f"{entry.score - paper:+.4f}"
                rows.append([result.domain, f"`{encoding}`", ours, f"{paper:.4f}", diff])
        lines += [
            "Test NLL published in paper 000 (SPEC 3; mean of 3 seeds) beside ours, for the domains trained at the "
            "`paper` preset.",
            "",
            *markdown_table(["domain", "encoding", "ours", "paper", "ours - paper"], rows),
            "",
        ]
    for result in other:
        lines.append(
            f"- {result.domain}: preset `{result.preset}`. The paper's published values (SPEC 3) come from the "
            "paper-scale models and budgets and are not comparable; omitted."
        )
    return lines + ([""] if other else [])


def _study_markdown(study: Study, figures: list[str]) -> str:
    missing = [line for result in study.results for line in result.missing]
    missing += [line for lines in study.unfinished_domains.values() for line in lines]
    unfinished = [f"- {domain}: no finished run yet" for domain in study.unfinished_domains]
    lines = [
        "# posbench comparison study",
        "",
        f"Runs: `{study.runs_root}`; domains: {', '.join(study.domains)}; reference: `{study.ref}`; "
        f"per-domain reports: {', '.join(f'`{d}/summary.md`' for d in study.domains)}; figures: "
        f"{', '.join(f'`{name}`' for name in figures)}.",
        "",
        *unfinished,
        *([""] if unfinished else []),
        *_table_section(study),
        *_paper_section(study),
        *_friedman_section(study),
        *_seed_section(study),
        *_extrapolation_section(study),
        *missing_section(missing),
    ]
    return "\n".join(lines)


# -------------------------------------------------------------------------------- study: csv and json

STUDY_CSV_HEADER = [
    "domain",
    "encoding",
    "metric",
    "score",
    "ci_lo",
    "ci_hi",
    "se",
    "n",
    "rank",
    "seeds",
    "seed_sd",
    "ref",
    "mean_diff",
    "p",
    "p_holm",
    "stars",
    "within_seed_spread",
    "paper",
]


def _jsonable(value):
    """NaN and infinities become null: JSON has no NaN."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _entry_record(result: DomainResult, entry: Entry, rank: float, ref: Entry | None, study_ref: str) -> dict:
    test = entry.test
    within = ""
    if ref is not None and entry.encoding != study_ref:
        within = bool(_spread_flag(entry, ref))
    paper = (
        PAPER_NLL.get(entry.encoding, {}).get(result.domain, math.nan) if result.preset == PAPER_PRESET else math.nan
    )
    return {
        "domain": result.domain,
        "encoding": entry.encoding,
        "metric": result.metric,
        "score": entry.score,
        "ci_lo": entry.ci_lo,
        "ci_hi": entry.ci_hi,
        "se": math.nan,
        "n": entry.n,
        "rank": rank,
        "seeds": {str(s): v for s, v in entry.seed_scores.items()},
        "seed_sd": entry.seed_sd,
        "ref": result.ref or "",
        "mean_diff": test.mean_diff if test else math.nan,
        "p": test.p if test else math.nan,
        "p_holm": test.p_holm if test else math.nan,
        "stars": significance_stars(test.p_holm) if test and test.significant and test.mean_diff > 0 else "",
        "within_seed_spread": within,
        "paper": paper,
    }


def _study_records(study: Study) -> list[dict]:
    records = []
    for result in study.results:
        rank = result.ranks()
        ref = result.entries.get(study.ref)
        for encoding in [e for e in study.order if e in result.entries]:
            records.append(_entry_record(result, result.entries[encoding], rank[encoding], ref, study.ref))
    for encoding in study.order:
        mean, se = study.mean_rank[encoding]
        records.append(
            {
                **dict.fromkeys(STUDY_CSV_HEADER, ""),
                "domain": "all",
                "encoding": encoding,
                "metric": "mean rank",
                "score": mean,
                "se": se,
                "n": study.ranked_in[encoding],
            }
        )
    return records


def _csv_row(record: dict) -> list:
    """A study record as a CSV row; the per-seed scores become `seed:score` pairs joined by `;`."""
    seeds = record["seeds"]
    return [
        ";".join(f"{seed}:{score!r}" for seed, score in seeds.items())
        if column == "seeds" and seeds
        else record[column]
        for column in STUDY_CSV_HEADER
    ]


def _friedman_json(outcome: BlockTest | str) -> dict:
    if isinstance(outcome, str):
        return {"not_run": outcome}
    result = outcome.result
    return {
        "blocks": outcome.blocks,
        "encodings": outcome.encodings,
        "mean_ranks": dict(zip(outcome.encodings, result.mean_ranks.tolist(), strict=True)),
        "chi2": result.chi2,
        "p": result.p,
        "iman_davenport_f": result.f,
        "p_f": result.p_f,
        "alpha": result.alpha,
        "cd": result.cd,
        "not_separated": outcome.not_separated(),
        "left_out": outcome.left_out,
    }


def _study_json(study: Study, records: list[dict]) -> dict:
    return {
        "runs": str(study.runs_root),
        "reference": study.ref,
        "domains": {
            result.domain: {
                "metric": result.metric,
                "lower_is_better": result.lower_is_better,
                "preset": result.preset,
                "reference": result.ref,
                "incomplete": result.incomplete,
                "encodings": {r["encoding"]: r for r in records if r["domain"] == result.domain},
            }
            for result in study.results
        },
        "mean_rank": {
            encoding: {"mean": mean, "se": se, "domains": study.ranked_in[encoding]}
            for encoding, (mean, se) in study.mean_rank.items()
        },
        "mean_rank_nll_domains": None
        if study.nll_mean_rank is None
        else {encoding: {"mean": mean, "se": se} for encoding, (mean, se) in study.nll_mean_rank.items()},
        "friedman": {name: _friedman_json(outcome) for name, outcome in study.friedman.items()},
        "extrapolation": _extrapolation_rows(study),
        "missing_runs": [line for result in study.results for line in result.missing]
        + [line for lines in study.unfinished_domains.values() for line in lines],
        "domains_without_finished_runs": list(study.unfinished_domains),
    }


# ------------------------------------------------------------------------------------- study: figures


def _plot_figure3(study: Study, path: Path) -> None:
    """Paper 000's Figure 3 layout: one bar group per domain with its 95% interval and significance marks
    against the reference, then the mean rank with its standard error across domains."""
    colours = encoding_colours(study.order)
    n = len(study.results)
    fig = Figure(figsize=((n + 1) * (1.5 + 0.4 * len(study.order)), 3.8), layout="constrained")
    axes = fig.subplots(1, n + 1, squeeze=False)[0]
    for ax, result in zip(axes[:-1], study.results, strict=True):
        ax.set_title(result.domain)
        names = [e for e in study.order if e in result.entries]
        if not names:
            ax.text(0.5, 0.5, "no encoding scored", ha="center", transform=ax.transAxes)
            continue
        entries = [result.entries[e] for e in names]
        means = np.array([e.score for e in entries])
        lo = np.array([e.ci_lo for e in entries])
        hi = np.array([e.ci_hi for e in entries])
        errors = np.nan_to_num(np.array([means - lo, hi - means]))
        ax.bar(range(len(names)), means, yerr=errors, capsize=3, color=[colours[e] for e in names])
        top = np.where(np.isnan(hi), means, hi)
        bottom = np.where(np.isnan(lo), means, lo)
        span = max(float(top.max() - bottom.min()), 1e-6)
        for i, entry in enumerate(entries):
            if entry.test is not None and entry.test.significant:
                mark = significance_stars(entry.test.p_holm)
                ax.text(
                    i,
                    top[i] + 0.02 * span,
                    mark if entry.test.mean_diff > 0 else "†" * len(mark),
                    ha="center",
                    fontsize=8,
                )
        ax.set_ylim(bottom.min() - 0.15 * span, top.max() + 0.2 * span)
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
        ax.set_ylabel("test NLL (nats)" if result.lower_is_better else "chance-normalised accuracy")
    ax = axes[-1]
    ranked = [e for e in study.order if study.ranked_in[e]]
    means = np.array([study.mean_rank[e][0] for e in ranked])
    errors = np.nan_to_num(np.array([study.mean_rank[e][1] for e in ranked]))
    ax.bar(range(len(ranked)), means, yerr=errors, capsize=3, color=[colours[e] for e in ranked])
    ax.set_xticks(range(len(ranked)), ranked, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("mean rank (1 = best)")
    ax.set_title("mean rank ± SE across domains")
    fig.suptitle(f"test results with 95% within-example intervals; * vs {study.ref} (Holm)", fontsize=9)
    save_figure(fig, path)


def _plot_positions_study(study: Study, path: Path) -> None:
    panels = [result for result in study.results if result.position_curves]
    fig = Figure(figsize=(5 * len(panels), 3.6), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    colours = encoding_colours(study.order)
    for ax, result in zip(axes, panels, strict=True):
        plot_positions(ax, result.position_curves, colours)
        ax.set_title(f"{result.domain}: test NLL by position")
        ax.legend(fontsize="x-small")
    save_figure(fig, path)


def _plot_cd(result: FriedmanResult, encodings: list[str], title: str, path: Path) -> None:
    """Demšar's critical-difference diagram: the rank axis, each encoding at its mean rank (better half
    labelled on the left), the CD as a bar, and thick lines joining encodings the Nemenyi test does not separate."""
    k = result.k
    order = np.argsort(result.mean_ranks, kind="stable")
    ranks_sorted = result.mean_ranks[order]
    groups = cd_groups(result.mean_ranks, result.cd)
    half = (k + 1) // 2
    depth = 0.4 + 0.25 * len(groups)
    fig = Figure(figsize=(7.5, 1.4 + 0.32 * half + 0.15 * len(groups)))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_axis_off()
    margin = 0.45 * (k - 1) + 0.6
    ax.set_xlim(1 - margin, k + margin)
    bottom = -depth - 0.35 * half - 0.3
    ax.set_ylim(bottom, 1.3)
    ax.plot([1, k], [0, 0], color="black", linewidth=1)
    for tick in range(1, k + 1):
        ax.plot([tick, tick], [0, 0.1], color="black", linewidth=1)
        ax.text(tick, 0.15, str(tick), ha="center", va="bottom", fontsize=8)
    ax.plot([1, 1 + result.cd], [0.85, 0.85], color="black", linewidth=1.5)
    for x in (1, 1 + result.cd):
        ax.plot([x, x], [0.78, 0.92], color="black", linewidth=1)
    ax.text(1 + result.cd / 2, 0.95, f"CD = {result.cd:.2f}", ha="center", va="bottom", fontsize=8)
    for j, (first, last) in enumerate(groups):
        y = -0.2 - 0.25 * j
        ax.plot([ranks_sorted[first] - 0.03, ranks_sorted[last] + 0.03], [y, y], color="black", linewidth=3)
    for i, index in enumerate(order):
        left = i < half
        level = i if left else k - 1 - i
        y = -depth - 0.35 * level
        x = ranks_sorted[i]
        edge = 1 - margin + 0.1 if left else k + margin - 0.1
        ax.plot([x, x, edge], [0, y, y], color="grey", linewidth=0.8)
        label = f"{encodings[index]} ({x:.2f})"
        ax.text(edge, y + 0.05, label, ha="left" if left else "right", va="bottom", fontsize=8)
    ax.set_title(title, fontsize=9)
    save_figure(fig, path)


# ---------------------------------------------------------------------------------------- study entry


def study(runs_root: Path, domains: list[str] | None, out: Path, ref: str | None = None) -> Path:
    """Compare every domain (results/<domain>/) and write the cross-domain study; return results/summary.md.

    `domains`: the domains to compare, None for every domain with run folders under `runs_root`.
    Raises FileNotFoundError when a named domain has no run folder or nothing has finished anywhere, and
    IncomparableRunsError (naming the runs) when the runs of a domain differ in data, budget, model or preset.
    A study file this comparison does not produce (no CD diagram without a Friedman test) is removed, so no
    figure from an earlier comparison is left beside the new report.
    """
    out = Path(out)
    built = build_study(runs_root, domains, out, ref)
    written = [FIGURE3]
    _plot_figure3(built, out / FIGURE3)
    if any(result.position_curves for result in built.results):
        _plot_positions_study(built, out / POSITIONS_FIGURE)
        written.append(POSITIONS_FIGURE)
    for name, outcome in built.friedman.items():
        if not isinstance(outcome, str):
            result = outcome.result
            title = f"Nemenyi critical difference across {name} (N = {result.n}, alpha {result.alpha:g})"
            _plot_cd(result, outcome.encodings, title, out / CD_FIGURES[name])
            written.append(CD_FIGURES[name])
    records = _study_records(built)
    write_csv(out / "summary.csv", STUDY_CSV_HEADER, [_csv_row(record) for record in records])
    extrapolation = _extrapolation_rows(built)
    if extrapolation:
        write_csv(out / EXTRAPOLATION_CSV, list(extrapolation[0]), [list(row.values()) for row in extrapolation])
        written.append(EXTRAPOLATION_CSV)
    for stale in {FIGURE3, POSITIONS_FIGURE, EXTRAPOLATION_CSV, *CD_FIGURES.values()} - set(written):
        (out / stale).unlink(missing_ok=True)
    write_json(out / "summary.json", _jsonable(_study_json(built, records)))
    summary = out / "summary.md"
    write_text(summary, _study_markdown(built, [name for name in written if name.endswith(".png")]))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.compare",
        description="Compare the runs of each domain and write the cross-domain study (SPEC section 3).",
    )
    parser.add_argument(
        "--domains",
        "--domain",
        nargs="+",
        default=[ALL_PRESENT],
        choices=[ALL_PRESENT, *DOMAINS],
        metavar="DOMAIN",
        help=f"domains to compare ({', '.join(DOMAINS)}) or {ALL_PRESENT} (default): every one with run folders",
    )
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="runs root (default: runs)")
    parser.add_argument("--out", type=Path, default=Path("results"), help="writes OUT/summary.* and OUT/<domain>/")
    parser.add_argument("--ref", default=None, help=f"reference of the paired tests (default {DEFAULT_REF})")
    args = parser.parse_args(argv)
    if ALL_PRESENT in args.domains and len(args.domains) > 1:
        parser.error(f"{ALL_PRESENT} cannot be combined with domain names")
    domains = None if args.domains == [ALL_PRESENT] else list(dict.fromkeys(args.domains))
    try:
        summary = study(args.runs, domains, args.out, args.ref)
    except (FileNotFoundError, IncomparableRunsError) as error:
        parser.exit(1, f"error: {error}\n")
    print(summary.read_text())
    print("figures:")
    for path in sorted(args.out.glob("*.png")) + sorted(args.out.glob("*/*.png")):
        print(f"  {path}")
    return 0
