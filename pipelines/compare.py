"""Compare the runs of one domain: summary tables, paired statistics and figures (SPEC section 3).

Reads the run folders written by the train pipeline:

    <runs_root>/<domain>/<pe_id>/seed<k>/               LM domains (jsb, maestro, hrg, sleep_edf)
    <runs_root>/synthetic/<task>/<pe_id>/seed<k>/       synthetic domain, one model per task

and writes `summary.md`, `summary.csv` and PNG figures into the output folder. A run folder without
`done.json` is unfinished: it is listed under "Missing runs", as is every (task, encoding, seed) that
another encoding of the domain has but this one lacks. Every file is written atomically.

    python -m pipelines.compare --domain jsb [--runs runs] [--out results] [--ref darope]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from domains.atomic import atomic_write, write_text
from pipelines.stats import (
    PairedResult,
    chance_normalised,
    mean_ci,
    mean_rank,
    paired_tests,
    ranks,
    seed_average,
)

DOMAINS = ("synthetic", "jsb", "maestro", "hrg", "sleep_edf")
SYNTHETIC = "synthetic"
LM_SPLIT = "test"
SYNTHETIC_SPLITS = ("test", "test_2x", "test_8x")
# SPEC 3: "ref = `darope` by default, configurable".
DEFAULT_REF = "darope"
LM_FIGURES = ("nll.png", "nll_by_position.png")
SYNTHETIC_FIGURES = ("accuracy.png",)
_SEED_DIR = re.compile(r"seed(\d+)")


# --------------------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunDir:
    """One run folder. `group` is the domain for LM domains and the task for the synthetic domain."""

    domain: str
    group: str
    encoding: str
    seed: int
    path: Path

    @property
    def finished(self) -> bool:
        return (self.path / "done.json").is_file()

    @property
    def label(self) -> str:
        return _run_label(self.domain, self.group, self.encoding, self.seed)


def _run_label(domain: str, group: str, encoding: str, seed: int) -> str:
    """The run's folder relative to the runs root."""
    parts = [domain, group] if domain == SYNTHETIC else [domain]
    return "/".join([*parts, encoding, f"seed{seed}"])


def _subdirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir()) if path.is_dir() else []


def discover_runs(runs_root: Path, domain: str) -> list[RunDir]:
    """Every `seed<k>` folder of the domain, finished or not.

    Raises FileNotFoundError naming the domain folder when it holds no run folder at all.
    """
    domain_dir = Path(runs_root) / domain
    group_dirs = _subdirs(domain_dir) if domain == SYNTHETIC else [domain_dir]
    runs = [
        RunDir(domain, group_dir.name if domain == SYNTHETIC else domain, enc_dir.name, int(m[1]), seed_dir)
        for group_dir in group_dirs
        for enc_dir in _subdirs(group_dir)
        for seed_dir in _subdirs(enc_dir)
        if (m := _SEED_DIR.fullmatch(seed_dir.name))
    ]
    if not runs:
        raise FileNotFoundError(f"no run folders for domain {domain!r} in {domain_dir}")
    return runs


def missing_runs(runs: list[RunDir]) -> list[str]:
    """One line per expected run without a finished result.

    Expected = every (group, encoding, seed) combination of the groups, encodings and seeds seen in the
    domain (SPEC 3: "within a domain and seed, every encoding sees the same data"), so a lost folder shows
    up as well as an unfinished one.
    """
    present = {(r.group, r.encoding, r.seed): r for r in runs}
    domain = runs[0].domain
    lines = []
    for group in sorted({r.group for r in runs}):
        for encoding in sorted({r.encoding for r in runs}):
            for seed in sorted({r.seed for r in runs}):
                run = present.get((group, encoding, seed))
                if run is None:
                    lines.append(f"{_run_label(domain, group, encoding, seed)}: no run folder")
                elif (run.path / "failed.json").is_file():
                    lines.append(f"{run.label}: failed ({_read_json(run.path / 'failed.json').get('error')})")
                elif not run.finished:
                    lines.append(f"{run.label}: unfinished (no done.json)")
    return lines


