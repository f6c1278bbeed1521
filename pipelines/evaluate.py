"""Evaluate a trained run: per-example and per-position metrics of every evaluation split.

    python -m pipelines.evaluate runs/synthetic/parity/rope10k/seed0 [--device cuda]

Writes <run>/metrics/<split>.per_example.csv (example, nll, tokens, correct, exact),
<run>/metrics/<split>.per_position.csv (position, nll_sum, tokens) and <run>/metrics/summary.json. A split the
encoding cannot represent (a learned table shorter than the split's sequences) or that the task cannot fill is
recorded as {"skipped": reason}, never dropped.

A trained `rope` run whose domain has splits longer than the training context (the synthetic 2x and 8x splits)
is also evaluated with YaRN at s = split length / L (s = 1 on the in-distribution split: plain RoPE). Those
results go to a sibling run folder, <domain>[/<task>]/<pe_id>+yarn/seed<k>/, so every comparison shows YaRN as
one more encoding without training anything.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from domains.atomic import write_json, write_text
from domains.base import EmptySplitError, SequenceDataModule
from models.encodings.yarn import with_yarn
from models.gpt import GPT, GPTConfig
from models.training import EvalResult, evaluate
from pipelines.config import build_datamodule


def evaluate_splits(
    model: GPT,
    datamodule: SequenceDataModule,
    run: Path,
    device: str | torch.device,
    adapt: Callable[[GPT, int], GPT] | None = None,
) -> dict:
    """Score every evaluation split of the domain; write the metrics files; return summary.json's content.
    `adapt(model, split_length)` gives the model to score a split with (YaRN); by default the model itself."""
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
        began = time.perf_counter()
        result = evaluate(scorer, datamodule.eval_dataloader(split), windows.n_examples, windows.max_length, device)
        seconds = time.perf_counter() - began
        write_metrics(run / "metrics", split, result)
        splits[split] = {
            **result.summary(),
            "tokens_per_s": windows.tokens.size / seconds,
            "window_length": windows.window_length,
        }
    summary = {"splits": splits}
    write_json(run / "metrics" / "summary.json", summary)
    return summary


def evaluate_yarn(run: Path, model: GPT, datamodule: SequenceDataModule, device: str | torch.device) -> Path | None:
    """The YaRN sibling of a finished rope run (see the module docstring); None when there is nothing longer than
    the training context to extrapolate to."""
    manifest = json.loads((run / "manifest.json").read_text())
    if model.cfg.pe != "rope":
        return None
    lengths = [w.window_length for s in datamodule.eval_split_names if (w := _windows_or_none(datamodule, s))]
    if not any(length > model.cfg.context for length in lengths):
        return None
    folder = run.parent.parent / f"{manifest['run']['pe_id']}+yarn" / run.name
    summary = evaluate_splits(model, datamodule, folder, device, adapt=with_yarn)
    encoding = with_yarn(model, max(lengths)).encoding.describe()
    manifest["run"] = {**manifest["run"], "pe": "yarn", "pe_id": f"{manifest['run']['pe_id']}+yarn"}
    manifest.update(
        derived_from=str(run),
        encoding={**encoding, "scale": "split length / training context, per split"},
        eval_tokens_per_s={split: s.get("tokens_per_s") for split, s in summary["splits"].items()},
    )
    write_json(folder / "manifest.json", manifest)
    write_json(folder / "done.json", {"derived_from": str(run)})
    return folder


def _windows_or_none(datamodule: SequenceDataModule, split: str):
    try:
        return datamodule.eval_windows(split)
    except EmptySplitError:
        return None


def write_metrics(folder: Path, split: str, result: EvalResult) -> None:
    rows = ["example,nll,tokens,correct,exact"] + [
        f"{i},{nll:.8f},{n},{c},{int(c == n)}"
        for i, (nll, n, c) in enumerate(zip(result.nll, result.tokens, result.correct, strict=True))
    ]
    write_text(folder / f"{split}.per_example.csv", "\n".join(rows) + "\n")
    seen = np.nonzero(result.position_tokens)[0]
    rows = ["position,nll_sum,tokens"] + [
        f"{p},{result.position_nll_sum[p]:.8f},{result.position_tokens[p]}" for p in seen
    ]
    write_text(folder / f"{split}.per_position.csv", "\n".join(rows) + "\n")


# What saved weights mean. 2: rotary encodings pair dimensions (2j, 2j+1); format 1 (no "format" key) paired
# (j, j + d/2), so its q/k weights are permuted for today's code and would load without error, then score wrongly.
MODEL_FORMAT = 2


def load_run_model(run: Path, device: str | torch.device = "cpu") -> GPT:
    path = run / "model.pt"
    saved = torch.load(path, map_location=device, weights_only=True)
    if saved.get("format", 1) != MODEL_FORMAT:
        raise ValueError(
            f"{path}: weights saved in model format {saved.get('format', 1)}, this code reads format {MODEL_FORMAT} "
            "(rotary encodings now pair dimensions (2j, 2j+1)); train the run again"
        )
    model = GPT(GPTConfig(**saved["config"]))
    model.load_state_dict(saved["state_dict"])
    return model.to(device)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a run folder holding manifest.json and model.pt")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    manifest = json.loads((args.run / "manifest.json").read_text())
    datamodule = build_datamodule(OmegaConf.create(manifest["config"]))
    summary = evaluate_splits(load_run_model(args.run, args.device), datamodule, args.run, args.device)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
