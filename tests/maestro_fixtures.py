"""MAESTRO mirrors for the tests: small ones cut from the shared sample (../shared/data/maestro)."""

from __future__ import annotations

import shutil
from pathlib import Path

from domains.maestro.archive import CSV_NAME

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"  # the shared sample mirror, every domain's folder


def small_maestro_mirror(root: Path) -> Path:
    """A mirror of three of the sample's performances (the smallest) with the real CSV."""
    smallest = sorted((SHARED / "maestro").rglob("*.midi"), key=lambda p: p.stat().st_size)[:3]
    folder = root / "maestro"
    for path in smallest:
        dest = folder / path.relative_to(SHARED / "maestro")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    shutil.copyfile(SHARED / "maestro" / CSV_NAME, folder / CSV_NAME)
    return root
