"""The study's page: index.html beside summary.md, one file that opens with no network (issue 34).

Every number the page shows is read from the study's summary.json object (the very dict render_study writes, passed
in, never recomputed) or, for the curves and one run's view, from the objects the PNG figures and the domain reports
draw from (the binned per-position curves, the extrapolation rows, the variance components, the run files the
analysis read). The verdict words come from the helpers the markdown uses (pipelines.report.verdicts), so the page
and summary.md cannot word a verdict differently.

Layout: a header (what the study is, links to summary.md/csv/json), the leaderboard (sortable, one row per domain
and encoding, then the mean rank across domains), the Δ forest plot per domain, the extrapolation (NLL by position
and by window length, YaRN rows togglable), make settle's looks, one run (training curves, manifest, per-example
NLL against the reference's on the same seed) and the variance components. A domain filter hides every other
domain's rows, charts and runs.

Charts are Vega-Lite specs built with altair; the JavaScript that draws them (vega, vega-lite and vega-embed, about
0.9 MB minified, bundled offline by vl-convert-python) is embedded once per page. Why not plotly: its offline
bundle is 4.8 MB on its own, past the page budget (PAGE_BUDGET) before any data; the wheel carries no partial
bundle. The page is rendered from a jinja2 template (templates/study.html.j2, its CSS and script beside it).
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
import math
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import altair as alt
import jinja2
import vl_convert
from matplotlib.colors import to_hex

from pipelines.analysis.results import DomainResult
from pipelines.analysis.study import Study
from pipelines.report.figures import binned_curve, encoding_colours
from pipelines.report.verdicts import STOPPED_WORDS, family_of, verdict_label
from pipelines.runs.layout import MANIFEST, RunFolder, is_derived
from pipelines.runs.metrics import per_example_path, read_run_csv, read_run_json
from pipelines.runs.train_log import read_training_curves

INDEX = "index.html"
# bytes: a page past this is refused. A study's page is committed with it, and a repository takes files of at most
# 2 MB (the synthetic study's page at full detail, 225 runs, was 2.4 MB: it could not be published)
PAGE_BUDGET = 2_000_000
TEMPLATES = Path(__file__).parent / "templates"
# The one-run view's detail per run: at most this many points per training curve (every k-th logged step) and this
# many test examples. A page over PAGE_BUDGET is drawn again at each coarser level in turn (RUN_DETAIL_LEVELS).
TRAINING_POINTS = 400
RUN_EXAMPLES = 300
RUN_DETAIL_LEVELS = ((TRAINING_POINTS, RUN_EXAMPLES), (200, 150), (100, 75), (50, 40))
LOSS_DIGITS = 4  # significant digits of a training curve's loss on the page: a chart cannot show more
VERDICT_COLOURS = {
    "better": "#1a7f37",
    "worse": "#cf222e",
    "equivalent": "#0969da",
    "stopped": "#8250df",
    "inconclusive": "#6e7781",
}


# under the plot, in columns, so that the plot keeps the width of a phone's screen
ENCODING_LEGEND = alt.Legend(title="encoding (click one to focus it)", orient="bottom", columns=4, symbolLimit=0)


class PageTooLarge(ValueError):
    """The page would exceed PAGE_BUDGET."""


# ------------------------------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cell:
    """One table cell: its text, the value it sorts by (data-value: the summary's own number, written exactly), an
    optional interval (data-lo, data-hi) and a title shown on hover."""

    text: str
    value: object = None
    lo: object = None
    hi: object = None
    title: str = ""
    css: str = ""
    sub: str = ""  # shown under the value (its interval)

    @property
    def value_attr(self) -> str:
        return _attr(self.value)

    @property
    def lo_attr(self) -> str:
        return _attr(self.lo)

    @property
    def hi_attr(self) -> str:
        return _attr(self.hi)


def _attr(value) -> str:
    """A number as its exact JSON text (repr of a float), a string as it is, nothing for a missing value."""
    if value is None or value == "":
        return ""
    return json.dumps(value) if isinstance(value, int | float) else str(value)


def _number(value, digits: int, signed: bool = False) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return ""
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _interval(lo, hi, digits: int, signed: bool = False) -> str:
    if not isinstance(lo, int | float) or not isinstance(hi, int | float):
        return ""
    return f"[{_number(lo, digits, signed)}, {_number(hi, digits, signed)}]"


def _p(value) -> str:
    """A p-value or variance to 3 significant digits (verdicts.p_text's form), nothing where summary.json has none."""
    return f"{value:.3g}" if isinstance(value, int | float) else ""


def plain_label(result: DomainResult, encoding: str) -> tuple[str, str]:
    """(the verdict as a table cell says it, the whole label) for one encoding, in summary.md's words
    (verdict_label) without its markdown."""
    entry = result.entries.get(encoding)
    if result.ref is None:
        return "", ""
    if encoding == result.ref:
        rule = result.verdicts.ref_note.replace("`", "") if result.verdicts else ""
        return "reference", f"the reference: {rule}" if rule else "the reference"
    if entry is None or entry.verdict is None:
        return "", ""
    label = verdict_label(entry.verdict, family_of(result)).replace("**", "")
    word = verdict_label(replace(entry.verdict, scope=""), family_of(result)).replace("**", "")  # without its scope
    return word, label


# ------------------------------------------------------------------------------------------- leaderboard


def _seed_count(record: dict) -> int:
    return len(record["seeds"]) if isinstance(record.get("seeds"), dict) else 0


def leaderboard_rows(study: Study, summary: dict) -> list[dict]:
    """One row per (domain, encoding), in the study's order: every number from summary.json's record."""
    rows = []
    for result in study.results:
        domain = summary["domains"][result.domain]
        digits, region = result.metric.digits, domain["equivalence_region"]
        for encoding, record in domain["encodings"].items():
            word, label = plain_label(result, encoding)
            is_ref = encoding == domain["reference"]
            verdict = record["verdict"] or ("reference" if is_ref else "")
            rows.append(
                {
                    "domain": result.domain,
                    "encoding": encoding,
                    "cells": {
                        "domain": Cell(result.domain, result.domain),
                        "encoding": Cell(encoding + (" (ref)" if is_ref else ""), encoding),
                        "score": Cell(
                            _number(record["score"], digits),
                            record["score"],
                            record["within_lo"],
                            record["within_hi"],
                            title=f"{record['interval']} interval",
                            sub=_interval(record["within_lo"], record["within_hi"], digits),
                        ),
                        "verdict": Cell(word, verdict, title=label, css=f"verdict {verdict}"),
                        "delta": Cell(
                            _number(record["delta"], digits, signed=True),
                            record["delta"],
                            record["delta_lo"],
                            record["delta_hi"],
                            title="95% t-interval over seeds, the test set fixed",
                            sub=_interval(record["delta_lo"], record["delta_hi"], digits, signed=True),
                        ),
                        "region": Cell(f"±{region:g}", region),
                        "p_holm": Cell(_p(record["seed_p_holm"]), record["seed_p_holm"]),
                        "p_tost": Cell(_p(record["p_tost"]), record["p_tost"]),
                        "p_better": Cell(_number(record["p_better"], 2), record["p_better"]),
                        "seeds": Cell(str(record["seeds_used"]), _seed_count(record)),
                        "rank": Cell(_number(record["rank"], 1).removesuffix(".0"), record["rank"]),
                    },
                }
            )
    return rows


LEADERBOARD_COLUMNS = [
    ("domain", "domain", ""),
    ("encoding", "encoding", ""),
    ("score", "score [95% within]", "the domain's metric over the encoding's own seeds, its within-example interval"),
    ("verdict", "verdict", "the seed-aware verdict against the domain's reference (summary.md's words)"),
    ("delta", "Δ vs ref [95% t]", "mean per-seed difference on the seeds both finished, its t-interval over seeds"),
    ("region", "equiv.", "the region of practical equivalence TOST tests (±)"),
    ("p_holm", "p (Holm)", "the difference test's p, Holm-adjusted within the verdict's family"),
    ("p_tost", "p TOST", "two one-sided tests of |Δ| ≥ the region"),
    ("p_better", "P(better)", "share of paired seeds where the encoding beats the reference"),
    ("seeds", "seeds", "the encoding's own finished seeds (k/expected when fewer)"),
    ("rank", "rank", "within the domain by the matched rule (Δ to the reference on matched seeds)"),
]


def mean_rank_rows(summary: dict) -> list[dict]:
    rows = []
    for encoding, record in summary["mean_rank"].items():
        lo, hi = record["ci_over_seeds"]
        rows.append(
            {
                "encoding": encoding,
                "cells": {
                    "encoding": Cell(encoding, encoding),
                    "mean_rank": Cell(_number(record["mean"], 2), record["mean"]),
                    "se": Cell(_number(record["se"], 2), record["se"]),
                    "range": Cell(_interval(lo, hi, 2), lo, lo, hi),
                    "p_rank_1": Cell(_number(record["p_rank_1"], 2), record["p_rank_1"]),
                    "domains": Cell(str(record["domains"]), record["domains"]),
                },
            }
        )
    return sorted(rows, key=lambda row: (row["cells"]["mean_rank"].value, row["encoding"]))


MEAN_RANK_COLUMNS = [
    ("encoding", "encoding", ""),
    ("mean_rank", "mean rank", "rank within each domain, mean over the domains (1 = best)"),
    ("se", "SE", "standard error across domains"),
    ("range", "2.5-97.5% over resampled seeds", "Bayesian bootstrap over each domain's seeds (descriptive)"),
    ("p_rank_1", "P(rank 1)", "share of resamples where the encoding's mean rank is the best"),
    ("domains", "domains", ""),
]


# ------------------------------------------------------------------------------------------------ charts


class Colours:
    """One colour per encoding across every chart of the page (encoding_colours, as the PNG figures), each chart's
    legend listing only the encodings it draws."""

    def __init__(self, names: list[str]) -> None:
        self.hex = {name: to_hex(colour) for name, colour in encoding_colours(names).items()}

    def scale(self, values: list[dict]) -> alt.Scale:
        drawn = [name for name in self.hex if any(v["encoding"] == name for v in values)]
        return alt.Scale(domain=drawn, range=[self.hex[name] for name in drawn])


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
    axis_title = f"Δ {result.metric.short} vs {result.ref} ({unit}; symlog, linear within ±{4 * region:g})"
    axis = alt.Axis(labelOverlap="greedy", labelSeparation=6, grid=False, tickCount=6, labelFlush=True)
    x = alt.X("delta:Q", scale=scale, title=axis_title, axis=axis)
    y = alt.Y("encoding:N", sort=order, title=None)
    fmt = f".{digits}f"
    tooltip = [
        alt.Tooltip("encoding:N"),
        alt.Tooltip("delta:Q", title="Δ", format=f"+{fmt}"),
        alt.Tooltip("lo:Q", title="interval from", format=f"+{fmt}"),
        alt.Tooltip("hi:Q", title="interval to", format=f"+{fmt}"),
        alt.Tooltip("level:Q", title="interval level", format=".0%"),
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
    interval = (
        alt.Chart(data)
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
                legend=alt.Legend(title="verdict", orient="bottom"),
            ),
            tooltip=tooltip,
        )
    )
    chart = alt.layer(band, zero, interval, point).properties(
        width="container",
        height=alt.Step(22),
        title=_title([f"{result.domain}: Δ to {result.ref}", f"shaded: equivalence ±{region:g}"]),
    )
    return chart.to_dict()


def _title(lines: list[str]) -> alt.TitleParams:
    """A chart's title, one line per item, left-aligned: it wraps where a long one-line title would be cut."""
    return alt.TitleParams(lines, anchor="start", fontSize=12)


def _yarn_param() -> alt.Parameter:
    return alt.param(name="show_yarn", value=True)  # the page's "YaRN rows" checkbox sets it in every view


def position_specs(study: Study, colours: Colours) -> list[dict]:
    """NLL by position, one panel per domain's test split and per (group, split) scored past the training length:
    the curves the PNG figures draw (binned_curve), seeds pooled; YaRN rows togglable, encodings by the legend."""
    panels = []
    for result in study.results:
        if result.position_curves:
            title = [f"{result.domain} test", "NLL by position"]
            panels.append((result.domain, title, None, result.position_curves.items()))
        groups: dict[tuple[str, str], list] = {}
        for curve in result.extrapolation:
            if curve.status == "ok":
                groups.setdefault((curve.group, curve.split), []).append(curve)
        for (group, split), curves in groups.items():
            where = result.domain if group == result.domain else f"{result.domain}/{group}"
            title = [f"{where} {split}", f"NLL by position (L = {curves[0].context}, window {curves[0].length})"]
            panels.append((result.domain, title, curves[0].context, [(c.encoding, c.by_position) for c in curves]))
    specs = []
    for domain, title, context, curves in panels:
        values = []
        for encoding, by_position in curves:
            x, y = binned_curve(*by_position)
            derived = is_derived(encoding)
            values += [
                {"encoding": encoding, "position": float(p), "nll": float(v), "yarn": derived}
                for p, v in zip(x, y, strict=True)
            ]
        specs.append({"domain": domain, "title": title, "spec": _curve_chart(values, title, context, colours)})
    return specs


def _curve_chart(values: list[dict], title: list[str], context: int | None, colours: Colours) -> dict:
    legend = alt.selection_point(fields=["encoding"], bind="legend")
    line = (
        alt.Chart(alt.Data(values=values))
        .mark_line(strokeWidth=1.5)
        .encode(
            x=alt.X("position:Q", title="position"),
            y=alt.Y("nll:Q", title="mean NLL (nats)", scale=alt.Scale(zero=False)),
            color=alt.Color("encoding:N", scale=colours.scale(values), legend=ENCODING_LEGEND),
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
    )
    layers = [line]
    if context is not None:
        layers.append(
            alt.Chart(alt.Data(values=[{"L": context}]))
            .mark_rule(color="#57606a", strokeDash=[2, 2])
            .encode(x="L:Q", tooltip=[alt.Tooltip("L:Q", title="training length L")])
        )
    return alt.layer(*layers).properties(width="container", height=260, title=_title(title)).to_dict()


def window_specs(study: Study, summary: dict, colours: Colours) -> list[dict]:
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
            where = result.domain if group == result.domain else f"{result.domain}/{group}"
            legend = alt.selection_point(fields=["encoding"], bind="legend")
            windows = [w for w in dict.fromkeys(v["window"] for v in sorted(values, key=lambda v: v["length"]))]
            encode = {
                "x": alt.X("window:O", sort=windows, title="window length (x L)"),
                "y": alt.Y("nll_past:Q", title="NLL past L (nats)", scale=alt.Scale(zero=False)),
                "color": alt.Color("encoding:N", scale=colours.scale(values), legend=ENCODING_LEGEND),
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
                .add_params(legend, _yarn_param())
                .transform_filter("show_yarn || !datum.yarn")
                .properties(width="container", height=240, title=_title([where, "NLL past L by window length"]))
            )
            specs.append({"domain": result.domain, "title": where, "spec": chart.to_dict()})
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
        .properties(width="container", height=alt.Step(24), title=_title([result.domain, "SD of each component"]))
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


# ---------------------------------------------------------------------------------------------- one run


def _key_of(run: RunFolder) -> tuple:
    return run.domain, run.key.task, run.encoding, run.seed


def _per_example_nll(run: RunFolder) -> dict[int, float]:
    """The run's test NLL per example, from the table the analysis read (read_run_csv's memo: not opened again)."""
    path = per_example_path(run.path, "test")
    if not path.is_file() and path not in run.files:
        return {}
    table = read_run_csv(run, path, ("example", "nll"))
    return {int(e): float(v) for e, v in zip(table["example"], table["nll"], strict=True)}


def _shown_examples(nll: dict[int, float], most: int = RUN_EXAMPLES) -> list[list]:
    """[[example, NLL], ...] in example order: at most `most` of them (every k-th, the same ones in every run of
    the test set), each to 6 significant digits: what the scatter draws and its tooltip prints (4 decimals); the
    exact values are in the run's files."""
    ids = sorted(nll)
    stride = max(1, math.ceil(len(ids) / most))
    return [[example, float(f"{nll[example]:.6g}")] for example in ids[::stride]]


def run_records(study: Study, detail: tuple[int, int] = RUN_DETAIL_LEVELS[0]) -> list[dict]:
    """Every finished run of the study: its manifest, training curves (when its folder has a training log), its
    per-example test NLL, and the reference's run of the same seed (and task) that the page sets it against.
    `detail`: at most this many points per training curve and test examples per run."""
    points, most = detail
    finished = [run for run in study.runs if run.finished]
    by_key = {_key_of(run): run for run in finished}
    refs = {result.domain: result.ref for result in study.results}
    records = []
    for run in sorted(finished, key=lambda r: (r.domain, r.key.task or "", r.encoding, r.seed)):
        ref = refs.get(run.domain)
        nll = _per_example_nll(run)
        record = {
            "label": run.label,
            "domain": run.domain,
            "encoding": run.encoding,
            "seed": run.seed,
            "manifest": read_run_json(run, run.path / MANIFEST),
            "train": _training_rows(run, points),
            "examples": _shown_examples(nll, most),
            "total_examples": len(nll),
            "ref": None,
            "note": "",
        }
        ref_run = by_key.get((run.domain, run.key.task, ref, run.seed)) if ref else None
        if ref is None:
            record["note"] = "the domain has no reference"
        elif run.encoding == ref:
            record["note"] = "this run is the reference's"
        elif ref_run is None:
            record["note"] = f"the reference {ref} has no finished seed {run.seed} here"
        elif not nll:
            record["note"] = "this run has no per-example test scores"
        else:
            record["ref"] = ref_run.label
        records.append(record)
    return records


def _training_rows(run: RunFolder, most: int = TRAINING_POINTS) -> list[list] | None:
    """[[curve, step, loss], ...], at most `most` per curve (every k-th point, the last kept), the loss to LOSS_DIGITS
    significant digits (a float32 loss's full digits gzip 4 times larger, and no chart shows them); None when the
    run folder holds no training log."""
    curves = read_training_curves(run)
    if curves is None:
        return None
    rows = []
    for name, points in curves.items():
        stride = max(1, math.ceil(len(points) / most))
        kept = points[::stride] + ([points[-1]] if (len(points) - 1) % stride else [])
        rows += [[name, step, float(f"{loss:.{LOSS_DIGITS}g}")] for step, loss in kept]
    return rows


# ---------------------------------------------------------------------------------------------- the rest


def looks_tables(study: Study, summary: dict) -> list[dict]:
    """Per domain with a make-settle design: each look's seeds (and those it added) and alpha, and per baseline its
    p (Holm) against that alpha, TOST p and word at each look; the look that decided it marked."""
    tables = []
    for result in study.results:
        domain = summary["domains"][result.domain]
        design = domain.get("verdict_design") or {}
        if design.get("fixed_sample") or not design or not domain.get("looks"):
            continue
        for family, looks in (("the design's family", domain["looks"]), ("joined", domain.get("joined_looks", []))):
            if not looks:
                continue
            seen: set[int] = set()
            columns = []
            for look in looks:
                added = [seed for seed in look["seeds"] if seed not in seen]
                seen |= set(look["seeds"])
                columns.append(
                    {
                        "look": look["look"],
                        "seeds": len(look["seeds"]),
                        "added": ", ".join(map(str, added)),
                        "alpha": look["alpha"],
                        "calls_for": ", ".join(look["calls_for"]),
                    }
                )
            baselines = list(dict.fromkeys(name for look in looks for name in look["pairs"]))
            rows = []
            for name in baselines:
                record = domain["encodings"].get(name, {})
                decided = record.get("verdict_look")
                cells = []
                for look in looks:
                    pair = look["pairs"].get(name)
                    if pair is None:
                        earlier = isinstance(decided, int) and decided < look["look"]
                        cells.append({"absent": f"decided at look {decided}" if earlier else "not in this look"})
                        continue
                    word = STOPPED_WORDS if pair["verdict"] == "stopped" else pair["verdict"]
                    cells.append(
                        {
                            "p_holm": _p(pair["p_holm"]),
                            "p_holm_value": _attr(pair["p_holm"]),
                            "alpha": f"{look['alpha']:.4g}",
                            "p_tost": _p(pair["p_tost"]),
                            "seeds": pair["seeds"],
                            "word": word,
                            "verdict": pair["verdict"],
                            "decided": decided == look["look"],
                            "absent": "",
                        }
                    )
                rows.append({"encoding": name, "cells": cells, "final": record.get("verdict", "")})
            tables.append(
                {"domain": result.domain, "family": family, "ref": domain["reference"], "looks": columns, "rows": rows}
            )
    return tables


def variance_tables(study: Study, summary: dict) -> list[dict]:
    tables = []
    for result in study.results:
        components = summary["domains"][result.domain].get("variance_components")
        if components is None:
            continue
        rows = (
            [
                {"component": name, "variance": _p(value), "sd": _p(math.sqrt(max(value, 0.0)))}
                for name, value in components.items()
            ]
            if isinstance(components, dict)
            else []
        )
        tables.append(
            {
                "domain": result.domain,
                "rows": rows,
                "note": components if isinstance(components, str) else "",
                "chart": variance_spec(result, summary),
            }
        )
    return tables


def header_facts(study: Study, summary: dict, runs: list[dict]) -> dict:
    """What the study is: its domains (preset, metric, seeds, reference and how it was chosen), the code commits and
    the machines its runs were trained on (from their manifests)."""
    domains = []
    for result in study.results:
        domain = summary["domains"][result.domain]
        seeds = domain["seeds"]
        domains.append(
            {
                "name": result.domain,
                "preset": domain["preset"],
                "metric": f"{domain['metric']} ({'lower' if domain['lower_is_better'] else 'higher'} is better)",
                "seeds": ", ".join(map(str, seeds["used"])) or "none common to every encoding",
                "expected": ", ".join(map(str, seeds["expected"])),
                "reference": domain["reference"] or "none",
                "rule": domain["reference_rule"],
                "encodings": len(domain["encodings"]),
            }
        )
    commits = Counter()
    for result in study.results:
        for sha, labels in result.commits.items():
            commits[sha] += len(labels)
    machines = Counter()
    for record in runs:
        manifest = record["manifest"]
        packages = manifest.get("packages") or {}
        described = ", ".join(
            part
            for part in (
                f"device {manifest.get('device', 'unrecorded')}",
                f"torch {packages['torch']}" if "torch" in packages else "",
                f"python {packages['python']}" if "python" in packages else "",
            )
            if part
        )
        machines[described] += 1
    references: dict[tuple[str, str], list[str]] = {}
    for d in domains:
        references.setdefault((d["reference"], d["rule"]), []).append(d["name"])
    return {
        "domains": domains,
        "references": [{"ref": ref, "rule": rule, "domains": names} for (ref, rule), names in references.items()],
        "commits": [{"sha": sha, "runs": count} for sha, count in sorted(commits.items())],
        "machines": [{"what": what, "runs": count} for what, count in machines.most_common()],
        "runs_root": summary["runs"],
        "reference": summary["reference"],
        "missing": summary["missing_runs"],
    }


@functools.cache
def vega_bundle() -> str:
    """vega, vega-lite (the version altair's schema is written for) and vega-embed as one script that defines
    window.vegaEmbed, bundled by vl-convert-python from the JavaScript its wheel carries (offline; about 0.9 MB;
    bundling takes some seconds, once per process)."""
    version = "_".join(alt.SCHEMA_VERSION.split(".")[:2])  # "v6.4.1" -> "v6_4", vl-convert's name for it
    script = vl_convert.javascript_bundle(vl_version=version)
    return script.replace("</script", "<\\/script")  # never closes the page's script element early


def code_spans(text: str) -> str:
    """Text from the markdown reports (`x` marks code) as escaped HTML with <code> elements (the template marks
    the result safe)."""
    parts = str(text).split("`")
    return "".join(f"<code>{html.escape(part)}</code>" if i % 2 else html.escape(part) for i, part in enumerate(parts))


def _packed_json(value) -> str:
    """JSON, gzipped (no timestamp: the same study gives the same page) and base64-encoded, for a script element the
    page inflates with the browser's DecompressionStream: manifests and curves repeat themselves, and a study of
    hundreds of runs stays within the page budget."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    return base64.b64encode(gzip.compress(text.encode(), compresslevel=9, mtime=0)).decode()


def study_page(study: Study, summary: dict, links: dict[str, str]) -> str:
    """The page's HTML from the analysed study and its summary.json object; `links`: the study's files by what they
    are (relative paths). A page over PAGE_BUDGET is drawn again with less of each run (RUN_DETAIL_LEVELS: the
    one-run view says how many examples it shows); PageTooLarge when it exceeds the budget at the coarsest level."""
    names = list(study.order)
    names += sorted({curve.encoding for r in study.results for curve in r.extrapolation} - set(names))
    colours = Colours(names)
    charts, sections = {}, {"forest": [], "positions": [], "windows": [], "variance": []}

    def add(section: str, domain: str, title: str, spec: dict | None) -> str | None:
        """Register a chart of a section; its element's id (None for no chart)."""
        if spec is None:
            return None
        name = f"{section}-{len(charts)}"
        charts[name] = spec
        sections[section].append({"id": name, "domain": domain, "title": title})
        return name

    for result in study.results:
        add("forest", result.domain, result.domain, forest_spec(result, summary))
    for panel in position_specs(study, colours):
        add("positions", panel["domain"], panel["title"], panel["spec"])
    for panel in window_specs(study, summary, colours):
        add("windows", panel["domain"], panel["title"], panel["spec"])
    variance = variance_tables(study, summary)
    for table in variance:
        table["chart"] = add("variance", table["domain"], table["domain"], table["chart"])
    run_charts = run_specs()
    charts.update({f"run-{name}": spec for name, spec in run_charts.items()})
    has_yarn = any(is_derived(name) for name in names)

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["code_spans"] = code_spans
    template = environment.get_template("study.html.j2")
    fixed = dict(  # what does not depend on the detail per run: computed once, whatever the level
        links=links,
        domains=[result.domain for result in study.results],
        leaderboard_columns=LEADERBOARD_COLUMNS,
        leaderboard=leaderboard_rows(study, summary),
        mean_rank_columns=MEAN_RANK_COLUMNS,
        mean_rank=mean_rank_rows(summary),
        not_ranked=summary["not_ranked"],
        sections=sections,
        looks=looks_tables(study, summary),
        variance=variance,
        has_yarn=has_yarn,
        charts_data=_packed_json(charts),
        style=(TEMPLATES / "study.css").read_text(),
        script=(TEMPLATES / "study.js").read_text(),
        vega=vega_bundle(),
    )
    for detail in RUN_DETAIL_LEVELS:
        runs = run_records(study, detail)
        page = template.render(
            **fixed,
            header=header_facts(study, summary, runs),
            run_options=[{"label": r["label"], "domain": r["domain"]} for r in runs],
            first_run=next((r["label"] for r in runs if r["ref"]), runs[0]["label"] if runs else ""),
            runs_data=_packed_json(runs),
        )
        size = len(page.encode())
        if size <= PAGE_BUDGET:
            return page
    raise PageTooLarge(
        f"{INDEX}: {size / 2**20:.2f} MiB, over the page budget of {PAGE_BUDGET:,} bytes even at the coarsest "
        f"detail per run ({detail[0]} training points, {detail[1]} examples)"
    )
