"""PoPE: polar coordinate position embedding (Gopalakrishnan et al., 2025; SPEC section 1).

Each of the d components c of a query or key is its own frequency theta_c = base^(-c/d), c = 0..d-1, with a
non-negative magnitude and a position-only phase:

    q'_m = [softplus(q_c) cos(m theta_c),        softplus(q_c) sin(m theta_c)]          (width 2d)
    k'_n = [softplus(k_c) cos(n theta_c + delta_c), softplus(k_c) sin(n theta_c + delta_c)]

    q'_m . k'_n = sum_c softplus(q_c) softplus(k_c) cos((n - m) theta_c + delta_c)

delta (one per layer, head and component) is learned, initialised 0 and clamped to [-2 pi, 0] in the forward
pass; it takes no weight decay. v is unchanged. The softmax scale stays 1/sqrt(d) with d the original head
dim, and attention runs fused on q and k of width 2d. Base 10k by SPEC's convention. Phases are fp32.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from models.encodings.base import PositionalEncoding, register
from models.encodings.rope import at_least_fp32


@register
class PoPE(PositionalEncoding):
    name = "pope"
    mechanism = "qk"

    def __init__(self, *, base: float = 10_000.0, **dims: int) -> None:
        super().__init__(**dims)
        self.base = float(base)
        theta = self.base ** (-torch.arange(self.head_dim, dtype=torch.float64) / self.head_dim)
        self.register_buffer("theta", theta.float(), persistent=False)
        self.phase_bias = nn.Parameter(torch.zeros(self.n_layer, self.n_head, self.head_dim))

    def prepare(self, pos: torch.Tensor) -> torch.Tensor:
        return super().prepare(pos).float()[:, None] * self.theta[None, :]  # (T, d) phases m theta_c

    def transform_qk(self, q, k, state, x, layer):
        phase = state
        delta = at_least_fp32(self.phase_bias[layer]).clamp(-2 * math.pi, 0.0)[:, None, :]  # (H, 1, d)
        key_phase = phase + delta  # (H, T, d)
        mu_q, mu_k = F.softplus(at_least_fp32(q)), F.softplus(at_least_fp32(k))
        q2 = torch.cat((mu_q * phase.cos(), mu_q * phase.sin()), dim=-1)
        k2 = torch.cat((mu_k * key_phase.cos(), mu_k * key_phase.sin()), dim=-1)
        return q2.to(q.dtype), k2.to(k.dtype)

    def optimizer_groups(self):
        return [{"params": [self.phase_bias], "weight_decay": 0.0}]

    def describe(self):
        return {**super().describe(), "base": self.base, "qk_width": 2 * self.head_dim}
