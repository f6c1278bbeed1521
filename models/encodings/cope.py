"""CoPE: contextual position encoding (Golovneva et al., 2024; facebookresearch/RAM `context_position.py`;
SPEC section 1).

Positions are counted by content: a query i gates every earlier key j and the position of j is the number of
open gates between them,

    g_ij = sigmoid(q_i . k_j / sqrt(d))            for j <= i (0 above the diagonal)
    p_ij = min(sum_{t=j..i} g_it, npos - 1)         npos = L + 1
    z_ij = (1 - w) q_i . E[floor(p_ij)] + w q_i . E[ceil(p_ij)],    w = p_ij - floor(p_ij)
    a_ij = softmax_j((q_i . k_j + z_ij) / sqrt(d))  (position logits added before the scaling, as released)

E (d x npos, zero-initialised) is one table per layer shared by the heads. CoPE needs the whole score matrix
before the softmax, so it cannot use the fused kernel: it is the one encoding that replaces the attention.
`contextual_positions` and `attention_weights` write p and the weights out from the definition as (B, H, T, T)
tensors, for looking inside a model (pipelines.inspection); training and evaluation never build them.

Why the kernel looks as it does. Written with autograd, the formula above builds about ten (B, H, T, T) tensors
and keeps most of them for the backward pass (355 MiB at B=2, H=4, T=1024). `CoPEAttention` is an autograd
Function with a hand-written backward pass instead. It saves only q, k, v, the table, the output and the
log-sum-exp of each row's scores, all O(T) per head, and the backward pass recomputes the rest, as FlashAttention
does. Everything of query row i depends on row i alone (its gates, their suffix sums, its softmax), so the
flattened batch x heads slices are processed in tiles of G slices (a head group) x R query rows: a tile of rows
r0..r1-1 needs only the n = r1 keys up to its last row (it skips the future half of the score matrix) and only
the table positions 0..min(r1, npos - 1) that those rows can reach. The tile size follows a byte budget
(`tile_bytes`; R is at most ROW_BLOCK): near cache size on the CPU, larger on a GPU.

Memory, per tile, in buffers of G x R x (n + 2) elements reused by every tile: the forward and the backward pass
each hold at most six float buffers (compute dtype) and one int64 index at once, plus a bool mask with dropout:
  forward   0: scores s (q.k + z), then exp    1: gates -> suffix sums p -> interpolation weights w
            2: table logits q.E                3: T[lo]    4: T[lo + 1] -> D[lo]    index: lo = floor(p)
  backward  the same, and 5: g (1 - g), kept from the gates; then 0: attention a -> scattered table gradient;
            1: (1 - w) G; 2: G, the gradient of the scores; 3: w G; 4: D[lo] -> dp -> dg.
  fused     forward 0: scores -> exp; 1: gates; 2: table logits; 3, 4: each row's max and sum. Backward 0: a;
            5: gates -> g (1 - g); 1: w -> (1 - w) G; 4: D[lo] -> w G; 2: table logits -> dA -> the logits'
            gradient; 3: dT; the index buffer holds lo as int32.
So beyond the scores a tile holds five float buffers and the index (seven fp32-sized blocks of R x (n + 2) per
slice), and at any T the whole workspace stays within `tile_bytes`. Nothing of size T x T survives a tile.

Algebra that keeps it lean (s = 1/sqrt(d), qs = s q; the kernel works on the scaled scores s (l + z)):
- gate g_ij = sigmoid(qs_i . k_j); the suffix sum p_ij = sum_{t>=j} g_it is the row total minus an exclusive
  prefix sum: one in-place cumsum over a buffer with one extra column;
- with T_i[c] = qs_i . E[c] (one product per tile, over the positions it reaches and one more), the interpolation
  is z = T_i[lo] + w D_i[lo], D_i[lo] = T_i[lo + 1] - T_i[lo]: two gathers with the same index lo (the second from
  the table logits shifted by a column). Past the table's last position E is extended by a copy of it, so a
  clamped position (p = npos - 1, lo = npos - 1, w = 0) meets D = 0 and its gradient vanishes without a mask;
- backward, with G = a (dA - rowsum(dO . o)) (rowsum(a dA) = dO . o saves a pass), dA = dO v^T:
  dv = a^T dO; dT = scatter_add(lo, (1 - w) G) + scatter_add(lo + 1, w G) -> dqs += dT E^T and the table gets
  qs^T dT; dp = G D[lo]; dg_it = sum_{j<=t} dp_ij (a prefix cumsum); the gradient of the gate logit qs.k is
  G + dg g (1 - g) (g (1 - g) kept from the recomputed gates), giving dqs and dk; finally dq = s dqs.
  Per tile that is three products forward (q.k, q.E, a v) and eight backward (q.k, q.E, a^T dO, dO v^T, dT E^T,
  qs^T dT, G k, G^T qs), where revision 1 took four and eleven: the product with the table's differences
  (q . ED), its gradient's two, and q.k a third time for the gates' derivative (issue 67).
- exponentials: the centred scores are clamped at EXP_FLOOR_MARGIN above log of the dtype's smallest normal
  before exp and the future zeroed after it (models.biased_attention: torch's exp is 4 to 35 times slower on an
  argument below log(FLT_MIN), the masked -inf included): a weight below 1.9e-38 (fp32) becomes that, which moves
  no row's sum or output.
The fused row chain (revisions 3 and 4, issue 67). On the CPU the elementwise chain between a tile's products runs in
C++ (cope_rows.cpp, built once per machine by models.native and called through ctypes), a few passes a row where
the operators above take about twenty: the gates and each row's total (8 exponentials at a time); the suffix
sums (in double, as torch's cumsum of floats accumulates) in one walk from the query down, four keys a step; the
interpolation and the row's max 8 keys at a time (their positions fall by at most 7, so T[lo] and T[lo + 1] come
from two loads of the table and permutes, no gather); the exponentials and their sum. The backward pass recomputes
the same way, keeping lo, w, D and g (1 - g) for two more walks: G and the prefix sums of G D, 8 keys at a time;
then dT scattered, the row's four quarters side by side (revision 4: the sums of dT's entries where two quarters
meet are formed in another order, and multiply-adds are fused only where the source says so). The gates
come before the table product, so it covers only the positions the tile reaches (a row's total of gates bounds its
p): about half the columns at initialisation, for the product and the table gradient's two. Measured on the
AVX-512 EPYC (one thread, JSB shape, forward and backward of one attention): 2.5x rope10k's flash attention ->
1.6x. It is taken on a CPU with AVX2 (all three kinds the suite meets) in fp32 or fp64, wherever the library
builds; elsewhere (a GPU, bf16 outside autocast, no compiler: a warning says why) the operators run, and both
equal the formula to float rounding (tests/test_cope.py: fp64 to 1e-11, fp32 within 1e-5 of the fp64 values and
nearer them than the operators are).
`describe` says which a run took.
Under bf16 autocast the kernel computes in fp32 (gates, their sums, the softmax) and returns the input dtype.
Attention dropout draws one bool mask per tile from the global RNG (one `bernoulli_` per tile, the draws of one
dropout call per tile); the forward pass saves the RNG state it started from and the backward pass replays it
to redraw the same masks, then restores the current state. The work runs in two custom ops, which
`torch.compile` keeps opaque: a compiled model traces through `CoPEAttention` without a graph break.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import nn

from models.encodings import cope_rows
from models.encodings.base import PositionalEncoding, outside_autocast, register
from models.encodings.cope_rows import rows_kernel
from models.encodings.options import Option
from models.encodings.rope import at_least_fp32

# Tile shape defaults per device. CPU (measured here, 1 thread): tiles of 64 rows and an 8 MiB workspace run
# 10-20% faster than 128-256 rows (more of the causal triangle skipped, tiles closer to cache size) and larger
# budgets gain nothing. GPU: large tiles, so that kernel launches (25 to 45 per tile and pass) do not dominate;
# not measured on this machine, a starting point. Per model: `pe_options: {tile_bytes: ...}`.
TILE_BYTES = {"cpu": 8 << 20, "cuda": 256 << 20}  # all of one tile's workspace
ROW_BLOCK = {"cpu": 64, "cuda": 512}  # most query rows per tile: smaller blocks skip more future keys
WORKSPACE_FLOATS = 6  # float buffers per tile (see the module docstring), beside one int64 index
EXP_FLOOR_MARGIN = 0.5  # centred scores are clamped this far above log(smallest normal) before exp (docstring)


@register
class CoPE(PositionalEncoding):
    name = "cope"
    takes_random_positions = False  # contextual positions come from the gates, not from the positions given
    mechanism = "scores"
    revision = 4  # dT's walk in quarters, no compiler-chosen fma (3: the fused row chain; 2: one table product a tile)
    option_rules = {
        "tile_bytes": Option(
            "whole", ">= 1", lambda v: v >= 1, optional=True, why="a tile's workspace; null: the device's default"
        )
    }

    def __init__(self, tile_bytes: int | None = None, **dims: int) -> None:
        super().__init__(**dims)
        self.npos = self.context + 1
        self.table = nn.Parameter(torch.zeros(self.n_layer, self.head_dim, self.npos))
        if tile_bytes is not None and tile_bytes <= 0:
            raise ValueError(f"cope: tile_bytes must be positive, got {tile_bytes}")
        self.tile_bytes = tile_bytes

    def attend(self, q, k, v, state, layer, dropout_p):
        B, H, T, _ = q.shape
        budget = self.tile_bytes or TILE_BYTES.get(q.device.type, TILE_BYTES["cuda"])
        q, k, v = q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1)
        out = CoPEAttention.apply(q, k, v, self.table[layer], self.softmax_scale, dropout_p, budget)
        return out.view(B, H, T, -1)

    def describe(self) -> dict:
        """The base class's, and the route CoPE's attention takes on the CPU in fp32."""
        rows = rows_kernel(torch.device("cpu"), torch.float32)
        why = cope_rows.why_not() or "the CPU has no AVX2"
        route = "fused row chain (cope_rows.cpp)" if rows is not None else f"PyTorch operators ({why})"
        return {**super().describe(), "cpu_route": route}

    def contextual_positions(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """p_ij = min(sum_{t=j..i} g_it, npos - 1) of every query and key, (B, H, T, T) in fp32 at least (0 above
        the diagonal), written out from the definition: for inspection; `attend` never builds it."""
        qs, k = at_least_fp32(q) * self.softmax_scale, at_least_fp32(k)
        gates = torch.sigmoid(qs @ k.transpose(-2, -1)).tril()  # key j > query i: gate closed
        suffix_sums = gates.flip(-1).cumsum(-1).flip(-1)  # sum over t >= j of g_it (the closed gates add 0)
        return suffix_sums.clamp(max=self.npos - 1).tril()

    def attention_weights(self, q, k, state, layer):
        """softmax_j((q_i . k_j + z_ij) / sqrt(d)) under the causal mask, (B, H, T, T), from the definition (the
        module docstring), in fp32 at least: what `attend` computes tile by tile."""
        qs, kf = at_least_fp32(q) * self.softmax_scale, at_least_fp32(k)
        p = self.contextual_positions(q, k)
        lo = p.floor()
        w = p - lo
        hi = (lo + 1).clamp(max=self.npos - 1)  # where w > 0, ceil(p) = floor(p) + 1
        table_logits = qs @ self.table[layer].to(qs.dtype)  # s q_i . E[c], (B, H, T, npos)
        z = (1 - w) * table_logits.gather(-1, lo.long()) + w * table_logits.gather(-1, hi.long())
        logits = qs @ kf.transpose(-2, -1) + z
        T = q.shape[-2]
        future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        return torch.softmax(logits.masked_fill(future, float("-inf")), dim=-1)

    def flops_per_token(self, T: int) -> float:
        """Per layer and head, for a query i attending keys j <= i ((T + 1) / 2 of them on average), per key:
            gate: sigmoid 1, causal mask 1                                     2
            reverse cumsum of the gates 1, clamp at npos - 1 1                 2
            floor 1, weight w = p - floor 1, two gathers 2                     4
            lerp (1 - w) a + w b as a + w (b - a): subtract 1, multiply-add 2  3
            position logit added to q . k                                      1
        that is 12 (T + 1) / 2; plus the table logits q_i . E[:, c] (a multiply-add over d) for the positions
        c = 0..min(i + 1, npos - 1) that row i can reach (p_ij <= i + 1): 2 d min(i + 2, npos), averaged over
        i < T: about d (T + 3) when T < npos rather than 2 d npos, since no row reaches the other positions (the
        kernel computes, per tile, the columns its last row reaches). Implementation costs (the backward
        pass's recomputation) are not model FLOPs and are not counted."""
        reachable = min(T, self.npos - 1)  # rows whose table columns min(i + 2, npos) are not yet capped
        mean_columns = (reachable * (reachable + 3) / 2 + (T - reachable) * self.npos) / T
        per_head = 12 * (T + 1) / 2 + 2 * self.head_dim * mean_columns
        return self.n_layer * self.n_head * per_head


def _plan(slices: int, T: int, capacity: int, rows: int) -> list[tuple[int, int, int, int]]:
    """Tiles (g0, g1, r0, r1): slices g0..g1-1, query rows r0..r1-1, keys 0..r1-1. A tile's buffers have
    (g1 - g0) x (r1 - r0) x (r1 + 2) elements, at most `capacity` unless one row of one slice is already more."""
    rows = max(1, min(T, rows, capacity // (T + 2)))
    tiles = []
    for r0 in range(0, T, rows):
        r1 = min(T, r0 + rows)
        group = max(1, min(slices, capacity // ((r1 - r0) * (r1 + 2))))
        tiles += [(g0, min(slices, g0 + group), r0, r1) for g0 in range(0, slices, group)]
    return tiles


class _Workspace:
    """Flat buffers reused by every tile; `take(i, *shape)` is a contiguous view of float buffer i."""

    def __init__(self, tiles: list[tuple[int, int, int, int]], dtype: torch.dtype, device: torch.device) -> None:
        numel = max((g1 - g0) * (r1 - r0) * (r1 + 2) for g0, g1, r0, r1 in tiles)
        self.floats = [torch.empty(numel, dtype=dtype, device=device) for _ in range(WORKSPACE_FLOATS)]
        self.index = torch.empty(numel, dtype=torch.int64, device=device)

    def take(self, i: int, *shape: int) -> torch.Tensor:
        return self.floats[i][: math.prod(shape)].view(shape)

    def take_index(self, *shape: int) -> torch.Tensor:
        return self.index[: math.prod(shape)].view(shape)


def _table(table: torch.Tensor, T: int, dtype: torch.dtype) -> torch.Tensor:
    """E restricted to the positions a sequence of T tokens can reach (p <= T), with one more column: the next
    position's, or past the table's last a copy of it, so that a clamped position (p = npos - 1) interpolates
    towards itself, T[lo + 1] - T[lo] = 0, and takes no gradient: (d, min(npos, T + 1) + 1)."""
    cols = min(table.shape[1], T + 1)
    return torch.cat((table, table[:, -1:]), dim=1)[:, : cols + 1].to(dtype)


def _scores(ws, qs, k, E, clamp_at, g0, g1, r0, r1, slopes=None):
    """Scaled scores s (q_i . k_j + z_ij) of one tile (future keys not yet masked), in buffer 0. Also returns
    w (a view of buffer 1), lo (the index buffer), D[lo] = T[lo + 1] - T[lo] (buffer 4) and the number of table
    columns used; with `slopes` (the backward pass's), the gates' derivative g (1 - g) is written there too."""
    G, R, n = g1 - g0, r1 - r0, r1
    last = min(clamp_at, n)  # rows < r1 reach positions <= r1 only
    cols = last + 1
    qb = qs[g0:g1, r0:r1]
    S = ws.take(0, G, R, n)
    torch.matmul(qb, k[g0:g1, :n].transpose(1, 2), out=S)  # s l_ij
    X = ws.take(1, G, R, n + 1)
    X[..., 0].zero_()
    gates = X[..., 1:]
    torch.sigmoid(S, out=gates)
    gates[..., r0:].tril_()  # key j > query i: gate closed
    if slopes is not None:
        torch.addcmul(gates, gates, gates, value=-1, out=slopes)  # g (1 - g), 0 in the future
    X.cumsum_(-1)  # X[..., j] = sum_{t<j} g_it; X[..., n] = row total
    p = X[..., :n]
    torch.sub(X[..., n:], p, out=p)  # p_ij = sum_{t>=j} g_it
    if last < n:
        p.clamp_(max=last)
    lo = ws.take_index(G, R, n)
    lo.copy_(p)  # floor, since p >= 0
    w = p.frac_()
    table_logits = ws.take(2, G, R, cols + 1)
    torch.matmul(qb, E[:, : cols + 1], out=table_logits)  # T_i[c] = qs_i . E[c], c = 0..cols
    below, above = ws.take(3, G, R, n), ws.take(4, G, R, n)
    torch.gather(table_logits, -1, lo, out=below)  # T[lo]
    torch.gather(table_logits[..., 1:], -1, lo, out=above)  # T[lo + 1]
    S.add_(below)
    D = above.sub_(below)
    S.addcmul_(D, w)  # + T[lo] + w (T[lo + 1] - T[lo])
    return S, w, lo, D, cols


def _weights(S: torch.Tensor, centre: torch.Tensor, r0: int, floor: float) -> torch.Tensor:
    """exp(S - centre) in place, the future keys 0: the centred scores are clamped at `floor` first, so that no exp
    takes torch's slow path for arguments below log(FLT_MIN) (the masked -inf among them; module docstring)."""
    S.sub_(centre).clamp_(min=floor).exp_()
    S[..., r0:].tril_()
    return S


def _causal(S: torch.Tensor, r0: int, future: dict[int, torch.Tensor], fill: float) -> None:
    """Fill the future keys of a tile (they lie in its last R columns, the diagonal block)."""
    R = S.shape[1]
    if R not in future:
        future[R] = torch.ones(R, R, dtype=torch.bool, device=S.device).triu(1)
    S[..., r0:].masked_fill_(future[R], fill)


class CoPEAttention(torch.autograd.Function):
    """CoPE attention over (N, T, d) slices with a recomputing backward pass; see the module docstring. The work
    is done by two custom ops, which torch.compile keeps opaque, so a compiled model has no graph break here."""

    @staticmethod
    def forward(ctx, q, k, v, table, scale, dropout_p, tile_bytes):
        out, lse, rng = cope_forward(q, k, v, table, scale, dropout_p, tile_bytes)
        ctx.save_for_backward(q, k, v, table, out, lse, rng)
        ctx.scale, ctx.dropout_p, ctx.tile_bytes = scale, dropout_p, tile_bytes
        return out

    @staticmethod
    def backward(ctx, grad_out):
        grads = cope_backward(grad_out, *ctx.saved_tensors, ctx.scale, ctx.dropout_p, ctx.tile_bytes)
        return (*grads, None, None, None)


def _setup(q: torch.Tensor, tile_bytes: int) -> tuple[torch.dtype, list[tuple[int, int, int, int]]]:
    """Compute dtype (at least fp32: gates, their sums and the softmax never run in bf16) and the tile plan."""
    dtype = torch.promote_types(q.dtype, torch.float32)
    itemsize = torch.empty((), dtype=dtype).element_size()
    bytes_per_element = WORKSPACE_FLOATS * itemsize + 8 + 1  # six float buffers, the int64 index, a dropout mask
    rows = ROW_BLOCK.get(q.device.type, ROW_BLOCK["cuda"])
    N, T, _ = q.shape
    return dtype, _plan(N, T, max(1, tile_bytes // bytes_per_element), rows)


@torch.library.custom_op("posbench::cope_forward", mutates_args=())
def cope_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    table: torch.Tensor,
    scale: float,
    dropout_p: float,
    tile_bytes: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns the output (N, T, dv) in v's dtype, the log-sum-exp of each row's scores (N, T, 1) and the RNG
    state the dropout masks were drawn from (empty without dropout)."""
    device = q.device
    dtype, tiles = _setup(q, tile_bytes)
    T = q.shape[1]
    with torch.no_grad(), outside_autocast(device):
        qs, kf, vf = q.to(dtype) * scale, k.to(dtype), v.to(dtype)
        E = _table(table, T, dtype)
        ws = _Workspace(tiles, dtype, device)
        floor = math.log(torch.finfo(dtype).tiny) + EXP_FLOOR_MARGIN
        rng = _rng_state(device) if dropout_p > 0 else torch.empty(0, dtype=torch.uint8)
        out = torch.empty(*q.shape[:2], v.shape[-1], dtype=dtype, device=device)
        lse = torch.empty(*q.shape[:2], 1, dtype=dtype, device=device)
        future = {}
        rows = rows_kernel(device, dtype)
        clamp_at = table.shape[1] - 1  # p is clamped at npos - 1
        for g0, g1, r0, r1 in tiles:
            if rows is not None:
                S, rowmax, total = cope_rows.fused_weights(rows, ws, qs, kf, E, clamp_at, g0, g1, r0, r1, floor)
            else:
                S = _scores(ws, qs, kf, E, clamp_at, g0, g1, r0, r1)[0]
                _causal(S, r0, future, float("-inf"))
                rowmax = S.amax(-1, keepdim=True)
                _weights(S, rowmax, r0, floor)
                total = S.sum(-1, keepdim=True)
            lse[g0:g1, r0:r1] = rowmax + total.log()
            if dropout_p > 0:
                S.mul_(torch.empty_like(S, dtype=torch.bool).bernoulli_(1 - dropout_p))
                total.mul_(1 - dropout_p)
            block = out[g0:g1, r0:r1]
            torch.matmul(S, vf[g0:g1, :r1], out=block)
            block.div_(total)
    return out.to(v.dtype), lse, rng


@cope_forward.register_fake
def _(q, k, v, table, scale, dropout_p, tile_bytes):
    dtype = torch.promote_types(q.dtype, torch.float32)
    rng_bytes = _rng_state(q.device).numel() if dropout_p > 0 else 0
    return (
        q.new_empty(*q.shape[:2], v.shape[-1], dtype=v.dtype),
        q.new_empty(*q.shape[:2], 1, dtype=dtype),
        torch.empty(rng_bytes, dtype=torch.uint8),
    )


@torch.library.custom_op("posbench::cope_backward", mutates_args=())
def cope_backward(
    grad_out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    table: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    rng: torch.Tensor,
    scale: float,
    dropout_p: float,
    tile_bytes: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients w.r.t. q, k, v and the table, recomputed tile by tile (same tiles, same dropout masks)."""
    device = q.device
    dtype, tiles = _setup(q, tile_bytes)
    T = q.shape[1]
    with torch.no_grad(), outside_autocast(device), _replayed_rng(device, rng):
        qs, kf, vf = q.to(dtype) * scale, k.to(dtype), v.to(dtype)
        E = _table(table, T, dtype)
        dO = grad_out.to(dtype)
        delta = (dO * out.to(dtype)).sum(-1, keepdim=True)  # rowsum(a dA) = dO . o
        if dropout_p > 0:
            dO = dO / (1 - dropout_p)
        dqs, dk, dv, dE = torch.zeros_like(qs), torch.zeros_like(kf), torch.zeros_like(vf), torch.zeros_like(E)
        ws = _Workspace(tiles, dtype, device)
        floor = math.log(torch.finfo(dtype).tiny) + EXP_FLOOR_MARGIN
        future = {}
        rows = rows_kernel(device, dtype)
        clamp_at = table.shape[1] - 1  # p is clamped at npos - 1
        for g0, g1, r0, r1 in tiles:
            G, R, n = g1 - g0, r1 - r0, r1
            qb, kb, vb, dOb = qs[g0:g1, r0:r1], kf[g0:g1, :n], vf[g0:g1, :n], dO[g0:g1, r0:r1]
            slopes = ws.take(5, G, R, n)
            if rows is not None:
                S, w, lo, D, cols = cope_rows.fused_recompute(rows, ws, qs, kf, E, clamp_at, g0, g1, r0, r1, lse, floor)
            else:
                S, w, lo, D, cols = _scores(ws, qs, kf, E, clamp_at, g0, g1, r0, r1, slopes)
                _causal(S, r0, future, float("-inf"))
                _weights(S, lse[g0:g1, r0:r1], r0, floor)  # a
            grad = ws.take(2, G, R, n)  # the table logits are spent
            if dropout_p > 0:
                keep = torch.empty_like(S, dtype=torch.bool).bernoulli_(1 - dropout_p)
                torch.mul(S, keep, out=grad)
                dv[g0:g1, :n].baddbmm_(grad.transpose(1, 2), dOb)
                torch.matmul(dOb, vb.transpose(1, 2), out=grad)
                grad.mul_(keep)
            else:
                dv[g0:g1, :n].baddbmm_(S.transpose(1, 2), dOb)
                torch.matmul(dOb, vb.transpose(1, 2), out=grad)
            if rows is not None:
                scattered = cope_rows.fused_gradient(rows, ws, S, grad, delta, lo, w, D, slopes, g0, g1, r0, r1, cols)
            else:
                grad.sub_(delta[g0:g1, r0:r1]).mul_(S)  # gradient of the scores s (l + z)
                upper = torch.mul(w, grad, out=ws.take(3, G, R, n))  # w G, to T[lo + 1]
                lower = torch.sub(grad, upper, out=w)  # (1 - w) G, to T[lo]
                scattered = ws.take(0, G, R, cols + 1)  # the attention weights are spent
                scattered.zero_().scatter_add_(-1, lo, lower)
                scattered[..., 1:].scatter_add_(-1, lo, upper)  # dT
                D.mul_(grad).cumsum_(-1)  # dg_it = sum_{j<=t} grad_ij D_i[lo_ij]
                grad.addcmul_(D, slopes)  # gradient of the gate logit s l: g (1 - g) kept from _scores
            dq = scattered @ E[:, : cols + 1].T
            dE[:, : cols + 1].addmm_(qb.reshape(G * R, -1).T, scattered.view(G * R, cols + 1))
            dq.baddbmm_(grad, kb)
            dqs[g0:g1, r0:r1] += dq
            dk[g0:g1, :n].baddbmm_(grad.transpose(1, 2), qb)
        dtable = torch.zeros_like(table, dtype=dtype)
        reach = min(E.shape[1], table.shape[1])  # E's last column is the table's next one, or the zero padding
        dtable[:, :reach] += dE[:, :reach]
    return (dqs * scale).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), dtable.to(table.dtype)


@cope_backward.register_fake
def _(grad_out, q, k, v, table, out, lse, rng, scale, dropout_p, tile_bytes):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), torch.empty_like(table)


def _rng_state(device: torch.device) -> torch.Tensor:
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state()


@contextlib.contextmanager
def _replayed_rng(device: torch.device, state: torch.Tensor):
    """Run with the RNG state the forward pass drew its dropout masks from, then restore the current state."""
    if not state.numel():
        yield
        return
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else [], device_type=device.type):
        if device.type == "cuda":
            torch.cuda.set_rng_state(state, device)
        else:
            torch.set_rng_state(state)
        yield
