"""The study page's charts (pipelines.report.html): Vega-Lite specs built with altair, one colour per encoding across
them (Colours): the Δ forest plot, NLL by position and by window length, the variance components and the two charts
of the one-run view.
"""

from __future__ import annotations

import math

import altair as alt
from matplotlib.colors import to_hex

from pipelines.analysis.results import DomainResult
from pipelines.analysis.study import Study
from pipelines.report.figures import MAX_CURVE_BINS, binned_curve, encoding_colours
from pipelines.report.page_tables import group_label, plain_label
from pipelines.runs.layout import is_derived

VERDICT_COLOURS = {
    "better": "#1a7f37",
    "worse": "#cf222e",
    "equivalent": "#0969da",
    "stopped": "#8250df",
    "inconclusive": "#57606a",  # 4.5:1 or more on the page's panels (#6e7781 was 4.27:1)
    "open": "#57606a",  # no verdict yet (no test, or below a design's first look)
}
VERDICT_SHAPES = {  # shape as well as colour: a verdict is never told by colour alone
    "better": "triangle-up",
    "worse": "triangle-down",
    "equivalent": "square",
    "stopped": "diamond",
    "inconclusive": "circle",
    "open": "cross",
}


# under the plot, in columns, so that the plot keeps the width of a phone's screen
# three columns: four of the longest names (`nope_every4`) overflow a 390 px phone's chart
ENCODING_LEGEND = alt.Legend(title="encoding (click one to focus it)", orient="bottom", columns=3, symbolLimit=0)
# An extrapolation chart draws the encodings of its `shown` parameter (the page's curve picker sets it) and lists only
# those: 13-27 curves on one chart are no reading, and a palette of 20 repeats its colours
CURVE_LEGEND = alt.Legend(
    title="encoding (click one to focus it)", orient="bottom", columns=3, symbolLimit=0, values=alt.ExprRef("shown")
)
SMALL_HEIGHT = 160  # the extrapolation charts are small multiples, three to a row on a laptop (study.css .grid.small)
SHOWN_BY_DEFAULT = 3  # besides the reference: the encodings best past L, by their mean rank over the charts


def shown_by_default(summary: dict) -> list[str]:
    """The encodings the extrapolation charts draw until the reader picks others: per domain, its reference and the
    SHOWN_BY_DEFAULT encodings with the best mean rank by NLL past L over its (group, split) tables; each chart
    draws those of them it has."""
    shown: list[str] = []
    for name, domain in summary["domains"].items():
        groups: dict[tuple, list[dict]] = {}
        for row in summary["extrapolation"]:
            if row["domain"] == name and row["status"] == "ok" and isinstance(row["nll_past"], int | float):
                groups.setdefault((row["group"], row["split"]), []).append(row)
        ranks: dict[str, list[int]] = {}
        for rows in groups.values():
            for rank, row in enumerate(sorted(rows, key=lambda r: r["nll_past"]), start=1):
                ranks.setdefault(row["encoding"], []).append(rank)
        ref = domain["reference"]
        best = sorted((e for e in ranks if e != ref), key=lambda e: (sum(ranks[e]) / len(ranks[e]), e))
        shown += [e for e in [ref, *best[:SHOWN_BY_DEFAULT]] if e and e not in shown]
    return shown


def _shown_param(shown: list[str]) -> alt.Parameter:
    return alt.param(name="shown", value=shown)


class Colours:
    """One colour per encoding across every chart of the page (encoding_colours, as the PNG figures), each chart's
    legend listing only the encodings it draws."""

    def __init__(self, names: list[str]) -> None:
        self.hex = {name: to_hex(colour) for name, colour in encoding_colours(names).items()}

    def scale(self, values: list[dict]) -> alt.Scale:
        drawn = [name for name in self.hex if any(v["encoding"] == name for v in values)]
        return alt.Scale(domain=drawn, range=[self.hex[name] for name in drawn])


# a forest tick's label: signed, as the tables print a Δ, in as few digits as the value needs (0.02, +0.5, -1)
SIGNED_LABEL = "datum.value === 0 ? '0' : format(datum.value, '+~g')"
TICK_MANTISSAS = (1, 5, 2)  # the tick values tried on each side of 0: 1, 5 and 2 times a power of ten, in that order
TICK_SPACING = 12  # at least 1/12 of the axis (on the symlog scale) between two ticks


def _symlog(value: float, constant: float) -> float:
    """Where `value` lies on Vega's symlog scale of `constant` (its position before the range is applied)."""
    return math.copysign(math.log1p(abs(value) / constant), value)


