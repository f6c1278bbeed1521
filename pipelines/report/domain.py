"""A domain's report: summary.md, summary.csv and the figures in its output folder (results/<domain>/), written
all or nothing (pipelines.report.files.publish).

Per example (NLL domains): test NLL with each example averaged over the seeds every encoding finished, 95%
within-example intervals (the between-example interval beside them in the CSV), paired t-tests against the
reference with Holm correction; nll.png and nll_by_position.png. Per task (a domain with tasks): token accuracy (and
its chance-normalised value) per task and split, with the mean rank over the tasks; accuracy.png. Both:
extrapolation.png when a split was scored past the training context. Above its table each summary says in one line
what the numbers rest on: N, the seeds used, the reference, the interval and the test; seeds left out are stated
first.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from domains.atomic import write_text
from pipelines.analysis.results import Cell, DomainResult, TaskTable
from pipelines.analysis.stats import mean_rank, significance_stars
from pipelines.report.figures import plot_accuracy, plot_extrapolation, plot_nll, plot_nll_by_position
from pipelines.report.files import publish, write_csv
from pipelines.report.markdown import bold_if, fmt_mean_rank, markdown_table, missing_section
from pipelines.report.study_figures import plot_cd

EXTRAPOLATION_FIGURE = "extrapolation.png"
PER_EXAMPLE_FIGURES = ("nll.png", "nll_by_position.png")
EXAMPLES_CD_FIGURE = "cd_examples.png"  # per-example domains: Nemenyi critical difference over the test examples
PER_TASK_FIGURES = ("accuracy.png",)
SUMMARY_FILES = ("summary.md", "summary.csv")
DOMAIN_REPORT_FILES = (
    *SUMMARY_FILES,
    *PER_EXAMPLE_FIGURES,
    EXAMPLES_CD_FIGURE,
    *PER_TASK_FIGURES,
    EXTRAPOLATION_FIGURE,
)
TASK_CSV_HEADER = ["task", "encoding", "split", "accuracy", "chance_normalised", "nll", "seeds", "status"]


def write_domain_report(result: DomainResult, out_dir: Path) -> Path:
    """Write the domain's summary.md, summary.csv and figures into `out_dir`, all or nothing; return summary.md."""
    publish(out_dir, lambda folder: render_domain_report(result, folder), owned=DOMAIN_REPORT_FILES)
    return out_dir / "summary.md"


def render_domain_report(result: DomainResult, folder: Path) -> list[str]:
    """Write the domain's report files into `folder`; return their names."""
    if result.tasks is None:
        rows = per_example_rows(result)
        write_csv(folder / "summary.csv", list(rows[0]), [list(row.values()) for row in rows])
        write_text(folder / "summary.md", _per_example_markdown(result, rows))
        plot_nll(result, folder / PER_EXAMPLE_FIGURES[0])
        plot_nll_by_position(result.position_curves, folder / PER_EXAMPLE_FIGURES[1])
        figures = list(PER_EXAMPLE_FIGURES)
        if result.example_friedman is not None:
            friedman = result.example_friedman
            title = f"Nemenyi critical difference over the {friedman.n} test examples of {result.domain}"
            plot_cd(friedman, list(result.entries), title, folder / EXAMPLES_CD_FIGURE)
            figures.append(EXAMPLES_CD_FIGURE)
    else:
        write_csv(folder / "summary.csv", TASK_CSV_HEADER, _task_csv_rows(result.tasks))
        write_text(folder / "summary.md", _per_task_markdown(result))
        plot_accuracy(result.tasks, folder / PER_TASK_FIGURES[0])
        figures = list(PER_TASK_FIGURES)
    if plot_extrapolation(result.extrapolation, folder / EXTRAPOLATION_FIGURE):
        figures.append(EXTRAPOLATION_FIGURE)
    return [*SUMMARY_FILES, *figures]


INTERVAL_METHOD = "Cousineau's normalisation with Morey's correction"


def seeds_text(result: DomainResult) -> str:
    """`seeds 0, 1, 2`, or `seeds 0, 1 of 0, 1, 2` when some were left out."""
    seeds = result.seeds
    text = f"seed{'s' * (len(seeds.used) != 1)} {', '.join(map(str, seeds.used))}"
    return text if not seeds.left_out else f"{text} of {', '.join(map(str, seeds.expected))}"


def left_out_note(result: DomainResult) -> str | None:
    """The sentence stating which seeds were left out and why, or None when every seed is used."""
    left_out = result.seeds.left_out
    if not left_out:
        return None
    listed = ", ".join(map(str, left_out))
    return (
        f"**Incomplete evidence ({result.domain})**: only {seeds_text(result)} are compared; seed"
        f"{'s' * (len(left_out) != 1)} {listed} {'were' if len(left_out) != 1 else 'was'} not finished by every "
        "encoding (see Missing runs), and every encoding is compared on the same seeds."
    )


