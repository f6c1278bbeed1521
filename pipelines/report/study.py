"""The study's output folder: every domain's report in <out>/<domain>/, then summary.md, summary.csv,
summary.json (strict JSON: NaN becomes null), index.html (the study's page, rendered from the summary.json object:
pipelines.report.html), figure3.png, nll_by_position.png (domains compared per example),
cd_<blocks>.png (when a Friedman test ran), extrapolation.csv (when a split past the training length was
scored) and recency.png (when some run was inspected: `python -m pipelines.inspect`). All or nothing
(pipelines.report.files.publish): everything is rendered into a fresh folder first, and a failure leaves the
previous results exactly as they were. A study file this comparison does not produce is removed, so none from an
earlier comparison is left beside the new report."""

from __future__ import annotations

import math
from pathlib import Path

from domains.atomic import write_json, write_text
from pipelines.analysis.paper import paper_nll
from pipelines.analysis.results import DomainResult, Entry
from pipelines.analysis.study import Study
from pipelines.report.answer import answer_markers_problem, answer_order, with_answer_block
from pipelines.report.domain import render_domain_report, verdict_record
from pipelines.report.files import jsonable, publish, write_csv
from pipelines.report.html import INDEX, study_page
from pipelines.report.study_about import README, study_about  # README: by hand but its answer
from pipelines.report.study_figures import plot_cd, plot_figure3, plot_positions_study, plot_recency_study
from pipelines.report.study_json import study_json
from pipelines.report.study_markdown import cd_figure, study_markdown
from pipelines.report.verdicts import marks

FIGURE3 = "figure3.png"
POSITIONS_FIGURE = "nll_by_position.png"
EXTRAPOLATION_CSV = "extrapolation.csv"
RECENCY_FIGURE = "recency.png"
STUDY_FILES = (
    INDEX,
    "summary.md",
    "summary.csv",
    "summary.json",
    FIGURE3,
    POSITIONS_FIGURE,
    EXTRAPOLATION_CSV,
    RECENCY_FIGURE,
)
STUDY_CSV_HEADER = [
    "domain",
    "encoding",
    "metric",
    "score",
    "interval",
    "within_lo",
    "within_hi",
    "between_lo",
    "between_hi",
    "se",
    "n",
    "rank",
    "seeds_used",
    "seeds",
    "seed_sd",
    "ref",
    "verdict",
    "delta",
    "delta_lo",
    "delta_hi",
    "p_better",
    "seed_p",
    "seed_p_holm",
    "p_tost",
    "mark",
    "seeds_needed",
    "paper_mean_diff",
    "paper_p",
    "paper_p_holm",
    "matched",
    "rank_lo",
    "rank_hi",
    "p_rank_1",
    "paper",
]


# the verdict's fields summary.json carries beyond the CSV's columns: the interval the verdict rests on (the forest
# plot draws it, as nll.png does), the look and level that decided it, the seeds of the pair, P(better)'s interval
PAGE_FIELDS = ("decision_level", "decision_lo", "decision_hi", "verdict_look", "verdict_alpha", "pair_seeds")
PAGE_FIELDS += ("p_better_lo", "p_better_hi")
# ... and the difference test's df and how its seed variance was estimated, printed beside its p (issue 64: a p of
# 1.6e-85 from 5 seeds, a moderated test on 1,004 df, said neither)
PAGE_FIELDS += ("seed_df", "seed_variance")


def write_study_report(study: Study, out: Path, joined: list[Path] = (), bridged: list[Path] = ()) -> Path:
    """Write the per-domain reports and the study files into `out`, all or nothing (the answer block of its
    README.md too, where it has one); return its summary.md. `joined`, `bridged`: the published studies whose runs
    it joins (--with) and bridges (--bridge), which its page names."""
    out = Path(out)
    readme = study_readme(out)
    about = study_about(out, joined, bridged)
    publish(out, lambda folder: render_study(study, folder, readme, about), owned=study_report_files(out))
    return out / "summary.md"


