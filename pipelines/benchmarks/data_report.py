"""The data benchmark's report: its rows as a table (rich) with one line per skipped domain, and as a CSV file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.benchmarks.data import COLUMNS
from pipelines.report.files import write_csv


def print_table(rows: list[dict[str, Any]], file: Any = None) -> None:
    """The measured rows as a table (rich), then one line per skipped domain with the reason."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Data preparation throughput")
    for name in ("domain", "stage", "amount", "seconds", "min-max", "per second", "workers"):
        table.add_column(name, justify="left" if name in ("domain", "stage") else "right")
    for row in rows:
        if not row["skipped"]:
            table.add_row(
                row["domain"],
                row["stage"],
                f"{row['amount']:,} {row['unit']}",
                f"{row['seconds']:.3g}",
                f"{row['seconds_min']:.3g}-{row['seconds_max']:.3g}",
                f"{human(row['per_second'])} {row['unit']}/s",
                str(row["workers"]),
            )
    console = Console(file=file, width=120)
    console.print(table)
    for row in rows:
        if row["skipped"]:
            console.print(f"{row['domain']} skipped: {row['skipped']}", soft_wrap=True)


def human(value: float) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g} {suffix}"
    return f"{value:.3g}"


def write_rows(rows: list[dict[str, Any]], path: Path) -> None:
    write_csv(path, list(COLUMNS), [[row[column] for column in COLUMNS] for row in rows])
