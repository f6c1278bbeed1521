"""MAESTRO mirrors for the tests: small ones cut from the repository's sample (tests/data/mirror/maestro)."""

from __future__ import annotations

import shutil
from pathlib import Path

from domains.maestro.archive import CSV_NAME
from tests.sample_fixtures import SAMPLES


def small_maestro_mirror(root: Path) -> Path:
    """A mirror of three of the sample's performances (the smallest) with the real CSV."""
    smallest = sorted((SAMPLES / "maestro").rglob("*.midi"), key=lambda p: p.stat().st_size)[:3]
    folder = root / "maestro"
    for path in smallest:
        dest = folder / path.relative_to(SAMPLES / "maestro")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    shutil.copyfile(SAMPLES / "maestro" / CSV_NAME, folder / CSV_NAME)
    return root
