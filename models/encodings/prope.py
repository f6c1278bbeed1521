"""p-RoPE: partial RoPE (Barbero et al., 2024, "Round and round we go! What makes rotary positional
encodings useful?"; restated in paper 001, equation 4).

    theta_j = base^(-2j/d)   if j < p * d/2
    theta_j = 0              otherwise

p is the fraction of bands kept, highest frequencies first: p = 1 is RoPE, p = 0 is NoPE. Default p = 0.75
and base 10k, as in the p-RoPE paper.
Computed and counted as RoPE (models.encodings.rope), the zero-angle bands included: 6 d_model FLOPs per
token and layer.
"""

import torch

from models.encodings.base import register
from models.encodings.options import Option
from models.encodings.rope import RoPE, rope_frequencies


@register
class PartialRoPE(RoPE):
    name = "prope"
    option_rules = {"p": Option("number", "in [0, 1]", lambda v: 0 <= v <= 1, why="the fraction of bands that rotate")}

    def __init__(self, *, p: float = 0.75, base: float = 10_000.0, **dims: int) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-RoPE keeps a fraction p of the bands; p must lie in [0, 1], got {p}")
        self.p = float(p)
        super().__init__(base=base, **dims)

    def frequencies(self) -> torch.Tensor:
        theta = rope_frequencies(self.head_dim, self.base)
        band = torch.arange(theta.numel())
        return torch.where(band < self.p * theta.numel(), theta, torch.zeros_like(theta))

    def describe(self):
        return {**super().describe(), "p": self.p}