def forest_ticks(values: list, constant: float) -> list[float]:
    """The forest's x ticks, chosen from the Δs and intervals it draws (issue 64: ticks at -1, 0 and 1 where the
    effects were ±0.5; none on JSB's negative side, where its better encodings are): 0 and, on each side that holds
    data, the outermost 1, 5 or 2 times a power of ten within the data, then the others inwards (1s, then 5s, then
    2s) wherever they keep 1/TICK_SPACING of the symlog axis from every tick taken, so that the ticks fall where the
    effects are, whatever their scale."""
    drawn = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
    if not drawn:
        return [0.0]
    low, high = min(min(drawn), 0.0), max(max(drawn), 0.0)
    gap = (_symlog(high, constant) - _symlog(low, constant)) / TICK_SPACING
    ticks = [0.0]
    for sign, extent in ((-1, -low), (1, high)):
        if extent <= 0:
            continue
        top = math.floor(math.log10(extent))
        candidates = [m * 10.0**k for k in range(top, top - 6, -1) for m in TICK_MANTISSAS if m * 10.0**k <= extent]
        outermost = max(candidates, default=None)
        ordered = [outermost] + sorted(candidates, key=lambda v: (TICK_MANTISSAS.index(_mantissa(v)), -v))
        for value in ordered:
            tick = sign * float(f"{value:.6g}")
            if value and all(abs(_symlog(tick, constant) - _symlog(t, constant)) >= gap for t in ticks):
                ticks.append(tick)
    return sorted(ticks)


def _mantissa(value: float) -> int:
    """The leading digit of a tick candidate (1, 2 or 5)."""
    return round(value / 10.0 ** math.floor(math.log10(value) + 1e-9))


def forest_spec(result: DomainResult, summary: dict) -> dict | None:
    """The Δ forest plot of one domain (nll.png's right panel): each baseline's Δ to the reference with the
    interval its verdict rests on, the equivalence region shaded; hover gives Δ, the interval, p, TOST p, seeds."""
    domain = summary["domains"][result.domain]
    region, digits = domain["equivalence_region"], result.metric.digits
    records = [r for r in domain["encodings"].values() if isinstance(r["delta"], int | float)]
    if not records:
        return None
    records.sort(key=lambda r: (r["rank"], r["encoding"]))
    values = [
        {
            "encoding": r["encoding"],
            "delta": r["delta"],
            "lo": r["decision_lo"],
            "hi": r["decision_hi"],
            "level": r["decision_level"],
            "p": r["seed_p"],
            "p_holm": r["seed_p_holm"],
            "p_tost": r["p_tost"],
            "seeds": str(r["pair_seeds"]),
            "verdict": r["verdict"],
            "label": plain_label(result, r["encoding"])[1],
        }
        for r in records
    ]
    order = [v["encoding"] for v in values]
    scale = alt.Scale(type="symlog", constant=4 * region)
    unit = result.metric.unit
    way = "better →" if result.metric.higher_is_better else "← better"
    # two lines: one overflows a 390 px phone's chart
    axis_title = [
        f"{way}   Δ {result.metric.short} vs {result.ref}",
        f"({unit}; symlog, linear within ±{4 * region:g})",
    ]
    ticks = forest_ticks([v[key] for v in values for key in ("delta", "lo", "hi")] + [-region, region], 4 * region)
    axis = alt.Axis(
        values=ticks,
        labelExpr=SIGNED_LABEL,
        labelOverlap="greedy",
        labelSeparation=6,
        grid=False,
        labelFlush=True,
    )
    x = alt.X("delta:Q", scale=scale, title=axis_title, axis=axis)
    y = alt.Y("encoding:N", sort=order, title=None)
    fmt = f".{digits}f"
    tooltip = [
        alt.Tooltip("encoding:N"),
        alt.Tooltip("delta:Q", title="Δ", format=f"+{fmt}"),
        alt.Tooltip("lo:Q", title="interval from", format=f"+{fmt}"),
        alt.Tooltip("hi:Q", title="interval to", format=f"+{fmt}"),
        alt.Tooltip("level:Q", title="interval level", format=".3~%"),  # 99.9%, never a rounded 100%
        alt.Tooltip("p:Q", title="p (raw)", format=".3~g"),
        alt.Tooltip("p_holm:Q", title="p (Holm)", format=".3~g"),
        alt.Tooltip("p_tost:Q", title="p TOST", format=".3~g"),
        alt.Tooltip("seeds:N", title="seeds"),
        alt.Tooltip("label:N", title="verdict"),
    ]
    data = alt.Data(values=values)
    band = (
        alt.Chart(alt.Data(values=[{"lo": -region, "hi": region}]))
        .mark_rect(color="#2da44e", opacity=0.18)
        .encode(x=alt.X("lo:Q", scale=scale), x2="hi:Q")
    )
    zero = alt.Chart(alt.Data(values=[{"zero": 0.0}])).mark_rule(color="#8c959f").encode(x=alt.X("zero:Q", scale=scale))
    # only the rows with an interval: a pair of one seed has none, and an empty extent makes Vega warn
    with_interval = [v for v in values if isinstance(v["lo"], int | float) and isinstance(v["hi"], int | float)]
    interval = (
        alt.Chart(alt.Data(values=with_interval))
        .mark_rule(strokeWidth=2)
        .encode(x=alt.X("lo:Q", scale=scale), x2="hi:Q", y=y, color=alt.value("#57606a"), tooltip=tooltip)
    )
    words = list(VERDICT_COLOURS)
    point = (
        alt.Chart(data)
        .mark_point(filled=True, size=70)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "verdict:N",
                scale=alt.Scale(domain=words, range=list(VERDICT_COLOURS.values())),
                legend=alt.Legend(title="verdict", orient="bottom", columns=3),
            ),
            shape=alt.Shape(
                "verdict:N",
                scale=alt.Scale(domain=words, range=[VERDICT_SHAPES[word] for word in words]),
                legend=alt.Legend(title="verdict", orient="bottom", columns=3),
            ),
            tooltip=tooltip,
        )
    )
    layers = [band, zero, interval, point] if with_interval else [band, zero, point]
    chart = alt.layer(*layers).properties(
        width="container",
        height=22 * len(values),  # 22 px a row (a Step height made Vega warn: FIT_WIDTH)
        autosize=FIT_WIDTH,
        title=_title([f"{result.domain}: Δ to {result.ref}", f"shaded: equivalence ±{region:g}"]),
    )
    return chart.to_dict()


