"""Sinusoidal absolute position table (Vaswani et al., 2017; paper 002).

    PE(m, 2i)   = sin(m / 10000^(2i / d_model))
    PE(m, 2i+1) = cos(m / 10000^(2i / d_model))
    h_m = E[token_m] + PE(m)

Fixed (no parameters) and defined at every position, so it can be evaluated past the training length.
"""

import torch

from models.encodings.base import PositionalEncoding, register


def sinusoid_table(pos: torch.Tensor, d_model: int) -> torch.Tensor:
    """(T, d_model) table in fp32."""
    if d_model % 2:
        raise ValueError(f"the sinusoidal table needs an even d_model, got {d_model}")
    inv_freq = 10_000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angle = pos.double()[:, None] * inv_freq[None, :]
    table = torch.stack((angle.sin(), angle.cos()), dim=-1).flatten(-2)  # interleave: sin at 2i, cos at 2i+1
    return table.float()


@register
class SinusoidalAbsolute(PositionalEncoding):
    name = "ape_sin"
    mechanism = "embedding"

    def prepare(self, pos: torch.Tensor) -> torch.Tensor:
        return sinusoid_table(super().prepare(pos), self.d_model).to(pos.device)

    def embed(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return x + state.to(x.dtype)
