"""Causal attention with an additive logit term (the "bias" mechanism: ALiBi, T5's buckets, KERPLE, FIRE, ...).

    y_i = sum_j softmax_j(scale * q_i . k_j + bias_ij) v_j        bias_ij = -inf for j > i (the encoding's mask)

`scaled_dot_product_attention(attn_mask=bias)` computes it, but over every key: with a float mask SDPA cannot know
that the half above the diagonal is masked, so it computes those scores only to mask them (its flash kernel skips
them only for `is_causal`). On the CPU, `query_blocked` therefore computes the same sum in blocks of QUERY_BLOCK
queries, each over the keys up to the block's last query only: the keys after it are masked for every query of the
block, so leaving them out changes nothing but the work (about half the scores at T >> QUERY_BLOCK), and every row
keeps its own key. Each block is attended by
- `flash_attention`, SDPA's flash kernel with the bias as its mask, when the bias needs no gradient (ALiBi's fixed
  slopes, or any bias encoding in evaluation); the kernel takes a float mask only then;
- `math_attention`, plain operators (a plain softmax is safe: no row is fully masked), when it does (T5's table,
  KERPLE's r1 and r2, FIRE's MLP): SDPA would send those to its math kernel, which builds the whole T x T scores
  and adds a "safe" softmax's checks for fully masked rows. Autograd differentiates it, the bias included.
Values and gradients agree with SDPA over every key to float rounding (tests/test_biased_attention.py). Training
with attention dropout keeps SDPA (its dropout draws its own random stream, which blocks would not reproduce), and
so does CUDA, whose memory-efficient kernel takes the bias gradient fused.

Measured on the 2-core development machine (under load: ratios only), torch 2.13, float32, one thread, B 4, 2 heads
of 64, T 1024, a learned (H, T) lag table laid out as T5 does, forward and backward of one attention: SDPA (math
kernel) 336-338 ms; math blocks of 1024 (one block) 210 ms, 256: 116-126 ms, 128: 111-137 ms, 64: 133 ms;
`is_causal` flash without a bias 75-91 ms. In a whole training step at the MAESTRO cpu preset (idle machine, `make
throughput`): T5's bias 0.66x of rope10k's tokens/s before, 0.93x after; KERPLE 0.65x -> 0.88x; FIRE 0.54x -> 0.67x.
Flash blocks of 256 against SDPA's flash kernel over every key, at the JSB cpu preset (one thread, quiet): ALiBi's
training step 1.22 s -> 0.88 s, KERPLE's evaluation step 0.42 s -> 0.30 s (docs/presets.md, issue 50).

A learned term that depends on the distance alone, bias_ij = b_h[i - j] (T5's buckets, KERPLE, FIRE below its
threshold: `PositionalEncoding.lag_bias`, a `LagTerm`), trains through `lag_biased_attention` on the CPU instead
(issue 67; FIRE's queries past L_thr, whose term is one of i and j, attend beside them over their own dense rows
with `math_attention`): the encoding hands over its (H, T) values on the lags and no (H, T, T) term is built, where the
math blocks built the term, kept each block's weights for backward, and scattered the term's (T, T) gradient back
onto the lags. `TiledAttention` is FlashAttention's recipe in PyTorch's operators: tiles of LAG_ROWS queries of
one head, every sequence of the batch together (within LAG_TILE_BYTES), over the keys up to the tile's last query;
the forward pass keeps the output and each row's log-sum-exp, the backward pass recomputes the tile's weights and
sums the term's gradient by lag (the tile's score gradient summed over the batch, its diagonals summed as the
columns of a sheared copy). A tile's term is a Toeplitz block, a strided view of the values reversed, flipped once
and shared by the batch, and enters as the initial value of the score product (one `baddbmm`).
The same tiles with no term (`tiled_causal_attention`) train PoPE on the CPU: its q and k are twice v's width, which
SDPA's flash kernels take only with v padded to that width (P.V at twice the work); the tiles take v at its own.
Exponentials: torch's vectorised exp takes a slow path for every argument below log(FLT_MIN), about -87.3 (a
subnormal or zero result, -inf included): 4 to 35 times slower a value on the AVX-512 development machine, which the
masked future of every tile and the far keys of a strong term hit. So the centred scores are clamped at
EXP_FLOOR_MARGIN above log of the dtype's smallest normal before the exp (fp32: -86.84), and the future zeroed after
it: a weight that would be below exp(-86.84) = 1.9e-38 becomes that, which cannot move a row's sum of weights
(>= 1) nor its output, and every masked weight is exactly 0. Values and gradients, the term's included, agree with
the dense softmax to float rounding (tests/test_biased_attention.py). A fixed term (ALiBi, any in evaluation) keeps
the flash blocks over its dense term: the lag route's forward measured slower than SDPA's fused flash kernel there
(JSB cpu preset evaluation 0.75x rope10k against 0.95x; docs/presets.md).
Measured (AVX-512 EPYC, one thread, CPU time beside a niced sweep), forward and backward of one attention with a
KERPLE term against rope10k's `is_causal` flash: B 4, 4 heads of 32, T 1024: math blocks 1.44x rope's time, lag
route 1.25x; B 1, 2 heads of 64, T 2048: 2.30x -> 1.33x.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from models.encodings.base import LagTerm, outside_autocast

QUERY_BLOCK = 256  # queries per block (the measurements above: 128 to 256 are fastest at T 1024, 256 for flash)
LAG_ROWS = 64  # queries per tile of `lag_biased_attention` (64 to 128 fastest at T 1024 and 2048, AVX-512; docs)
LAG_TILE_BYTES = 4 << 20  # most bytes of one tile's scores: sequences of the batch per tile (64 x 1024 x 4: 16)
EXP_FLOOR_MARGIN = 0.5  # the clamp before exp sits this far above log(smallest normal): fp32 -86.84


def biased_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, dropout_p: float, scale: float
) -> torch.Tensor:
    """softmax(scale * q k^T + bias) v for q, k, v (B, H, T, D) and a bias (1 or B, H, T, T) that masks j > i."""
    if dropout_p == 0.0 and q.device.type == "cpu":
        return query_blocked(q, k, v, bias, scale, math_attention if bias.requires_grad else flash_attention)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p, scale=scale)


def query_blocked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias: torch.Tensor,
    scale: float,
    attend: Callable[..., torch.Tensor],
    block: int = QUERY_BLOCK,
) -> torch.Tensor:
    """The same attention, QUERY_BLOCK queries at a time over the keys up to the block's last query, each block by
    `attend` (the module docstring: exact when the bias masks every key after its query, as a bias encoding's term
    does)."""
    T = q.shape[-2]
    if k.shape[-2] != T or bias.shape[-2:] != (T, T):
        raise ValueError(f"query-blocked attention needs T x T self-attention, got q {tuple(q.shape)}, k "
                         f"{tuple(k.shape)}, bias {tuple(bias.shape)}")  # fmt: skip
    outputs = []
    for start in range(0, T, block):
        end = min(start + block, T)
        queries, keys = slice(start, end), slice(None, end)
        outputs.append(attend(q[..., queries, :], k[..., keys, :], v[..., keys, :], bias[..., queries, keys], scale))
    return torch.cat(outputs, dim=-2)


def math_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(scale * q k^T + bias) v in plain operators: autograd differentiates the bias too. Every row keeps its
    own key, so a plain softmax is safe."""
    return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * scale + bias, dim=-1), v)


