"""Shared test settings. Tests run in one pytest process (importing lightning costs seconds)."""

from __future__ import annotations

import os

import torch

torch.set_num_threads(min(2, os.cpu_count() or 1))
os.environ.setdefault("POSBENCH_PROGRESS", "0")
