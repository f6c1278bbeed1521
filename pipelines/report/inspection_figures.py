"""The figures of a run's inspection (pipelines.inspection): attention by distance, and one per encoding view.

<split>.recency.png             mean attention weight by query-key distance, one panel per layer
<split>.darope_coordinates.png  the coordinates along the example, per head, the window's content beneath
<split>.fox_gates.png           the forget gates along the example, likewise
<split>.cope_positions.png      contextual positions against token distance, per layer and head, a few queries
<split>.bias_curves.png         a bias encoding's term by distance, per head (per layer where it differs)
<split>.lerope_scales.png       the learned frequency scales and the wavelengths they give
<split>.pope_phases.png         the phase biases, per layer: heads x components
<split>.rotation_basis.png      HD-RoPE's block basis and the rotation frequencies (rope_dup: no basis)
<split>.xpos_decay.png          xPos's decay by distance, per band
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from pipelines.inspection.content import ContentTrack
from pipelines.inspection.recency import LayerRecency, RecencyProfile
from pipelines.inspection.views import View
from pipelines.report.files import save_figure

DPI = 120  # save_figure's


def head_colours(n: int) -> list[tuple]:
    return [colormaps["tab10"](h % 10) for h in range(n)]


def mark_distances(ax, profile: RecencyProfile) -> None:
    """The wavelength the far mass is measured at, the base-10k reference where it differs, and the training
    context L where the window is longer: vertical lines labelled in the legend."""
    ax.axvline(profile.wavelength, color="tab:red", linestyle=":", label=f"λ = {profile.wavelength:.1f}")
    if not math.isclose(profile.reference, profile.wavelength, rel_tol=1e-5):  # own bands in fp32
        ax.axvline(profile.reference, color="tab:purple", linestyle=":", label=f"λ(10k) = {profile.reference:.1f}")
    if profile.window > profile.context:
        ax.axvline(profile.context, color="black", linestyle="--", linewidth=0.8, label=f"L = {profile.context}")


def binned_mean(layer: LayerRecency, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """(mean distance, mean weight) over distance bins: each distance below 8 its own, then `bins` log-spaced ones;
    the weights and counts are summed within a bin, so a bin's mean is exact. Smooths a curve over few windows."""
    size = layer.count.size
    edges = np.unique(np.concatenate([np.arange(min(8, size)), np.geomspace(8, size, bins).astype(int)]))
    edges = edges[edges < size]
    count = np.add.reduceat(layer.count, edges)
    distance = np.add.reduceat(layer.count * np.arange(size), edges)
    weight = np.add.reduceat(layer.weight_sum, edges)
    kept = count > 0
    return distance[kept] / count[kept], weight[kept] / count[kept]


def plot_mean_weight(ax, layer: LayerRecency, colour, label: str, spread: bool, bins: int | None = None) -> None:
    """One layer's mean weight by distance on a log axis (the distances some query reaches), with its standard
    deviation as a thin line (it exceeds the mean where a few queries put much weight on one distance); with
    `bins`, over distance bins (`binned_mean`)."""
    seen = layer.count > 0
    distance, mean = (np.flatnonzero(seen), layer.mean[seen]) if bins is None else binned_mean(layer, bins)
    ax.plot(distance, mean, color=colour, linewidth=1.3, label=label)
    if spread:
        ax.plot(
            np.flatnonzero(seen),
            layer.std[seen],
            color=colour,
            linewidth=0.6,
            alpha=0.6,
            label="its standard deviation",
        )
    ax.set_yscale("log")
    ax.set_xlabel("query-key distance i - j (tokens)")
    ax.set_ylabel("mean attention weight")


def weight_floor(layer: LayerRecency) -> float:
    """Where a log axis of attention weights ends, once every curve is drawn: two decades below the smallest weight
    of attention spread evenly; a curve that falls further leaves the panel."""
    return 0.01 * float(layer.uniform[layer.count > 0].min())


