"""Partial rotation: GPT-NeoX and Phi's `partial_rotary_factor`, Qwen3-Next (25% of each head), DeepSeek's MLA
(a decoupled RoPE part of 64 of each query's 192 dimensions). A fraction f of each head's dimensions rotates, as a
RoPE of their own width, and the rest pass through unchanged:

    b = round(f d / 2) rotating bands (at least 1), the first 2b dimensions
    theta_j = base^(-2j / 2b) = base^(-j / b)   for j < b,      theta_j = 0 (no rotation)   for j >= b

The reference (transformers `modeling_rope_utils._compute_default_rope_parameters`, SPEC 1c) computes
`dim = int(head_dim * partial_rotary_factor)` and `inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2) / dim))`,
and its `apply_rotary_pos_emb` rotates `q[..., :rotary_dim]` and passes `q[..., rotary_dim:]` through. The two
agree wherever f d is even (25% at d = 32 or 64). Where it is odd the reference rotates ceil(dim / 2) bands at
base^(-2j / dim) (10% at d = 32: dim = 3, two bands at 1 and base^(-2/3)); here b = round(f d / 2) bands over
the whole range (two bands, at 1 and base^(-1/2)). The reference pairs each dimension with the one r/2 further
(NeoX halves) where this pairs neighbours (models.encodings.rope): the same encoding up to a permutation of W_q and
W_k's output columns.

It is not `prope`. p-RoPE keeps the first p d / 2 bands of full RoPE's spectrum, base^(-2j / d), and drops the
slow end: its rotating bands stop at base^(-p). Partial rotation spreads RoPE's whole range 1 .. base^(-(b-1)/b)
over its b bands. The same dimensions rotate, at other frequencies: at d = 32, f = p = 0.25, base 10k, partial
rotation turns at 1, 0.1, 0.01, 0.001 rad per token, p-RoPE at 1, 0.56, 0.32, 0.18.

Computed and counted as RoPE (models.encodings.rope), the zero-angle bands included: 6 d_model FLOPs per token
and layer.
"""

import torch

from models.encodings.base import register
from models.encodings.options import Option
from models.encodings.rope import RoPE, rope_frequencies


@register
class PartialRotary(RoPE):
    name = "partial_rotary"
    option_rules = {
        "fraction": Option("number", "in (0, 1]", lambda v: 0 < v <= 1, why="the fraction of each head that rotates")
    }

    def __init__(self, *, fraction: float = 0.25, base: float = 10_000.0, **dims: int) -> None:
        self.fraction = float(fraction)
        super().__init__(base=base, **dims)

    @property
    def rotating_bands(self) -> int:
        return max(1, round(self.fraction * self.head_dim / 2))

    def frequencies(self) -> torch.Tensor:
        b = self.rotating_bands
        theta = torch.zeros(self.head_dim // 2)
        theta[:b] = rope_frequencies(2 * b, self.base)
        return theta

    def describe(self):
        return {**super().describe(), "fraction": self.fraction, "rotated_dims": 2 * self.rotating_bands}