def _finished_by(runs: Iterable[RunDir], *keys: str) -> dict[tuple, list[RunDir]]:
    """Finished runs grouped by the given RunDir attributes, seeds ascending."""
    grouped = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.seed):
        if run.finished:
            grouped[tuple(getattr(run, key) for key in keys)].append(run)
    return dict(grouped)


def _read_json(path: Path) -> dict:
    with path.open() as f:
        return json.load(f)


def _read_csv(path: Path) -> dict[str, np.ndarray]:
    """A numeric CSV file as {column: float array}."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path} has no rows")
    return {column: np.array([float(row[column]) for row in rows]) for column in rows[0]}


# ------------------------------------------------------------------------------------ atomic output


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([["" if _is_nan(v) else v for v in row] for row in rows])
    write_text(path, buffer.getvalue())


def _save_figure(fig: Figure, path: Path) -> None:
    """Render with the Agg canvas (no display needed) and write the PNG atomically."""
    FigureCanvasAgg(fig)
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=120, bbox_inches="tight"), mode="wb")


# ---------------------------------------------------------------------------------------- formatting


def _is_nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _bold_if(text: str, bold: bool) -> str:
    return f"**{text}**" if bold else text


def _fmt_rank(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:g}"


def _fmt_mean_rank(mean: float, se: float) -> str:
    if math.isnan(mean):
        return "n/a"
    return f"{mean:.2f}" if math.isnan(se) else f"{mean:.2f} ± {se:.2f}"


def _markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _missing_section(runs: list[RunDir]) -> list[str]:
    lines = missing_runs(runs)
    return ["## Missing runs", "", *([f"- {line}" for line in lines] or ["None."]), ""]


# ---------------------------------------------------------------------------------------- LM domains


@dataclass(frozen=True)
class EncodingNLL:
    """Test-split NLL of one encoding of an LM domain, over its finished seeds."""

    encoding: str
    seeds: list[int]
    example_ids: np.ndarray  # ascending
    nll: np.ndarray  # per example, averaged over seeds (aligned on example_ids)
    seed_means: np.ndarray  # mean NLL over the examples, one per seed
    positions: np.ndarray
    position_nll: np.ndarray  # mean NLL per position: nll_sum and tokens each summed over seeds

    @property
    def mean(self) -> float:
        return float(self.nll.mean())


def load_encoding_nll(encoding: str, runs: list[RunDir]) -> EncodingNLL:
    """Read the per-example and per-position test metrics of the finished seeds of one encoding."""
    per_seed, ids = {}, {}
    nll_sum, tokens = defaultdict(float), defaultdict(float)
    for run in runs:
        metrics = run.path / "metrics"
        examples = _read_csv(metrics / f"{LM_SPLIT}.per_example.csv")
        per_seed[run.seed] = examples["nll"]
        ids[run.seed] = examples["example"].astype(int)
        by_position = _read_csv(metrics / f"{LM_SPLIT}.per_position.csv")
        for position, s, n in zip(
            by_position["position"].astype(int), by_position["nll_sum"], by_position["tokens"], strict=True
        ):
            nll_sum[position] += s
            tokens[position] += n
    positions = np.array(sorted(p for p in tokens if tokens[p] > 0))
    return EncodingNLL(
        encoding=encoding,
        seeds=[run.seed for run in runs],
        example_ids=np.sort(ids[runs[0].seed]),
        nll=seed_average(per_seed, ids),
        seed_means=np.array([values.mean() for values in per_seed.values()]),
        positions=positions,
        position_nll=np.array([nll_sum[p] / tokens[p] for p in positions]),
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
        f"`*` = `{name}` significantly better (adjusted p < 0.05)."
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


def _lm_markdown_row(row: dict, best: float, ref: str | None) -> list[str]:
    if ref is None:
        diff = p = ""
    elif row["encoding"] == ref:
        diff, p = "reference", ""
    else:
        star = " *" if row["ref_better"] else ""
        diff = f"{row['mean_diff']:+.4f} [{row['diff_lo']:+.4f}, {row['diff_hi']:+.4f}]{star}"
        p = f"{row['p_holm']:.3g}"
    return [
        _fmt_rank(row["rank"]),
        f"`{row['encoding']}`",
        _bold_if(f"{row['nll']:.4f}", row["nll"] == best),
        f"[{row['ci_lo']:.4f}, {row['ci_hi']:.4f}]",
        str(row["seeds"]),
        str(row["examples"]),
        f"{row['seed_min']:.4f}..{row['seed_max']:.4f}",
        diff,
        p,
    ]


def _lm_markdown(domain: str, rows: list[dict], ref: str | None, ref_note: str, runs: list[RunDir]) -> str:
    best = min(row["nll"] for row in rows)
    header = ["rank", "encoding", "test NLL", "95% CI", "seeds", "examples", "per-seed mean (min..max)"]
    header += [f"Δ vs {ref} [95% CI]" if ref else "Δ vs ref", "p (Holm)"]
    lines = [
        f"# {domain}: test NLL by encoding",
        "",
        "Test NLL in nats: each test example's mean NLL is averaged over seeds, then over examples, with a "
        "95% t-interval over examples (SPEC 3). Rank 1 = lowest NLL; best NLL in bold.",
        "",
        ref_note,
        "",
        *_markdown_table(header, [_lm_markdown_row(row, best, ref) for row in rows]),
        "",
        *_missing_section(runs),
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
    _save_figure(fig, path)


def _plot_nll_by_position(results: dict[str, EncodingNLL], path: Path) -> None:
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    for result in results.values():
        ax.plot(result.positions, result.position_nll, label=result.encoding, linewidth=1)
    ax.set_xlabel("position")
    ax.set_ylabel("mean NLL (nats)")
    ax.set_title("test NLL per position (summed over seeds)")
    ax.legend(fontsize="small")
    _save_figure(fig, path)


def _compare_lm(domain: str, runs: list[RunDir], out_dir: Path, ref: str | None) -> Path:
    by_encoding = _finished_by(runs, "encoding")
    results = {enc: load_encoding_nll(enc, enc_runs) for (enc,), enc_runs in sorted(by_encoding.items())}
    _check_same_examples(results)
    ref, ref_note = _choose_ref(ref, results)
    tests = {}
    if ref is not None:
        tests = {t.baseline: t for t in paired_tests({k: v.nll for k, v in results.items()}, ref)}
    rank = ranks({name: result.mean for name, result in results.items()})
    rows = _lm_rows(results, rank, tests, ref)

    _write_csv(out_dir / "summary.csv", list(rows[0]), [list(row.values()) for row in rows])
    summary = out_dir / "summary.md"
    write_text(summary, _lm_markdown(domain, rows, ref, ref_note, runs))
    _plot_nll(rows, out_dir / LM_FIGURES[0])
    _plot_nll_by_position(results, out_dir / LM_FIGURES[1])
    return summary


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
    levels = {_read_json(run.path / "manifest.json").get("chance") for run in runs}
    levels = {level for level in levels if level is not None}
    if len(levels) > 1:
        raise ValueError(f"task {task!r}: manifests disagree on the chance level: {sorted(levels)}")
    return levels.pop() if levels else math.nan


def _cell(runs: list[RunDir], split: str, chance: float) -> Cell:
    """Mean over seeds of one split's accuracy and NLL from metrics/summary.json."""
    entries = [_read_json(run.path / "metrics" / "summary.json")["splits"].get(split) for run in runs]
    evaluated = [e for e in entries if e is not None and "skipped" not in e]
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
    """(chance per task, cells[split][task][encoding]) for every task and encoding seen in the runs."""
    finished = _finished_by(runs, "group", "encoding")
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
    return _bold_if(f"{cell.accuracy:.3f}{normalised}", best)


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
            *[_bold_if(_fmt_mean_rank(*rank[enc]), rank[enc][0] == best_rank) for enc in encodings],
        ]
    )
    skipped = defaultdict(list)
    for task, row in table.items():
        for enc, cell in row.items():
            if cell.status == "n/a":
                skipped[enc, cell.note].append(task)
    notes = [f"- n/a for `{enc}` ({', '.join(tasks)}): {note}" for (enc, note), tasks in skipped.items()]
    header = ["task", "chance", *[f"`{enc}`" for enc in encodings]]
    return [f"## {split}", "", *_markdown_table(header, rows), "", *notes, *([""] if notes else [])]


