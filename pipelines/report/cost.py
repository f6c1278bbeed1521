"""What the evidence cost, as the reports print it: a phrase for each domain's answer, the study's section (per
domain and per encoding) and its JSON. Every figure is pipelines.analysis.cost's; nothing is computed here."""

from __future__ import annotations

from pipelines.analysis.cost import Cost, combined
from pipelines.analysis.results import DomainResult
from pipelines.report.markdown import markdown_table, runs_text


def hours(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def cost_phrase(result: DomainResult) -> str:
    """`spent 12.3 core-hours on 75 trained runs and their 5 YaRN evaluations (1.5 per decided pair, 8 decided)`,
    or without a decided pair."""
    cost = result.cost
    if cost is None or not cost.runs:
        return ""
    per = cost.per_decided(result.decided)
    each = f"{hours(per)} per decided pair, {result.decided} decided" if per is not None else "no pair decided yet"
    runs = runs_text(cost.runs, cost.evaluations, joiner=" and their ")
    return f"spent {hours(cost.hours)} {cost.unit} on {runs} ({each})"


def timing_sentence(cost: Cost) -> str:
    """How the seconds were measured: wall-clock for runs recorded before their CPU seconds, CPU seconds since."""
    wall = "wall-clock seconds, not CPU time: runs that shared their cores with other work record more than they needed"
    if not cost.cpu_timed:
        return f"W{wall[1:]} alone."
    sentence = (
        f"{cost.cpu_timed} entries count their CPU seconds instead (every thread of the run's process: what it held "
        "of the cores, whatever else shared them)"
    )
    return sentence + (f"; {cost.wall_timed} recorded before that count {wall} alone." if cost.wall_timed else ".")


def cost_section(results: list[DomainResult]) -> list[str]:
    """The study's `## What it cost`: per domain (runs, hours, decided pairs, hours per decided pair), then per
    encoding across the domains."""
    domains = [result for result in results if result.cost is not None and result.cost.runs]
    if not domains:
        return []
    costs = [result.cost for result in domains]
    total = combined(costs)
    unit = total.unit
    lines = [
        "## What it cost",
        "",
        f"Process time of the finished runs compared, from their manifests and summaries: training (validation "
        f"passes included) and the scoring of every split, times the threads each run used ({unit}; a run whose "
        "manifest predates the thread record counts as one thread). "
        + timing_sentence(total)
        + " A pair is decided when its verdict is better, worse or equivalent.",
        "",
    ]
    rows = []
    for result in domains:
        cost = result.cost
        per = cost.per_decided(result.decided)
        rows.append(
            [result.domain, str(cost.runs), hours(cost.hours), str(result.decided), "" if per is None else hours(per)]
        )
    decided = sum(result.decided for result in results)
    per = total.per_decided(decided)
    rows.append(["all", str(total.runs), hours(total.hours), str(decided), "" if per is None else hours(per)])
    lines += markdown_table(["domain", "trained runs", unit, "decided pairs", f"{unit} per decided pair"], rows)
    encodings = sorted({e for cost in costs for e in (*cost.core_seconds, *cost.gpu_seconds)},
                       key=lambda e: (-total.hours_of(e), e))  # fmt: skip
    lines += ["", f"Per encoding ({unit}; a YaRN evaluation counts under its rope encoding):", ""]
    lines += markdown_table(
        ["encoding", *[r.domain for r in domains], "all"],
        [[f"`{e}`", *[_cell(r.cost, e) for r in domains], hours(total.hours_of(e))] for e in encodings],
    )
    if total.untimed:
        lines += ["", f"Not counted (no training time recorded): {', '.join(total.untimed)}."]
    return [*lines, ""]


def _cell(cost: Cost, encoding: str) -> str:
    value = cost.hours_of(encoding)
    return hours(value) if value else ""


def cost_json(results: list[DomainResult]) -> dict:
    """summary.json's `cost`: per domain and in all, hours per encoding, decided pairs."""

    def one(cost: Cost, decided: int) -> dict:
        return {
            "runs": cost.runs,
            "core_hours": cost.core_hours,
            "gpu_hours": cost.gpu_hours,
            "decided_pairs": decided,
            "hours_per_decided_pair": cost.per_decided(decided),
            "hours_per_encoding": {e: cost.hours_of(e) for e in sorted({*cost.core_seconds, *cost.gpu_seconds})},
            "untimed_runs": list(cost.untimed),
        }

    counted = [result for result in results if result.cost is not None]
    total = combined([result.cost for result in counted])
    return {
        "domains": {result.domain: one(result.cost, result.decided) for result in counted},
        "all": one(total, sum(result.decided for result in counted)),
    }