def plot_recency(profile: RecencyProfile, title: str, path: Path) -> None:
    layers = profile.layers
    columns = min(len(layers), 3)
    rows = math.ceil(len(layers) / columns)
    fig = Figure(figsize=(4.8 * columns + 0.4, 3.4 * rows + 1.0), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for index, (ax, layer) in enumerate(zip(axes, layers, strict=False)):
        plot_mean_weight(ax, layer, "tab:blue", "mean weight (over windows, heads, queries)", spread=True)
        seen = layer.count > 0
        ax.plot(np.flatnonzero(seen), layer.uniform[seen], color="grey", linestyle="--", label="uniform over j ≤ i")
        mark_distances(ax, profile)
        far, even = layer.far_mass(profile.wavelength), layer.far_mass(profile.wavelength, uniform=True)
        ax.set_title(f"layer {index}: {far:.0%} of attention beyond λ (uniform: {even:.0%})", fontsize=9)
        ax.set_ylim(weight_floor(layer), 1.0)  # no weight exceeds 1
    for ax in axes[len(layers) :]:
        ax.set_axis_off()
    handles, labels = axes[0].get_legend_handles_labels()
    labels = [f"{label} (training context)" if label.startswith("L =") else label for label in labels]
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 3), fontsize=8)
    fig.suptitle(f"{title}\nλ: {profile.wavelength_source}", fontsize=9)
    save_figure(fig, path)


# ------------------------------------------------------------------------------------- views along an example


def _width(n: int) -> float:
    return float(np.clip(5.0 + 0.045 * n, 8.0, 16.0))


def plot_content(ax, content: ContentTrack, n: int, width_in: float) -> None:
    """The window's content beneath the views: stretches as labelled bands, marks as lines, the text if legible."""
    palette = [colormaps["Pastel1"](i) for i in range(9)]
    colour_of: dict[str, tuple] = {}
    for start, end, label in content.spans:
        colour = colour_of.setdefault(label, palette[len(colour_of) % len(palette)])
        ax.axvspan(start - 0.5, end - 0.5, color=colour, linewidth=0)
        if (end - start) / n * width_in > 0.35:  # wide enough for its label
            ax.text((start + end - 1) / 2, 0.78, label, ha="center", va="center", fontsize=8)
    for position, label in content.marks:
        ax.axvline(position - 0.5, color="black", linewidth=0.8)
        ax.text(position, 0.78, label, fontsize=7, ha="left", va="center")
    if content.text is not None and width_in * DPI / n >= 5.5:  # a character per token, when each has room
        for position, char in enumerate(content.text[:n]):
            ax.text(position, 0.3, char, ha="center", va="center", fontsize=6, family="monospace")
    elif content.text is not None:
        ax.text(0, 0.3, "(text too long to print here: see the JSON)", fontsize=7, va="center")
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_xlabel(f"token position m; beneath: {content.what}", fontsize=8)
    ax.set_title(content.where, fontsize=8, loc="left")


def plot_along_example(view: View, values: np.ndarray, ylabel: str, limits: tuple[float, float], path: Path) -> None:
    """values (layers, H, n) along the example, a panel per layer, a line per head, the content beneath."""
    n_layer, n_head, n = values.shape
    width = _width(n)
    heights = [2.2] * n_layer + [1.0]
    fig = Figure(figsize=(width, sum(heights) + 0.8), layout="constrained")
    axes = fig.subplots(n_layer + 1, 1, sharex=True, gridspec_kw={"height_ratios": heights})
    positions = np.arange(n)
    for layer, ax in enumerate(axes[:-1]):
        for head, colour in enumerate(head_colours(n_head)):
            ax.plot(positions, values[layer, head], color=colour, linewidth=1, label=f"head {head}")
        for position, _ in view.content.marks if view.content else []:
            ax.axvline(position - 0.5, color="grey", linewidth=0.5, alpha=0.6)
        ax.axhline(limits[1], color="grey", linewidth=0.6)
        ax.set_ylim(limits[0], limits[1] * 1.05)  # a line at the bound stays visible
        ax.set_ylabel(f"layer {layer}\n{ylabel}", fontsize=8)
    if view.kind == "darope_coordinates":  # RoPE's coordinate m + 0.5, inside (0, L)
        inside = positions + 0.5 < limits[1]
        for ax in axes[:-1]:
            ax.plot(positions[inside], positions[inside] + 0.5, color="black", linestyle="--", linewidth=0.8)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=min(n_head, 8), fontsize=7)
    if view.content is not None:
        plot_content(axes[-1], view.content, n, width)
    fig.suptitle(view.title + "".join(f"\n{note}" for note in view.notes), fontsize=9)
    save_figure(fig, path)


