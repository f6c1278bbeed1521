"""Compare the trained runs of one domain (SPEC section 3): the report in results/<domain>/.

Reads the domain's run folders through pipelines.runs (discovery, missing runs, the comparability check,
per-position curves) and writes, atomically, into the domain's output folder:
- LM domains (jsb, maestro, hrg, sleep_edf): test NLL with each example averaged over seeds, 95% t-intervals
  over examples, paired t-tests against the reference with Holm correction over the baselines, in summary.md
  and summary.csv; nll.png and nll_by_position.png.
- synthetic: token accuracy (and its chance-normalised value) per task and split, with the mean rank over
  the tasks, in summary.md and summary.csv; accuracy.png.
- both: extrapolation.png, NLL by position on the splits scored past the training context (when there are any).

`compare(runs_root, domain, out_dir, ref)` writes one domain's report; `compare_domain` also returns the
DomainResult that the cross-domain study (pipelines.study) collects.

YaRN entries (`<pe_id>+yarn`) equal their rope run at the training length (scale 1), so they are kept out
of every in-distribution comparison (tables, tests, ranks) and appear on the longer splits only.

`python -m pipelines.compare` runs the cross-domain study: its command line is pipelines.study.main.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from domains.atomic import write_text
from pipelines.runs import (
    MAX_CURVE_BINS,
    SYNTHETIC,
    Curve,
    RunDir,
    binned_curve,
    bold_if,
    check_comparable,
    discover_runs,
    encoding_colours,
    finished_by,
    fmt_mean_rank,
    is_derived,
    is_evaluated,
    load_extrapolation,
    markdown_table,
    missing_runs,
    missing_section,
    pooled_positions,
    preset_of,
    read_csv,
    read_json,
    save_figure,
    split_entries,
    write_csv,
)
from pipelines.stats import (
    PairedResult,
    chance_normalised,
    mean_ci,
    mean_rank,
    paired_tests,
    ranks,
    seed_average,
    significance_stars,
)

TEST_SPLIT = "test"
SYNTHETIC_SPLITS = ("test", "test_2x", "test_8x")
# SPEC 3: "ref = `darope` by default, configurable".
DEFAULT_REF = "darope"
LM_FIGURES = ("nll.png", "nll_by_position.png")
SYNTHETIC_FIGURES = ("accuracy.png",)
EXTRAPOLATION_FIGURE = "extrapolation.png"


# ---------------------------------------------------------------------------------------- domain results


@dataclass(frozen=True)
class Entry:
    """One encoding's result in one domain of the study.

    `score` is the mean test NLL for an LM domain and the mean chance-normalised test accuracy over the
    tasks for the synthetic domain, with its 95% t-interval over the `n` examples (tasks). `seed_scores`
    is the same score from each seed alone. `test` is the paired test against the reference (LM domains).
    """

    encoding: str
    score: float
    ci_lo: float
    ci_hi: float
    n: int
    seed_scores: dict[int, float]
    test: PairedResult | None = None

    @property
    def seed_sd(self) -> float:
        values = np.array(list(self.seed_scores.values()))
        return float(values.std(ddof=1)) if values.size > 1 else math.nan


@dataclass
class DomainResult:
    """What the study needs from one domain; `report` is the domain's own summary.md."""

    domain: str
    metric: str
    lower_is_better: bool
    preset: str
    ref: str | None
    ref_note: str
    entries: dict[str, Entry]
    incomplete: dict[str, str]  # encoding -> why it has no score here
    seen: set[str]  # trained encodings with any run folder in the domain, finished or not
    missing: list[str]
    extrapolation: list[Curve]
    report: Path
    position_curves: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    task_accuracy: dict[str, dict[str, float]] = field(default_factory=dict)  # synthetic: task -> enc -> acc

    def scores(self) -> dict[str, float]:
        return {name: entry.score for name, entry in self.entries.items()}

    def ranks(self) -> dict[str, float]:
        return ranks(self.scores(), self.lower_is_better)


