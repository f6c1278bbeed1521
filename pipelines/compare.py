"""Compare trained runs: one report per domain and the cross-domain study (SPEC section 3).

Reads the run folders written by the train pipeline:

    <runs_root>/<domain>/<pe_id>/seed<k>/               LM domains (jsb, maestro, hrg, sleep_edf)
    <runs_root>/synthetic/<task>/<pe_id>/seed<k>/       synthetic domain, one model per task
    .../<pe_id>+yarn/seed<k>/                           YaRN applied to a trained rope run at evaluation

Data flow:
1. Every `seed<k>` folder of a domain is found; an unfinished, failed or absent (group, encoding, seed) is
   listed under "Missing runs", never dropped.
2. The finished runs of a domain (of one task, for the synthetic domain) must agree on their data hashes,
   token budget (max_steps x batch_size x context), model (config.model and the parameters outside the
   encoding) and preset; otherwise IncomparableRunsError names the groups of runs (SPEC 3: "every encoding
   sees the same data in the same order with the same token budget").
3. Per domain (`results/<domain>/`): test NLL with each example averaged over seeds, 95% t-intervals over
   examples, paired t-tests against the reference with Holm correction over the baselines (LM domains), or
   token accuracy per task and split (synthetic); NLL by position; extrapolation curves.
4. Study (`results/`): the domain x encoding table with significance stars and the mean rank across domains
   (paper 000, Figure 3), a Friedman test with the Nemenyi critical difference, each seed's own score with
   the seed spread, NLL past the training length, and the paper's published values at the paper preset.

YaRN entries (`<pe_id>+yarn`) equal their rope run at the training length (scale 1), so they are kept out
of every in-distribution comparison (tables, tests, ranks) and appear on the longer splits only.

    python -m pipelines.compare [--domains all-present | DOMAIN ...] [--runs runs] [--out results] [--ref darope]

Every file is written atomically.
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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from domains.atomic import atomic_write, write_json, write_text
from pipelines.stats import (
    FriedmanResult,
    PairedResult,
    cd_groups,
    chance_normalised,
    friedman,
    mean_ci,
    mean_rank,
    paired_tests,
    ranks,
    seed_average,
    significance_stars,
    summarise_ranks,
)

DOMAINS = ("jsb", "maestro", "hrg", "sleep_edf", "synthetic")  # the study's column order
SYNTHETIC = "synthetic"
ALL_PRESENT = "all-present"
TEST_SPLIT = "test"
SYNTHETIC_SPLITS = ("test", "test_2x", "test_8x")
# SPEC 3: "ref = `darope` by default, configurable".
DEFAULT_REF = "darope"
# An evaluation-time variant of a trained run (`rope10k+yarn`): not an encoding of its own at length L.
DERIVED_MARK = "+"
PAPER_PRESET = "paper"
# SPEC 3: the paper's published test NLL (mean of 3 seeds), per encoding id and domain.
PAPER_NLL = {
    "darope": {"jsb": 0.4547, "maestro": 1.4180, "hrg": 4.3153, "sleep_edf": 4.2235},
    "hope": {"jsb": 0.4567, "maestro": 1.4289, "hrg": 4.3164, "sleep_edf": 4.2255},
    "nope": {"jsb": 1.1634, "maestro": 1.5075, "hrg": 4.3494, "sleep_edf": 4.4320},
    "pope": {"hrg": 4.3127},
}
LM_FIGURES = ("nll.png", "nll_by_position.png")
SYNTHETIC_FIGURES = ("accuracy.png",)
EXTRAPOLATION_FIGURE = "extrapolation.png"
FIGURE3 = "figure3.png"
POSITIONS_FIGURE = "nll_by_position.png"
CD_FIGURES = {"domains": "cd_domains.png", "synthetic tasks": "cd_synthetic_tasks.png"}
EXTRAPOLATION_CSV = "extrapolation.csv"
MAX_CURVE_BINS = 128
_SEED_DIR = re.compile(r"seed(\d+)")
_LENGTH_FACTOR = re.compile(r"_(\d+)x$")  # test_2x: evaluated at 2x the training context


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
    def derived(self) -> bool:
        """An evaluation-time variant of a trained run (YaRN), not a trained encoding."""
        return is_derived(self.encoding)

    @property
    def label(self) -> str:
        return _run_label(self.domain, self.group, self.encoding, self.seed)


def is_derived(encoding: str) -> bool:
    return DERIVED_MARK in encoding


def _run_label(domain: str, group: str, encoding: str, seed: int) -> str:
    """The run's folder relative to the runs root."""
    parts = [domain, group] if domain == SYNTHETIC else [domain]
    return "/".join([*parts, encoding, f"seed{seed}"])


