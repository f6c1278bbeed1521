"""LeRoPE: learned RoPE frequencies (Karypis et al., 2026; paper 001, section 3.1).

    theta_j' = exp(a_j) * theta_j,    theta_j = base^(-2j/d),    a_j initialised 0

One a_j per band, shared by all layers and heads (d/2 parameters in the whole model), so LeRoPE equals RoPE
at initialisation. As in the paper, a takes no weight decay and is gradient-clipped as its own parameter
group (norm 1.0). Base 10k, as in the paper.

Computed as RoPE (see models.encodings.rope): the (T, d/2) table of e^{i m theta_j'} is built once per forward
pass from the shared a, and each q and k is rotated by one complex product (eager mode). The table carries a
gradient: its backward is one complex product of the incoming gradient with conj(q) (or conj(k)) summed over
batch and heads, where the real form of the rotation needs four products and four such sums. FLOPs (forward)
as RoPE's: 6 d_model per layer; the table and exp(a) are per forward pass and neglected.
"""

import torch
from torch import nn

from models.encodings.base import register
from models.encodings.options import Option
from models.encodings.rope import RoPE, at_least_fp32


@register
class LeRoPE(RoPE):
    name = "lerope"
    option_rules = {
        "clip_norm": Option("number", "> 0", lambda v: v > 0, why="the gradient norm its group is clipped to")
    }

    def __init__(self, *, base: float = 10_000.0, clip_norm: float = 1.0, **dims: int) -> None:
        super().__init__(base=base, **dims)
        self.clip_norm = float(clip_norm)
        self.log_scale = nn.Parameter(torch.zeros(self.head_dim // 2))

    def angles(self, pos: torch.Tensor) -> torch.Tensor:
        theta = self.theta * at_least_fp32(self.log_scale).exp()
        return pos.to(theta.dtype)[:, None] * theta[None, :]

    def optimizer_groups(self):
        return [{"params": [self.log_scale], "weight_decay": 0.0, "clip_norm": self.clip_norm}]