# ------------------------------------------------------------------------------------ extrapolation


def _plot_extrapolation(curves: list[Curve], path: Path) -> None:
    """One panel per (group, split): per-position NLL of every encoding, the training length marked.
    Without any such split there is no figure (and none left from an earlier comparison)."""
    panels = defaultdict(list)
    for curve in curves:
        if curve.status == "ok":
            panels[curve.group, curve.split].append(curve)
    if not panels:
        path.unlink(missing_ok=True)
        return
    columns = sorted({split for _, split in panels}, key=lambda s: next(c.length for c in curves if c.split == s))
    groups = sorted({group for group, _ in panels})
    fig = Figure(figsize=(4.5 * len(columns) + 2.0, 3.0 * len(groups)), layout="constrained")
    axes = fig.subplots(len(groups), len(columns), squeeze=False)
    colours = encoding_colours(sorted({c.encoding for c in curves}))
    for row, group in enumerate(groups):
        for column, split in enumerate(columns):
            ax = axes[row][column]
            panel = panels.get((group, split), [])
            for curve in panel:
                x, y = binned_curve(curve.positions, curve.nll_sum, curve.tokens)
                ax.plot(x, y, linewidth=1, color=colours[curve.encoding], label=curve.encoding)
            if panel:
                ax.axvline(panel[0].context, color="grey", linestyle="--", linewidth=0.8)
                ax.set_title(f"{group} {split} (L = {panel[0].context}, scored at {panel[0].length})", fontsize=8)
            ax.set_xlabel("position", fontsize=8)
            ax.set_ylabel("NLL (nats)", fontsize=8)
    handles, labels = [], []
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    fig.legend(handles, labels, loc="outside right center", fontsize="small")
    fig.suptitle("NLL by position past the training length (dashed: L); seeds pooled", fontsize=9)
    save_figure(fig, path)


# ---------------------------------------------------------------------------------------- LM domains


@dataclass(frozen=True)
class EncodingNLL:
    """Test-split NLL of one encoding of an LM domain, over its finished seeds."""

    encoding: str
    seeds: list[int]
    example_ids: np.ndarray  # ascending
    nll: np.ndarray  # per example, averaged over seeds (aligned on example_ids)
    seed_means: np.ndarray  # mean NLL over the examples, one per seed (in `seeds` order)
    positions: np.ndarray
    position_nll_sum: np.ndarray  # summed over seeds
    position_tokens: np.ndarray  # summed over seeds

    @property
    def mean(self) -> float:
        return float(self.nll.mean())


def load_encoding_nll(encoding: str, runs: list[RunDir]) -> EncodingNLL:
    """Read the per-example and per-position test metrics of the finished seeds of one encoding."""
    per_seed, ids = {}, {}
    for run in runs:
        examples = read_csv(run.path / "metrics" / f"{TEST_SPLIT}.per_example.csv")
        per_seed[run.seed] = examples["nll"]
        ids[run.seed] = examples["example"].astype(int)
    positions, nll_sum, tokens = pooled_positions(
        run.path / "metrics" / f"{TEST_SPLIT}.per_position.csv" for run in runs
    )
    return EncodingNLL(
        encoding=encoding,
        seeds=[run.seed for run in runs],
        example_ids=np.sort(ids[runs[0].seed]),
        nll=seed_average(per_seed, ids),
        seed_means=np.array([values.mean() for values in per_seed.values()]),
        positions=positions,
        position_nll_sum=nll_sum,
        position_tokens=tokens,
    )


def _check_same_examples(results: dict[str, EncodingNLL]) -> None:
    """Paired tests need every encoding scored on the same test examples."""
    first = next(iter(results.values()))
    for result in results.values():
        if not np.array_equal(result.example_ids, first.example_ids):
            raise ValueError(
                f"{result.encoding!r} and {first.encoding!r} were scored on different test examples "
                f"({result.example_ids.size} and {first.example_ids.size})"
            )