def _synthetic_markdown(
    chance: dict[str, float], cells: dict[str, dict[str, dict[str, Cell]]], runs: list[RunDir]
) -> str:
    lines = [
        "# synthetic: token accuracy by task and encoding",
        "",
        "Token accuracy on the output span, mean over seeds; in parentheses the chance-normalised accuracy "
        "`(acc - chance) / (1 - chance)` (SPEC 2). Best per task in bold. `n/a`: the encoding cannot be "
        "evaluated on that split (reason below the table); `missing`: no finished run. Mean rank: rank by "
        "accuracy within each task (1 = best, ties averaged), mean over tasks ± its standard error across "
        "tasks; n/a and missing cells are not ranked.",
        "",
    ]
    for split, table in cells.items():
        lines += _split_section(split, table, chance)
    return "\n".join(lines + _missing_section(runs))


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
    encodings = list(cells[splits[0]][tasks[0]])
    fig = Figure(figsize=(len(splits) * (1.2 + 0.9 * len(encodings)), 1.2 + 0.45 * len(tasks)))
    axes = fig.subplots(1, len(splits), squeeze=False)[0]
    cmap = colormaps["viridis"].with_extremes(bad="lightgrey")
    for ax, split in zip(axes, splits, strict=True):
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
    _save_figure(fig, path)


