"""Markdown pieces shared by the reports: tables, bold cells, mean ranks, the missing-runs section."""

from __future__ import annotations

import math


def bold_if(text: str, bold: bool) -> str:
    return f"**{text}**" if bold else text


def fmt_mean_rank(mean: float, se: float) -> str:
    if math.isnan(mean):
        return "n/a"
    return f"{mean:.2f}" if math.isnan(se) else f"{mean:.2f} ± {se:.2f}"


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A pipe table; a `|` inside a cell (`small |Δ|`) is escaped, so it never splits the cell."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(row) for row in rows)]


def missing_section(lines: list[str]) -> list[str]:
    return ["## Missing runs", "", *([f"- {line}" for line in lines] or ["None."]), ""]


def counted(count: int, what: str) -> str:
    """`1 run`, `3 runs`: a count with its noun (issue 64: "(1 runs)")."""
    return f"{count} {what}{'' if count == 1 else 's'}"


def runs_text(trained: int, evaluations: int = 0, joiner: str = ", ") -> str:
    """A count of a study's run records that says what it counts: `164 trained runs`, `164 trained runs, 15 YaRN
    evaluations` (a YaRN entry scores a trained rope run at other lengths and trains nothing; issue 64: a page said
    "179 runs" of its records and "164 runs" of its trained runs, side by side)."""
    text = counted(trained, "trained run")
    return text + (f"{joiner}{counted(evaluations, 'YaRN evaluation')}" if evaluations else "")
