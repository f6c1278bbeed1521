"""RoPE: rotary position embedding (Su et al., 2021, "RoFormer: Enhanced Transformer with Rotary Position
Embedding", arXiv 2104.09864).

Band j = 0..d/2-1 has frequency theta_j = base^(-2j/d). At position m the pair (x_{2j}, x_{2j+1}) of a query
or key is rotated by the angle m * theta_j:

    x'_{2j}   = x_{2j} cos(m theta_j) - x_{2j+1} sin(m theta_j)
    x'_{2j+1} = x_{2j} sin(m theta_j) + x_{2j+1} cos(m theta_j)

so q_m . k_n depends on positions only through n - m. All d/2 bands rotate (no partial rotation).

How it is computed fast: the pair is the complex number z_j = x_{2j} + i x_{2j+1} and the rotation is the
product z_j * e^{i m theta_j}, which is exactly the two lines above. `prepare` builds the (T, d/2) table of
(cos, sin) = e^{i m theta_j} once per forward pass (shared by every layer). In eager mode each q or k is then
rotated by one complex multiplication on a complex view of (a contiguous copy of) its memory: one kernel
forward and one backward, where the real form costs about seven (halves, four products, two sums, a stack).
Under torch.compile the real form runs instead: inductor fuses it into one kernel but generates no code for
complex numbers (and, torch 2.13, gets the gradient of a complex view of a strided tensor wrong). Both compute
the same products. Pairing adjacent dimensions (Su et al.'s layout) is what makes the complex view possible;
any fixed pairing is the same encoding up to a permutation of W_q and W_k's output columns. Angles and the
rotation are fp32 even under bf16.

A band is fast when it turns at least once inside the training window (theta_j >= 2 pi / L), slow otherwise
(SPEC section 1); HoPE, DaRoPE and YaRN are defined by that split.

FLOPs (`flops_per_token`): a complex product is 4 multiplications and 2 additions, 3 FLOPs per real
element, on q and k: 6 d_model per layer. The table (3 T d/2 FLOPs per forward pass, shared by the batch and
the layers) is neglected.
"""

import math

import torch

from models.encodings.base import PositionalEncoding, register
from models.encodings.options import Option

# base > 1: theta_j = base^(-2j/d) falls with j (fast bands first); base <= 0 makes the angles inf or NaN
BASE = Option("number", "> 1", lambda v: v > 1, why="theta_j = base^(-2j/d) must fall with j")


def rope_frequencies(head_dim: int, base: float) -> torch.Tensor:
    """theta_j = base^(-2j/d), j = 0..d/2-1, in fp32."""
    if head_dim % 2:
        raise ValueError(f"RoPE needs an even head dimension, got {head_dim}")
    return base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim).float()


def fast_band_count(theta: torch.Tensor, context: int) -> int:
    """K = number of bands with theta_j >= 2 pi / L; theta is in decreasing order, so they are bands 0..K-1."""
    return int((theta >= 2 * math.pi / context).sum())


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """Angle and phase math runs in fp32 even when the model runs in bf16 (fp64 stays fp64, for tests)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def unit_rotations(angle: torch.Tensor) -> torch.Tensor:
    """(..., n) angles -> (..., n, 2) table of (cos, sin): the unit complex numbers e^{i angle} as real pairs."""
    return torch.stack((angle.cos(), angle.sin()), dim=-1)


def rotate(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Rotate the pairs (x_{2j}, x_{2j+1}) of x (..., T, d) by the (cos, sin) pairs of `rotation` (..., T, d/2, 2),
    broadcast against x, in fp32 at least; returns x's dtype."""
    if torch.compiler.is_compiling():  # the real form, which inductor fuses into one kernel
        pairs = at_least_fp32(x).unflatten(-1, (-1, 2))
        x0, x1, cos, sin = pairs[..., 0], pairs[..., 1], rotation[..., 0], rotation[..., 1]
        rotated = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    else:  # eager: one complex product, on a contiguous copy (the product is 3x slower on q/k's strided views)
        pairs = at_least_fp32(x).contiguous().unflatten(-1, (-1, 2))
        rotated = torch.view_as_real(torch.view_as_complex(pairs) * torch.view_as_complex(rotation))
    return rotated.flatten(-2).to(x.dtype)


@register
class RoPE(PositionalEncoding):
    name = "rope"
    mechanism = "qk"
    option_rules = {"base": BASE}

    def __init__(self, *, base: float = 10_000.0, **dims: int) -> None:
        super().__init__(**dims)
        self.base = float(base)
        self.register_buffer("theta", self.frequencies(), persistent=False)

    def frequencies(self) -> torch.Tensor:
        """(d/2,) per-band frequencies; variants that change which bands turn override this."""
        return rope_frequencies(self.head_dim, self.base)

    def angles(self, pos: torch.Tensor) -> torch.Tensor:
        """(T, d/2) angles m * theta_j in fp32."""
        return pos.to(self.theta.dtype)[:, None] * self.theta[None, :]

    def prepare(self, pos: torch.Tensor) -> torch.Tensor:
        """(T, d/2, 2): cos and sin of m theta_j."""
        return unit_rotations(self.angles(super().prepare(pos)))

    def transform_qk(self, q, k, state, x, layer):
        return rotate(q, state), rotate(k, state)

    def flops_per_token(self, T: int) -> float:
        """6 * d_model * n_layer: the complex product (3 FLOPs per element) on q and k in every layer."""
        return 6.0 * self.d_model * self.n_layer

    def describe(self):
        rotating = int((self.theta > 0).sum())
        return {**super().describe(), "base": self.base, "rotating_bands": f"{rotating}/{self.theta.numel()}"}
