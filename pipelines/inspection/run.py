"""Inspecting one finished run: its model and data rebuilt from the run folder, a few evaluation windows of one
split, and what the inspection finds there (Inspection: the recency profile and the encoding's views)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from pipelines.experiment.config import build_datamodule
from pipelines.inspection.attention import real_length, recency_profile
from pipelines.inspection.content import content_track
from pipelines.inspection.recency import RecencyProfile
from pipelines.inspection.views import View, encoding_views
from pipelines.runs.layout import MANIFEST, is_derived
from pipelines.runs.metrics import read_json_file
from pipelines.runs.model_file import load_run_model


@dataclass
class Inspection:
    """What `python -m pipelines.inspect` found in one run on one split."""

    run: Path
    encoding: str  # the encoding's config id (run.pe_id)
    implementation: str  # its registered class (run.pe)
    split: str
    windows: list[int]  # the rows of the split's evaluation windows inspected
    examples: list[int]  # the examples they score (the split's numbering, as in its per-example metrics)
    lengths: list[int]  # their real lengths (tokens before the padding)
    shown: int  # the window the views along an example show (the longest)
    recency: RecencyProfile
    views: list[View]

    def as_json(self) -> dict:
        return {
            "run": str(self.run),
            "encoding": self.encoding,
            "implementation": self.implementation,
            "split": self.split,
            "windows": self.windows,
            "examples": self.examples,
            "lengths": self.lengths,
            "shown_window": self.shown,
            "recency": self.recency.as_json(),
            "views": {view.kind: view.as_json() for view in self.views},
        }


def inspect_run(run: Path, split: str, count: int, device: str | torch.device) -> Inspection:
    """Inspect `count` evaluation windows of `split` (evenly spaced over the split, its first and last included).
    ValueError (or FileNotFoundError) naming what is wrong: a derived run, an unknown split, a split the encoding
    cannot represent, a missing model file or data store."""
    manifest = read_json_file(run / MANIFEST)
    encoding = manifest["run"]["pe_id"]
    if is_derived(encoding):
        raise ValueError(f"{run}: {encoding} is an evaluation of a trained run, not a model: inspect that run")
    if count < 1:
        raise ValueError(f"the number of windows to inspect must be at least 1, got {count}")
    model = load_run_model(run, device).eval()
    datamodule = build_datamodule(OmegaConf.create(manifest["config"]))
    if split not in datamodule.eval_split_names:
        raise ValueError(f"{run}: no split {split!r}; the domain evaluates {', '.join(datamodule.eval_split_names)}")
    windows = datamodule.eval_windows(split)
    limit = model.encoding.max_positions
    if limit is not None and windows.window_length > limit:
        raise ValueError(f"{run}: {encoding} represents {limit} positions; {split} needs {windows.window_length}")
    rows = np.unique(np.linspace(0, len(windows) - 1, min(count, len(windows))).round().astype(int)).tolist()
    lengths = [real_length(windows.scored[row]) for row in rows]
    recency = recency_profile(model, [(windows.tokens[row], windows.scored[row]) for row in rows], device)
    shown = rows[int(np.argmax(lengths))]
    tokens = windows.tokens[shown][: max(lengths)]
    content = content_track(datamodule, split, tokens, int(windows.example[shown]), int(windows.start[shown]))
    return Inspection(
        run=run,
        encoding=encoding,
        implementation=manifest["run"]["pe"],
        split=split,
        windows=rows,
        examples=[int(windows.example[row]) for row in rows],
        lengths=lengths,
        shown=shown,
        recency=recency,
        views=encoding_views(model, tokens, content),
    )