# a chart as wide as its container and as tall as its rows: fitted in width only, its height a number of pixels
# per row (a Step height with a container width, Vega warned in the console: "Dropping fit-y because spec has
# discrete height", whatever the autosize)
FIT_WIDTH = alt.AutoSizeParams(type="fit-x", contains="padding")


def _title(lines: list[str]) -> alt.TitleParams:
    """A chart's title, one line per item, left-aligned: it wraps where a long one-line title would be cut."""
    return alt.TitleParams(lines, anchor="start", frame="bounds", fontSize=12)  # from the chart's left edge


def _yarn_param() -> alt.Parameter:
    return alt.param(name="show_yarn", value=True)  # the page's "YaRN rows" checkbox sets it in every view


def position_specs(study: Study, colours: Colours, shown: list[str], bins: int = MAX_CURVE_BINS) -> list[dict]:
    """NLL by position, one panel per domain's test split and per (group, split) scored past the training length:
    the curves the PNG figures draw (binned_curve), seeds pooled; YaRN rows togglable, encodings by the legend.
    `bins`: at most this many position bins a curve (fewer than the figures' only where the page's budget needs it,
    which a third title line then says)."""
    coarser = [f"in {bins} bins of positions (the page's size budget)"] if bins < MAX_CURVE_BINS else []
    panels = []
    for result in study.results:
        if result.position_curves:
            title = [f"{result.domain} test", "NLL by position", *coarser]
            panels.append((result.domain, title, None, result.position_curves.items()))
        groups: dict[tuple[str, str], list] = {}
        for curve in result.extrapolation:
            if curve.status == "ok":
                groups.setdefault((curve.group, curve.split), []).append(curve)
        for (group, split), curves in groups.items():
            where = group_label(result.domain, group)
            title = [
                f"{where} {split}",
                f"NLL by position (L = {curves[0].context}, window {curves[0].length})",
                *coarser,
            ]
            panels.append((result.domain, title, curves[0].context, [(c.encoding, c.by_position) for c in curves]))
    specs = []
    for domain, title, context, curves in panels:
        values = []
        for encoding, by_position in curves:
            x, y = binned_curve(*by_position, bins=bins)
            derived = is_derived(encoding)
            values += [
                {"encoding": encoding, "position": _shown(p), "nll": _shown(v), "yarn": derived}
                for p, v in zip(x, y, strict=True)
            ]
        spec = _curve_chart(values, title, context, colours, shown)
        specs.append({"domain": domain, "title": title, "spec": spec, "encodings": {v["encoding"] for v in values}})
    return specs