def _choose_ref(ref: str | None, encodings: Iterable[str]) -> tuple[str | None, str]:
    """(reference used for the paired tests or None, a sentence saying what was done)."""
    encodings = list(encodings)
    name = ref or DEFAULT_REF
    if name not in encodings:
        why = "given" if ref else "the default reference"
        return None, f"No paired tests: `{name}` ({why}) has no finished run here; choose one with `--ref`."
    if len(encodings) < 2:
        return None, "No paired tests: only one encoding has finished runs."
    return name, (
        f"Paired two-sided t-tests against `{name}` on d_i = NLL_i(b) - NLL_i({name}) of the seed-averaged "
        f"examples, Holm-corrected over the baselines ({len(encodings) - 1}) of the domain (SPEC 3); "
        f"`*`, `**`, `***`: `{name}` significantly better at adjusted p < 0.05, 0.01, 0.001."
    )


def _lm_rows(
    results: dict[str, EncodingNLL], rank: dict[str, float], tests: dict[str, PairedResult], ref: str | None
) -> list[dict]:
    """One record per encoding, best rank first: everything the table and the CSV show."""
    rows = []
    for name, result in results.items():
        mean, lo, hi = mean_ci(result.nll)
        test = tests.get(name)
        rows.append(
            {
                "encoding": name,
                "rank": rank[name],
                "nll": mean,
                "ci_lo": lo,
                "ci_hi": hi,
                "seeds": len(result.seeds),
                "examples": result.nll.size,
                "seed_min": float(result.seed_means.min()),
                "seed_max": float(result.seed_means.max()),
                "ref": ref or "",
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
    return sorted(rows, key=lambda row: (row["rank"], row["encoding"]))


def _fmt_rank(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:g}"


def _lm_markdown_row(row: dict, best: float, ref: str | None) -> list[str]:
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
        f"[{row['ci_lo']:.4f}, {row['ci_hi']:.4f}]",
        str(row["seeds"]),
        str(row["examples"]),
        f"{row['seed_min']:.4f}..{row['seed_max']:.4f}",
        diff,
        p,
    ]


def _lm_markdown(domain: str, rows: list[dict], ref: str | None, ref_note: str, missing: list[str]) -> str:
    best = min(row["nll"] for row in rows)
    header = ["rank", "encoding", "test NLL", "95% CI", "seeds", "examples", "per-seed mean (min..max)"]
    header += [f"Δ vs {ref} [95% CI]" if ref else "Δ vs ref", "p (Holm)"]
    lines = [
        f"# {domain}: test NLL by encoding",
        "",
        "Test NLL in nats: each test example's mean NLL is averaged over seeds, then over examples, with a "
        "95% t-interval over examples (SPEC 3). Rank 1 = lowest NLL; best NLL in bold. YaRN entries equal their "
        "rope run at the training length: they appear only on the splits longer than the training context "
        f"(`{EXTRAPOLATION_FIGURE}` when the domain has any).",
        "",
        ref_note,
        "",
        *markdown_table(header, [_lm_markdown_row(row, best, ref) for row in rows]),
        "",
        *missing_section(missing),
    ]
    return "\n".join(lines)


def _plot_nll(rows: list[dict], path: Path) -> None:
    fig = Figure(figsize=(max(4.0, 0.9 * len(rows) + 1.5), 3.5))
    ax = fig.add_subplot()
    means = np.array([row["nll"] for row in rows])
    errors = np.array([[row["nll"] - row["ci_lo"], row["ci_hi"] - row["nll"]] for row in rows]).T
    ax.bar(range(len(rows)), means, yerr=np.nan_to_num(errors), capsize=4, color="tab:blue")
    ax.set_xticks(range(len(rows)), [row["encoding"] for row in rows], rotation=30, ha="right")
    ax.set_ylabel("test NLL (nats)")
    low = float(np.nanmin([row["ci_lo"] for row in rows] + list(means)))
    ax.set_ylim(bottom=max(0.0, low - 0.1 * abs(low)))
    ax.set_title("mean test NLL with 95% interval")
    save_figure(fig, path)


def plot_positions(ax, curves: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], colours: dict) -> None:
    for encoding, (positions, nll_sum, tokens) in curves.items():
        x, y = binned_curve(positions, nll_sum, tokens)
        ax.plot(x, y, label=encoding, linewidth=1, color=colours[encoding])
    ax.set_xlabel("position")
    ax.set_ylabel("mean NLL (nats)")


