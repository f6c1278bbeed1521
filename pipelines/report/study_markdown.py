"""The sections of the study's summary.md: the domain x encoding table with the mean rank, paper 000's published
values, the Friedman tests, the per-seed spread, extrapolation past the training length, attention by distance of
the inspected runs, the missing runs."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from pipelines.analysis.paper import PAPER_NLL, PAPER_PRESET
from pipelines.analysis.results import DomainResult, bridged_settings_text
from pipelines.analysis.study import AT_CHANCE, Study
from pipelines.report.answer import answer_order, answer_text
from pipelines.report.cost import cost_section
from pipelines.report.domain import EXTRAPOLATION_FIGURE, INTERVAL_METHOD, left_out_note, paired_tests_note
from pipelines.report.markdown import bold_if, fmt_mean_rank, markdown_table, missing_section
from pipelines.report.recency_section import recency_section
from pipelines.report.verdicts import MARKS_RULE, marks, verdict_label


def cd_figure(name: str) -> str:
    """The critical-difference diagram of the Friedman test over `name` ("domains", "synthetic tasks")."""
    return f"cd_{name.replace(' ', '_')}.png"


def study_markdown(study: Study, figures: list[str], extrapolation: list[dict]) -> str:
    unfinished = [f"- {domain}: no finished run yet" for domain in study.unfinished_domains]
    incomplete = [note for result in study.results if (note := left_out_note(result))]
    lines = [
        "# posbench comparison study",
        "",
        f"Runs: `{study.runs_root}`; domains (preset): "
        f"{', '.join(f'{r.domain} (`{r.preset}`)' for r in study.results)}; reference: `{study.ref}`; "
        f"per-domain reports: {', '.join(f'`{d}/summary.md`' for d in study.domains)}; figures: "
        f"{', '.join(f'`{name}`' for name in figures)}.",
        "",
        "## The answer",
        "",
        *[line for result in answer_order(study.results) for line in (answer_text(result), "")],
        *unfinished,
        *([""] if unfinished else []),
        *[f"- {note}" for note in incomplete],
        *([""] if incomplete else []),
        *_table_section(study),
        *_paper_section(study),
        *_friedman_section(study),
        *_seed_section(study),
        *_extrapolation_section(study, extrapolation),
        *recency_section(study),
        *cost_section(study.results),
        *missing_section(study.missing),
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ the table


def _study_cell(result: DomainResult, encoding: str, best: str | None) -> str:
    entry = result.entries.get(encoding)
    if entry is None:
        if encoding in result.incomplete:
            return f"incomplete ({result.incomplete[encoding]})"
        return "missing" if encoding in result.seen else "—"
    digits = result.metric.digits
    text = f"{entry.score:.{digits}f}"
    if not math.isnan(entry.ci_lo):
        text += f" ± {(entry.ci_hi - entry.ci_lo) / 2:.{digits}f}"
    text = bold_if(text, encoding == best)
    mark = marks(entry.verdict)
    if mark:
        text += f" {mark}"
    if not result.seeds.uniform or result.seeds.left_out:
        count = len(entry.seed_scores)
        text += f" ({count} seed{'s' * (count != 1)})"
    return text


def _table_section(study: Study) -> list[str]:
    header = ["encoding"]
    for result in study.results:
        arrow = "↑" if result.metric.higher_is_better else "↓"
        header.append(f"{result.domain} ({result.metric.short} {arrow})")
    header += ["mean rank", "range over resampled seeds; P(rank 1)"]
    if study.per_example_mean_rank is not None:
        header.append("mean rank (NLL domains)")
    best_rank = np.nanmin([mean for mean, _ in study.mean_rank.values()] + [math.inf])
    refs = {result.ref for result in study.results if result.ref}
    rows = []
    for encoding in study.order:
        name = f"`{encoding}`" + (" (ref)" if encoding in refs else "")
        cells = [_study_cell(result, encoding, study.best_in(result)) for result in study.results]
        if encoding in study.mean_rank:
            mean, se = study.mean_rank[encoding]
            cells.append(bold_if(fmt_mean_rank(mean, se), mean == best_rank))
            spread = study.rank_interval.get(encoding)
            cells.append(f"[{spread[0]:.2f}, {spread[1]:.2f}]; {spread[2]:.2f}" if spread else "—")
        else:
            cells += ["— (not in every domain)" if encoding in study.partial_ranks else "—", ""]
        if study.per_example_mean_rank is not None:
            cells.append(fmt_mean_rank(*study.per_example_mean_rank.get(encoding, (math.nan, math.nan))))
        rows.append([name, *cells])

    per_example = [r.domain for r in study.results if r.per_example]
    with_tasks = [r.domain for r in study.results if not r.per_example]
    lines = ["## Test results by domain and encoding"]
    if per_example:
        lines += [
            "",
            f"{', '.join(per_example)}: mean test NLL in nats over the encoding's own seeds (each test example "
            "averaged over the seeds the encoding finished, then over the examples; descriptive where seed sets "
            "differ) ± the half width of its 95% within-example interval "
            f"({INTERVAL_METHOD}, SPEC 3; paper 000's Figure 3 draws the same; the between-example interval is in "
            "summary.csv).",
        ]
    lines += [
        "",
        f"Marks against each domain's reference: {MARKS_RULE} (each domain's summary.md has the verdict words, the "
        "intervals, TOST and paper 000 C.2's per-example tests, which hold the trained networks fixed and are never "
        "the verdict).",
    ]
    for domain in with_tasks:
        lines += [
            "",
            f"{domain}: token accuracy on each task's test split (seed-averaged), chance-normalised "
            "`(acc - chance) / (1 - chance)` and averaged over the tasks (paper 000, Figure 4) ± the half width "
            "of its 95% within-task interval (the same method, tasks as the examples); higher is better. It enters "
            "the mean rank as "
            "one domain, as each non-text domain does in paper 000's Figure 3 (ranking inside a task by "
            "accuracy or by chance-normalised accuracy is the same); the Friedman test counts each of its tasks as "
            "a dataset.",
        ]
    lines += [
        "",
        "Ranks, bold and the mean rank follow the matched rule: within each domain the encodings are ranked by their "
        "Δ to the domain's reference on the seeds both finished (the reference's is 0), never by means over "
        "different seeds; bold: the first so ranked. `(k seeds)`: the encoding's own finished seeds, where the "
        "domain's encodings differ. Mean rank: rank within each domain among the encodings scored in every domain "
        "(1 = best, ties averaged), mean over the domains ± its standard error across domains; beside it the "
        "2.5-97.5% range of the mean rank and P(rank 1) when the training seeds are resampled (the Bayesian "
        "bootstrap over each domain's seeds, one weight per seed shared by every encoding so each stays paired with "
        "the reference; 10,000 replicates): a descriptive spread, not an interval whose coverage the suite has "
        "shown (`—` where a domain holds one seed: nothing to resample); an encoding missing from a domain gets no "
        "mean rank (its ranks within the domains where it was scored are listed below the table)"
        + (
            f"; `mean rank (NLL domains)` leaves the {', '.join(with_tasks)} domain out, as paper 000's Figure 3 does."
            if study.per_example_mean_rank is not None
            else "."
        )
        + " `missing`: runs exist but none finished; `—`: not run in that domain; `incomplete`: not every "
        f"{' or '.join(with_tasks) or 'synthetic'} task has a result.",
        "",
    ]
    notes = [f"- {r.domain}: {paired_tests_note(r)}" for r in study.results if r.per_example and r.ref is None]
    notes += [f"- {bridge_note(r)}" for r in study.results if r.ranked_with is not None]
    notes += [
        f"- `{encoding}` has no mean rank: not scored in every domain; its rank within "
        + ", ".join(f"{domain} {rank:g} of {len(study.domain_ranks[domain])}" for domain, rank in ranks.items())
        + "."
        for encoding, ranks in study.partial_ranks.items()
    ]
    return [*lines, *markdown_table(header, rows), "", *notes, *([""] if notes else [])]


def bridge_note(result: DomainResult) -> str:
    """What a bridged study's column is and how its encodings enter its domain's ranking."""
    domain, changed = result.ranked_with, bridged_settings_text(result.bridge_settings)
    return (
        f"`{result.domain}`: {domain} trained at other settings ({changed}), with its own runs of `{result.ref}`. "
        f"Its encodings that {domain} does not hold are ranked in {domain} (and its mean rank) by their Δ to these "
        f"`{result.ref}` runs, beside the others' Δ to {domain}'s own: that reads a Δ measured at other settings as if "
        "it carried over, which no run here tests."
    )


# -------------------------------------------------------------------------------------- paper values


def _paper_section(study: Study) -> list[str]:
    per_example = [result for result in study.results if result.per_example]
    if not per_example:
        return []
    lines = ["## Paper 000's published values", ""]
    at_paper = [result for result in per_example if result.preset == PAPER_PRESET]
    other = [result for result in per_example if result.preset != PAPER_PRESET]
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
            *markdown_table(["domain", "encoding", "ours", "paper", "ours - paper"], rows),
            "",
        ]
    for result in other:
        lines.append(
            f"- {result.domain}: preset `{result.preset}`. The paper's published values (SPEC 3) come from the "
            "paper-scale models and budgets and are not comparable; omitted."
        )
    return lines + ([""] if other else [])


# ---------------------------------------------------------------------------------------- Friedman


def _friedman_section(study: Study) -> list[str]:
    blocks = "; ".join(["the domains", *[f"the {r.domain} tasks" for r in study.results if not r.per_example]])
    lines = [
        "## Friedman test and Nemenyi critical difference (beyond the paper)",
        "",
        f"Friedman's test of equal mean ranks over blocks ({blocks}), with the "
        "Iman-Davenport F form that Demšar (2006) recommends for few blocks; two encodings whose mean ranks "
        "differ by at least the Nemenyi critical difference CD = q_0.05 sqrt(k (k + 1) / (6 N)) differ at the "
        "0.05 level. Only encodings scored in every block take part, so these mean ranks can differ from the "
        "table's.",
        "",
    ]
    if study.unranked:
        lines += [unranked_text(study.unranked), ""]
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
            f"CD = {result.cd:.3f}. Figure: `{cd_figure(name)}`.",
            "",
        ]
        mean_ranks = dict(zip(outcome.encodings, result.mean_ranks, strict=True))
        lines += markdown_table(
            ["encoding", "mean rank"], [[f"`{enc}`", f"{mean_ranks[enc]:.2f}"] for enc in outcome.by_rank()]
        )
        groups = ["{" + ", ".join(f"`{enc}`" for enc in group) + "}" for group in outcome.not_separated()]
        lines += ["", f"Not separated by the Nemenyi test: {'; '.join(groups) or 'none'}."]
        if outcome.left_out:
            lines.append(f"Left out (not scored in every block): {', '.join(f'`{e}`' for e in outcome.left_out)}.")
        if outcome.at_chance:
            lines.append(
                f"Tasks left out (no encoding's chance-normalised accuracy reaches {AT_CHANCE:g}: their ranks are "
                f"noise): {', '.join(f'`{t}`' for t in outcome.at_chance)}."
            )
        lines.append("")
    return lines


# --------------------------------------------------------------------------------------- seed spread


def _seed_section(study: Study) -> list[str]:
    lines = [
        "## Per-seed scores",
        "",
        "Each seed's own score (LM domains: its mean test NLL; synthetic: its mean chance-normalised accuracy over "
        "the tasks), their standard deviation over seeds, and the matched Δ to the domain's reference (the mean "
        "over the seeds both finished of the per-seed differences; the verdict's Δ), beside the verdict. A gap "
        "between two encodings' seed means is no evidence by itself: the verdict tests it seed by seed.",
        "",
    ]
    for result in study.results:
        seeds = sorted({s for entry in result.entries.values() for s in entry.seed_scores})
        digits = result.metric.digits
        header = ["encoding", *[f"seed {s}" for s in seeds], "seed SD"]
        if result.ref is not None:
            header += [f"matched Δ to {result.ref}", "verdict"]
        rows = []
        for encoding in [e for e in study.order if e in result.entries]:
            entry = result.entries[encoding]
            row = [
                f"`{encoding}`",
                *[f"{entry.seed_scores[s]:.{digits}f}" if s in entry.seed_scores else "" for s in seeds],
            ]
            row.append("" if math.isnan(entry.seed_sd) else f"{entry.seed_sd:.{digits}f}")
            if result.ref is not None:
                is_ref = encoding == result.ref
                row.append("reference" if is_ref else f"{result.matched[encoding]:+.{digits}f}")
                family = result.verdicts.family if result.verdicts else None
                row.append("" if is_ref or entry.verdict is None else verdict_label(entry.verdict, family))
            rows.append(row)
        note = [] if result.ref is not None else [f"{result.domain} has no reference: no Δ.", ""]
        lines += [f"### {result.domain}", "", *note, *markdown_table(header, rows), ""]
    return lines


# ------------------------------------------------------------------------------------- extrapolation


def _extrapolation_section(study: Study, rows: list[dict]) -> list[str]:
    lines = ["## Extrapolation past the training length", ""]
    if not rows:
        return [*lines, "No split longer than the training context was evaluated.", ""]
    splits = defaultdict(list)
    for row in rows:
        splits[row["domain"], row["group"], row["split"], row["context"], row["length"]].append(row)
    figures = ", ".join(f"`{r.domain}/{EXTRAPOLATION_FIGURE}`" for r in study.results if r.extrapolation)
    lines += [
        "Each split scored at a window longer than the training context L. The test: each encoding's NLL at "
        "positions >= L seed by seed against the domain's reference on the seeds both evaluated, Δ (nats; negative: "
        "lower NLL than the reference) with its 95% t-interval, the t-test Holm-corrected over the split's "
        "encodings at 0.05 (TOST at ±0.005 for `equivalent`): a fixed-sample family apart from the verdict's. "
        "`+yarn`: the rope run evaluated with YaRN at s = window / L (SPEC 1), paired with its own seed of the "
        "reference. `pooled NLL past L`: the mean over the positions >= L, token-weighted, each encoding's seeds "
        f"pooled whichever they are: descriptive, no ranking claim. Per-position curves: {figures}; all values in "
        "`extrapolation.csv`.",
        "",
    ]
    header = ["encoding", "seeds", "pooled NLL past L", "Δ past L vs reference [95% CI]", "p (Holm)", "verdict"]
    for (domain, group, split, context, length), cells in splits.items():
        where = domain if domain == group else f"{domain}/{group}"
        ref = cells[0]["ref"]
        table = []
        for cell in cells:
            if cell["status"] != "ok":
                table.append([f"`{cell['encoding']}`", "", cell["status"], "", "", ""])
                continue
            pooled = f"{cell['nll_past']:.4f}"
            if cell["encoding"] == ref:
                table.append([f"`{cell['encoding']}`", str(cell["seeds"]), pooled, "reference", "", ""])
                continue
            if not cell["past_verdict"]:
                table.append([f"`{cell['encoding']}`", str(cell["seeds"]), pooled, "", "", ""])
                continue
            lo, hi = cell["past_delta_lo"], cell["past_delta_hi"]
            interval = "[n/a]" if math.isnan(lo) else f"[{lo:+.4f}, {hi:+.4f}]"
            table.append(
                [
                    f"`{cell['encoding']}`",
                    str(cell["past_seeds"]),
                    pooled,
                    f"{cell['past_delta']:+.4f} {interval}",
                    "n/a" if math.isnan(cell["past_p_holm"]) else f"{cell['past_p_holm']:.3g}",
                    cell["past_verdict"],
                ]
            )
        title = f"### {where}, `{split}` (L {context} → window {length}; reference `{ref or 'none'}`)"
        lines += [title, "", *markdown_table(header, table), ""]
    notes = sorted({(row["encoding"], row["note"]) for row in rows if row["status"] == "n/a"})
    return [*lines, *[f"- n/a for `{encoding}`: {note}" for encoding, note in notes], *([""] if notes else [])]


def unranked_text(unranked: dict[str, str]) -> str:
    """The sentence that names the results no rank takes in (Study.unranked), as summary.md and the page say it."""
    return "Not ranked: " + "; ".join(f"`{name}` ({why})" for name, why in unranked.items()) + "."
