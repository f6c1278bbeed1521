"""A run's final weights, `model.pt`: the model config beside the state dict, and the format they are saved in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from domains.atomic import atomic_path
from models.gpt import GPT, GPTConfig
from pipelines.runs.layout import MODEL

# What saved weights mean. 2: rotary encodings pair dimensions (2j, 2j+1); format 1 (no "format" key) paired
# (j, j + d/2), so its q/k weights are permuted for today's code and would load without error, then score wrongly.
MODEL_FORMAT = 2


def save_run_model(run: Path, model: GPT, model_config: dict[str, Any]) -> None:
    with atomic_path(run / MODEL) as tmp:
        torch.save({"format": MODEL_FORMAT, "config": model_config, "state_dict": model.state_dict()}, tmp)


def load_run_model(run: Path, device: str | torch.device = "cpu") -> GPT:
    path = run / MODEL
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no model file; is {run} a finished run folder?")
    try:
        saved = torch.load(path, map_location=device, weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError) as error:
        raise ValueError(
            f"{path}: truncated or corrupt ({error}); evaluate from the run's checkpoint or train again"
        ) from None
    if not isinstance(saved, dict) or "config" not in saved or "state_dict" not in saved:
        raise ValueError(f"{path}: not a posbench model file (no config and state_dict)")
    if saved.get("format", 1) != MODEL_FORMAT:
        raise ValueError(
            f"{path}: weights saved in model format {saved.get('format', 1)}, this code reads format {MODEL_FORMAT} "
            "(rotary encodings now pair dimensions (2j, 2j+1)); train the run again"
        )
    model = GPT(GPTConfig(**saved["config"]))
    model.load_state_dict(saved["state_dict"])
    return model.to(device)