def _plot_nll_by_position(curves: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], path: Path) -> None:
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    plot_positions(ax, curves, encoding_colours(list(curves)))
    ax.set_title(f"test NLL per position (seeds pooled, at most {MAX_CURVE_BINS} bins)")
    ax.legend(fontsize="small")
    save_figure(fig, path)


def _compare_lm(domain: str, runs: list[RunDir], out_dir: Path, ref: str | None) -> DomainResult:
    by_encoding = finished_by([run for run in runs if not run.derived], "encoding")
    if not by_encoding:
        raise FileNotFoundError(f"{domain}: no finished trained run (only evaluation-time variants)")
    results = {enc: load_encoding_nll(enc, enc_runs) for (enc,), enc_runs in sorted(by_encoding.items())}
    _check_same_examples(results)
    ref, ref_note = _choose_ref(ref, results)
    tests = {}
    if ref is not None:
        tests = {t.baseline: t for t in paired_tests({k: v.nll for k, v in results.items()}, ref)}
    rank = ranks({name: result.mean for name, result in results.items()})
    rows = _lm_rows(results, rank, tests, ref)
    missing = missing_runs(runs)
    curves = load_extrapolation(domain, runs)
    by_position = {r.encoding: (r.positions, r.position_nll_sum, r.position_tokens) for r in results.values()}

    write_csv(out_dir / "summary.csv", list(rows[0]), [list(row.values()) for row in rows])
    summary = out_dir / "summary.md"
    write_text(summary, _lm_markdown(domain, rows, ref, ref_note, missing))
    _plot_nll(rows, out_dir / LM_FIGURES[0])
    _plot_nll_by_position(by_position, out_dir / LM_FIGURES[1])
    _plot_extrapolation(curves, out_dir / EXTRAPOLATION_FIGURE)

    entries = {}
    for row in rows:
        result = results[row["encoding"]]
        seed_scores = dict(zip(result.seeds, map(float, result.seed_means), strict=True))
        test = tests.get(result.encoding)
        entries[result.encoding] = Entry(
            result.encoding, row["nll"], row["ci_lo"], row["ci_hi"], row["examples"], seed_scores, test
        )
    return DomainResult(
        domain=domain,
        metric="test NLL",
        lower_is_better=True,
        preset=preset_of(runs),
        ref=ref,
        ref_note=ref_note,
        entries=entries,
        incomplete={},
        seen={run.encoding for run in runs if not run.derived},
        missing=missing,
        extrapolation=curves,
        report=summary,
        position_curves=by_position,
    )


# ---------------------------------------------------------------------------------- synthetic domain


@dataclass(frozen=True)
class Cell:
    """One (task, encoding, split) of the synthetic domain, over the finished seeds.

    status: "ok"; "n/a" (the split was skipped, `note` says why: e.g. a learned absolute table cannot be
    evaluated past its length); "missing" (no finished run reports this split).
    """

    status: str
    accuracy: float = math.nan  # token accuracy, mean over the seeds that evaluated the split
    chance_normalised: float = math.nan
    nll: float = math.nan
    seeds: int = 0
    note: str = ""


def _task_chance(task: str, runs: list[RunDir]) -> float:
    """The task's chance level from the manifests (nan when none gives one); all runs must agree."""
    levels = {read_json(run.path / "manifest.json").get("chance") for run in runs}
    levels = {level for level in levels if level is not None}
    if len(levels) > 1:
        raise ValueError(f"task {task!r}: manifests disagree on the chance level: {sorted(levels)}")
    return levels.pop() if levels else math.nan


