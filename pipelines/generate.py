"""Let a trained run continue a piece and write it as a MIDI file, to hear what the model learned.

    python -m pipelines.generate RUN_DIR --out FILE.mid [--prompt-tokens N] [--new-tokens M]
                                 [--temperature T] [--seed S] [--device D]

The prompt is the first N tokens of the domain's first test example. M tokens are sampled one at a time from the
model's softmax at temperature T with a seeded torch.Generator (same run, seed and device: same file). The model
sees at most its training context: once the piece is longer, the most recent tokens, starting on a multiple of
the datamodule's `window_alignment` (JSB: 4 tokens, one timestep) as its training windows do. The domain's
datamodule writes prompt + continuation with its `write_midi(tokens, path)`; a domain without one is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from domains.base import SequenceDataModule
from domains.fetch import FetchError
from domains.stored import StoredDataModule
from models.gpt import GPT
from pipelines.config import build_datamodule
from pipelines.evaluate import load_run_model


def midi_writer(datamodule: SequenceDataModule) -> Callable[[np.ndarray, Path], Path]:
    write = getattr(datamodule, "write_midi", None)
    if write is None or not isinstance(datamodule, StoredDataModule):
        raise ValueError(f"domain {datamodule.domain} cannot be written as MIDI")
    return write


def context_start(length: int, context: int, alignment: int) -> int:
    """First token the model sees of a sequence of `length`: the latest multiple of `alignment` that leaves at
    most `context` tokens."""
    overflow = max(0, length - context)
    return -(-overflow // alignment) * alignment


@torch.no_grad()
def sample_continuation(
    model: GPT,
    prompt: torch.Tensor,
    new_tokens: int,
    *,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    alignment: int = 1,
) -> torch.Tensor:
    """prompt (P,) int64 on the model's device -> (P + new_tokens,): the prompt followed by sampled tokens."""
    if len(prompt) < 1:
        raise ValueError("the prompt needs at least one token")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    context = model.cfg.context
    if alignment > context:
        raise ValueError(f"alignment {alignment} is longer than the model's context {context}")
    was_training = model.training
    model.eval()
    sequence = torch.empty(len(prompt) + new_tokens, dtype=torch.long, device=prompt.device)
    sequence[: len(prompt)] = prompt
    for length in range(len(prompt), len(sequence)):
        window = sequence[context_start(length, context, alignment) : length]
        logits = model(window[None])[0, -1].float() / temperature
        sequence[length] = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)[0]
    model.train(was_training)
    return sequence


def generate(
    run: Path, out: Path, prompt_tokens: int, new_tokens: int, temperature: float, seed: int, device: str
) -> Path:
    manifest = json.loads((run / "manifest.json").read_text())
    datamodule = build_datamodule(OmegaConf.create(manifest["config"]))
    write = midi_writer(datamodule)
    datamodule.prepare_data()
    example = np.asarray(datamodule.split("test").example(0), dtype=np.int64)
    if not 1 <= prompt_tokens <= len(example):
        raise ValueError(f"--prompt-tokens must be in 1..{len(example)} (the first test example's length)")
    model = load_run_model(run, device)
    generator = torch.Generator(device=device).manual_seed(seed)
    prompt = torch.from_numpy(example[:prompt_tokens]).to(device)
    alignment = getattr(datamodule, "window_alignment", 1)
    tokens = sample_continuation(
        model, prompt, new_tokens, temperature=temperature, generator=generator, alignment=alignment
    )
    return write(tokens.cpu().numpy(), out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a finished run folder (manifest.json and model.pt)")
    parser.add_argument("--out", type=Path, required=True, help="MIDI file to write")
    parser.add_argument("--prompt-tokens", type=int, default=64, help="tokens of the first test example to continue")
    parser.add_argument("--new-tokens", type=int, default=512, help="tokens to sample")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    try:
        path = generate(
            args.run, args.out, args.prompt_tokens, args.new_tokens, args.temperature, args.seed, args.device
        )
    except (ValueError, FileNotFoundError, FetchError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{path}: {args.prompt_tokens} prompt + {args.new_tokens} sampled tokens from {args.run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
