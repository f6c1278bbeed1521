"""Atomic output files of every report: CSV tables and PNG figures (written under a temporary name, renamed)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from domains.atomic import atomic_write, write_text


def _is_nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    """Write the CSV file atomically; NaN cells are left empty."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([["" if _is_nan(v) else v for v in row] for row in rows])
    write_text(path, buffer.getvalue())


def save_figure(fig: Figure, path: Path) -> None:
    """Render with the Agg canvas (no display needed) and write the PNG atomically."""
    FigureCanvasAgg(fig)
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=120, bbox_inches="tight"), mode="wb")
