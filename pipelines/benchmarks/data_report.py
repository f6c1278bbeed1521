"""The data benchmarks' report: preparation and training-loader rows as tables (rich) with one line per skipped
domain, and as CSV files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipelines.benchmarks import loader
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


def print_loader_table(rows: list[dict[str, Any]], file: Any = None) -> None:
    """Loader rows: batches/s and tokens/s per configuration, against the preset's training tokens/s."""
    from rich.console import Console
    from rich.table import Table

    measured = [row for row in rows if not row["skipped"]]
    preset = measured[0]["preset"] if measured else ""
    table = Table(title=f"Training loader throughput ({preset} preset; training: the reference encoding's tokens/s)")
    for name in ("domain", "path", "method", "workers", "batch x context", "batches/s", "tokens/s", "training", "x"):
        table.add_column(name, justify="left" if name in ("domain", "path", "method") else "right")
    for row in measured:
        train, ratio = row["train_tokens_per_s"], row["loader_vs_train"]
        table.add_row(
            row["domain"],
            row["path"],
            row["method"],
            str(row["workers"]),
            f"{row['batch']} x {row['context']}",
            f"{row['batches_per_s']:.3g}",
            human(row["tokens_per_s"]),
            human(train) if train else "-",
            f"{ratio:.3g}" if ratio else "-",
        )
    console = Console(file=file, width=120)
    console.print(table)
    for row in rows:
        if row["skipped"]:
            console.print(f"{row['domain']} loader skipped: {row['skipped']}", soft_wrap=True)


def write_loader_rows(rows: list[dict[str, Any]], path: Path) -> None:
    write_csv(path, list(loader.COLUMNS), [[row[column] for column in loader.COLUMNS] for row in rows])


def human(value: float) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g} {suffix}"
    return f"{value:.3g}"


def write_rows(rows: list[dict[str, Any]], path: Path) -> None:
    write_csv(path, list(COLUMNS), [[row[column] for column in COLUMNS] for row in rows])