CURVE_DIGITS = 5  # significant digits of a drawn curve's point: its tooltip shows 4 decimals of an NLL below 10


def _shown(value) -> float:
    """A curve's value as the chart needs it (CURVE_DIGITS significant digits): full float digits would make the
    curves the largest part of the page; the exact values are in the study's per-position files."""
    return float(f"{float(value):.{CURVE_DIGITS}g}")


def _curve_chart(values: list[dict], title: list[str], context: int | None, colours: Colours, shown: list[str]) -> dict:
    legend = alt.selection_point(fields=["encoding"], bind="legend")
    line = (
        alt.Chart(alt.Data(values=values))
        .mark_line(strokeWidth=1.5)
        .encode(
            x=alt.X("position:Q", title="position"),
            y=alt.Y("nll:Q", title="mean NLL (nats)", scale=alt.Scale(zero=False)),
            color=alt.Color("encoding:N", scale=colours.scale(values), legend=CURVE_LEGEND),
            strokeDash=alt.condition("datum.yarn", alt.value([4, 3]), alt.value([1, 0])),
            opacity=alt.condition(legend, alt.value(1.0), alt.value(0.12)),
            tooltip=[
                alt.Tooltip("encoding:N"),
                alt.Tooltip("position:Q", format=".0f"),
                alt.Tooltip("nll:Q", title="NLL", format=".4f"),
            ],
        )
        .add_params(legend, _yarn_param())
        .transform_filter("show_yarn || !datum.yarn")
        .transform_filter("indexof(shown, datum.encoding) >= 0")
    )
    layers = [line]
    if context is not None:
        layers.append(
            alt.Chart(alt.Data(values=[{"L": context}]))
            .mark_rule(color="#57606a", strokeDash=[2, 2])
            .encode(x="L:Q", tooltip=[alt.Tooltip("L:Q", title="training length L")])
        )
    chart = alt.layer(*layers).add_params(_shown_param(_drawn(shown, values)))
    return chart.properties(width="container", height=SMALL_HEIGHT, title=_title(title)).to_dict()


def _drawn(shown: list[str], values: list[dict]) -> list[str]:
    """Of `shown`, the encodings a chart has values of (its legend lists no encoding it cannot draw)."""
    present = {value["encoding"] for value in values}
    return [name for name in shown if name in present]


def window_specs(study: Study, summary: dict, colours: Colours, shown: list[str]) -> list[dict]:
    """NLL past the training length by window length (as a multiple of L), per domain and group: summary.json's
    extrapolation rows (extrapolation.csv), with the seed-paired Δ past L on hover."""
    rows = [row for row in summary["extrapolation"] if row["status"] == "ok" and row["nll_past"] is not None]
    specs = []
    for result in study.results:
        groups = sorted({row["group"] for row in rows if row["domain"] == result.domain})
        for group in groups:
            values = [
                {
                    "encoding": row["encoding"],
                    "window": f"{row['length'] // row['context']}x"
                    if row["length"] % row["context"] == 0
                    else f"{row['length'] / row['context']:.2g}x",
                    "length": row["length"],
                    "nll_past": row["nll_past"],
                    "nll_within": row["nll_within"],
                    "seeds": row["seeds"],
                    "past_delta": row["past_delta"],
                    "past_delta_lo": row["past_delta_lo"],
                    "past_delta_hi": row["past_delta_hi"],
                    "past_p_holm": row["past_p_holm"],
                    "past_verdict": row["past_verdict"],
                    "yarn": is_derived(row["encoding"]),
                }
                for row in rows
                if row["domain"] == result.domain and row["group"] == group
            ]
            where = group_label(result.domain, group)
            legend = alt.selection_point(fields=["encoding"], bind="legend")
            windows = [w for w in dict.fromkeys(v["window"] for v in sorted(values, key=lambda v: v["length"]))]
            if len(windows) < 2:
                continue  # one window past L draws no trend: its numbers are the extrapolation table's
            encode = {
                "x": alt.X("window:O", sort=windows, title="window length (x L)"),
                "y": alt.Y("nll_past:Q", title="NLL past L (nats)", scale=alt.Scale(zero=False)),
                "color": alt.Color("encoding:N", scale=colours.scale(values), legend=CURVE_LEGEND),
                "opacity": alt.condition(legend, alt.value(1.0), alt.value(0.12)),
            }
            tooltip = [
                alt.Tooltip("encoding:N"),
                alt.Tooltip("window:N"),
                alt.Tooltip("nll_past:Q", title="NLL past L", format=".4f"),
                alt.Tooltip("nll_within:Q", title="NLL within L", format=".4f"),
                alt.Tooltip("seeds:Q"),
                alt.Tooltip("past_delta:Q", title="Δ past L vs reference", format="+.4f"),
                alt.Tooltip("past_delta_lo:Q", title="Δ interval from", format="+.4f"),
                alt.Tooltip("past_delta_hi:Q", title="Δ interval to", format="+.4f"),
                alt.Tooltip("past_p_holm:Q", title="p (Holm)", format=".3~g"),
                alt.Tooltip("past_verdict:N", title="verdict past L"),
            ]
            base = alt.Chart(alt.Data(values=values)).encode(**encode)
            chart = (
                alt.layer(
                    base.mark_line(strokeWidth=1.2).encode(detail="encoding:N"),
                    base.mark_point(filled=True, size=60).encode(tooltip=tooltip),
                )
                .add_params(legend, _yarn_param(), _shown_param(_drawn(shown, values)))
                .transform_filter("show_yarn || !datum.yarn")
                .transform_filter("indexof(shown, datum.encoding) >= 0")
                .properties(
                    width="container", height=SMALL_HEIGHT, title=_title([where, "NLL past L by window length"])
                )
            )
            drawn = {v["encoding"] for v in values}
            specs.append({"domain": result.domain, "title": where, "spec": chart.to_dict(), "encodings": drawn})
    return specs