def flash_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, scale: float
) -> torch.Tensor:
    """SDPA's CPU flash kernel with the bias as its float mask (one that needs no gradient)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)


def tiled_route(q: torch.Tensor, dropout_p: float) -> bool:
    """Whether attention may train through the lag route's tiles (`lag_biased_attention` for a learned term of the
    distance alone, the caller checking it has one; `tiled_causal_attention` for an encoding that asks for it): in
    training on the CPU without attention dropout. A fixed term (ALiBi's, or any in evaluation) keeps
    `flash_attention`'s query blocks over its dense term, faster there (module docstring); off the CPU or with
    dropout, the dense term goes to SDPA."""
    return dropout_p == 0.0 and q.device.type == "cpu" and torch.is_grad_enabled()


def lag_biased_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, term: LagTerm, scale: float
) -> torch.Tensor:
    """softmax_j(scale * q_i . k_j + values[h, i - j]) v_j over the keys j <= i, for q, k, v (B, H, T, D) and a
    term's values on the lags 0..T-1 (H, T) for its first `rows` queries; the later queries, which the term gives
    `rest` (1, H, T - rows, T), attend over every key with `math_attention` (module docstring). Differentiable in
    q, k, v, the values and the rest."""
    B, H, T, _ = q.shape
    values, rows = term.values, term.rows
    if k.shape[-2] != T or values.shape != (H, T) or not 0 < rows <= T:
        shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, values {tuple(values.shape)}, rows {rows}"
        raise ValueError(f"lag-biased attention needs T x T self-attention, (H, T) values, 0 < rows <= T; got {shapes}")
    leading = (t[..., :rows, :] for t in (q, k, v))  # their keys are the first `rows`
    lagged = TiledAttention.apply(*leading, values[:, :rows], scale)
    if rows == T:
        return lagged
    if term.rest is None or term.rest.shape[-2:] != (T - rows, T):
        raise ValueError(f"the {T - rows} queries after the lag term's {rows} need their (T - rows, T) rows")
    return torch.cat((lagged, math_attention(q[..., rows:, :], k, v, term.rest, scale)), dim=-2)


def tiled_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax_j(scale * q_i . k_j) v_j over the keys j <= i in the lag route's tiles with no term, for q and k
    (B, H, T, D) and v (B, H, T, Dv) of any widths: PoPE's q and k are twice v's width, where SDPA's flash kernels
    need one width and so a v padded with zeros, P.V done at twice its width (module docstring: measured)."""
    if k.shape[-2] != q.shape[-2] or v.shape[-2] != q.shape[-2] or q.shape[-1] != k.shape[-1]:
        shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        raise ValueError(f"tiled causal attention needs T x T self-attention and q, k of one width; got {shapes}")
    return TiledAttention.apply(q, k, v, None, scale)


def _lag_tiles(B: int, T: int, itemsize: int) -> list[tuple[int, int, int, int]]:
    """(b0, b1, r0, r1): sequences b0..b1-1, queries r0..r1-1 (keys 0..r1-1), within LAG_TILE_BYTES of scores."""
    rows = min(T, LAG_ROWS)
    group = max(1, min(B, LAG_TILE_BYTES // (rows * T * itemsize)))
    return [(b0, min(B, b0 + group), r0, min(T, r0 + rows)) for r0 in range(0, T, rows) for b0 in range(0, B, group)]


def _reversed_term(values: torch.Tensor) -> torch.Tensor:
    """(H, 2T - 1): entry m holds the term at lag T - 1 - m, -inf for the negative lags (the future)."""
    H, T = values.shape
    padded = values.new_full((H, 2 * T - 1), float("-inf"))
    padded[:, T - 1 :] = values
    return padded.flip(-1)


def _toeplitz(reversed_term: torch.Tensor, h: int, r0: int, r1: int) -> torch.Tensor:
    """Head h's term of queries r0..r1-1 over keys 0..r1-1, (r1 - r0, r1): entry (r, j) at lag r0 + r - j. A view
    of the reversed values with unit strides reads the rows bottom up; one flip puts them in order."""
    T = (reversed_term.shape[-1] + 1) // 2
    row = reversed_term[h]
    return row.as_strided((r1 - r0, r1), (1, 1), row.storage_offset() + T - r1).flip(0)


def _weights(scores: torch.Tensor, centre: torch.Tensor, r0: int, floor: float) -> torch.Tensor:
    """exp(scores - centre) in place, the future keys (past the diagonal of the tile's last r1 - r0 columns) 0: the
    centred scores are clamped at `floor` first, so that no exp falls on its slow path (module docstring)."""
    scores.sub_(centre).clamp_(min=floor).exp_()
    scores[..., r0:].tril_()
    return scores


class TiledAttention(torch.autograd.Function):
    """Attention with a term of the distance alone (values (H, T)), or with none (values None); FlashAttention's
    forward and recomputing backward in tiles of PyTorch operators (module docstring). Computes in q's dtype, at
    least fp32."""

    @staticmethod
    def forward(ctx, q, k, v, values, scale):
        with outside_autocast(q.device):  # the tiles' products in the dtype they compute in, under bf16 autocast too
            return TiledAttention._forward(ctx, q, k, v, values, scale)

    @staticmethod
    def backward(ctx, grad_out):
        with outside_autocast(grad_out.device):
            return TiledAttention._backward(ctx, grad_out)

    @staticmethod
    def _forward(ctx, q, k, v, values, scale):
        B, H, T, _ = q.shape
        dtype = torch.promote_types(q.dtype, torch.float32)
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
        floor = math.log(torch.finfo(dtype).tiny) + EXP_FLOOR_MARGIN
        term = None if values is None else _reversed_term(values.detach().to(dtype))
        out = q.new_empty(*q.shape[:-1], v.shape[-1])
        lse = q.new_empty(*q.shape[:-1], 1)
        for h in range(H):
            for b0, b1, r0, r1 in _lag_tiles(B, T, q.element_size()):
                scores = _tile_scores(term, h, q[b0:b1, h, r0:r1], k[b0:b1, h, :r1], r0, scale)
                rowmax = scores.amax(-1, keepdim=True)
                weights = _weights(scores, rowmax, r0, floor)
                total = weights.sum(-1, keepdim=True)
                torch.bmm(weights, v[b0:b1, h, :r1], out=out[b0:b1, h, r0:r1]).div_(total)
                lse[b0:b1, h, r0:r1] = rowmax + total.log()
        ctx.save_for_backward(q, k, v, values, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def _backward(ctx, grad_out):
        q, k, v, values, out, lse = ctx.saved_tensors
        scale = ctx.scale
        B, H, T, _ = q.shape
        dtype = q.dtype
        floor = math.log(torch.finfo(dtype).tiny) + EXP_FLOOR_MARGIN
        term = None if values is None else _reversed_term(values.detach().to(dtype))
        dO = grad_out.to(dtype)
        delta = (dO * out).sum(-1, keepdim=True)  # rowsum(a dA) = dO . o
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dvalues = torch.zeros(H, T, dtype=dtype) if ctx.needs_input_grad[3] else None  # False for no term
        for h in range(H):
            for b0, b1, r0, r1 in _lag_tiles(B, T, q.element_size()):
                qb, kb, vb, dOb = q[b0:b1, h, r0:r1], k[b0:b1, h, :r1], v[b0:b1, h, :r1], dO[b0:b1, h, r0:r1]
                scores = _tile_scores(term, h, qb, kb, r0, scale)
                weights = _weights(scores, lse[b0:b1, h, r0:r1], r0, floor)  # a
                dv[b0:b1, h, :r1].baddbmm_(weights.transpose(1, 2), dOb)
                grad = torch.bmm(dOb, vb.transpose(1, 2))  # dA
                grad.sub_(delta[b0:b1, h, r0:r1]).mul_(weights)  # dS: the gradient of the scores, 0 in the future
                dq[b0:b1, h, r0:r1].baddbmm_(grad, kb, alpha=scale)
                dk[b0:b1, h, :r1].baddbmm_(grad.transpose(1, 2), qb, alpha=scale)
                if dvalues is not None:
                    dvalues[h, :r1] += _sums_by_lag(grad.sum(0), r0)
        return dq, dk, dv, None if dvalues is None else dvalues.to(values.dtype), None


def _tile_scores(term: torch.Tensor | None, h: int, qb: torch.Tensor, kb: torch.Tensor, r0: int, scale: float):
    """A tile's scores, scale * q_i . k_j plus head h's term at lag i - j (none without a term): queries r0.. of qb
    over the keys of kb, (b, R, n), the future not yet masked."""
    if term is None:
        return torch.bmm(qb, kb.transpose(1, 2)).mul_(scale)
    return torch.baddbmm(_toeplitz(term, h, r0, kb.shape[-2]), qb, kb.transpose(1, 2), alpha=scale)


def _sums_by_lag(tile: torch.Tensor, r0: int) -> torch.Tensor:
    """tile (R, n) of queries r0..r0+R-1 over keys 0..n-1 (n = r0 + R) -> (n,): entry m sums the tile's entries at
    lag r0 + r - j = m. Row r is written R - r places right in rows of n + R (a sheared copy), which puts every lag
    in one column (column c holds lag n - c), and the columns are summed."""
    R, n = tile.shape
    width = n + R
    sheared = tile.new_zeros(R, width)
    sheared.as_strided((R, n), (width - 1, 1), sheared.storage_offset() + R).copy_(tile)
    return sheared.sum(0)[1 : n + 1].flip(0)
