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
from pipelines.analysis.results import TEST_SPLIT, Cell, DomainResult, TaskTable
from pipelines.analysis.stats import mean_rank
from pipelines.report.answer import answer_text
from pipelines.report.figures import plot_accuracy, plot_extrapolation, plot_nll, plot_nll_by_position
from pipelines.report.files import publish, write_csv
from pipelines.report.looks import families_text, looks_section
from pipelines.report.markdown import bold_if, counted, fmt_mean_rank, markdown_table, missing_section
from pipelines.report.study_figures import plot_cd
from pipelines.report.verdicts import (
    PAIRS_HEADER,
    PAPER_COLUMN,
    VERDICT_FIELDS,
    pair_rows,
    pairs_section,
    paper_cell,
    task_verdict_section,
    variance_section,
    verdict_cells,
    verdict_header,
    verdict_note,
    verdict_record,
)

EXTRAPOLATION_FIGURE = "extrapolation.png"
PER_EXAMPLE_FIGURES = ("nll.png", "nll_by_position.png")
EXAMPLES_CD_FIGURE = "cd_examples.png"  # per-example domains: Nemenyi critical difference over the test examples
PER_TASK_FIGURES = ("accuracy.png",)
SUMMARY_FILES = ("summary.md", "summary.csv")
PAIRS_CSV = "pairs.csv"  # every pair of encodings (the secondary family)
DOMAIN_REPORT_FILES = (
    *SUMMARY_FILES,
    PAIRS_CSV,
    *PER_EXAMPLE_FIGURES,
    EXAMPLES_CD_FIGURE,
    *PER_TASK_FIGURES,
    EXTRAPOLATION_FIGURE,
)
TASK_CSV_HEADER = ["task", "encoding", "split", "accuracy", "chance_normalised", "nll", "seeds", "status"]
PAPER_FIELDS = ["paper_mean_diff", "paper_p", "paper_p_holm"]  # paper 000 C.2's per-example test (`all` rows)


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
        write_csv(folder / "summary.csv", [*TASK_CSV_HEADER, *VERDICT_FIELDS, *PAPER_FIELDS], _task_csv_rows(result))
        write_text(folder / "summary.md", _per_task_markdown(result))
        plot_accuracy(result.tasks, folder / PER_TASK_FIGURES[0])
        figures = list(PER_TASK_FIGURES)
    if result.verdicts is not None and result.verdicts.pairs:
        write_csv(folder / PAIRS_CSV, PAIRS_HEADER, pair_rows(result))
        figures.append(PAIRS_CSV)
    if plot_extrapolation(result.extrapolation, folder / EXTRAPOLATION_FIGURE):
        figures.append(EXTRAPOLATION_FIGURE)
    return [*SUMMARY_FILES, *figures]


INTERVAL_METHOD = "Cousineau's normalisation with Morey's correction"


def seeds_text(result: DomainResult) -> str:
    """`seeds 0, 1, 2` when every encoding finished the same seeds, else the number of seeds per encoding."""
    seeds = result.seeds
    if not seeds.uniform:
        counts = sorted({len(s) for s in seeds.per_encoding.values()})
        return f"{counts[0]}-{counts[-1]} seeds per encoding (each over the seeds it finished)"
    used = seeds.used
    text = f"seed{'s' * (len(used) != 1)} {', '.join(map(str, used))}"
    return text if not seeds.left_out else f"{text} of {', '.join(map(str, seeds.expected))}"


def _designed(result: DomainResult) -> bool:
    verdicts = result.verdicts
    return bool(verdicts and verdicts.family and verdicts.family.design.sequential)


def left_out_note(result: DomainResult) -> str | None:
    """The sentence stating which seeds not every encoding finished and how they are used, or None."""
    seeds = result.seeds
    if seeds.uniform and not seeds.left_out:
        return None
    counts = ", ".join(f"`{name}` {len(s)}" for name, s in seeds.per_encoding.items())
    how = "each encoding is scored over the seeds it finished and each pair is compared on the seeds both finished"
    if _designed(result):
        return f"**Seeds per encoding ({result.domain})** follow make settle's design ({counts}): {how}."
    listed = ", ".join(map(str, seeds.left_out))
    return (
        f"**Incomplete evidence ({result.domain})**: seed{'s' * (len(seeds.left_out) != 1)} {listed} "
        f"{'were' if len(seeds.left_out) != 1 else 'was'} not finished by every encoding (see Missing runs; seeds "
        f"finished: {counts}): {how}."
    )


