"""RoPE: rotary position embedding (Su et al., 2021; paper 002 in ../shared/papers).

Band j = 0..d/2-1 has frequency theta_j = base^(-2j/d). At position m the pair (x_j, x_{j+d/2}) of a query
or key is rotated by the angle m * theta_j:

    x'_j       = x_j cos(m theta_j) - x_{j+d/2} sin(m theta_j)
    x'_{j+d/2} = x_j sin(m theta_j) + x_{j+d/2} cos(m theta_j)

so q_m . k_n depends on positions only through n - m. All d/2 bands rotate (no partial rotation).
Bands pair dimension j with j + d/2 (the "rotate half" layout): the same as pairing (2j, 2j+1) up to a
fixed permutation of W_q and W_k's output columns, and faster. Angles are computed in fp32.
"""

import torch

from models.encodings.base import PositionalEncoding, register


def rope_frequencies(head_dim: int, base: float) -> torch.Tensor:
    """theta_j = base^(-2j/d), j = 0..d/2-1, in fp32."""
    if head_dim % 2:
        raise ValueError(f"RoPE needs an even head dimension, got {head_dim}")
    return base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim).float()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the band pairs (j, j + d/2) of x (..., T, d) by angles with cos/sin of shape (T, d/2), in fp32."""
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).to(x.dtype)


@register
class RoPE(PositionalEncoding):
    name = "rope"
    mechanism = "qk"

    def __init__(self, *, base: float = 10_000.0, **dims: int) -> None:
        super().__init__(**dims)
        self.base = float(base)
        self.register_buffer("theta", rope_frequencies(self.head_dim, self.base), persistent=False)

    def angles(self, pos: torch.Tensor) -> torch.Tensor:
        """(T, d/2) angles m * theta_j in fp32."""
        return pos.float()[:, None] * self.theta[None, :]

    def prepare(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angle = self.angles(super().prepare(pos))
        return angle.cos(), angle.sin()

    def transform_qk(self, q, k, state, x, layer):
        cos, sin = state
        return rotate(q, cos, sin), rotate(k, cos, sin)

    def describe(self):
        return {**super().describe(), "base": self.base}
