"""The study's page: index.html beside summary.md, one file that opens with no network (issue 34).

Every number the page shows is read from the study's summary.json object (the very dict render_study writes, passed
in, never recomputed) or, for the curves and one run's view, from the objects the PNG figures and the domain reports
draw from (the binned per-position curves, the extrapolation rows, the variance components, the run files the
analysis read). The verdict words come from the helpers the markdown uses (pipelines.report.verdicts), so the page
and summary.md cannot word a verdict differently.

Layout: a header (what the study is, links to summary.md/csv/json; its first screen the top of the leaderboard,
each domain's best rows with their Δ, beside or above the answer), the leaderboard (sortable, one row per domain
and encoding, then the mean rank across domains), the Δ forest plot per domain, the extrapolation (NLL by position
and by window length, YaRN rows togglable), make settle's looks, one run (training curves, manifest, per-example
NLL against the reference's on the same seed) and the variance components. A domain filter hides every other
domain's rows, charts and runs.

Charts are Vega-Lite specs built with altair; the JavaScript that draws them (vega, vega-lite and vega-embed, about
0.9 MB minified, bundled offline by vl-convert-python) is embedded once per page, gzipped like the data (0.4 MB in
base64: half the page budget would go to it otherwise), and the page runs it before its own script. Why not plotly:
its offline bundle is 4.8 MB on its own, past the page budget (PAGE_BUDGET) before any data; the wheel carries no
partial bundle. The page is rendered from a jinja2 template (templates/study.html.j2, its CSS and script beside it).

The page's parts: its tables (pipelines.report.page_tables), its charts (pipelines.report.page_charts) and the
one-run view's records (pipelines.report.page_runs); this module assembles them into the page.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
import math
import re
from collections import Counter
from pathlib import Path

import altair as alt
import jinja2
import vl_convert

from pipelines.analysis.evidence import commit_label
from pipelines.analysis.results import bridged_settings_text
from pipelines.analysis.study import Study
from pipelines.report.answer import answer_order
from pipelines.report.figures import MAX_CURVE_BINS
from pipelines.report.markdown import counted, runs_text
from pipelines.report.page_charts import (
    SHOWN_BY_DEFAULT,
    Colours,
    forest_spec,
    position_specs,
    run_specs,
    shown_by_default,
    variance_spec,
    window_specs,
)
from pipelines.report.page_detail import extrapolation_tables, friedman_tables, seed_tables, task_tables
from pipelines.report.page_ranks import leaderboard_rank_notes, mean_rank_notes
from pipelines.report.page_runs import RUN_DETAIL_LEVELS, run_records
from pipelines.report.page_tables import (
    MEAN_RANK_COLUMNS,
    ONE_DOMAIN_RANK_COLUMNS,
    leaderboard_columns,
    leaderboard_rows,
    looks_tables,
    mean_rank_rows,
    p_cell,
    top_of_leaderboard,
)
from pipelines.runs.layout import is_derived

INDEX = "index.html"
# bytes: a page past this is refused. A study's page is committed with it, and a repository takes files of at most
# 2 MB (the synthetic study's page at full detail, 225 runs, was 2.4 MB: it could not be published)
PAGE_BUDGET = 2_000_000
# the position curves' bins, finest first: the figures' own, then coarser where a page cannot fit otherwise
CURVE_BIN_LEVELS = (MAX_CURVE_BINS, MAX_CURVE_BINS // 2, MAX_CURVE_BINS // 4)
TEMPLATES = Path(__file__).parent / "templates"


class PageTooLarge(ValueError):
    """The page would exceed PAGE_BUDGET."""


def variance_tables(study: Study, summary: dict) -> list[dict]:
    tables = []
    for result in study.results:
        components = summary["domains"][result.domain].get("variance_components")
        if components is None:
            continue
        rows = (
            [
                {"component": name, "variance": p_cell(value), "sd": p_cell(math.sqrt(max(value, 0.0)))}
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


# each chart's text alternative: where the figures it draws are written out (a screen reader gets no chart)
CHART_TEXT = {
    "forest": "each encoding's Δ to the reference with the interval its verdict rests on, marked by verdict in colour "
    "and shape; the numbers are the leaderboard's Δ column and summary.md's verdict table",
    "positions": "NLL by position per encoding, seeds pooled; the numbers past the training length are summary.md's "
    "extrapolation table and extrapolation.csv",
    "windows": "NLL past the training length by window length per encoding; the numbers are summary.md's extrapolation "
    "table and extrapolation.csv",
    "variance": "the variance components of the domain; the numbers are the table beside it",
}


RUN_CHART_TEXT = {
    "train": "the chosen run's training and validation loss by step; its numbers are the run's logs/metrics.csv",
    "examples": "the chosen run's test NLL per example against the reference's run of the same seed; the numbers are "
    "the study's per_example files",
}


def first_run(study: Study, runs: list[dict]) -> str:
    """The run the page opens on: the first domain's best-ranked encoding's first seed, set against the reference
    (its reference's own run where no other encoding has one), else the first run."""
    for result in study.results:
        for encoding in [*[e for e in result.entries if e != result.ref], result.ref]:
            mine = [r for r in runs if r["domain"] == result.domain and r["encoding"] == encoding]
            chosen = next((r for r in mine if r["ref"]), mine[0] if mine else None)
            if chosen is not None:
                return chosen["label"]
    return runs[0]["label"] if runs else ""


def outside_the_commit(study: Study) -> dict[str, list[str]]:
    """Per `<sha>+dirty` commit label (pipelines.analysis.evidence.commits), the code files its runs' manifests record
    as modified or untracked there: what ran that the commit does not hold (a newcomer's own encoding, say)."""
    files: dict[str, set[str]] = {}
    for run in study.runs:
        git = (run.manifest.get("git") or {}) if run.finished else {}
        if git.get("dirty"):
            files.setdefault(commit_label(git), set()).update(git.get("modified") or {}, git.get("untracked") or {})
    return {label: sorted(paths) for label, paths in files.items()}


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
    derived = {run.label for run in study.runs if run.derived}
    commits: dict[str, Counter] = {}
    for result in study.results:
        for sha, labels in result.commits.items():
            commits.setdefault(sha, Counter()).update(label in derived for label in labels)
    outside = outside_the_commit(study)
    machines: dict[str, Counter] = {}
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
        machines.setdefault(described, Counter())[is_derived(record["encoding"])] += 1
    references: dict[tuple[str, str], list[str]] = {}
    for d in domains:
        references.setdefault((d["reference"], d["rule"]), []).append(d["name"])
    return {
        "domains": domains,
        "scale": scale_columns(summary),
        "references": [{"ref": ref, "rule": rule, "domains": names} for (ref, rule), names in references.items()],
        "commits": [
            {
                "sha": sha.removesuffix("+dirty")[:10],
                "dirty": sha.endswith("+dirty"),
                "runs": runs_text(count[False], count[True]),
                "files": outside.get(sha, []),
            }
            for sha, count in sorted(commits.items())
        ],  # fmt: skip
        "machines": [
            {"what": what, "runs": runs_text(count[False], count[True])}
            for what, count in sorted(machines.items(), key=lambda item: -item[1].total())
        ],
        "provenance": provenance(summary),
        "reference": summary["reference"],
        "missing": summary["missing_runs"],
    }


def provenance(summary: dict) -> dict:
    """Where the study's runs were read from, from summary.json's `runs` (pipelines.runs.published_join.runs_label:
    the local runs folder, then each published study joined, `runs + docs/results/x`): the local folder (None where
    there was none: `--runs none`) and the published studies by name, this study's own marked. The page said
    `Runs: none + docs/results/...` of a study published from its evidence alone (issue 64)."""
    local, *published = str(summary["runs"]).split(" + ")
    name = (summary.get("study") or {}).get("name", "")
    return {
        "local": None if local == "none" and published else local,
        "published": [{"name": Path(folder).name, "own": Path(folder).name == name} for folder in published],
    }


def _count(value: float) -> str:
    """A count as a reader scans it: 829,568; 1.23M; 2.46M."""
    return f"{value / 1e6:.3g}M" if value >= 1e6 else f"{value:,}"


def _spanned(values: list, shown=str) -> str:
    """A scale figure: one value, or `least–most` where the domain's runs differ."""
    return "–".join(shown(v) for v in values) if values else "unrecorded"


# the facts table's scale columns: (summary.json's scale key, header, how a value shows)
SCALE_COLUMNS = (
    ("parameters", "parameters", _count),
    ("layers", "layers", str),
    ("context", "context L", str),
    ("steps", "training steps", str),
    ("training_tokens", "training tokens", _count),
)


def scale_columns(summary: dict) -> dict[str, dict[str, str]]:
    """Per domain, the scale its runs were trained at (summary.json's `scale`, pipelines.report.study_about) as the
    facts table's cells: the reference's parameter count first (the encodings' range beside it where they differ),
    the tokens seen in training with how they were counted."""
    cells = {}
    for name, domain in summary["domains"].items():
        scale = domain.get("scale") or {}
        row = {key: _spanned(scale.get(key, []), shown) for key, _, shown in SCALE_COLUMNS}
        ref_params, params = scale.get("reference_parameters"), scale.get("parameters", [])
        if ref_params is not None and len(params) > 1:
            row["parameters"] = f"{_count(ref_params)} ({domain['reference']}; {row['parameters']} over the encodings)"
        if scale.get("steps"):
            batch = _spanned(scale["effective_batch"])
            row["training_tokens"] += f" ({row['steps']} steps x {batch} sequences x {row['context']})"
        cells[name] = row
    return cells


def study_heading(summary: dict) -> dict:
    """The page's name and status, from summary.json's `study` (pipelines.report.study_about): the title, the
    status line (superseded by another study, else each domain's look), and the links to the study's README and to
    the studies it joins, bridges or supersedes (sibling folders: ../<name>/index.html)."""
    about = summary.get("study") or {}
    name = about.get("name", "")
    title = f"posbench study{' ' + name if name else ''}: {', '.join(summary['domains'])}"
    statuses = {domain: record.get("status", "") for domain, record in summary["domains"].items()}
    looks = "; ".join(f"{domain} {status}" for domain, status in statuses.items() if status)
    if len(set(statuses.values())) == 1:
        looks = next(iter(statuses.values()))
    superseded = about.get("superseded_by")
    related = [
        {"what": what, "name": other, "href": f"../{other}/index.html"}
        for what, key in (("joins", "joins"), ("bridges", "bridges"), ("supersedes", "supersedes"))
        for other in about.get(key, [])
    ]
    return {
        "name": name,
        "title": title,
        "status": "superseded" if superseded else looks,
        "looks": looks,
        "superseded_by": None
        if not superseded
        else {
            "study": superseded["study"],
            "because": superseded["because"].strip().removesuffix(".") + ".",
            "href": f"../{superseded['study']}/index.html",
        },
        "readme": "README.md" if about.get("readme") else None,
        "related": related,
    }


@functools.cache
def vega_bundle() -> str:
    """vega, vega-lite (the version altair's schema is written for) and vega-embed as one script that defines
    window.vegaEmbed, bundled by vl-convert-python from the JavaScript its wheel carries (offline; about 0.9 MB;
    bundling takes some seconds, once per process)."""
    version = "_".join(alt.SCHEMA_VERSION.split(".")[:2])  # "v6.4.1" -> "v6_4", vl-convert's name for it
    return vl_convert.javascript_bundle(vl_version=version)


@functools.cache
def packed_vega_bundle() -> str:
    """vega_bundle() packed as the page carries it (_packed): study.js inflates it and runs it as a script element
    of the page, before drawing any chart."""
    return _packed(vega_bundle())


def code_spans(text: str) -> str:
    """Text from the markdown reports (`x` marks code) as escaped HTML with <code> elements (the template marks
    the result safe)."""
    parts = str(text).split("`")
    return "".join(f"<code>{html.escape(part)}</code>" if i % 2 else html.escape(part) for i, part in enumerate(parts))


def markdown_spans(text: str) -> str:
    """code_spans, and `**x**` as <strong>: the answer block's markdown as HTML."""
    return re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", code_spans(text))


def answer_html(text: str) -> str:
    """summary.json's answer (pipelines.report.answer: a line, then `- ` items) as a paragraph and a list, each line
    through markdown_spans (the template marks the result safe)."""
    head, *items = [line for line in str(text).split("\n") if line.strip()]
    listed = "".join(f"<li>{markdown_spans(item.removeprefix('- '))}</li>" for item in items)
    return f"<p>{markdown_spans(head)}</p>" + (f"<ul>{listed}</ul>" if listed else "")


# the words the answer and the tables use that a reader may not know (issue 64): (term, what it means here)
GLOSSARY = (
    ("look", "one of the design's planned analyses, at a number of seeds fixed in advance: each tests every pair "
     "still open at its own alpha, and decides which encodings get more seeds"),
    ("Holm", "the correction for testing many encodings at once within a look: the smallest p faces alpha / m, the "
     "next alpha / (m - 1), and so on; the interval beside a verdict is at the level its rank was tested at"),
    ("cap", "the design's last look, its most seeds: a pair still open there stays inconclusive; no more seeds are "
     "trained for it"),
    ("futility", "a stop of the design for a pair it would not decide by its cap; it says nothing about the size "
     "of Δ, whose interval may be wide"),
    ("moderated", "a difference test whose seed variance borrows strength from the other encodings of its family "
     "(limma's moderated t, seeds as blocks): its degrees of freedom are the pair's own plus those of the family's "
     "pooled variances (at most (encodings - 1) x (seeds - 1)), so that 5 seeds can give a test on tens or hundreds "
     "of df and a p far below what 5 seeds alone could; used from 5 seeds where simulations hold its error rates. "
     "The tables print each p's df beside it"),
    ("TOST", "two one-sided tests of whether Δ lies inside the region of practical equivalence (the leaderboard's "
     "region column); a pair is equivalent only where TOST shows it inside"),
    ("joined", "an encoding added to a study after its design was fixed: it forms its own family over the same "
     "looks, apart from the study's own pairs"),
    ("bridge", "a study of one domain at other settings (more layers or steps), ranked in that domain by its "
     "encodings' Δ to its own reference runs, as if a Δ carried over between settings"),
)  # fmt: skip


def _packed(text: str) -> str:
    """Text gzipped (no timestamp: the same study gives the same page) and base64-encoded, for a script element the
    page inflates with the browser's DecompressionStream (study.js: inflate)."""
    return base64.b64encode(gzip.compress(text.encode(), compresslevel=9, mtime=0)).decode()


def _packed_json(value) -> str:
    """JSON, packed (_packed): manifests and curves repeat themselves, and a study of hundreds of runs stays within
    the page budget."""
    return _packed(json.dumps(value, separators=(",", ":"), allow_nan=False))


def bridge_notes(summary: dict) -> list[dict]:
    """The studies bridged into a domain's ranking (pipelines.analysis.bridge), as summary.json records them: what
    the across-domains table must say of the ranks they enter."""
    return [
        {
            "name": name,
            "domain": domain["ranked_with"],
            "ref": domain["reference"],
            "settings": bridged_settings_text(domain["bridge_settings"]),
        }
        for name, domain in summary["domains"].items()
        if domain.get("ranked_with")
    ]


def study_page(study: Study, summary: dict, links: dict[str, str]) -> str:
    """The page's HTML from the analysed study and its summary.json object; `links`: the study's files by what they
    are (relative paths). A page over PAGE_BUDGET is drawn again with less of each run (RUN_DETAIL_LEVELS: the
    one-run view says how many examples it shows), then with coarser position curves (CURVE_BIN_LEVELS: their
    titles say so); PageTooLarge when it exceeds the budget at the coarsest of both."""
    names = list(study.order)
    names += sorted({curve.encoding for r in study.results for curve in r.extrapolation} - set(names))
    colours = Colours(names)
    shown = shown_by_default(summary)
    windows = window_specs(study, summary, colours, shown)

    def charts_at(bins: int) -> tuple[dict, dict, list[dict], set[str]]:
        """The page's charts with position curves of at most `bins` bins: (charts by id, the sections' charts, the
        variance tables with their charts, the encodings any curve draws)."""
        charts, sections = {}, {"forest": [], "positions": [], "windows": [], "variance": []}

        def add(section: str, domain: str, title, spec: dict | None) -> str | None:
            """Register a chart of a section; its element's id (None for no chart)."""
            if spec is None:
                return None
            name = f"{section}-{len(charts)}"
            text = f"{' '.join(title) if isinstance(title, list) else title}: {CHART_TEXT[section]}"
            charts[name] = {**spec, "description": text}  # Vega's aria-label: the chart's text alternative
            sections[section].append({"id": name, "domain": domain, "title": title})
            return name

        for result in study.results:
            add("forest", result.domain, result.domain, forest_spec(result, summary))
        curves = position_specs(study, colours, shown, bins)
        for panel in curves:
            add("positions", panel["domain"], panel["title"], panel["spec"])
        for panel in windows:
            add("windows", panel["domain"], panel["title"], panel["spec"])
        variance = variance_tables(study, summary)
        for table in variance:
            table["chart"] = add("variance", table["domain"], table["domain"], table["chart"])
        run_charts = run_specs()
        charts.update(
            {f"run-{name}": {**spec, "description": RUN_CHART_TEXT[name]} for name, spec in run_charts.items()}
        )
        return charts, sections, variance, {name for panel in curves + windows for name in panel["encodings"]}

    has_yarn = any(is_derived(name) for name in names)

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["code_spans"] = code_spans
    environment.filters["markdown_spans"] = markdown_spans
    environment.filters["answer_html"] = answer_html
    environment.filters["counted"] = counted
    template = environment.get_template("study.html.j2")
    # a study of one domain (a bridged study counts in its domain): its mean rank is that domain's rank, and no test
    # across domains can run
    one_domain = len(study.ranked_domains) == 1
    leaderboard = leaderboard_rows(study, summary)
    fixed = dict(  # what does not depend on the detail per run: computed once, whatever the level
        links=links,
        heading=study_heading(summary),
        glossary=GLOSSARY,
        scale_columns=SCALE_COLUMNS,
        domains=[result.domain for result in study.results],
        answers=[
            {"domain": r.domain, "text": summary["domains"][r.domain]["answer"]} for r in answer_order(study.results)
        ],
        leaderboard_columns=leaderboard_columns(study),
        leaderboard=leaderboard,
        top=top_of_leaderboard(study, leaderboard, summary),
        mean_rank_columns=ONE_DOMAIN_RANK_COLUMNS if one_domain else MEAN_RANK_COLUMNS,
        mean_rank=mean_rank_rows(summary),
        one_domain=one_domain,
        not_ranked=summary["not_ranked"],
        bridges=bridge_notes(summary),
        leaderboard_rank_notes=leaderboard_rank_notes(summary),
        mean_rank_notes=mean_rank_notes(summary),
        looks=looks_tables(study, summary),
        seed_tables=seed_tables(summary),
        extrapolation_tables=extrapolation_tables(summary),
        tasks=task_tables(summary),
        friedman=friedman_tables(summary, across_domains=not one_domain),
        has_yarn=has_yarn,
        shown_count=SHOWN_BY_DEFAULT,
        style=(TEMPLATES / "study.css").read_text(),
        script=(TEMPLATES / "study.js").read_text(),
        vega=packed_vega_bundle(),
    )
    # the finest detail that fits: the figures' position curves first, each level of detail per run in turn, then
    # coarser curves (CURVE_BIN_LEVELS) through the levels per run again
    for bins in CURVE_BIN_LEVELS:
        charts, sections, variance, charted = charts_at(bins)
        drawn = dict(
            sections=sections,
            variance=variance,
            curve_picker=[
                {"name": name, "colour": colours.hex[name], "shown": name in shown} for name in names if name in charted
            ],
            charts_data=_packed_json(charts),
        )
        for detail in RUN_DETAIL_LEVELS:
            runs = run_records(study, detail)
            page = template.render(
                **fixed,
                **drawn,
                header=header_facts(study, summary, runs),
                first_run=first_run(study, runs),
                runs_data=_packed_json(runs),
            )
            size = len(page.encode())
            if size <= PAGE_BUDGET:
                return page
    raise PageTooLarge(
        f"{INDEX}: {size / 2**20:.2f} MiB, over the page budget of {PAGE_BUDGET:,} bytes even at the coarsest "
        f"detail per run ({detail[0]} training points, {detail[1]} examples) and position curves of {bins} bins"
    )
