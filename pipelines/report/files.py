"""Output files of every report: atomic CSV tables and PNG figures (written under a temporary name, renamed), values
made strict JSON, and a whole report published all or nothing."""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from domains.atomic import atomic_write, write_text


def _is_nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def jsonable(value):
    """`value` for strict JSON: NaN and infinities become null (JSON has no NaN), numpy scalars Python numbers."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


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


def publish(out: Path, render: Callable[[Path], list[str]], owned: Iterable[str] = ()) -> None:
    """Write a report all or nothing. `render(folder)` writes into a fresh folder beside `out` and returns the names
    it wrote there (files or folders). Only once it has succeeded do they move into `out`, each replacing the entry
    of the same name; the `owned` names it did not write (outputs of an earlier report that this one does not
    produce) are removed. A failure while rendering, or while moving (undone), leaves `out` exactly as it was;
    entries of `out` that are neither written nor owned (other reports, benchmarks) are never touched."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        staged, previous = Path(tmp) / "new", Path(tmp) / "old"
        staged.mkdir()
        previous.mkdir()
        written = render(staged)
        set_aside, placed = [], []
        try:
            for name in sorted({*written, *owned}):
                if (out / name).exists():
                    os.replace(out / name, previous / name)
                    set_aside.append(name)
            for name in written:
                os.replace(staged / name, out / name)
                placed.append(name)
        except BaseException:
            for name in placed:
                _remove(out / name)
            for name in set_aside:
                os.replace(previous / name, out / name)
            raise


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
