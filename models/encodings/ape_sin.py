"""Sinusoidal absolute position table (Vaswani et al., 2017; paper 002), at the scale of the token embeddings.

    PE(m, 2i)   = sin(m / 10000^(2i / d_model))
    PE(m, 2i+1) = cos(m / 10000^(2i / d_model))
    h_m = E[token_m] + s PE(m),    s = 0.02 sqrt(2)

The table's entries have unit amplitude (per-dimension RMS 1/sqrt(2)); Vaswani et al. match it by multiplying
embeddings initialised at std d^-1/2 by sqrt(d_model). This decoder's embeddings are GPT-2-initialised (std
0.02), where the unscaled table drowns the tokens (the tiny JSB and reverse_string models ended at chance, below
NoPE), so the table is scaled to the same per-dimension RMS as the tokens and as nanoGPT's learned table
(`ape_learned`, N(0, 0.02^2)): the fixed and the learned table then start from the same signal-to-token ratio.
`scale` overrides s. Fixed (no parameters) and defined at every position, so it can be evaluated past the
training length.
"""

import math

import torch

from models.encodings.base import PositionalEncoding, register
from models.encodings.options import Option


def sinusoid_table(pos: torch.Tensor, d_model: int) -> torch.Tensor:
    """(T, d_model) table in fp32."""
    if d_model % 2:
        raise ValueError(f"the sinusoidal table needs an even d_model, got {d_model}")
    inv_freq = 10_000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64, device=pos.device) / d_model)
    angle = pos.double()[:, None] * inv_freq[None, :]
    table = torch.stack((angle.sin(), angle.cos()), dim=-1).flatten(-2)  # interleave: sin at 2i, cos at 2i+1
    return table.float()


@register
class SinusoidalAbsolute(PositionalEncoding):
    name = "ape_sin"
    mechanism = "embedding"
    option_rules = {"scale": Option("number", why="the table's factor s")}

    def __init__(self, *, scale: float = 0.02 * math.sqrt(2), **dims: int) -> None:
        super().__init__(**dims)
        self.scale = float(scale)

    def describe(self):
        return {**super().describe(), "scale": self.scale}

    def prepare(self, pos: torch.Tensor) -> torch.Tensor:
        return sinusoid_table(super().prepare(pos), self.d_model)

    def embed(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return x + self.scale * state.to(x.dtype)

    def flops_per_token(self, T: int) -> float:
        """A multiply-add per embedding dimension, once (the table itself is built once per forward)."""
        return 2.0 * self.d_model
