"""Evaluate a trained run: per-example and per-position metrics of every evaluation split.

    python -m pipelines.evaluate runs/synthetic/parity/rope10k/seed0 [--device cuda]

Writes <run>/metrics/<split>.per_example.csv (example, nll, tokens, correct, exact),
<run>/metrics/<split>.per_position.csv (position, nll_sum, tokens) and <run>/metrics/summary.json. A split the
encoding cannot represent (a learned table shorter than the split's sequences) or that the task cannot fill is
recorded as {"skipped": reason}, never dropped.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from domains.atomic import write_json, write_text
from domains.base import EmptySplitError, SequenceDataModule
from models.gpt import GPT, GPTConfig
from models.training import EvalResult, evaluate
from pipelines.config import build_datamodule


def evaluate_splits(model: GPT, datamodule: SequenceDataModule, run: Path, device: str | torch.device) -> dict:
    """Score every evaluation split of the domain; write the metrics files; return summary.json's content."""
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
        began = time.perf_counter()
        result = evaluate(model, datamodule.eval_dataloader(split), windows.n_examples, windows.max_length, device)
        seconds = time.perf_counter() - began
        write_metrics(run / "metrics", split, result)
        splits[split] = {**result.summary(), "tokens_per_s": windows.tokens.size / seconds}
    summary = {"splits": splits}
    write_json(run / "metrics" / "summary.json", summary)
    return summary


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


def load_run_model(run: Path, device: str | torch.device = "cpu") -> GPT:
    saved = torch.load(run / "model.pt", map_location=device, weights_only=True)
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
