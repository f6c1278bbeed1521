"""xPos: RoPE with a per-band exponential decay (Sun et al., 2023, "A Length-Extrapolatable Transformer"; SPEC 1b).

Band j = 0..d/2-1 rotates as in RoPE (base 10k, theta_j = base^(-2j/d)) and is scaled on q and on k by

    zeta_j = (2j/d + gamma) / (1 + gamma),    gamma = 0.4
    q_m -> zeta_j^((m - c)/B) R(m theta_j) q_m,    k_n -> zeta_j^(-(n - c)/B) R(n theta_j) k_n,    B = 512

so q_m . k_n = sum_j zeta_j^((m - n)/B) (RoPE's band-j term): c cancels in every score, and a key n tokens back
is damped by zeta_j^(n/B), most in band 0 (the fastest: x0.29 per 512 tokens), least in the slowest bands
(zeta -> 1).

Choices (references: torchscale's `XPOS`, x-transformers' `RotaryEmbedding(use_xpos=True)`):
- c is the centre of the window's positions, (min + max) / 2 ((T - 1) / 2 for 0..T-1), computed on the device from
  the positions themselves: no host sync, and it stays central under randomized positions. torchscale centres at
  ceil(T/2) and x-transformers at floor(T/2); any c gives the same scores, and the exact centre makes the largest
  power, |m - c| / B <= S / 2B over a span S = max - min of positions, as small as it can be.
- The decay saturates far from c, so that no score overflows. A masked entry (key n after query m) carries
  zeta_j^(-(n - m)/B) whatever c is (the factorisation into a q and a k table is unique up to c), and attention
  kernels that add the -inf causal mask to q.k (SDPA's math kernel) turn its overflow into NaN: in fp32 from a
  span of about 36k (0.2857^(-36k/512) = 2^127). So each table entry is clamped to [2^-E, 2^E], E = 50 for fp32
  tables (`decay_limit`: half the dtype's exponent range less 14): a masked entry stays below 2^100 |q||k|, finite
  for any realistic q and k. The clamp is the decay with positions clipped to c +- W_j, W_j = B E ln 2 / ln(1 /
  zeta_j) (band 0: 14.2k tokens at B = 512): a visible score is RoPE's per band times zeta_j^((m' - n')/B), with m'
  and n' the clipped positions, which is xPos's zeta_j^((m - n)/B) wherever both lie within W_j of c, and never a
  stronger decay than xPos's. Up to a span of 2 W_0 (28k tokens) nothing is clamped and the tables are the plain
  powers, bit for bit; the suite trains and evaluates far inside it (L <= 2048; randomized positions up to 8 L).
  Beyond it the slowest-decaying bands stay exact longest (zeta -> 1: W_j -> infinity).
- Both components of band j, the pair (x_{2j}, x_{2j+1}) that RoPE rotates, share zeta_j (torchscale's
  `duplicate_interleave`, x-transformers' stacked scale): a real factor on the complex number x_{2j} + i x_{2j+1}.
  So it is folded into RoPE's (cos, sin) table, one table for q (zeta^(+)) and one for k (zeta^(-)), and q and k
  go through RoPE's complex product (`rotate`) unchanged.
- Numerics: angles, powers and both tables are fp32 even under bf16 autocast (SPEC 1); q and k are rotated and
  scaled in fp32 and rounded once to their dtype.
The paper's blockwise causal attention at inference is not part of the encoding and is not implemented.

FLOPs: RoPE's, 6 d_model per layer (the complex product on q and k). The decay rides in the per-forward tables
(built once, shared by the batch and the layers, neglected like RoPE's).
"""

import math

import torch

from models.encodings.base import PositionalEncoding, register
from models.encodings.options import Option
from models.encodings.rope import RoPE, rotate, unit_rotations


def xpos_decay(head_dim: int, gamma: float) -> torch.Tensor:
    """zeta_j = (2j/d + gamma) / (1 + gamma), j = 0..d/2-1, in fp32."""
    band = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return ((band + gamma) / (1 + gamma)).float()


def window_centre(pos: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """c = (min + max) / 2 of the positions, a tensor on their device (reading its value would wait for it)."""
    return (pos.amin() + pos.amax()).to(dtype) / 2


def decay_limit(dtype: torch.dtype) -> float:
    """The largest factor a decay table holds, 2^E with E = e / 2 - 14 for a dtype whose values stay below 2^e (fp32
    and bf16: 2^50, fp64: 2^498): a q factor times a k factor stays below 2^(e - 28) (module docstring)."""
    exponent = math.ceil(math.log2(torch.finfo(dtype).max))  # 128 for fp32
    return 2.0 ** (exponent // 2 - 14)


def decay_powers(
    pos: torch.Tensor, zeta: torch.Tensor, scale_base: float, centre: torch.Tensor | float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, d/2) factors zeta_j^((m - c)/B) for q and zeta_j^(-(m - c)/B) for k, in zeta's dtype (fp32 at least)."""
    power = ((pos.to(zeta.dtype) - centre) / scale_base)[:, None]
    return zeta**power, zeta ** (-power)


@register
class XPos(RoPE):
    name = "xpos"  # mechanism "qk" and the rotation come from RoPE
    option_rules = {
        "gamma": Option("number", "> 0", lambda v: v > 0, why="zeta_j = (2j/d + gamma)/(1 + gamma) must be positive"),
        "scale_base": Option("number", "> 0", lambda v: v > 0, why="B, the decay's length scale in tokens"),
    }

    def __init__(self, *, base: float = 10_000.0, gamma: float = 0.4, scale_base: float = 512.0, **dims: int) -> None:
        super().__init__(base=base, **dims)
        self.gamma, self.scale_base = float(gamma), float(scale_base)
        self.register_buffer("zeta", xpos_decay(self.head_dim, self.gamma), persistent=False)

    def prepare(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(q table, k table), each (T, d/2, 2): (cos, sin) of m theta_j times zeta_j^(+-(m - c)/B)."""
        pos = PositionalEncoding.prepare(self, pos)  # the positions used (randomized ones included)
        rotation = unit_rotations(self.angles(pos))
        up, down = decay_powers(pos, self.zeta, self.scale_base, window_centre(pos, self.zeta.dtype))
        limit = decay_limit(up.dtype)  # saturation far from the centre: every score stays finite (module docstring)
        up, down = up.clamp(1 / limit, limit), down.clamp(1 / limit, limit)
        return rotation * up[..., None], rotation * down[..., None]

    def transform_qk(self, q, k, state, x, layer):
        q_table, k_table = state
        return rotate(q, q_table), rotate(k, k_table)

    def describe(self):
        return {**super().describe(), "gamma": self.gamma, "scale_base": self.scale_base}
