"""A trained run continues the first test example of its domain, written as a MIDI file (music domains)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from domains.base import SequenceDataModule
from domains.stored import StoredDataModule
from models.sampling import sample_continuation
from pipelines.experiment.config import build_datamodule
from pipelines.runs.layout import MANIFEST
from pipelines.runs.metrics import read_json_file
from pipelines.runs.model_file import load_run_model


def midi_writer(datamodule: SequenceDataModule) -> Callable[[np.ndarray, Path], Path]:
    write = getattr(datamodule, "write_midi", None)
    if write is None or not isinstance(datamodule, StoredDataModule):
        raise ValueError(f"domain {datamodule.domain} cannot be written as MIDI")
    return write


def generate_midi(
    run: Path, out: Path, prompt_tokens: int, new_tokens: int, temperature: float, seed: int, device: str
) -> Path:
    """Sample `new_tokens` after the first `prompt_tokens` of the first test example; write prompt + continuation."""
    manifest = read_json_file(run / MANIFEST)
    datamodule = build_datamodule(OmegaConf.create(manifest["config"]))
    write = midi_writer(datamodule)
    datamodule.prepare_data()
    example = np.asarray(datamodule.split("test").example(0), dtype=np.int64)
    if new_tokens < 0:
        raise ValueError(f"--new-tokens must be >= 0, got {new_tokens}")
    if not 1 <= prompt_tokens <= len(example):
        raise ValueError(f"--prompt-tokens must be in 1..{len(example)} (the first test example's length)")
    model = load_run_model(run, device)
    generator = torch.Generator(device=device).manual_seed(seed)
    prompt = torch.from_numpy(example[:prompt_tokens]).to(device)
    tokens = sample_continuation(
        model, prompt, new_tokens, temperature=temperature, generator=generator, alignment=datamodule.window_alignment
    )
    return write(tokens.cpu().numpy(), out)