def study_readme(out: Path) -> str | None:
    """The text of the study README in `out` (its answer block is rewritten with the report), None without one;
    ValueError naming it when its answer markers are not one pair (answer_markers_problem), before anything is
    written."""
    path = Path(out) / README
    if not path.is_file():
        return None
    text = path.read_text()
    if problem := answer_markers_problem(text):
        raise ValueError(f"{path}: {problem}; nothing written")
    return text


def study_report_files(out: Path) -> list[str]:
    """The names a study's report owns in `out`: its files, and the critical-difference figures an earlier report
    wrote there (a domain group may be gone since)."""
    return [*STUDY_FILES, *(path.name for path in Path(out).glob("cd_*.png"))]


def render_study(study: Study, folder: Path, readme: str | None = None, about: dict | None = None) -> list[str]:
    """Write the per-domain reports (one folder each) and the study files into `folder`, and the study README's text
    `readme` with its answer block from summary.json where it is given; return their names. `about`: what the study
    is (study_about of the folder it is published in: `folder` is a scratch folder), summary.json's `study`."""
    for result in study.results:
        (folder / result.domain).mkdir()
        render_domain_report(result, folder / result.domain)
    written = [FIGURE3]
    plot_figure3(study, folder / FIGURE3)
    if any(result.position_curves for result in study.results):
        plot_positions_study(study, folder / POSITIONS_FIGURE)
        written.append(POSITIONS_FIGURE)
    for name, outcome in study.friedman.items():
        if not isinstance(outcome, str):
            result = outcome.result
            title = f"Nemenyi critical difference across {name} (N = {result.n}, alpha {result.alpha:g})"
            plot_cd(result, outcome.encodings, title, folder / cd_figure(name))
            written.append(cd_figure(name))
    if study.recency.panels:
        plot_recency_study(study.recency, study.order, folder / RECENCY_FIGURE)
        written.append(RECENCY_FIGURE)
    records = study_records(study)
    write_csv(folder / "summary.csv", STUDY_CSV_HEADER, [_csv_row(record) for record in records])
    extrapolation = extrapolation_rows(study)
    if extrapolation:
        write_csv(folder / EXTRAPOLATION_CSV, list(extrapolation[0]), [list(row.values()) for row in extrapolation])
        written.append(EXTRAPOLATION_CSV)
    summary = jsonable(study_json(study, records, extrapolation, about))
    write_json(folder / "summary.json", summary)
    figures = [name for name in written if name.endswith(".png")]
    write_text(folder / "summary.md", study_markdown(study, figures, extrapolation))
    # the page renders the very object summary.json holds: its numbers are summary.json's, never recomputed
    links = {"summary.md": "summary.md", "summary.csv": "summary.csv", "summary.json": "summary.json"}
    links.update({f"{domain}/summary.md": f"{domain}/summary.md" for domain in study.domains})
    write_text(folder / INDEX, study_page(study, summary, links))
    if readme is not None:
        # in summary.md's order: a bridge beside its domain
        answers = [summary["domains"][result.domain]["answer"] for result in answer_order(study.results)]
        write_text(folder / README, with_answer_block(readme, answers))
        written.append(README)
    return [*study.domains, "summary.md", "summary.csv", "summary.json", INDEX, *written]