def evidence_line(result: DomainResult) -> str:
    """What a domain's numbers rest on, in one line: N, the seeds, the reference, the interval and the test."""
    if result.tasks is not None:
        return (
            f"N = {len(result.tasks.chance)} tasks ({len(result.entries)} encodings scored on all of them); "
            f"{seeds_text(result)}; no reference and no paired tests (accuracy per task); the domain's score (mean "
            f"chance-normalised accuracy over the tasks) carries a {result.interval} interval "
            f"({INTERVAL_METHOD})."
        )
    n = next(iter(result.entries.values())).n
    test = (
        f"paired two-sided t-tests against `{result.ref}`, Holm-corrected over {len(result.entries) - 1} baselines"
        if result.ref
        else "no paired tests"
    )
    reference = f"reference `{result.ref}`" if result.ref else "no reference"
    return (
        f"N = {n} test examples; {seeds_text(result)}; {reference}; {result.interval} intervals "
        f"({INTERVAL_METHOD}); {test}."
    )


def paired_tests_note(result: DomainResult) -> str:
    """What the paired tests of a domain compared per example are, or why there are none."""
    if result.ref is None:
        return result.no_tests_reason or ""
    ref = result.ref
    return (
        f"Paired two-sided t-tests against `{ref}` on d_i = NLL_i(b) - NLL_i({ref}) of the seed-averaged "
        f"examples, Holm-corrected over the baselines ({len(result.entries) - 1}) of the domain (SPEC 3); "
        f"`*`, `**`, `***`: `{ref}` significantly better at adjusted p < 0.05, 0.01, 0.001."
    )


# ------------------------------------------------------------------------------------------- per example


def per_example_rows(result: DomainResult) -> list[dict]:
    """One record per encoding, best rank first: everything the table and the CSV show."""
    rank = result.ranks()
    rows = []
    for name, entry in result.entries.items():
        test = entry.test
        seed_means = list(entry.seed_scores.values())
        rows.append(
            {
                "encoding": name,
                "rank": rank[name],
                "nll": entry.score,
                "within_lo": entry.ci_lo,
                "within_hi": entry.ci_hi,
                "between_lo": entry.between_lo,
                "between_hi": entry.between_hi,
                "seeds": len(seed_means),
                "seeds_expected": len(result.seeds.expected),
                "examples": entry.n,
                "seed_min": float(min(seed_means)),
                "seed_max": float(max(seed_means)),
                "ref": result.ref or "",
                "mean_diff": test.mean_diff if test else math.nan,
                "diff_lo": test.ci_lo if test else math.nan,
                "diff_hi": test.ci_hi if test else math.nan,
                "t": test.t if test else math.nan,
                "p": test.p if test else math.nan,
                "p_holm": test.p_holm if test else math.nan,
                "significant": test.significant if test else "",
                "ref_better": test.ref_better if test else "",
            }
        )
    return rows


def _fmt_rank(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:g}"


def _per_example_markdown_row(row: dict, best: float, ref: str | None) -> list[str]:
    seeds = str(row["seeds"]) if row["seeds"] == row["seeds_expected"] else f"{row['seeds']}/{row['seeds_expected']}"
    if ref is None:
        diff = p = ""
    elif row["encoding"] == ref:
        diff, p = "reference", ""
    else:
        star = f" {significance_stars(row['p_holm'])}" if row["ref_better"] else ""
        diff = f"{row['mean_diff']:+.4f} [{row['diff_lo']:+.4f}, {row['diff_hi']:+.4f}]{star}"
        p = f"{row['p_holm']:.3g}"
    return [
        _fmt_rank(row["rank"]),
        f"`{row['encoding']}`",
        bold_if(f"{row['nll']:.4f}", row["nll"] == best),
        f"[{row['within_lo']:.4f}, {row['within_hi']:.4f}]",
        seeds,
        str(row["examples"]),
        f"{row['seed_min']:.4f}..{row['seed_max']:.4f}",
        diff,
        p,
    ]


def _examples_friedman_lines(result: DomainResult) -> list[str]:
    """The Friedman test over the test examples and its figure, when it ran."""
    friedman = result.example_friedman
    if friedman is None:
        return []
    return [
        f"Friedman test over the {friedman.n} test examples (blocks) of the {friedman.k} encodings: chi2 = "
        f"{friedman.chi2:.1f}, p = {friedman.p:.3g}; Iman-Davenport F = {friedman.f:.2f}, p = {friedman.p_f:.3g}. "
        f"Nemenyi critical difference of mean ranks at alpha {friedman.alpha:g}: {friedman.cd:.3f} "
        f"(`{EXAMPLES_CD_FIGURE}`; encodings joined by a bar are not separated).",
        "",
    ]