def plot_cope_positions(view: View, path: Path) -> None:
    positions, queries = np.asarray(view.data["positions"]), np.asarray(view.data["queries"])
    n_layer, n_head = positions.shape[:2]
    fig = Figure(figsize=(3.4 * n_head + 0.5, 2.8 * n_layer + 0.8), layout="constrained")
    axes = fig.subplots(n_layer, n_head, squeeze=False, sharex=True, sharey=True)
    colours = [colormaps["viridis"](x) for x in np.linspace(0, 0.85, len(queries))]
    cap = float(view.data["cap"])
    for layer in range(n_layer):
        for head in range(n_head):
            ax = axes[layer, head]
            for q, (query, colour) in enumerate(zip(queries, colours, strict=True)):
                keys = np.arange(query + 1)
                ax.plot(keys, positions[layer, head, q, : query + 1], color=colour, label=f"query i = {query}")
                ax.plot(keys, np.minimum(query - keys + 1, cap), color=colour, linestyle="--", linewidth=0.7)
            ax.set_ylim(0, cap * 1.05)
            ax.set_title(f"layer {layer}, head {head}", fontsize=8)
            if layer == n_layer - 1:
                ax.set_xlabel("key position j")
            if head == 0:
                ax.set_ylabel("contextual position p_ij")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(view.title, fontsize=9)
    save_figure(fig, path)


# ------------------------------------------------------------------------------------- learned parameters


def plot_bias_curves(view: View, context: int, path: Path) -> None:
    bias = np.asarray(view.data["bias"])
    panels, n_head, n = bias.shape
    fig = Figure(figsize=(4.8 * panels + 0.6, 3.6), layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False)[0]
    for index, ax in enumerate(axes):
        for head, colour in enumerate(head_colours(n_head)):
            ax.plot(np.arange(n), bias[index, head], color=colour, linewidth=1.2, label=f"head {head}")
        if n > context:
            ax.axvline(context, color="black", linestyle="--", linewidth=0.8, label=f"L = {context}")
        ax.set_xlabel("query-key distance i - j (tokens)")
        ax.set_ylabel("term added to the logit")
        ax.set_title("every layer" if view.data["shared"] else f"layer {index}", fontsize=9)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=min(n_head + 1, 8), fontsize=7)
    fig.suptitle(view.title + "".join(f"\n{note}" for note in view.notes), fontsize=9)
    save_figure(fig, path)


def plot_lerope_scales(view: View, path: Path) -> None:
    theta, scale = np.asarray(view.data["theta"]), np.asarray(view.data["scale"])
    fast, context = np.asarray(view.data["fast_at_init"]), view.data["context"]
    bands = np.arange(theta.size)
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="initial scale 1")
    left.plot(bands[fast], scale[fast], "o", color="tab:orange", label="fast at initialisation (a turn within L)")
    left.plot(bands[~fast], scale[~fast], "o", color="tab:blue", label="slow at initialisation")
    left.set_xlabel("band j (fastest first)")
    left.set_ylabel("learned scale exp(a_j)")
    left.legend(fontsize=7)
    right.plot(bands, 2 * np.pi / theta, "x", color="grey", label="initial 2π / θ_j")
    right.plot(bands, 2 * np.pi / (theta * scale), "o", color="tab:green", label="learned 2π / (exp(a_j) θ_j)")
    right.axhline(context, color="black", linestyle="--", linewidth=0.8, label=f"L = {context}")
    right.set_yscale("log")
    right.set_xlabel("band j (fastest first)")
    right.set_ylabel("wavelength (tokens)")
    right.legend(fontsize=7)
    fig.suptitle(view.title, fontsize=9)
    save_figure(fig, path)


