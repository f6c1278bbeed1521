"""Shared fixtures. Tests run in one pytest process (importing lightning costs seconds)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"

torch.set_num_threads(min(2, os.cpu_count() or 1))
os.environ.setdefault("POSBENCH_PROGRESS", "0")


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.fail(f"{SHARED_DATA} is missing: the real data samples must sit at ../shared/data beside the checkout")
    return SHARED_DATA
