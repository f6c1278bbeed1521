"""The study's figures: figure3.png (paper 000's Figure 3 layout), nll_by_position.png (one panel per domain
compared per example), the critical-difference diagrams of the Friedman tests and recency.png (attention by
distance of the inspected runs, one panel per group and split)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from pipelines.analysis.recency import StudyRecency
from pipelines.analysis.stats import FriedmanResult, cd_groups
from pipelines.analysis.study import Study
from pipelines.report.figures import encoding_colours, plot_positions
from pipelines.report.files import save_figure
from pipelines.report.inspection_figures import plot_mean_weight, weight_floor
from pipelines.report.verdicts import marks


def plot_figure3(study: Study, path: Path) -> None:
    """One bar group per domain with its 95% interval and significance marks against the reference, then the mean
    rank with its standard error across domains."""
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
            mark = marks(entry.verdict)
            if mark:
                ax.text(i, top[i] + 0.02 * span, mark, ha="center", fontsize=8)
        ax.set_ylim(bottom.min() - 0.15 * span, top.max() + 0.2 * span)
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
        ax.set_ylabel(f"test {result.metric.short} ({result.metric.unit})")
    ax = axes[-1]
    ranked = [e for e in study.order if e in study.mean_rank]
    means = np.array([study.mean_rank[e][0] for e in ranked])
    errors = np.nan_to_num(np.array([study.mean_rank[e][1] for e in ranked]))
    ax.bar(range(len(ranked)), means, yerr=errors, capsize=3, color=[colours[e] for e in ranked])
    ax.set_xticks(range(len(ranked)), ranked, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("mean rank (1 = best)")
    ax.set_title("mean rank ± SE across domains\n(encodings scored in every domain)", fontsize=10)
    fig.suptitle(
        "test results over each encoding's own seeds with 95% within-example intervals (Cousineau-Morey; within-task "
        "for tasks); * / † the domain's reference / the encoding better by the verdict (the seed-level test at the "
        "level it was decided at), no mark otherwise",
        fontsize=9,
    )
    save_figure(fig, path)


def plot_positions_study(study: Study, path: Path) -> None:
    panels = [result for result in study.results if result.position_curves]
    fig = Figure(figsize=(5 * len(panels), 3.6), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    colours = encoding_colours(study.order)
    for ax, result in zip(axes, panels, strict=True):
        plot_positions(ax, result.position_curves, colours)
        ax.set_title(f"{result.domain}: test NLL by position")
        ax.legend(fontsize="x-small")
    save_figure(fig, path)


RECENCY_BINS = 40  # log-spaced distance bins of the overlay's curves (beyond the first 8 distances)


def plot_recency_study(recency: StudyRecency, order: list[str], path: Path) -> None:
    """Per group (rows) and split (columns) two panels: every inspected encoding's mean attention weight by
    distance at the last layer (seeds pooled, over log-spaced distance bins), and its share of attention beyond
    λ(10k), the base-10k RoPE's fast-band wavelength (one distance for every encoding), as bars."""
    groups = list(dict.fromkeys(panel.group for panel in recency.panels))
    splits = list(dict.fromkeys(panel.split for panel in recency.panels))
    fig = Figure(figsize=(10.5 * len(splits), 4.4 * len(groups) + 0.7), layout="constrained")
    axes = fig.subplots(
        len(groups), 2 * len(splits), squeeze=False, gridspec_kw={"width_ratios": [2.2, 1] * len(splits)}
    )
    colours = encoding_colours([*order, *sorted({e for p in recency.panels for e in p.profiles} - set(order))])
    rank = {encoding: i for i, encoding in enumerate(order)}
    for ax in axes.flat:
        ax.set_axis_off()  # a group without an inspection of some split keeps its cells empty
    for panel in recency.panels:
        row, column = groups.index(panel.group), 2 * splits.index(panel.split)
        curves, bars = axes[row, column], axes[row, column + 1]
        curves.set_axis_on()
        bars.set_axis_on()
        profiles = sorted(panel.profiles.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0]))
        for encoding, profile in profiles:
            plot_mean_weight(curves, profile.layers[panel.layer], colours[encoding], encoding, False, RECENCY_BINS)
        first = profiles[0][1]
        even = first.layers[panel.layer]
        seen = even.count > 0
        curves.plot(np.flatnonzero(seen), even.uniform[seen], color="grey", linestyle="--", label="uniform over j ≤ i")
        curves.axvline(panel.reference, color="black", linestyle=":", label=f"λ(10k) = {panel.reference:.1f}")
        if first.window > first.context:
            curves.axvline(first.context, color="black", linestyle="--", linewidth=0.8, label=f"L = {first.context}")
        curves.set_xscale("log")  # distances from 1: the self-attention at distance 0 is not drawn here
        curves.set_xlim(left=0.8)
        curves.set_ylim(weight_floor(even), 1.0)  # no weight exceeds 1
        curves.set_title(f"{panel.group}, {panel.split} (T = {first.window}), layer {panel.layer}", fontsize=9)
        curves.set_xlabel("query-key distance i - j (tokens, log scale; distance 0 not drawn)")
        curves.legend(fontsize=7, ncol=2, loc="lower left")
        shares = sorted(((p.layers[panel.layer].far_mass(panel.reference), e) for e, p in profiles), reverse=True)
        bars.barh(range(len(shares)), [share for share, _ in shares], color=[colours[e] for _, e in shares])
        bars.set_yticks(range(len(shares)), [e for _, e in shares], fontsize=8)
        for index, (share, _) in enumerate(shares):
            bars.text(share + 0.01, index, f"{share:.0%}", va="center", fontsize=7)
        bars.invert_yaxis()
        bars.axvline(even.far_mass(panel.reference, uniform=True), color="grey", linestyle="--", label="uniform")
        bars.set_xlim(0, 1)
        bars.set_xlabel(f"share of attention beyond λ(10k) = {panel.reference:.1f}")
        bars.legend(fontsize=7, loc="lower right")
    fig.suptitle(
        "attention by distance (python -m pipelines.inspect): mean weight over the inspected windows, heads and "
        "queries, seeds pooled;\nright: the share of a query's attention beyond λ(10k), the longest fast-band "
        "wavelength of a base-10k RoPE (the same distance for every encoding)",
        fontsize=9,
    )
    save_figure(fig, path)


def plot_cd(result: FriedmanResult, encodings: list[str], title: str, path: Path) -> None:
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
