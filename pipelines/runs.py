"""Read the run folders of the train pipeline, for the per-domain reports and the study (SPEC section 3).

    <runs_root>/<domain>/<pe_id>/seed<k>/               LM domains (jsb, maestro, hrg, sleep_edf)
    <runs_root>/synthetic/<task>/<pe_id>/seed<k>/       synthetic domain, one model per task
    .../<pe_id>+yarn/seed<k>/                           YaRN applied to a trained rope run at evaluation

A run folder holds manifest.json, metrics/summary.json ({split: entry}; an entry holds "skipped" when the
split was not evaluated), metrics/<split>.per_example.csv, metrics/<split>.per_position.csv, and done.json
once finished (failed.json when training failed). This module reads them; it writes nothing of its own.

1. Discovery: every `seed<k>` folder of a domain is found; an unfinished, failed or absent (group, encoding,
   seed) is listed under "Missing runs", never dropped.
2. Comparability: the finished runs of a domain (of one task, for the synthetic domain) must agree on their
   data hashes, token budget (max_steps x batch_size x context), model (config.model and the parameters
   outside the encoding) and preset; otherwise IncomparableRunsError names the groups of runs (SPEC 3:
   "every encoding sees the same data in the same order with the same token budget").
3. Per-position curves: the per_position.csv files of the seeds pooled, binned for plotting, and a Curve per
   (split scored past the training context, encoding) for the extrapolation figures and tables.

Also the helpers both reports (pipelines.compare, pipelines.study) share: atomic CSV and PNG writers, markdown
tables and cells, one colour per encoding.
"""

from __future__ import annotations

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

from domains.atomic import atomic_write, write_text

DOMAINS = ("jsb", "maestro", "hrg", "sleep_edf", "synthetic")  # the study's column order
SYNTHETIC = "synthetic"
# An evaluation-time variant of a trained run (`rope10k+yarn`): not an encoding of its own at length L.
DERIVED_MARK = "+"
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
                    lines.append(f"{run.label}: failed ({read_json(run.path / 'failed.json').get('error')})")
                elif not run.finished:
                    lines.append(f"{run.label}: unfinished (no done.json)")
    return lines


def finished_by(runs: Iterable[RunDir], *keys: str) -> dict[tuple, list[RunDir]]:
    """Finished runs grouped by the given RunDir attributes, seeds ascending."""
    grouped = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.seed):
        if run.finished:
            grouped[tuple(getattr(run, key) for key in keys)].append(run)
    return dict(grouped)


def read_json(path: Path) -> dict:
    with path.open() as f:
        return json.load(f)


def read_csv(path: Path) -> dict[str, np.ndarray]:
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


def split_entries(run: RunDir) -> dict[str, dict]:
    """metrics/summary.json's {split: entry}; an entry holds "skipped" when the split was not evaluated."""
    return read_json(run.path / "metrics" / "summary.json")["splits"]


def is_evaluated(entry: dict | None) -> bool:
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
    manifest = read_json(path)

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
    for (group,), group_runs in sorted(finished_by(runs, "group").items()):
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
    return int(_manifest_value(read_json(path), path, "config", "model", "context"))


def preset_of(runs: list[RunDir]) -> str:
    """The preset of the first finished run (check_comparable makes the finished runs agree)."""
    run = next(r for r in runs if r.finished)
    path = run.path / "manifest.json"
    return str(_manifest_value(read_json(path), path, "run", "preset"))


# ----------------------------------------------------------------------------------- position curves


def pooled_positions(files: Iterable[Path]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions, nll_sum, tokens) of per_position.csv files summed position by position (over seeds)."""
    tables = [read_csv(path) for path in files]
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
    splits = {run: split_entries(run) for run in finished}
    lengths = {}
    for entries in splits.values():
        for split, entry in entries.items():
            length = split_length(split, entry, context)
            if length is not None and length > context:
                lengths[split] = max(length, lengths.get(split, 0))
    by_encoding = finished_by(finished, "encoding")
    encodings = sorted({run.encoding for run in runs})
    curves = []
    for split, length in sorted(lengths.items(), key=lambda item: (item[1], item[0])):
        for encoding in encodings:
            enc_runs = by_encoding.get((encoding,), [])
            evaluated = [run for run in enc_runs if is_evaluated(splits[run].get(split))]
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


# ------------------------------------------------------------------------------------ atomic output


def _is_nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    """Write the CSV file atomically; NaN cells are left empty."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([["" if _is_nan(v) else v for v in row] for row in rows])
    write_text(path, buffer.getvalue())


def save_figure(fig: Figure, path: Path) -> None:
    """Render with the Agg canvas (no display needed) and write the PNG atomically."""
    FigureCanvasAgg(fig)
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=120, bbox_inches="tight"), mode="wb")


# ------------------------------------------------------------------------------ formatting and colours


def bold_if(text: str, bold: bool) -> str:
    return f"**{text}**" if bold else text


def fmt_mean_rank(mean: float, se: float) -> str:
    if math.isnan(mean):
        return "n/a"
    return f"{mean:.2f}" if math.isnan(se) else f"{mean:.2f} ± {se:.2f}"


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def missing_section(lines: list[str]) -> list[str]:
    return ["## Missing runs", "", *([f"- {line}" for line in lines] or ["None."]), ""]


def encoding_colours(encodings: list[str]) -> dict[str, tuple]:
    """A distinct colour per encoding: tab20's ten dark shades first, then its ten light ones."""
    cmap = colormaps["tab20"]
    shades = [*range(0, 20, 2), *range(1, 20, 2)]
    return {encoding: cmap(shades[i % 20]) for i, encoding in enumerate(encodings)}
