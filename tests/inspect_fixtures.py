"""Tiny trained runs and an inspection's files, for the inspection tests (tests/test_inspect.py)."""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.experiment.config import compose_config
from pipelines.experiment.training import train_and_evaluate
from pipelines.runs.layout import INSPECT


def tiny_run(runs_root: Path, pe: str, task: str = "reverse_string") -> Path:
    """A `debug=fast` synthetic run (6 steps): a real model.pt and metrics, in seconds."""
    overrides = ["debug=fast", f"runs_root={runs_root}", f"domain.args.task={task}", f"pe={pe}"]
    return train_and_evaluate(compose_config(overrides))


def inspection_json(run: Path, split: str) -> dict:
    """What `python -m pipelines.inspect RUN --split SPLIT` wrote into RUN/inspect/<split>.json."""
    return json.loads((run / INSPECT / f"{split}.json").read_text())
