"""RoPE: rotary position embedding (Su et al., 2021; paper 002 in ../shared/papers).

Band j = 0..d/2-1 has frequency theta_j = base^(-2j/d). At position m the pair (x_j, x_{j+d/2}) of a query
or key is rotated by the angle m * theta_j:

    x'_j       = x_j cos(m theta_j) - x_{j+d/2} sin(m theta_j)
    x'_{j+d/2} = x_j sin(m theta_j) + x_{j+d/2} cos(m theta_j)

so q_m . k_n depends on positions only through n - m. All d/2 bands rotate (no partial rotation).
Bands pair dimension j with j + d/2 (the "rotate half" layout): the same as pairing (2j, 2j+1) up to a
fixed permutation of W_q and W_k's output columns, and faster. Angles are computed in fp32.

A band is fast when it turns at least once inside the training window (theta_j >= 2 pi / L), slow otherwise
(SPEC section 1); HoPE, DaRoPE and YaRN are defined by that split.
"""

import math

import torch

from models.encodings.base import PositionalEncoding, register


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


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the band pairs (j, j + d/2) of x (..., T, d) by angles with cos/sin of shape (T, d/2), in fp32."""
    x1, x2 = at_least_fp32(x).chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).to(x.dtype)


@register
class RoPE(PositionalEncoding):
    name = "rope"
    mechanism = "qk"

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

    def prepare(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angle = self.angles(super().prepare(pos))
        return angle.cos(), angle.sin()

    def transform_qk(self, q, k, state, x, layer):
        cos, sin = state
        return rotate(q, cos, sin), rotate(k, cos, sin)

    def describe(self):
        rotating = int((self.theta > 0).sum())
        return {**super().describe(), "base": self.base, "rotating_bands": f"{rotating}/{self.theta.numel()}"}