def _per_example_markdown(result: DomainResult, rows: list[dict]) -> str:
    ref = result.ref
    best = min(row["nll"] for row in rows)
    header = ["rank", "encoding", "test NLL", f"{result.interval} CI", "seeds", "examples"]
    header += ["per-seed mean (min..max)", f"Δ vs {ref} [95% CI]" if ref else "Δ vs ref", "p (Holm)"]
    note = left_out_note(result)
    lines = [
        f"# {result.domain}: test NLL by encoding",
        "",
        *([note, ""] if note else []),
        "Test NLL in nats: each test example's mean NLL is averaged over the seeds, then over the examples. The "
        f"interval is the {result.interval} interval of SPEC 3 ({INTERVAL_METHOD}: each example's NLL minus "
        "its mean over the compared encodings, plus the grand mean), the one paper 000's Figure 3 draws; the "
        "ordinary t-interval between examples is in summary.csv (between_lo, between_hi). Rank 1 = lowest NLL; best "
        "NLL in bold. YaRN entries equal their rope run at the training length: they appear only on the splits "
        f"longer than the training context (`{EXTRAPOLATION_FIGURE}` when the domain has any).",
        "",
        paired_tests_note(result),
        "",
        evidence_line(result),
        "",
        *markdown_table(header, [_per_example_markdown_row(row, best, ref) for row in rows]),
        "",
        *_examples_friedman_lines(result),
        *missing_section(result.missing),
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- per task


def _fmt_cell(cell: Cell, best: bool) -> str:
    if cell.status != "ok":
        return cell.status
    normalised = "" if math.isnan(cell.chance_normalised) else f" ({cell.chance_normalised:.3f})"
    return bold_if(f"{cell.accuracy:.3f}{normalised}", best)


def _split_section(split: str, table: TaskTable) -> list[str]:
    """Task x encoding table of one split, closed by the mean rank over tasks."""
    cells = table.cells[split]
    encodings = list(next(iter(cells.values())))
    rows = []
    for task, row in cells.items():
        best = np.nanmax([cell.accuracy for cell in row.values()] + [-math.inf])
        formatted = [_fmt_cell(row[enc], row[enc].accuracy == best) for enc in encodings]
        chance = table.chance[task]
        rows.append([task, "" if math.isnan(chance) else f"{chance:.3g}", *formatted])

    rank = mean_rank(table.accuracy(split), lower_is_better=False)
    best_rank = np.nanmin([rank[enc][0] for enc in encodings] + [math.inf])
    rows.append(
        [
            "mean rank",
            "",
            *[bold_if(fmt_mean_rank(*rank[enc]), rank[enc][0] == best_rank) for enc in encodings],
        ]
    )
    skipped = defaultdict(list)
    for task, row in cells.items():
        for enc, cell in row.items():
            if cell.status == "n/a":
                skipped[enc, cell.note].append(task)
    notes = [f"- n/a for `{enc}` ({', '.join(tasks)}): {note}" for (enc, note), tasks in skipped.items()]
    header = ["task", "chance", *[f"`{enc}`" for enc in encodings]]
    return [f"## {split}", "", *markdown_table(header, rows), "", *notes, *([""] if notes else [])]


def _per_task_markdown(result: DomainResult) -> str:
    note = left_out_note(result)
    lines = [
        f"# {result.domain}: token accuracy by task and encoding",
        "",
        *([note, ""] if note else []),
        evidence_line(result),
        "",
        "Token accuracy on the output span, mean over seeds; in parentheses the chance-normalised accuracy "
        "`(acc - chance) / (1 - chance)` (SPEC 2). Best per task in bold. `n/a`: the encoding cannot be "
        "evaluated on that split (reason below the table); `missing`: no finished run. Mean rank: rank by "
        "accuracy within each task (1 = best, ties averaged), mean over tasks ± its standard error across "
        f"tasks; n/a and missing cells are not ranked. YaRN entries (`+yarn`) appear on the longer splits only; "
        f"NLL by position past the training length: `{EXTRAPOLATION_FIGURE}`.",
        "",
    ]
    for split in result.tasks.cells:
        lines += _split_section(split, result.tasks)
    return "\n".join(lines + missing_section(result.missing))


def _task_csv_rows(table: TaskTable) -> list[list]:
    return [
        [task, enc, split, cell.accuracy, cell.chance_normalised, cell.nll, cell.seeds, cell.status]
        for split, cells in table.cells.items()
        for task, row in cells.items()
        for enc, cell in row.items()
    ]