def _cell(runs: list[RunDir], split: str, chance: float) -> Cell:
    """Mean over seeds of one split's accuracy and NLL from metrics/summary.json."""
    entries = [split_entries(run).get(split) for run in runs]
    evaluated = [e for e in entries if is_evaluated(e)]
    if evaluated:
        accuracy = float(np.mean([e["accuracy"] for e in evaluated]))
        return Cell(
            status="ok",
            accuracy=accuracy,
            chance_normalised=chance_normalised(accuracy, chance),
            nll=float(np.mean([e["nll"] for e in evaluated])),
            seeds=len(evaluated),
        )
    reasons = sorted({e["skipped"] for e in entries if e is not None})
    return Cell(status="n/a", note="; ".join(reasons)) if reasons else Cell(status="missing")


def load_synthetic(runs: list[RunDir]) -> tuple[dict[str, float], dict[str, dict[str, dict[str, Cell]]]]:
    """(chance per task, cells[split][task][encoding]) for every task and encoding seen in the runs.

    YaRN entries are left out of the in-distribution split (at scale 1 they are their rope run)."""
    finished = finished_by(runs, "group", "encoding")
    tasks = sorted({r.group for r in runs})
    encodings = sorted({r.encoding for r in runs})
    chance = {
        task: _task_chance(task, [r for (t, _), rs in finished.items() if t == task for r in rs]) for task in tasks
    }
    cells = {
        split: {
            task: {
                enc: _cell(finished[task, enc], split, chance[task])
                if (task, enc) in finished
                else Cell(status="missing")
                for enc in encodings
                if split != TEST_SPLIT or not is_derived(enc)
            }
            for task in tasks
        }
        for split in SYNTHETIC_SPLITS
    }
    return chance, cells


def _fmt_cell(cell: Cell, best: bool) -> str:
    if cell.status != "ok":
        return cell.status
    normalised = "" if math.isnan(cell.chance_normalised) else f" ({cell.chance_normalised:.3f})"
    return bold_if(f"{cell.accuracy:.3f}{normalised}", best)


def _accuracy(table: dict[str, dict[str, Cell]]) -> dict[str, dict[str, float]]:
    return {task: {enc: cell.accuracy for enc, cell in row.items()} for task, row in table.items()}


def _split_section(split: str, table: dict[str, dict[str, Cell]], chance: dict[str, float]) -> list[str]:
    """Task x encoding table of one split, closed by the mean rank over tasks."""
    encodings = list(next(iter(table.values())))
    rows = []
    for task, row in table.items():
        best = np.nanmax([cell.accuracy for cell in row.values()] + [-math.inf])
        cells = [_fmt_cell(row[enc], row[enc].accuracy == best) for enc in encodings]
        rows.append([task, "" if math.isnan(chance[task]) else f"{chance[task]:.3g}", *cells])

    rank = mean_rank(_accuracy(table), lower_is_better=False)
    best_rank = np.nanmin([rank[enc][0] for enc in encodings] + [math.inf])
    rows.append(
        [
            "mean rank",
            "",
            *[bold_if(fmt_mean_rank(*rank[enc]), rank[enc][0] == best_rank) for enc in encodings],
        ]
    )
    skipped = defaultdict(list)
    for task, row in table.items():
        for enc, cell in row.items():
            if cell.status == "n/a":
                skipped[enc, cell.note].append(task)
    notes = [f"- n/a for `{enc}` ({', '.join(tasks)}): {note}" for (enc, note), tasks in skipped.items()]
    header = ["task", "chance", *[f"`{enc}`" for enc in encodings]]
    return [f"## {split}", "", *markdown_table(header, rows), "", *notes, *([""] if notes else [])]


