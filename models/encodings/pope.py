"""PoPE: polar coordinate position embedding (Gopalakrishnan et al., 2025; SPEC section 1).

Each of the d components c of a query or key is its own frequency theta_c = base^(-c/d), c = 0..d-1, with a
non-negative magnitude and a position-only phase:

    q'_m = [softplus(q_c) cos(m theta_c),        softplus(q_c) sin(m theta_c)]          (width 2d)
    k'_n = [softplus(k_c) cos(n theta_c + delta_c), softplus(k_c) sin(n theta_c + delta_c)]

    q'_m . k'_n = sum_c softplus(q_c) softplus(k_c) cos((n - m) theta_c + delta_c)

delta (one per layer, head and component) is learned, initialised 0 and clamped to [-2 pi, 0] in the forward
pass; it takes no weight decay. v is unchanged. The softmax scale stays 1/sqrt(d) with d the original head
dim, and attention runs on q and k of width 2d: fused in evaluation and off the CPU (models.gpt.fused_causal_attention
zero-pads v to that width for the flash kernel), and in training on the CPU in tiles that take v at its own width
(`tiled_training`: models.biased_attention.tiled_causal_attention; issue 67). Base 10k by SPEC's convention. Phases
are fp32.

How it is computed fast, and why that is exact: the angle-sum formulas

    cos(n theta + delta) = cos(n theta) cos(delta) - sin(n theta) sin(delta)
    sin(n theta + delta) = sin(n theta) cos(delta) + cos(n theta) sin(delta)

let `prepare` take cos and sin of the (T, d) phases m theta_c once per forward pass for all layers; each layer
then takes cos and sin of its (H, d) deltas only and combines the tables with products, instead of cos and sin
of (H, T, d) phases. The products run in the (B, T, H, d) memory order of the qkv projection and of the
attention kernel's gradients (`token_major`). Even so PoPE costs more than RoPE, mostly in attention itself: the
flash kernel at width 2d does twice the work of width d, P.V included (v padded with zeros). The tiles do q.k at
2d and P.V at d: forward and backward of one attention, one thread (AVX-512 EPYC, CPU seconds beside a niced
sweep), 1.77-1.91x rope10k's `is_causal` flash on the flash kernel, 1.32-1.64x in the tiles at the JSB shape (B 4, 4
heads of 32, T 1024); 1.82-1.90x and 1.48-1.51x at T 2048 (B 1, 2 heads of 64). Values agree to float rounding.

FLOPs per token and layer (`flops_per_token`): softplus of q and k 2 d_model, the magnitudes times cos and sin
4 d_model, and the wider attention: q.k at width 2d and P.V with v zero-padded to 2d each add 2 d (T + 1) / 2
per head (a causal query sees (T + 1) / 2 keys), 2 d_model (T + 1) in all. The tables (T d per forward pass,
H T d per layer: the keys' phases) are shared by the batch and neglected.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from models.encodings.base import PositionalEncoding, register
from models.encodings.rope import BASE, at_least_fp32


def token_major(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d) -> a dense (B, T, H, d) copy in at least fp32: the memory order of the qkv projection (one
    cheap copy of its strided view) and of the attention kernel's gradients, so that every later elementwise
    kernel, forward and backward, meets one memory order (mixed orders make them several times slower)."""
    return at_least_fp32(x).transpose(1, 2).contiguous()


@register
class PoPE(PositionalEncoding):
    name = "pope"
    mechanism = "qk"
    revision = 2  # training on the CPU in tiles, P.V at v's width (models.encodings.base; issue 67)
    tiled_training = True
    option_rules = {"base": BASE}  # theta_c = base^(-c/d) must fall with c

    def __init__(self, *, base: float = 10_000.0, **dims: int) -> None:
        super().__init__(**dims)
        self.base = float(base)
        theta = self.base ** (-torch.arange(self.head_dim, dtype=torch.float64) / self.head_dim)
        self.register_buffer("theta", theta.float(), persistent=False)
        self.phase_bias = nn.Parameter(torch.zeros(self.n_layer, self.n_head, self.head_dim))

    def prepare(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of the (T, d) phases m theta_c."""
        phase = super().prepare(pos).to(self.theta.dtype)[:, None] * self.theta[None, :]
        return phase.cos(), phase.sin()

    def transform_qk(self, q, k, state, x, layer):
        cos, sin = (table[:, None, :] for table in state)  # (T, 1, d)
        delta = at_least_fp32(self.phase_bias[layer]).clamp(-2 * math.pi, 0.0)  # (H, d)
        cos_delta, sin_delta = delta.cos(), delta.sin()
        key_cos = cos * cos_delta - sin * sin_delta  # (T, H, d): cos(n theta + delta), by the angle sum
        key_sin = sin * cos_delta + cos * sin_delta
        mu_q, mu_k = F.softplus(token_major(q)), F.softplus(token_major(k))  # (B, T, H, d)
        q2 = torch.cat((mu_q * cos, mu_q * sin), dim=-1).transpose(1, 2)  # (B, H, T, 2d)
        k2 = torch.cat((mu_k * key_cos, mu_k * key_sin), dim=-1).transpose(1, 2)
        return q2.to(q.dtype), k2.to(k.dtype)

    def flops_per_token(self, T: int) -> float:
        """n_layer * (2 d_model (T + 1) + 6 d_model): wider q.k and P.V, softplus, magnitudes times cos and sin."""
        return float(self.n_layer * (2 * self.d_model * (T + 1) + 6 * self.d_model))

    def optimizer_groups(self):
        return [{"params": [self.phase_bias], "weight_decay": 0.0}]

    def describe(self):
        return {**super().describe(), "base": self.base, "qk_width": 2 * self.head_dim}