def _group_label(domain: str, group: str) -> str:
    return f"{domain}/{group}" if domain == SYNTHETIC else domain


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


def present_domains(runs_root: Path) -> list[str]:
    """The domains (in DOMAINS order) with at least one run folder under `runs_root`."""
    present = []
    for domain in DOMAINS:
        try:
            discover_runs(runs_root, domain)
        except FileNotFoundError:
            continue
        present.append(domain)
    return present


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
    """A numeric CSV file with a header line as {column: float array}."""
    with path.open() as f:
        header = f.readline().strip().split(",")
        try:
            values = np.loadtxt(f, delimiter=",", ndmin=2)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from error
    if values.shape[0] == 0:
        raise ValueError(f"{path} has no rows")
    if values.shape[1] != len(header):
        raise ValueError(f"{path}: {values.shape[1]} columns under a header of {len(header)}")
    return dict(zip(header, values.T, strict=True))


def _splits(run: RunDir) -> dict[str, dict]:
    """metrics/summary.json's {split: entry}; an entry holds "skipped" when the split was not evaluated."""
    return _read_json(run.path / "metrics" / "summary.json")["splits"]


def _evaluated(entry: dict | None) -> bool:
    return entry is not None and "skipped" not in entry


# --------------------------------------------------------------------------------- comparability


class IncomparableRunsError(ValueError):
    """Finished runs of one domain (one synthetic task) differ in what SPEC 3 holds fixed."""


def _manifest_value(manifest: dict, path: Path, *keys: str):
    value = manifest
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise ValueError(f"{path}: no {'.'.join(keys)}")
        value = value[key]
    return value


def run_properties(run: RunDir) -> dict[str, str]:
    """What must agree between the finished runs of one domain or task, each as printable text.

    The model is config.model (the encoding is its own config group) and the parameter count outside the
    encoding, n_params - encoding["parameters"]: encodings legitimately add their own parameters.
    """
    path = run.path / "manifest.json"
    manifest = _read_json(path)

    def get(*keys):
        return _manifest_value(manifest, path, *keys)

    model = get("config", "model")
    steps, batch, context = (
        get("config", "trainer", "max_steps"),
        get("config", "trainer", "batch_size"),
        model.get("context"),
    )
    if context is None:
        raise ValueError(f"{path}: no config.model.context")
    non_encoding = get("n_params") - get("encoding", "parameters")
    model_text = ", ".join(f"{key}={value}" for key, value in sorted(model.items()))
    return {
        "data hashes": ", ".join(f"{name}={digest}" for name, digest in sorted(get("data_hashes").items())),
        "token budget (max_steps x batch_size x context)": f"{steps} x {batch} x {context} = {steps * batch * context}",
        "model (config.model and the parameters outside the encoding)": f"{model_text}; {non_encoding} parameters",
        "preset": str(get("run", "preset")),
    }


