"""HoPE: high-frequency rotary position encoding (Chen et al., 2024, "HoPE: A Novel Positional Encoding
Without Long-Term Decay"; as defined in paper 000, section 2 and table 1).

RoPE on the fast bands, no rotation on the slow ones:

    angle_j(m) = m * theta_j   if theta_j >= 2 pi / L   (fast: at least one turn inside the training window)
    angle_j(m) = 0             otherwise                (slow: position-independent, pure content)

with theta_j = base^(-2j/d). Base 500k by SPEC's convention (paper 000 appendix A.1).
Computed and counted as RoPE (models.encodings.rope), the zero-angle bands included: 6 d_model FLOPs per
token and layer.
"""

import torch

from models.encodings.base import register
from models.encodings.rope import RoPE, fast_band_count, rope_frequencies


@register
class HoPE(RoPE):
    name = "hope"

    def __init__(self, *, base: float = 500_000.0, **dims: int) -> None:
        super().__init__(base=base, **dims)

    def frequencies(self) -> torch.Tensor:
        theta = rope_frequencies(self.head_dim, self.base)
        theta[fast_band_count(theta, self.context) :] = 0.0
        return theta
