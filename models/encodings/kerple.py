"""KERPLE, logarithmic variant (Chi et al., 2022, "KERPLE: Kernelized Relative Positional Embedding for Length
Extrapolation", NeurIPS; SPEC section 1b).

    score(i, j) = q_i . k_j / sqrt(d) - r1_h * log(1 + r2_h * (i - j))      for j <= i

r1, r2 > 0, learned per layer and head, initialised r1 ~ U(0, 2) and r2 ~ U(0, 1) as the reference code does
(github.com/chijames/KERPLE, megatron/mpu/layers.py, `ParallelKerpleLog`: bias_p = 2 rand, bias_a = rand).

Positivity, as the reference code: at the start of every forward pass the parameters themselves are clamped to
>= 1e-2 (`param.data = param.data.clamp(min=eps)` there, before the bias is built), a projection after each
optimiser step. The forward pass sees the clamped values and the gradient passes through unchanged, so a
parameter pushed below 1e-2 restarts from 1e-2 at the next step; a clamp inside the graph instead would give it
zero gradient and leave it stuck below for good. The clamp goes through `.data`, like an optimiser step, so
autograd does not record it. r1 and r2 take no weight decay: they are per-head scalars, like ALiBi's slopes,
and decay would drag them into the clamp.

Computed per layer from the shared pieces: the (H, T) values on the lags n = 0..T-1 (`lag_bias`, which attention
on the CPU takes as they are: models.biased_attention.lag_biased_attention), or laid out with one gather to
(H, T, T) and the causal mask (relative_bias; `logit_bias`); the lags and the gather index are built once per
forward pass.

FLOPs per token (`flops_per_token`): one add of the bias per visible key, head and layer, n_layer * H * (T + 1)
/ 2, as ALiBi; the (H, T) values and their layout are per layer but shared by the batch, so left out.
"""

import torch
from torch import nn

from models.encodings.base import LagTerm, PositionalEncoding, causal_logits, register
from models.encodings.relative_bias import LagLogits, lag_logits

EPS = 1e-2  # the reference code's lower clamp of r1 and r2


@register
class Kerple(PositionalEncoding):
    name = "kerple"
    takes_random_positions = False  # its lag table covers the distances of one window
    mechanism = "bias"
    revision = 3  # 2: query-blocked flash attention in evaluation; 3: lag-biased attention (models.encodings.base)

    def __init__(self, **dims: int) -> None:
        super().__init__(**dims)
        self.r1 = nn.Parameter(2 * torch.rand(self.n_layer, self.n_head))  # the kernel's scale
        self.r2 = nn.Parameter(torch.rand(self.n_layer, self.n_head))  # its rate in the distance

    def prepare(self, pos: torch.Tensor) -> LagLogits:
        for param in (self.r1, self.r2):
            param.data.clamp_(min=EPS)
        return lag_logits(causal_logits(super().prepare(pos)))

    def on_lags(self, state: LagLogits, layer: int) -> torch.Tensor:
        """-r1 log(1 + r2 n) on the lags n = 0..T-1, (H, T)."""
        r1, r2 = self.r1[layer, :, None], self.r2[layer, :, None]
        return -r1 * torch.log1p(r2 * state.lags)

    def lag_bias(self, state: LagLogits, layer, x):
        return LagTerm(self.on_lags(state, layer), state.lags.shape[0])

    def logit_bias(self, state: LagLogits, layer, x):
        return state.masked_by_lag(self.on_lags(state, layer))

    def flops_per_token(self, T: int) -> float:
        """n_layer * n_head * (T + 1) / 2: the add of the bias per visible key, head and layer."""
        return self.n_layer * self.n_head * (T + 1) / 2

    def optimizer_groups(self):
        return [{"params": [self.r1, self.r2], "weight_decay": 0.0}]

    def describe(self):
        return {**super().describe(), "kernel": "log", "clamp_min": EPS}
