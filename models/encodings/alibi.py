"""ALiBi: attention with linear biases (Press et al., 2022, "Train Short, Test Long: Attention with Linear Biases
Enables Input Length Extrapolation", ICLR; arXiv 2108.12409).

    score(i, j) = q_i . k_j / sqrt(d) - s_h * (i - j)    for j <= i

Head h = 1..n gets slope s_h = 2^(-8h/n) when n is a power of two. Otherwise, with m the largest power of two
below n, the first m heads take the slopes for m heads and the remaining n - m heads take every other slope
(the odd-numbered ones) of the 2m-head sequence (the rule of the ALiBi reference code).
"""

import math

import torch

from models.encodings.base import CausalLogits, PositionalEncoding, causal_logits, register


def alibi_slopes(n_head: int) -> list[float]:
    def power_of_two_slopes(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    if n_head & (n_head - 1) == 0:
        return power_of_two_slopes(n_head)
    m = 2 ** math.floor(math.log2(n_head))
    return power_of_two_slopes(m) + power_of_two_slopes(2 * m)[0::2][: n_head - m]


@register
class ALiBi(PositionalEncoding):
    name = "alibi"
    mechanism = "bias"
    revision = 2  # query-blocked flash attention with its fixed bias (models.encodings.base)

    def __init__(self, **dims: int) -> None:
        super().__init__(**dims)
        self.register_buffer("slopes", torch.tensor(alibi_slopes(self.n_head)), persistent=False)

    def prepare(self, pos: torch.Tensor) -> torch.Tensor:
        """The masked bias, once per forward pass: the same in every layer."""
        logits: CausalLogits = causal_logits(super().prepare(pos))
        return logits.masked(-self.slopes[:, None, None] * logits.distance.float())

    def logit_bias(self, state, layer, x):
        return state

    def flops_per_token(self, T: int) -> float:
        """One add of the bias per visible key, head and layer: n_layer * n_head * (T + 1) / 2. The (H, T, T)
        table is built once per forward and shared by the batch and the layers, so it is left out."""
        return self.n_layer * self.n_head * (T + 1) / 2
