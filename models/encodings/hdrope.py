"""HD-RoPE: higher-dimensional rotary position embedding (paper 004, section 3.3; SPEC section 1).

The head dimension is cut into blocks of N = 4 (or 8) consecutive channels; block i has one frequency
theta_i = base^(-N i / d), i = 0..d/N - 1, and position m rotates it by

    M_i(m) = Q R(m theta_i) Q^T,    R(phi) = blockdiag(R2(phi), ..., R2(phi))  (N/2 planes)

with the fixed orthogonal Q = C / sqrt(N - 1) built from a Paley-I conference matrix C of order N = q + 1
(q = 3 or 7, both 3 mod 4): C = [[0, 1^T], [1, J]] with the Jacobsthal matrix J[a][b] = chi(a - b) over GF(q)
(chi = quadratic character). For N = 4 this is SPEC's C = [[0,1,1,1],[1,0,-1,1],[1,1,0,-1],[1,-1,1,0]].
M(m)^T M(n) = Q R((n - m) theta) Q^T, so scores depend on n - m only. Each block costs two N x N products
on top of RoPE's rotation. Base 500k by SPEC's convention. `rope_dup` is the control without Q.
"""

import math

import torch

from models.encodings.base import PositionalEncoding, register
from models.encodings.rope import at_least_fp32, rope_frequencies


def paley_conference_matrix(order: int) -> torch.Tensor:
    """Paley-I conference matrix C (order x order, entries 0/+-1, C C^T = (order - 1) I) for a prime order - 1."""
    q = order - 1
    if q < 3 or any(q % f == 0 for f in range(2, int(math.isqrt(q)) + 1)) or q % 4 != 3:
        raise ValueError(f"Paley-I needs order = q + 1 with q a prime = 3 mod 4; got order {order}")
    residues = {(x * x) % q for x in range(1, q)}

    def chi(a: int) -> int:
        a %= q
        return 0 if a == 0 else (1 if a in residues else -1)

    c = torch.zeros(order, order, dtype=torch.float64)
    c[0, 1:] = 1.0
    c[1:, 0] = 1.0
    for a in range(q):
        for b in range(q):
            c[1 + a, 1 + b] = chi(a - b)
    return c


@register
class HDRoPE(PositionalEncoding):
    name = "hdrope"
    mechanism = "qk"

    def __init__(self, *, block: int = 4, base: float = 500_000.0, **dims: int) -> None:
        super().__init__(**dims)
        if block not in (4, 8) or self.head_dim % block:
            raise ValueError(f"HD-RoPE blocks are 4 or 8 channels and must divide the head dim {self.head_dim}")
        self.block, self.base = int(block), float(base)
        basis = paley_conference_matrix(block) / math.sqrt(block - 1)
        self.register_buffer("basis", basis.float(), persistent=False)  # Q
        self.register_buffer("theta", rope_frequencies(2 * self.head_dim // block, self.base), persistent=False)

    def prepare(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angle = super().prepare(pos).float()[:, None] * self.theta[None, :]  # (T, d/N)
        return angle.cos(), angle.sin()

    def rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x (..., T, d) -> Q R Q^T applied to each block of N channels, in fp32."""
        *lead, T, d = x.shape
        with torch.autocast(device_type=x.device.type, enabled=False):  # keep the basis change out of bf16
            blocks = at_least_fp32(x).reshape(*lead, T, d // self.block, self.block)
            basis = self.basis.to(blocks.dtype)
            y = blocks @ basis  # rows: y = Q^T x per block
            even, odd = y[..., 0::2], y[..., 1::2]  # the N/2 planes of each block
            c, s = cos[:, :, None], sin[:, :, None]  # (T, d/N, 1): one angle for all planes of a block
            rotated = torch.stack((even * c - odd * s, even * s + odd * c), dim=-1).flatten(-2)
            return (rotated @ basis.T).reshape(*lead, T, d).to(x.dtype)  # Q y' per block

    def transform_qk(self, q, k, state, x, layer):
        cos, sin = state
        return self.rotate(q, cos, sin), self.rotate(k, cos, sin)

    def describe(self):
        return {**super().describe(), "base": self.base, "block": self.block}
