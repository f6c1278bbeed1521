"""Sampling a continuation from a trained decoder, one token at a time, within its training context."""

from __future__ import annotations

import torch

from models.gpt import GPT


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
    """prompt (P,) int64 on the model's device -> (P + new_tokens,): the prompt followed by tokens sampled from the
    softmax at `temperature`. Once the sequence is longer than the context, the model sees the most recent tokens
    from a multiple of `alignment` on, as its training windows start (JSB: 4 tokens, one timestep)."""
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