def check_comparable(runs: list[RunDir]) -> None:
    """Raise IncomparableRunsError listing, per property that differs, the groups of runs sharing a value."""
    problems = []
    for (group,), group_runs in sorted(_finished_by(runs, "group").items()):
        properties = {run.label: run_properties(run) for run in group_runs}
        for name in next(iter(properties.values())):
            holders = defaultdict(list)
            for label, values in properties.items():
                holders[values[name]].append(label)
            if len(holders) > 1:
                groups = "".join(f"\n  {value}: {', '.join(labels)}" for value, labels in holders.items())
                problems.append(f"{_group_label(runs[0].domain, group)}: the runs differ in {name}:{groups}")
    if problems:
        raise IncomparableRunsError(
            "refusing to compare runs that must share data, token budget, model and preset (SPEC 3):\n"
            + "\n".join(problems)
        )


def _context(runs: list[RunDir]) -> int:
    """Training context of the runs (config.model.context; check_comparable makes them agree)."""
    run = runs[0]
    path = run.path / "manifest.json"
    return int(_manifest_value(_read_json(path), path, "config", "model", "context"))


def _preset(runs: list[RunDir]) -> str:
    run = next(r for r in runs if r.finished)
    path = run.path / "manifest.json"
    return str(_manifest_value(_read_json(path), path, "run", "preset"))


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


def _missing_section(lines: list[str]) -> list[str]:
    return ["## Missing runs", "", *([f"- {line}" for line in lines] or ["None."]), ""]


# ----------------------------------------------------------------------------------- position curves


def pooled_positions(files: Iterable[Path]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions, nll_sum, tokens) of per_position.csv files summed position by position (over seeds)."""
    tables = [_read_csv(path) for path in files]
    size = 1 + max(int(table["position"].max()) for table in tables)
    nll_sum, tokens = np.zeros(size), np.zeros(size)
    for table in tables:
        position = table["position"].astype(int)
        nll_sum += np.bincount(position, table["nll_sum"], size)
        tokens += np.bincount(position, table["tokens"], size)
    positions = np.flatnonzero(tokens)
    return positions, nll_sum[positions], tokens[positions]


def binned_curve(
    positions: np.ndarray, nll_sum: np.ndarray, tokens: np.ndarray, bins: int = MAX_CURVE_BINS
) -> tuple[np.ndarray, np.ndarray]:
    """(bin centre, token-weighted mean NLL) over at most `bins` equal-width position bins (raw when fewer)."""
    if positions.size <= bins:
        return positions.astype(float), nll_sum / tokens
    edges = np.linspace(positions[0], positions[-1] + 1, bins + 1)
    index = np.digitize(positions, edges[1:-1])
    total, count = np.bincount(index, nll_sum, bins), np.bincount(index, tokens, bins)
    centres = (edges[:-1] + edges[1:] - 1) / 2
    kept = count > 0
    return centres[kept], total[kept] / count[kept]


@dataclass(frozen=True)
class Curve:
    """Per-position NLL of one encoding on one split longer than the training context, seeds pooled.

    status: "ok", "n/a" (every seed skipped the split, `note` says why) or "missing" (no finished run).
    """

    group: str
    split: str
    length: int  # window length the split is scored at
    context: int  # training context L
    encoding: str
    status: str
    note: str = ""
    seeds: int = 0
    positions: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))
    nll_sum: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tokens: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def mean_nll(self, past: bool) -> float:
        """Token-weighted NLL at positions >= L (`past`) or < L; nan when there is none."""
        kept = (self.positions >= self.context) == past
        n = self.tokens[kept].sum()
        return float(self.nll_sum[kept].sum() / n) if n > 0 else math.nan


def split_length(split: str, entry: dict, context: int) -> int | None:
    """The window length a split was scored at: the entry's `window_length` when the evaluation recorded it,
    else the name's factor times the training context (`test_2x`: 2L), else None (scored at L)."""
    if "window_length" in entry:
        return int(entry["window_length"])
    factor = _LENGTH_FACTOR.search(split)
    return int(factor[1]) * context if factor else None


