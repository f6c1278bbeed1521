"""The per-domain figures, and the plotting pieces every report shares (a colour per encoding, binned curves).

nll.png               mean test NLL per encoding with its 95% interval (domains compared per example)
nll_by_position.png   test NLL per position, seeds pooled
accuracy.png          tasks x encodings heatmap of chance-normalised accuracy, one panel per split (domains with tasks)
extrapolation.png     NLL per position on the splits scored past the training context, the training length marked
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from pipelines.analysis.curves import Curve, PositionNLL
from pipelines.analysis.results import DomainResult, TaskTable
from pipelines.report.files import save_figure
from pipelines.report.verdicts import marks

MAX_CURVE_BINS = 128


def encoding_colours(encodings: list[str]) -> dict[str, tuple]:
    """A distinct colour per encoding: tab20's ten dark shades first, then its ten light ones."""
    cmap = colormaps["tab20"]
    shades = [*range(0, 20, 2), *range(1, 20, 2)]
    return {encoding: cmap(shades[i % 20]) for i, encoding in enumerate(encodings)}


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


def plot_positions(ax, curves: dict[str, PositionNLL], colours: dict) -> None:
    for encoding, by_position in curves.items():
        x, y = binned_curve(*by_position)
        ax.plot(x, y, label=encoding, linewidth=1, color=colours[encoding])
    ax.set_xlabel("position")
    ax.set_ylabel("mean NLL (nats)")


def plot_nll(result: DomainResult, path: Path) -> None:
    """Mean test NLL per encoding (best first) with its 95% within-example interval; beside it, when the domain has
    a reference, each encoding's Δ to it with its interval and the region of practical equivalence shaded, the
    verdict written by each interval (plot_deltas)."""
    entries = list(result.entries.values())
    pairs = [entry for entry in entries if entry.verdict is not None]
    width = max(4.0, 0.9 * len(entries) + 1.5)
    fig = Figure(figsize=(width + (6.0 if pairs else 0.0), 3.5 + 0.12 * len(entries)), layout="constrained")
    ax, delta_ax = fig.subplots(1, 2, width_ratios=[width, 6.0]) if pairs else (fig.add_subplot(), None)
    means = np.array([entry.score for entry in entries])
    errors = np.array([[entry.score - entry.ci_lo, entry.ci_hi - entry.score] for entry in entries]).T
    ax.bar(range(len(entries)), means, yerr=np.nan_to_num(errors), capsize=4, color="tab:blue")
    ax.set_xticks(range(len(entries)), [entry.encoding for entry in entries], rotation=30, ha="right")
    ax.set_ylabel("test NLL (nats)")
    low = float(np.nanmin([entry.ci_lo for entry in entries] + list(means)))
    ax.set_ylim(bottom=max(0.0, low - 0.1 * abs(low)))
    ax.set_title(f"{result.domain}: mean test NLL, {result.interval} intervals", fontsize=10)
    if delta_ax is not None:
        plot_deltas(delta_ax, result, pairs)
    save_figure(fig, path)


def plot_deltas(ax, result: DomainResult, entries: list) -> None:
    """Δ to the reference per encoding (top: the best by the matched rule), with the interval each verdict rests on
    (the 95% t-interval; the (1 - 2 alpha) one for an equivalent or stopped pair), the region shaded. Each interval
    is drawn as a line from its lower to its upper end, so any interval draws, one that excludes its own estimate
    included."""
    region = result.metric.equivalence
    y = np.arange(len(entries))[::-1]
    ax.axvspan(-region, region, color="tab:green", alpha=0.15, label=f"equivalence ±{region:g}")
    ax.axvline(0, color="grey", linewidth=0.8)
    for yi, entry in zip(y, entries, strict=True):
        pair = entry.verdict
        _, lo, hi = pair.decision_interval()
        if np.isfinite(lo) and np.isfinite(hi):
            ax.hlines(yi, lo, hi, color="tab:blue", linewidth=1.2)
            ax.vlines([lo, hi], yi - 0.15, yi + 0.15, color="tab:blue", linewidth=1.2)
        ax.plot([pair.delta], [yi], "o", color="tab:blue", markersize=4)
        right = max(v for v in (pair.delta, lo, hi) if np.isfinite(v))
        label = pair.verdict + (f" {marks(pair)}" if marks(pair) else "")
        ax.annotate(label, (right, yi), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(y, [entry.encoding for entry in entries], fontsize=8)
    # symmetric log past a few region widths: a 1-nat gap and a 0.005-nat one stay readable on one axis
    ax.set_xscale("symlog", linthresh=4 * region, linscale=1.5)
    ax.set_xlabel(
        f"Δ {result.metric.short} vs {result.ref} ({result.metric.unit}; linear within ±{4 * region:g})", fontsize=8
    )
    ax.set_title("seed-aware Δ, 95% t-interval over seeds (test set fixed)", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")


def plot_nll_by_position(curves: dict[str, PositionNLL], path: Path) -> None:
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    plot_positions(ax, curves, encoding_colours(list(curves)))
    ax.set_title(f"test NLL per position (seeds pooled, at most {MAX_CURVE_BINS} bins)")
    ax.legend(fontsize="small")
    save_figure(fig, path)


def plot_accuracy(table: TaskTable, path: Path) -> None:
    """One heatmap panel per split, stacked: tasks x encodings, chance-normalised accuracy, annotated."""
    cells = table.cells
    splits = list(cells)
    tasks = list(cells[splits[0]])
    widest = max(len(cells[split][tasks[0]]) for split in splits)
    panel_height = 0.9 + 0.32 * len(tasks)
    fig = Figure(figsize=(2.2 + 0.75 * widest, 0.9 + panel_height * len(splits)), layout="constrained")
    axes = fig.subplots(len(splits), 1, squeeze=False)[:, 0]
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
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
        ax.set_xticks(range(len(encodings)), encodings, rotation=35, ha="right", fontsize=8)
        ax.set_yticks(range(len(tasks)), tasks, fontsize=8)
        ax.set_title(f"{split}: chance-normalised token accuracy (0 = chance, 1 = perfect)", fontsize=9)
    fig.colorbar(image, ax=list(axes), label="chance-normalised accuracy", shrink=0.8)
    save_figure(fig, path)


def plot_extrapolation(curves: list[Curve], path: Path) -> bool:
    """One panel per (group, split): per-position NLL of every encoding, the training length marked. Without any
    such split there is no figure (and none left from an earlier comparison); returns whether one was drawn."""
    panels = defaultdict(list)
    for curve in curves:
        if curve.status == "ok":
            panels[curve.group, curve.split].append(curve)
    if not panels:
        path.unlink(missing_ok=True)
        return False
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
                x, y = binned_curve(*curve.by_position)
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
    return True
