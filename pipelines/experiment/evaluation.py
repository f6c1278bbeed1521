"""Scoring a trained model on every evaluation split of its domain, and the YaRN evaluation of rope runs.

Each split is one deterministic pass (models.training.evaluate); its per-example and per-position metrics and
the summary go to the run's metrics folder (pipelines.runs.metrics). A split the encoding cannot represent (a
learned table shorter than the split's sequences) or that the task cannot fill is recorded as
{"skipped": reason}, never dropped.

A trained `rope` run whose domain has splits longer than the training context is also evaluated with YaRN at
s = split length / L (s = 1 on the in-distribution split: plain RoPE). Those results go to a sibling run folder,
<domain>[/<task>]/<encoding>+yarn/seed<k>/, so every comparison shows YaRN as one more encoding without training
anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from domains.atomic import write_json
from domains.base import EmptySplitError, EvalWindows, SequenceDataModule
from models.encodings.yarn import with_yarn
from models.gpt import GPT
from models.training import evaluate
from pipelines.experiment.progress_lines import counted, progress_every, say
from pipelines.runs.layout import DONE, MANIFEST, YARN_SUFFIX
from pipelines.runs.manifest import eval_tokens_per_s
from pipelines.runs.metrics import read_json_file, write_split_metrics, write_summary


def evaluate_splits(
    model: GPT,
    datamodule: SequenceDataModule,
    run: Path,
    device: str | torch.device,
    adapt: Callable[[GPT, int], GPT] | None = None,
    label: str | None = None,
) -> dict:
    """Score every evaluation split of the domain; write the metrics files; return summary.json's content.
    `adapt(model, split_length)` gives the model to score a split with (YaRN); by default the model itself. With a
    run's `label`, a line every few seconds says how far each split's scoring is (pipelines.experiment.progress_lines:
    where no bar is drawn, the minutes of scoring after a run's training were silent)."""
    splits: dict[str, Any] = {}
    for split in datamodule.eval_split_names:
        try:
            windows = datamodule.eval_windows(split)
        except EmptySplitError as err:
            splits[split] = {"skipped": str(err)}
            continue
        limit = model.encoding.max_positions
        if limit is not None and windows.window_length > limit:
            splits[split] = {
                "skipped": f"{model.cfg.pe} represents {limit} positions; {split} needs {windows.window_length}"
            }
            continue
        scorer = adapt(model, windows.window_length) if adapt else model
        began, cpu_began = time.perf_counter(), time.process_time()
        loader = datamodule.eval_dataloader(split)
        if label is not None:
            say(f"{label}: scoring {split} ({windows.n_examples} examples in {len(loader)} batches)")
            loader = counted(loader, len(loader), f"{label}: scoring {split}", progress_every())
        result = evaluate(scorer, loader, windows.n_examples, windows.max_length, device)
        seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu_began
        write_split_metrics(run, split, result)
        splits[split] = {
            **result.summary(),
            "tokens_per_s": windows.tokens.size / seconds,
            "cpu_seconds": cpu_seconds,  # every thread of the process: the core-seconds the scoring held
            "window_length": windows.window_length,
        }
    return write_summary(run, splits)


def evaluate_yarn(
    run: Path, model: GPT, datamodule: SequenceDataModule, device: str | torch.device, label: str | None = None
) -> Path | None:
    """The YaRN sibling of a finished rope run (see the module docstring); None when there is nothing longer than
    the training context to extrapolate to, or when the run trained on randomized positions (it has seen positions
    past L: YaRN's rescaling assumes it has not). With the run's `label`, its scoring prints progress lines."""
    if model.cfg.pe != "rope" or model.encoding.random_positions is not None:
        return None
    lengths = [w.window_length for s in datamodule.eval_split_names if (w := _windows_or_none(datamodule, s))]
    if not any(length > model.cfg.context for length in lengths):
        return None
    manifest = read_json_file(run / MANIFEST)
    encoding = manifest["run"]["pe_id"] + YARN_SUFFIX
    folder = run.parent.parent / encoding / run.name
    yarn_label = None if label is None else f"{label} with YaRN ({encoding})"
    summary = evaluate_splits(model, datamodule, folder, device, adapt=with_yarn, label=yarn_label)
    manifest["run"] = {**manifest["run"], "pe": "yarn", "pe_id": encoding}
    manifest.update(
        derived_from=str(run),
        encoding={
            **with_yarn(model, max(lengths)).encoding.describe(),
            "scale": "split length / training context, per split",
        },
        eval_tokens_per_s=eval_tokens_per_s(summary),
    )
    write_json(folder / MANIFEST, manifest)
    write_json(folder / DONE, {"derived_from": str(run)})
    return folder


def _windows_or_none(datamodule: SequenceDataModule, split: str) -> EvalWindows | None:
    try:
        return datamodule.eval_windows(split)
    except EmptySplitError:
        return None