def load_extrapolation(group: str, runs: list[RunDir]) -> list[Curve]:
    """A Curve per (split longer than the training context, encoding) of one domain or task."""
    finished = [run for run in runs if run.finished]
    if not finished:
        return []
    context = _context(finished)
    splits = {run: _splits(run) for run in finished}
    lengths = {}
    for entries in splits.values():
        for split, entry in entries.items():
            length = split_length(split, entry, context)
            if length is not None and length > context:
                lengths[split] = max(length, lengths.get(split, 0))
    by_encoding = _finished_by(finished, "encoding")
    encodings = sorted({run.encoding for run in runs})
    curves = []
    for split, length in sorted(lengths.items(), key=lambda item: (item[1], item[0])):
        for encoding in encodings:
            enc_runs = by_encoding.get((encoding,), [])
            evaluated = [run for run in enc_runs if _evaluated(splits[run].get(split))]
            common = {"group": group, "split": split, "length": length, "context": context, "encoding": encoding}
            if evaluated:
                positions, nll_sum, tokens = pooled_positions(
                    run.path / "metrics" / f"{split}.per_position.csv" for run in evaluated
                )
                curves.append(
                    Curve(
                        **common, status="ok", seeds=len(evaluated), positions=positions, nll_sum=nll_sum, tokens=tokens
                    )
                )
                continue
            reasons = sorted({splits[run][split]["skipped"] for run in enc_runs if split in splits[run]})
            curves.append(
                Curve(**common, status="n/a", note="; ".join(reasons)) if reasons else Curve(**common, status="missing")
            )
    return curves


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
    colours = _colours(sorted({c.encoding for c in curves}))
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
    _save_figure(fig, path)


def _colours(encodings: list[str]) -> dict[str, tuple]:
    """A distinct colour per encoding: tab20's ten dark shades first, then its ten light ones."""
    cmap = colormaps["tab20"]
    shades = [*range(0, 20, 2), *range(1, 20, 2)]
    return {encoding: cmap(shades[i % 20]) for i, encoding in enumerate(encodings)}


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
        examples = _read_csv(run.path / "metrics" / f"{TEST_SPLIT}.per_example.csv")
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
        _bold_if(f"{row['nll']:.4f}", row["nll"] == best),
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
        *_markdown_table(header, [_lm_markdown_row(row, best, ref) for row in rows]),
        "",
        *_missing_section(missing),
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


def _plot_positions(ax, curves: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], colours: dict) -> None:
    for encoding, (positions, nll_sum, tokens) in curves.items():
        x, y = binned_curve(positions, nll_sum, tokens)
        ax.plot(x, y, label=encoding, linewidth=1, color=colours[encoding])
    ax.set_xlabel("position")
    ax.set_ylabel("mean NLL (nats)")


def _plot_nll_by_position(curves: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], path: Path) -> None:
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    _plot_positions(ax, curves, _colours(list(curves)))
    ax.set_title(f"test NLL per position (seeds pooled, at most {MAX_CURVE_BINS} bins)")
    ax.legend(fontsize="small")
    _save_figure(fig, path)


def _compare_lm(domain: str, runs: list[RunDir], out_dir: Path, ref: str | None) -> DomainResult:
    by_encoding = _finished_by([run for run in runs if not run.derived], "encoding")
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

    _write_csv(out_dir / "summary.csv", list(rows[0]), [list(row.values()) for row in rows])
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
        preset=_preset(runs),
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
    levels = {_read_json(run.path / "manifest.json").get("chance") for run in runs}
    levels = {level for level in levels if level is not None}
    if len(levels) > 1:
        raise ValueError(f"task {task!r}: manifests disagree on the chance level: {sorted(levels)}")
    return levels.pop() if levels else math.nan


def _cell(runs: list[RunDir], split: str, chance: float) -> Cell:
    """Mean over seeds of one split's accuracy and NLL from metrics/summary.json."""
    entries = [_splits(run).get(split) for run in runs]
    evaluated = [e for e in entries if _evaluated(e)]
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
    return "\n".join(lines + _missing_section(missing))


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
    _save_figure(fig, path)