def evidence_line(result: DomainResult) -> str:
    """What a domain's numbers rest on, in one line: the preset, N, the seeds, the reference, the interval, tests."""
    reference = f"reference `{result.ref}`" if result.ref else "no reference"
    test = families_text(result) if result.ref else "no paired tests"
    paper = "; paper 000 C.2's per-example tests beside them" if result.ref else ""
    if result.tasks is not None:
        return (
            f"Preset `{result.preset}`; N = {len(result.tasks.chance)} tasks ({len(result.entries)} encodings scored "
            f"on all of them); {seeds_text(result)}; {reference}; {test}{paper}; the domain's score (mean "
            f"chance-normalised accuracy over the tasks) carries a {result.interval} interval ({INTERVAL_METHOD})."
        )
    n = next(iter(result.entries.values())).n
    return (
        f"Preset `{result.preset}`; N = {n} test examples; {seeds_text(result)}; {reference}; {result.interval} "
        f"intervals ({INTERVAL_METHOD}); {test}{paper}."
    )


def commits_line(result: DomainResult) -> str:
    """The code commits the runs were trained at: differing ones are stated (what they change is held fixed)."""
    held = result.commits
    if len(held) <= 1:
        return f"Code: every run at commit `{next(iter(held), 'unknown')}`."
    listed = "; ".join(f"`{sha}` ({counted(len(labels), 'run')})" for sha, labels in sorted(held.items()))
    return (
        f"Code: the runs were trained at {len(held)} commits: {listed}. Everything that can change a result is "
        "the same for all of them (checked); a commit changes results only through those."
    )


def paired_tests_note(result: DomainResult) -> str:
    """What paper 000 C.2's per-example tests are (the table's last column), or why there are none."""
    if result.ref is None:
        return result.no_tests_reason or ""
    ref = result.ref
    tests = [entry.test for entry in result.entries.values() if entry.test is not None]
    if not tests:
        return ""
    if result.tasks is None:
        what = (
            f"d_i = NLL_i(b) - NLL_i({ref}) of the examples averaged over the seeds both finished (one shared seed "
            "is enough; each one's own seeds only where they share none)"
        )
    else:
        what = (
            f"d_i = acc_i(b) - acc_i({ref}) over the {tests[0].n} test instances of the "
            f"{len(result.tasks.chance)} tasks, each instance's chance-normalised token accuracy averaged over the "
            "seeds both finished (each one's own where they share none; the paper's test applied to the task "
            "instances; the paper reports none on its synthetic tasks)"
        )
    return (
        f"Last column, {PAPER_COLUMN}: paired two-sided t-tests against `{ref}` on {what}, Holm-corrected over the "
        f"baselines ({len(result.entries) - 1}). They hold the trained networks fixed (training randomness never "
        "enters them), so they say whether these networks differ on this test set, not whether the encoding will win "
        "again: never the verdict."
    )


# ------------------------------------------------------------------------------------------- per example


def per_example_rows(result: DomainResult) -> list[dict]:
    """One record per encoding, best rank first: everything the table and the CSV show (the seed-aware verdict
    against the reference, then paper 000 C.2's per-example test as `paper_*`)."""
    rank = result.ranks()
    rows = []
    for name, entry in result.entries.items():
        test, pair = entry.test, entry.verdict
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
                **verdict_record(pair),
                "paper_mean_diff": test.mean_diff if test else math.nan,
                "paper_diff_lo": test.ci_lo if test else math.nan,
                "paper_diff_hi": test.ci_hi if test else math.nan,
                "paper_t": test.t if test else math.nan,
                "paper_p": test.p if test else math.nan,
                "paper_p_holm": test.p_holm if test else math.nan,
            }
        )
    return rows


def _fmt_rank(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:g}"