def _synthetic_markdown(
    chance: dict[str, float], cells: dict[str, dict[str, dict[str, Cell]]], missing: list[str]
) -> str:
    lines = [
        "# synthetic: token accuracy by task and encoding",
        "",
        "Token accuracy on the output span, mean over seeds; in parentheses the chance-normalised accuracy "
        "`(acc - chance) / (1 - chance)` (SPEC 2). Best per task in bold. `n/a`: the encoding cannot be "
        "evaluated on that split (reason below the table); `missing`: no finished run. Mean rank: rank by "
        "accuracy within each task (1 = best, ties averaged), mean over tasks ± its standard error across "
        f"tasks; n/a and missing cells are not ranked. YaRN entries (`+yarn`) appear on the longer splits only; "
        f"NLL by position past the training length: `{EXTRAPOLATION_FIGURE}`.",
        "",
    ]
    for split, table in cells.items():
        lines += _split_section(split, table, chance)
    return "\n".join(lines + missing_section(missing))


def _synthetic_csv_rows(cells: dict[str, dict[str, dict[str, Cell]]]) -> list[list]:
    return [
        [task, enc, split, cell.accuracy, cell.chance_normalised, cell.nll, cell.seeds, cell.status]
        for split, table in cells.items()
        for task, row in table.items()
        for enc, cell in row.items()
    ]


def _plot_accuracy(cells: dict[str, dict[str, dict[str, Cell]]], path: Path) -> None:
    """One heatmap panel per split: tasks x encodings, chance-normalised accuracy, annotated."""
    splits = list(cells)
    tasks = list(cells[splits[0]])
    widest = max(len(cells[split][tasks[0]]) for split in splits)
    fig = Figure(figsize=(len(splits) * (1.2 + 0.9 * widest), 1.2 + 0.45 * len(tasks)))
    axes = fig.subplots(1, len(splits), squeeze=False)[0]
    cmap = colormaps["viridis"].with_extremes(bad="lightgrey")
    for ax, split in zip(axes, splits, strict=True):
        encodings = list(cells[split][tasks[0]])
        grid = np.array([[cells[split][t][e].chance_normalised for e in encodings] for t in tasks])
        image = ax.imshow(np.ma.masked_invalid(grid), vmin=0.0, vmax=1.0, cmap=cmap, aspect="auto")
        for i, task in enumerate(tasks):
            for j, enc in enumerate(encodings):
                cell = cells[split][task][enc]
                text = f"{cell.chance_normalised:.2f}" if cell.status == "ok" else cell.status
                dark = cell.status == "ok" and cell.chance_normalised < 0.5  # dark end of viridis
                ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
        ax.set_xticks(range(len(encodings)), encodings, rotation=40, ha="right", fontsize=8)
        ax.set_yticks(range(len(tasks)), tasks if ax is axes[0] else [""] * len(tasks), fontsize=8)
        ax.set_title(split)
    fig.colorbar(image, ax=list(axes), label="chance-normalised accuracy")
    save_figure(fig, path)


def _test_accuracy_by_seed(runs: list[RunDir]) -> dict[tuple[str, str], dict[int, float]]:
    """{(task, encoding): {seed: test token accuracy}} of the finished, trained (not derived) runs."""
    accuracy = defaultdict(dict)
    for (task, encoding), group_runs in finished_by(runs, "group", "encoding").items():
        if is_derived(encoding):
            continue
        for run in group_runs:
            entry = split_entries(run).get(TEST_SPLIT)
            if is_evaluated(entry):
                accuracy[task, encoding][run.seed] = float(entry["accuracy"])
    return dict(accuracy)