def _compare_synthetic(runs: list[RunDir], out_dir: Path) -> Path:
    chance, cells = load_synthetic(runs)
    header = ["task", "encoding", "split", "accuracy", "chance_normalised", "nll", "seeds", "status"]
    _write_csv(out_dir / "summary.csv", header, _synthetic_csv_rows(cells))
    summary = out_dir / "summary.md"
    write_text(summary, _synthetic_markdown(chance, cells, runs))
    _plot_accuracy(cells, out_dir / SYNTHETIC_FIGURES[0])
    return summary


# ---------------------------------------------------------------------------------------- entry points


def compare(runs_root: Path, domain: str, out_dir: Path, ref: str | None = None) -> Path:
    """Write summary.md, summary.csv and the figures of one domain into `out_dir`; return summary.md.

    `ref` (LM domains only) is the reference of the paired tests, `darope` when None (SPEC 3).
    Raises FileNotFoundError naming the folder when the domain has no run folder, or no finished run.
    """
    runs = discover_runs(runs_root, domain)
    if not any(run.finished for run in runs):
        raise FileNotFoundError(
            f"no finished run for domain {domain!r} in {Path(runs_root) / domain} ({len(runs)} unfinished run folders)"
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if domain == SYNTHETIC:
        return _compare_synthetic(runs, out_dir)
    return _compare_lm(domain, runs, out_dir, ref)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.compare", description="Compare the runs of one domain (SPEC section 3)."
    )
    parser.add_argument("--domain", required=True, choices=DOMAINS)
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="runs root (default: runs)")
    parser.add_argument("--out", type=Path, default=Path("results"), help="writes to OUT/<domain>")
    parser.add_argument(
        "--ref", default=None, help=f"reference of the paired tests (LM domains; default {DEFAULT_REF})"
    )
    args = parser.parse_args(argv)
    try:
        summary = compare(args.runs, args.domain, args.out / args.domain, args.ref)
    except FileNotFoundError as error:
        parser.exit(1, f"error: {error}\n")
    print(summary.read_text())
    figures = SYNTHETIC_FIGURES if args.domain == SYNTHETIC else LM_FIGURES
    print("figures:")
    for name in figures:
        print(f"  {summary.parent / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
