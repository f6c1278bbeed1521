"""Evaluate a trained run again: per-example and per-position metrics of every evaluation split.

    python -m pipelines.evaluate runs/synthetic/parity/rope10k/seed0 [--device cuda]

Rebuilds the run's datamodule from its manifest, loads model.pt and rewrites <run>/metrics/ (the files are
described in pipelines.runs.metrics; the scoring in pipelines.experiment.evaluation).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from omegaconf import OmegaConf

from pipelines.experiment.config import build_datamodule
from pipelines.experiment.evaluation import evaluate_splits
from pipelines.host_memory import keep_freed_memory
from pipelines.runs.layout import MANIFEST
from pipelines.runs.metrics import read_json_file
from pipelines.runs.model_file import load_run_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a run folder holding manifest.json and model.pt")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    keep_freed_memory()
    try:
        manifest = read_json_file(args.run / MANIFEST)
        model = load_run_model(args.run, args.device)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    datamodule = build_datamodule(OmegaConf.create(manifest["config"]))
    summary = evaluate_splits(model, datamodule, args.run, args.device)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
