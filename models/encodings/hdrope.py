"""HD-RoPE: higher-dimensional rotary position embedding (paper 004, section 3.3; SPEC section 1).

The head dimension is cut into blocks of N = 4 (or 8) consecutive channels; block i has one frequency
theta_i = base^(-N i / d), i = 0..d/N - 1, and position m rotates it by

    M_i(m) = Q R(m theta_i) Q^T,    R(phi) = blockdiag(R2(phi), ..., R2(phi))  (N/2 planes)

with the fixed orthogonal Q = C / sqrt(N - 1) built from a Paley-I conference matrix C of order N = q + 1
(q = 3 or 7, both 3 mod 4): C = [[0, 1^T], [1, J]] with the Jacobsthal matrix J[a][b] = chi(a - b) over GF(q)
(chi = quadratic character). For N = 4 this is SPEC's C = [[0,1,1,1],[1,0,-1,1],[1,1,0,-1],[1,-1,1,0]].
M(m)^T M(n) = Q R((n - m) theta) Q^T, so scores depend on n - m only. Base 500k by SPEC's convention.
`rope_dup` is the control without Q.

How it is computed fast, and why that is exact: attention only ever uses the scores q'.k', and Q is
orthogonal, so

    (Q R_m Q^T q) . (Q R_n Q^T k) = q^T Q R_m^T Q^T Q R_n Q^T k = (R_m Q^T q) . (R_n Q^T k):

the back-rotation by Q cancels in every score and is dropped. `transform_qk` therefore returns R(m theta) Q^T q
(and the same for k), not M(m) q itself; the scores, hence the model, are those of the definition. What remains
is rope_dup: Q^T of every block at once is one dense (d x d) product with the block-diagonal
blockdiag(Q, ..., Q) (a dense GEMM beats d/N products of N x N by far on these sizes), then plane p of block i,
channels (N i + 2p, N i + 2p + 1), is RoPE's pair (N/2) i + p turning at theta_i: exactly rope_dup's table.
Basis change and rotation run in fp32.

FLOPs per token and layer (`flops_per_token`): the dense basis change, zeros included, 2 d per element of q
and of k, 4 d d_model in all; the rotation of q and k 6 d_model (as RoPE).
"""

import math

import torch

from models.encodings.base import outside_autocast, register
from models.encodings.options import Option
from models.encodings.rope import at_least_fp32, rotate
from models.encodings.rope_dup import DuplicatedRoPE


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
class HDRoPE(DuplicatedRoPE):
    name = "hdrope"
    option_rules = {"block": Option("whole", "in {4, 8}", lambda v: v in (4, 8), why="channels per rotation block")}

    def __init__(self, *, block: int = 4, base: float = 500_000.0, **dims: int) -> None:
        if block not in (4, 8):
            raise ValueError(f"HD-RoPE blocks are 4 or 8 channels, got {block}")
        super().__init__(block=block, base=base, **dims)
        basis = paley_conference_matrix(block) / math.sqrt(block - 1)  # Q
        blocks = torch.block_diag(*[basis] * (self.head_dim // block))  # (d, d): Q on every block
        self.register_buffer("block_basis", blocks.float(), persistent=False)

    def transform_qk(self, q, k, state, x, layer):
        with outside_autocast(q.device):  # keep the basis change out of bf16
            q32, k32 = at_least_fp32(q), at_least_fp32(k)
            basis = self.block_basis.to(q32.dtype)
            # row vectors: x @ blockdiag(Q) is Q^T x on every block; then rope_dup's rotation
            return rotate(q32 @ basis, state).to(q.dtype), rotate(k32 @ basis, state).to(k.dtype)

    def flops_per_token(self, T: int) -> float:
        """n_layer * (4 d d_model + 6 d_model): dense basis change and rotation of q and k."""
        return float(self.n_layer * (4 * self.head_dim * self.d_model + 6 * self.d_model))