def _synthetic_entries(
    chance: dict[str, float], test_cells: dict[str, dict[str, Cell]], runs: list[RunDir]
) -> tuple[dict[str, Entry], dict[str, str]]:
    """The synthetic domain's study entries: mean chance-normalised test accuracy over all tasks (paper 000's
    Figure 4 aggregate), its t-interval over tasks and each seed's own score; encodings without a test result
    on every task are returned apart with the reason (they cannot be averaged over the same tasks)."""
    tasks = list(test_cells)
    unknown = [t for t in tasks if math.isnan(chance[t]) and any(c.status == "ok" for c in test_cells[t].values())]
    if unknown:
        raise ValueError(f"synthetic tasks without a chance level in their manifests: {', '.join(unknown)}")
    by_seed = _test_accuracy_by_seed(runs)
    entries, incomplete = {}, {}
    for encoding in dict.fromkeys(enc for row in test_cells.values() for enc in row):
        done = [task for task in tasks if test_cells[task][encoding].status == "ok"]
        if len(done) < len(tasks):
            incomplete[encoding] = f"test results on {len(done)} of {len(tasks)} tasks"
            continue
        per_task = np.array([test_cells[task][encoding].chance_normalised for task in tasks])
        mean, lo, hi = mean_ci(per_task)
        seeds = set.intersection(*(set(by_seed[task, encoding]) for task in tasks))
        seed_scores = {
            seed: float(np.mean([chance_normalised(by_seed[task, encoding][seed], chance[task]) for task in tasks]))
            for seed in sorted(seeds)
        }
        entries[encoding] = Entry(encoding, mean, lo, hi, len(tasks), seed_scores)
    return entries, incomplete


def _compare_synthetic(runs: list[RunDir], out_dir: Path) -> DomainResult:
    chance, cells = load_synthetic(runs)
    missing = missing_runs(runs)
    curves = [
        curve
        for task in sorted({r.group for r in runs})
        for curve in load_extrapolation(task, [r for r in runs if r.group == task])
    ]
    header = ["task", "encoding", "split", "accuracy", "chance_normalised", "nll", "seeds", "status"]
    write_csv(out_dir / "summary.csv", header, _synthetic_csv_rows(cells))
    summary = out_dir / "summary.md"
    write_text(summary, _synthetic_markdown(chance, cells, missing))
    _plot_accuracy(cells, out_dir / SYNTHETIC_FIGURES[0])
    _plot_extrapolation(curves, out_dir / EXTRAPOLATION_FIGURE)

    entries, incomplete = _synthetic_entries(chance, cells[TEST_SPLIT], runs)
    return DomainResult(
        domain=SYNTHETIC,
        metric="chance-normalised test accuracy, mean over tasks",
        lower_is_better=False,
        preset=preset_of(runs),
        ref=None,
        ref_note="",
        entries=entries,
        incomplete=incomplete,
        seen={run.encoding for run in runs if not run.derived},
        missing=missing,
        extrapolation=curves,
        report=summary,
        task_accuracy=_accuracy(cells[TEST_SPLIT]),
    )


# ---------------------------------------------------------------------------------------- one domain


def compare_domain(domain: str, runs: list[RunDir], out_dir: Path, ref: str | None) -> DomainResult:
    """Check the runs are comparable, write the domain's report into `out_dir` and return its DomainResult."""
    check_comparable(runs)
    out_dir.mkdir(parents=True, exist_ok=True)
    if domain == SYNTHETIC:
        return _compare_synthetic(runs, out_dir)
    return _compare_lm(domain, runs, out_dir, ref)


def _finished_runs(runs_root: Path, domain: str) -> list[RunDir]:
    """The domain's run folders; FileNotFoundError naming the folder when none has finished."""
    runs = discover_runs(runs_root, domain)
    if not any(run.finished for run in runs):
        raise FileNotFoundError(
            f"no finished run for domain {domain!r} in {Path(runs_root) / domain} ({len(runs)} unfinished run folders)"
        )
    return runs


def compare(runs_root: Path, domain: str, out_dir: Path, ref: str | None = None) -> Path:
    """Write summary.md, summary.csv and the figures of one domain into `out_dir`; return summary.md.

    `ref` (LM domains only) is the reference of the paired tests, `darope` when None (SPEC 3).
    Raises FileNotFoundError naming the folder when the domain has no run folder, or no finished run;
    IncomparableRunsError when its runs differ in data, token budget, model or preset.
    """
    return compare_domain(domain, _finished_runs(runs_root, domain), Path(out_dir), ref).report


if __name__ == "__main__":
    # The command line runs the cross-domain study, which builds on this module: imported here, not at the
    # top, so that pipelines.study can import pipelines.compare.
    from pipelines.study import main

    raise SystemExit(main())