def extrapolation_rows(study: Study) -> list[dict]:
    """One row per (domain, group, split past the training context, encoding): mean NLL within and past L (seeds
    pooled, descriptive), and the seed-paired Δ past L to the domain's reference with its test (past_verdicts)."""
    rows = []
    for result in study.results:
        paired = {
            (group, split, pair.a): pair for (group, split), pairs in result.past_verdicts.items() for pair in pairs
        }
        for curve in result.extrapolation:
            pair = paired.get((curve.group, curve.split, curve.encoding))
            # the interval the verdict rests on (Holm's level at its rank, TOST's for an equivalent pair): a 95%
            # interval may exclude 0 beside `inconclusive` after Holm (issue 64), this one cannot
            level, decision_lo, decision_hi = pair.decision_interval() if pair else (math.nan,) * 3
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
                    "ref": result.ref or "",
                    "past_delta": pair.delta if pair else math.nan,
                    "past_delta_lo": pair.ci_lo if pair else math.nan,
                    "past_delta_hi": pair.ci_hi if pair else math.nan,
                    "past_seeds": (len(pair.seeds_a) if pair.paired else f"{len(pair.seeds_a)}/{len(pair.seeds_b)}")
                    if pair
                    else "",
                    "past_decision_level": level,
                    "past_decision_lo": decision_lo,
                    "past_decision_hi": decision_hi,
                    "past_p_holm": pair.p_holm if pair else math.nan,
                    "past_p_tost": pair.p_tost if pair else math.nan,
                    # the region TOST tested past L (the page prints it beside an `equivalent`: issue 64)
                    "past_region": pair.region if pair else math.nan,
                    "past_verdict": pair.verdict if pair else "",
                    "note": curve.note,
                }
            )
    return rows


# -------------------------------------------------------------------------------------- csv and json


def seeds_used(result: DomainResult, entry: Entry) -> str:
    """The encoding's own finished seeds, `k` or `k/expected` when the domain's runs hold more seeds."""
    count, expected = len(entry.seed_scores), len(result.seeds.expected)
    return str(count) if count == expected else f"{count}/{expected}"


def _entry_record(result: DomainResult, entry: Entry, rank: float) -> dict:
    """One encoding of one domain as the study's CSV/JSON record. `matched`: what ranks it (DomainResult.matched)."""
    test = entry.test
    record = verdict_record(entry.verdict)
    return {
        "domain": result.domain,
        "encoding": entry.encoding,
        "metric": result.metric.name,
        "score": entry.score,
        "interval": result.interval,
        "within_lo": entry.ci_lo,
        "within_hi": entry.ci_hi,
        "between_lo": entry.between_lo,
        "between_hi": entry.between_hi,
        "se": math.nan,
        "n": entry.n,
        "rank": rank,
        "seeds_used": seeds_used(result, entry),
        "seeds": {str(s): v for s, v in entry.seed_scores.items()},
        "seed_sd": entry.seed_sd,
        "ref": result.ref or "",
        **{key: record[key] for key in ("verdict", "delta", "delta_lo", "delta_hi", "p_better", "seeds_needed")},
        "seed_p": record["seed_p"],
        "seed_p_holm": record["seed_p_holm"],
        "p_tost": record["p_tost"],
        # summary.json only (not CSV columns): what the study page's forest plot and looks show beside Δ
        **{key: record[key] for key in PAGE_FIELDS},
        "mark": marks(entry.verdict),
        "paper_mean_diff": test.mean_diff if test else math.nan,
        "paper_p": test.p if test else math.nan,
        "paper_p_holm": test.p_holm if test else math.nan,
        "matched": result.matched.get(entry.encoding, math.nan),
        "rank_lo": "",
        "rank_hi": "",
        "p_rank_1": "",
        "paper": paper_nll(entry.encoding, result.domain, result.preset),
    }


def study_records(study: Study) -> list[dict]:
    records = []
    for result in study.results:
        rank = study.domain_ranks.get(result.ranked_with or result.domain) or result.ranks()  # bridged: its domain's
        for encoding in [e for e in study.order if e in result.entries]:
            records.append(_entry_record(result, result.entries[encoding], rank[encoding]))
    for encoding in [e for e in study.order if e in study.mean_rank]:
        mean, se = study.mean_rank[encoding]
        lo, hi, p_best = study.rank_interval.get(encoding, (math.nan, math.nan, math.nan))
        records.append(
            {
                **dict.fromkeys(STUDY_CSV_HEADER, ""),
                "domain": "all",
                "encoding": encoding,
                "metric": "mean rank",
                "score": mean,
                "se": se,
                "n": len(study.ranked_domains),
                "rank_lo": lo,
                "rank_hi": hi,
                "p_rank_1": p_best,
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