def plot_pope_phases(view: View, path: Path) -> None:
    delta = np.asarray(view.data["delta"])
    n_layer, n_head, d = delta.shape
    lowest = min(float(delta.min()), -0.1)  # the colours span what was learned (at least 0.1 rad), not all of -2 pi
    fig = Figure(figsize=(min(16.0, 3.0 + 0.45 * d), 1.4 + (0.4 * n_head + 0.6) * n_layer), layout="constrained")
    axes = fig.subplots(n_layer, 1, squeeze=False)[:, 0]
    for layer, ax in enumerate(axes):
        image = ax.imshow(delta[layer], vmin=lowest, vmax=0.0, cmap="magma", aspect="auto")
        if d <= 32:  # room for each value
            for (head, component), value in np.ndenumerate(delta[layer]):
                colour = "white" if value < lowest / 2 else "black"  # magma is dark at the low end
                ax.text(component, head, f"{value:.2f}", ha="center", va="center", fontsize=6, color=colour)
        ax.set_yticks(range(n_head), [f"head {h}" for h in range(n_head)], fontsize=7)
        ax.set_title(f"layer {layer}", fontsize=8, loc="left")
    axes[-1].set_xlabel("component c (its frequency θ_c = base^(-c/d): fastest on the left)")
    fig.colorbar(image, ax=list(axes), label="phase bias δ (radians)")
    fig.suptitle(view.title + "".join(f"\n{note}" for note in view.notes), fontsize=9)
    save_figure(fig, path)


def plot_rotation_basis(view: View, path: Path) -> None:
    basis, theta, context = np.asarray(view.data["basis"]), np.asarray(view.data["theta"]), view.data["context"]
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.6]})
    left.imshow(basis, vmin=-1, vmax=1, cmap="coolwarm")
    for (row, column), value in np.ndenumerate(basis):
        left.text(column, row, f"{value:+.2f}", ha="center", va="center", fontsize=8)
    left.set_title("the basis of each block (rows: channels of the block)", fontsize=8)
    left.set_xticks(range(len(basis)))
    left.set_yticks(range(len(basis)))
    planes = np.arange(theta.size)
    right.plot(planes, theta, "o", color="tab:blue", label="HD-RoPE and rope_dup: θ of each plane")
    right.axhline(2 * np.pi / context, color="black", linestyle="--", linewidth=0.8, label=f"2π / L (L = {context})")
    right.set_yscale("log")
    right.set_xlabel(f"rotation plane (channel pair); blocks of {view.data['block']} channels share a frequency")
    right.set_ylabel("frequency θ (radians per token)")
    right.set_title("above the dashed line: fast (a full turn within L)", fontsize=8)
    right.legend(fontsize=7)
    fig.suptitle(view.title + "".join(f"\n{note}" for note in view.notes), fontsize=9)
    save_figure(fig, path)


def plot_xpos_decay(view: View, context: int, path: Path) -> None:
    decay = np.asarray(view.data["decay"])
    fig = Figure(figsize=(7.5, 4.0), layout="constrained")
    ax = fig.add_subplot()
    cmap = colormaps["viridis"]
    for band, curve in enumerate(decay):
        ax.plot(np.arange(curve.size), curve, color=cmap(band / max(1, len(decay) - 1)), linewidth=1)
    if decay.shape[1] > context:
        ax.axvline(context, color="black", linestyle="--", linewidth=0.8, label=f"L = {context}")
        ax.legend(fontsize=7)
    ax.set_xlabel("query-key distance (tokens)")
    ax.set_ylabel("factor on band j's score term")
    mappable = ax.scatter([], [], c=[], cmap=cmap, vmin=0, vmax=len(decay) - 1)
    fig.colorbar(mappable, ax=ax, label="band j (0 = fastest, decays most)")
    fig.suptitle(view.title, fontsize=9)
    save_figure(fig, path)


def plot_view(view: View, context: int, path: Path) -> None:
    """The figure of one view, by its kind."""
    if view.kind == "darope_coordinates":
        plot_along_example(view, np.asarray(view.data["coordinates"]), "c_h (tokens)", (0.0, float(context)), path)
    elif view.kind == "fox_gates":
        plot_along_example(view, np.asarray(view.data["gates"]), "forget gate f_t", (0.0, 1.0), path)
    elif view.kind == "cope_positions":
        plot_cope_positions(view, path)
    elif view.kind == "bias_curves":
        plot_bias_curves(view, context, path)
    elif view.kind == "lerope_scales":
        plot_lerope_scales(view, path)
    elif view.kind == "pope_phases":
        plot_pope_phases(view, path)
    elif view.kind == "rotation_basis":
        plot_rotation_basis(view, path)
    elif view.kind == "xpos_decay":
        plot_xpos_decay(view, context, path)
    else:
        raise ValueError(f"no figure for a view of kind {view.kind!r}")