def _test_accuracy_by_seed(runs: list[RunDir]) -> dict[tuple[str, str], dict[int, float]]:
    """{(task, encoding): {seed: test token accuracy}} of the finished, trained (not derived) runs."""
    accuracy = defaultdict(dict)
    for (task, encoding), group_runs in _finished_by(runs, "group", "encoding").items():
        if is_derived(encoding):
            continue
        for run in group_runs:
            entry = _splits(run).get(TEST_SPLIT)
            if _evaluated(entry):
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
    _write_csv(out_dir / "summary.csv", header, _synthetic_csv_rows(cells))
    summary = out_dir / "summary.md"
    write_text(summary, _synthetic_markdown(chance, cells, missing))
    _plot_accuracy(cells, out_dir / SYNTHETIC_FIGURES[0])
    _plot_extrapolation(curves, out_dir / EXTRAPOLATION_FIGURE)

    entries, incomplete = _synthetic_entries(chance, cells[TEST_SPLIT], runs)
    return DomainResult(
        domain=SYNTHETIC,
        metric="chance-normalised test accuracy, mean over tasks",
        lower_is_better=False,
        preset=_preset(runs),
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


def _compare_domain(domain: str, runs: list[RunDir], out_dir: Path, ref: str | None) -> DomainResult:
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
    return _compare_domain(domain, _finished_runs(runs_root, domain), Path(out_dir), ref).report


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
        results.append(_compare_domain(domain, runs, Path(out) / domain, ref))
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
    text = _bold_if(text, entry.score == best)
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
        text = _fmt_mean_rank(mean, se)
        if 0 < study.ranked_in[encoding] < len(study.results):
            text += f" ({study.ranked_in[encoding]} of {len(study.results)} domains)"
        cells.append(_bold_if(text, mean == best_rank))
        if study.nll_mean_rank is not None:
            cells.append(_fmt_mean_rank(*study.nll_mean_rank.get(encoding, (math.nan, math.nan))))
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
    return [*lines, *_markdown_table(header, rows), "", *notes, *([""] if notes else [])]


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
        lines += _markdown_table(
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
        lines += [f"### {result.domain}", "", *note, *_markdown_table(header, rows), ""]
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
                row.append(_bold_if(f"{cell['nll_past']:.4f}", cell["nll_past"] == best))
        table.append(row)
    notes = sorted({(row["encoding"], row["note"]) for row in rows if row["status"] == "n/a"})
    figures = ", ".join(f"`{r.domain}/{EXTRAPOLATION_FIGURE}`" for r in study.results if r.extrapolation)
    return [
        *lines,
        "Mean NLL (nats, token-weighted, seeds pooled) over the positions at or past the training context L on "
        "every split scored at a longer window; best per row in bold. `+yarn`: the rope run evaluated with YaRN "
        f"at s = window / L (SPEC 1). Per-position curves: {figures}; all values in `extrapolation.csv`.",
        "",
        *_markdown_table(["domain", "split", "L → window", *[f"`{e}`" for e in encodings]], table),
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
            *_markdown_table(["domain", "encoding", "ours", "paper", "ours - paper"], rows),
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
        *_missing_section(missing),
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
    colours = _colours(study.order)
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
    _save_figure(fig, path)


def _plot_positions_study(study: Study, path: Path) -> None:
    panels = [result for result in study.results if result.position_curves]
    fig = Figure(figsize=(5 * len(panels), 3.6), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    colours = _colours(study.order)
    for ax, result in zip(axes, panels, strict=True):
        _plot_positions(ax, result.position_curves, colours)
        ax.set_title(f"{result.domain}: test NLL by position")
        ax.legend(fontsize="x-small")
    _save_figure(fig, path)


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
    _save_figure(fig, path)


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
    _write_csv(out / "summary.csv", STUDY_CSV_HEADER, [_csv_row(record) for record in records])
    extrapolation = _extrapolation_rows(built)
    if extrapolation:
        _write_csv(out / EXTRAPOLATION_CSV, list(extrapolation[0]), [list(row.values()) for row in extrapolation])
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


if __name__ == "__main__":
    raise SystemExit(main())
