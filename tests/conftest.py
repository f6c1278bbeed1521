"""Shared test settings. `make test` runs the tests in pytest-xdist workers, one per core (TEST_WORKERS), each test
file whole on one worker (--dist loadfile: a module's fixtures are built once); each worker's torch gets an equal
share of the cores, so the workers do not fight over them."""

from __future__ import annotations

import os

import torch

workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
torch.set_num_threads(max(1, min(2, (os.cpu_count() or 1) // workers)))
os.environ.setdefault("POSBENCH_PROGRESS", "0")