def variance_spec(result: DomainResult, summary: dict) -> dict | None:
    components = summary["domains"][result.domain].get("variance_components")
    if not isinstance(components, dict) or not components:
        return None
    values = [
        {"component": name, "variance": value, "sd": math.sqrt(max(value, 0.0))}
        for name, value in components.items()
        if isinstance(value, int | float)
    ]
    chart = (
        alt.Chart(alt.Data(values=values))
        .mark_bar(color="#0969da")
        .encode(
            x=alt.X("sd:Q", title="SD (square root of the variance component)"),
            y=alt.Y("component:N", sort=None, title=None),
            tooltip=[
                alt.Tooltip("component:N"),
                alt.Tooltip("variance:Q", format=".3~g"),
                alt.Tooltip("sd:Q", title="SD", format=".3~g"),
            ],
        )
        .properties(
            width="container",
            height=24 * len(values),
            autosize=FIT_WIDTH,
            title=_title([result.domain, "SD of each component"]),
        )
    )
    return chart.to_dict()


def run_specs() -> dict[str, dict]:
    """The two charts of the one-run view, on named data the page's script fills with the chosen run."""
    train = (
        alt.Chart(alt.NamedData("train"))
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("loss:Q", title="loss (nats)", scale=alt.Scale(zero=False)),
            color=alt.Color(
                "curve:N",
                scale=alt.Scale(domain=["training", "validation"], range=["#0969da", "#cf222e"]),
                legend=alt.Legend(orient="bottom", title=None),
            ),
            tooltip=[alt.Tooltip("curve:N"), alt.Tooltip("step:Q"), alt.Tooltip("loss:Q", format=".4f")],
        )
        .properties(width="container", height=240, title=_title(["training and validation loss"]))
    )
    examples = alt.NamedData("examples")
    diagonal = alt.Chart(examples).mark_line(color="#8c959f", strokeDash=[4, 3], clip=True).encode(x="ref:Q", y="ref:Q")
    points = (
        alt.Chart(examples)
        .mark_point(filled=True, size=30, color="#0969da")
        .encode(
            x=alt.X("ref:Q", title="test NLL per example: the reference, same seed", scale=alt.Scale(zero=False)),
            y=alt.Y("run:Q", title="this run", scale=alt.Scale(zero=False)),
            tooltip=[
                alt.Tooltip("example:N"),
                alt.Tooltip("run:Q", title="this run", format=".4f"),
                alt.Tooltip("ref:Q", title="reference", format=".4f"),
            ],
        )
    )
    scatter = alt.layer(diagonal, points).properties(
        width="container", height=240, title=_title(["per example: this run against the reference", "dashed: equal"])
    )
    return {"train": train.to_dict(), "examples": scatter.to_dict()}