def _per_example_markdown_row(row: dict, entry, result: DomainResult) -> list[str]:
    seeds = str(row["seeds"]) if row["seeds"] == row["seeds_expected"] else f"{row['seeds']}/{row['seeds_expected']}"
    digits, ref = result.metric.digits, result.ref
    if ref is None:
        verdict, paper = [""] * 6, ""
    elif row["encoding"] == ref:
        verdict, paper = verdict_cells(None, digits), ""
    else:
        verdict = verdict_cells(entry.verdict, digits, result.verdicts.family)
        paper = paper_cell(entry.test, digits)
    return [
        _fmt_rank(row["rank"]),
        f"`{row['encoding']}`",
        bold_if(f"{row['nll']:.4f}", row["encoding"] == result.best()),
        f"[{row['within_lo']:.4f}, {row['within_hi']:.4f}]",
        seeds,
        str(row["examples"]),
        f"{row['seed_min']:.4f}..{row['seed_max']:.4f}",
        *verdict,
        paper,
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
    header = ["rank", "encoding", "test NLL (own seeds)", f"{result.interval} CI", "seeds", "examples"]
    header += ["per-seed mean (min..max)", *verdict_header(result), f"{PAPER_COLUMN}: Δ, p"]
    note = left_out_note(result)
    lines = [
        f"# {result.domain}: test NLL by encoding",
        "",
        answer_text(result),
        "",
        *([note, ""] if note else []),
        "Test NLL in nats over the encoding's own finished seeds (each test example's mean NLL averaged over them, "
        "then over the examples; a descriptive figure: encodings with other seeds are not compared by it). The "
        f"interval is the {result.interval} interval of SPEC 3 ({INTERVAL_METHOD}: each example's NLL minus "
        "its mean over the compared encodings, plus the grand mean), the one paper 000's Figure 3 draws; the "
        "ordinary t-interval between examples is in summary.csv (between_lo, between_hi). Rank and bold follow the "
        f"matched rule: each encoding's Δ to `{result.ref}` on the seeds both finished (rank 1 = the lowest Δ; "
        "the reference's is 0), never means over different seeds. YaRN entries equal their rope run at the training "
        f"length: they appear only on the splits longer than the training context (`{EXTRAPOLATION_FIGURE}` when "
        "the domain has any).",
        "",
        verdict_note(result),
        "",
        paired_tests_note(result),
        "",
        evidence_line(result),
        "",
        commits_line(result),
        "",
        *markdown_table(
            header,
            [
                _per_example_markdown_row(row, entry, result)
                for row, entry in zip(rows, result.entries.values(), strict=True)
            ],
        ),
        "",
        *_examples_friedman_lines(result),
        *looks_section(result),
        *pairs_section(result),
        *variance_section(result),
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
        answer_text(result),
        "",
        *([note, ""] if note else []),
        evidence_line(result),
        "",
        commits_line(result),
        "",
        "Token accuracy on the output span, mean over seeds; in parentheses the chance-normalised accuracy "
        "`(acc - chance) / (1 - chance)` (SPEC 2). Best per task in bold. `n/a`: the encoding cannot be "
        "evaluated on that split (reason below the table); `missing`: no finished run. Mean rank: rank by "
        "accuracy within each task (1 = best, ties averaged), mean over tasks ± its standard error across "
        f"tasks; n/a and missing cells are not ranked. YaRN entries (`+yarn`) appear on the longer splits only; "
        f"NLL by position past the training length: `{EXTRAPOLATION_FIGURE}`.",
        "",
    ]
    lines += task_verdict_section(result)
    if result.entries:
        lines += [paired_tests_note(result), ""]
    for split in result.tasks.cells:
        lines += _split_section(split, result.tasks)
    lines += [*looks_section(result), *pairs_section(result), *variance_section(result)]
    return "\n".join(lines + missing_section(result.missing))


def _task_csv_rows(result: DomainResult) -> list[list]:
    """Every (task, encoding, split) cell, then one `all` row per scored encoding: its domain score (mean
    chance-normalised test accuracy over the tasks) and its seed-aware verdict against the reference."""
    empty = [""] * (len(VERDICT_FIELDS) + len(PAPER_FIELDS))
    rows = [
        [task, enc, split, cell.accuracy, cell.chance_normalised, cell.nll, cell.seeds, cell.status, *empty]
        for split, cells in result.tasks.cells.items()
        for task, row in cells.items()
        for enc, cell in row.items()
    ]
    for name, entry in result.entries.items():
        verdict = list(verdict_record(entry.verdict).values())
        test = entry.test
        paper = [test.mean_diff, test.p, test.p_holm] if test else ["", "", ""]
        rows.append(["all", name, TEST_SPLIT, "", entry.score, "", len(entry.seed_scores), "ok", *verdict, *paper])
    return rows
