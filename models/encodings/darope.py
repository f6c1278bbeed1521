"""DaRoPE: data-aware RoPE (paper 000, section 2.2, equation 3 and Method 1).

RoPE on the fast bands j < K (K = number of bands with theta_j >= 2 pi / L). On the slow bands the position m
is replaced by a bounded per-head coordinate computed from the block's normalised input x_m:

    beta_m   = logit(clip(m + 0.5, eps L, (1 - eps) L) / L),   eps = 1e-6      (fixed positional prior)
    c_h(x_m) = L * sigmoid(w_h . x_m + alpha_h * beta_m)                       (content coordinate in [0, L])
    angle_j  = m * theta_j          for j < K
    angle_j  = c_h(x_m) * theta_j   for j >= K

per layer and head: w_h in R^d_model (init N(0, 0.1^2)), alpha_h (init 0.5, no weight decay): n_head *
(d_model + 1) parameters per layer. With w = 0 and alpha = 1, c_h = m + 0.5 inside the window: RoPE up to a
constant offset that cancels in q.k. With c_h = 0 the slow bands stop turning: HoPE. `n_slow` overrides the
number of slow bands (paper 000 uses 16 instead of the canonical 17 on MAESTRO). Base 500k by SPEC's
convention.

How it is computed fast: the coordinates of all heads come from one (d_model x n_head) projection of x (fp32,
outside autocast); the fast bands' rotations e^{i m theta_j} are built once per forward pass in `prepare`, the
slow bands' e^{i c_h theta_j} per layer; the two are joined into one table of d/2 rotations per token and head,
which rotates q and k as RoPE's table does (one complex product each in eager mode; models.encodings.rope).

FLOPs per token and layer (`flops_per_token`): the projection 2 d_model H, the prior term alpha_h beta_m as a
multiply-add 2 H, the sigmoid and the scaling by L 2 H, the slow angles c_h theta_j and their cos and sin 3 H S,
the rotation of q and k 6 d_model (3 per element, as RoPE). The fast table and beta are per forward pass and
neglected.
"""

import torch
from torch import nn

from models.encodings.base import PositionalEncoding, outside_autocast, register
from models.encodings.options import Option
from models.encodings.rope import RoPE, at_least_fp32, fast_band_count, rotate, unit_rotations

EPS = 1e-6


@register
class DaRoPE(RoPE):
    name = "darope"
    # null: the wavelength rule; at most the head's d/2 bands (checked when built, with the model's sizes)
    option_rules = {"n_slow": Option("whole", ">= 0", lambda v: v >= 0, optional=True, why="slow bands")}

    def __init__(self, *, base: float = 500_000.0, n_slow: int | None = None, **dims: int) -> None:
        super().__init__(base=base, **dims)
        bands = self.theta.numel()
        self.n_slow = bands - fast_band_count(self.theta, self.context) if n_slow is None else int(n_slow)
        if not 0 <= self.n_slow <= bands:
            raise ValueError(f"n_slow must lie in 0..{bands} (the head has {bands} bands), got {n_slow}")
        self.n_fast = bands - self.n_slow
        self.coordinate_weight = nn.Parameter(torch.randn(self.n_layer, self.n_head, self.d_model) * 0.1)  # w_h
        self.prior_weight = nn.Parameter(torch.full((self.n_layer, self.n_head), 0.5))  # alpha_h

    def prepare(self, pos: torch.Tensor) -> dict[str, torch.Tensor]:
        pos = PositionalEncoding.prepare(self, pos).to(self.theta.dtype)  # the range check only
        fast = unit_rotations(pos[:, None] * self.theta[None, : self.n_fast])  # (T, K, 2)
        L = self.context
        prior = torch.logit(torch.clamp(pos + 0.5, EPS * L, (1 - EPS) * L) / L)  # beta_m, (T,)
        return {"fast": fast, "prior": prior}

    def coordinates(self, x: torch.Tensor, prior: torch.Tensor, layer: int) -> torch.Tensor:
        """c_h(x_m) for every head: (B, T, H), in fp32."""
        with outside_autocast(x.device):  # autocast would run the matmul in bf16
            weight = at_least_fp32(self.coordinate_weight[layer])
            logits = at_least_fp32(x) @ weight.T  # (B, T, H): one projection for all heads
            logits = logits + prior[:, None] * at_least_fp32(self.prior_weight[layer])[None, :]
            return self.context * torch.sigmoid(logits)

    def transform_qk(self, q, k, state, x, layer):
        B, H, T, _ = q.shape
        coordinate = self.coordinates(x, state["prior"], layer).transpose(1, 2)  # (B, H, T)
        slow = unit_rotations(coordinate[..., None] * self.theta[self.n_fast :])  # (B, H, T, S, 2)
        rotation = torch.cat((state["fast"].expand(B, H, T, self.n_fast, 2), slow), dim=-2)  # (B, H, T, d/2, 2)
        return rotate(q, rotation), rotate(k, rotation)

    def flops_per_token(self, T: int) -> float:
        """n_layer * (2 d_model H + 4 H + 3 H S + 6 d_model): projection, prior multiply-add, sigmoid and scale,
        slow angles with cos and sin, rotation of q and k."""
        H, S = self.n_head, self.n_slow
        return float(self.n_layer * (2 * self.d_model * H + 4 * H + 3 * H * S + 6 * self.d_model))

    def optimizer_groups(self):
        return [{"params": [self.prior_weight], "weight_decay": 0.0}]

    def describe(self):
        described = {**super().describe(), "fast_bands": self.n_fast, "slow_bands": self.n_slow}
        del described["rotating_bands"]  # every band turns; the fast/slow split is what describes DaRoPE
        return described
