"""Learned absolute position table (GPT-2 / nanoGPT `wpe`).

    h_m = E[token_m] + P[m],    P in R^{L x d_model}, initialised N(0, 0.02^2)

The table has exactly L = training-context rows: evaluating at a position >= L is an error, never a silent
clamp.
"""

import torch
from torch import nn

from models.encodings.base import PositionalEncoding, register


@register
class LearnedAbsolute(PositionalEncoding):
    name = "ape_learned"
    mechanism = "embedding"

    def __init__(self, **dims: int) -> None:
        super().__init__(**dims)
        self.table = nn.Embedding(self.context, self.d_model)
        nn.init.normal_(self.table.weight, mean=0.0, std=0.02)

    @property
    def max_positions(self) -> int:
        return self.context

    def embed(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return x + self.table(state)

    def flops_per_token(self, T: int) -> float:
        """One add per embedding dimension, once."""
        return float(self.d_model)
