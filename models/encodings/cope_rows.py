"""CoPE's fused row chain on the CPU (revisions 3-4, issue 67): cope_rows.cpp, built once per machine by models.native
and called through ctypes for each tile of models/encodings/cope.py, whose module docstring gives the chain, the
tiles and their buffers. Each function here takes the tile's workspace (cope._Workspace), does the tile's products
in PyTorch and hands the elementwise work between them to the kernel."""

from __future__ import annotations

import ctypes
import functools
import warnings
from pathlib import Path

import torch

from models import native

SOURCE = Path(__file__).with_name("cope_rows.cpp")
FLAGS = ("-mavx2", "-mfma", "-ffp-contract=off")
REACH_MARGIN = 1e-3  # relative: a row's total of gates, summed in another order, bounds its positions past rounding


def why_not() -> str | None:
    """Why the kernel could not be built or loaded here, if it could not."""
    return native.why_not(SOURCE)


@functools.cache
def rows_kernel(device: torch.device, dtype: torch.dtype) -> ctypes.CDLL | None:
    """The fused row chain (cope_rows.cpp) where it runs: on a CPU with AVX2, in fp32 or fp64, once built; else
    None, and the tiles run the same chain as PyTorch operators (equal to float rounding: tests/test_cope.py)."""
    if device.type != "cpu" or dtype not in (torch.float32, torch.float64) or not native.cpu_has_avx2():
        return None
    rows = native.library(SOURCE, FLAGS)
    if rows is None:
        why = why_not()
        warnings.warn(f"cope: the fused row kernel is unavailable, so CoPE runs slower: {why}", stacklevel=2)
        return None
    for suffix in ("f32", "f64"):
        getattr(rows, f"cope_gates_rows_{suffix}").restype = ctypes.c_double
    return rows


def _address(*tensors: torch.Tensor) -> list[ctypes.c_void_p]:
    """Raw addresses for the kernel, which reads every buffer as one row-major block."""
    if not all(t.is_contiguous() for t in tensors):
        raise RuntimeError("cope: the fused row kernel takes contiguous buffers only")
    return [ctypes.c_void_p(t.data_ptr()) for t in tensors]


def _entry(rows: ctypes.CDLL, name: str, dtype: torch.dtype):
    """The kernel's function `name` for fp32 or fp64."""
    return getattr(rows, f"{name}_{'f32' if dtype == torch.float32 else 'f64'}")


def _tile(rows, ws, qs, k, E, clamp_at, g0, g1, r0, r1, gates_at):
    """A tile's products and gates in the fused kernel: q.k in buffer 0, the gates in buffer `gates_at`, and the
    table logits q.E in buffer 2 over the positions the tile's rows reach (p_ij is at most row i's total of
    gates, known once the gates are: at initialisation about half the tile's width, which halves this product
    and the table gradient's two). Returns the three and the kernel's tile arguments."""
    G, R, n = g1 - g0, r1 - r0, r1
    last = min(clamp_at, n)  # rows < r1 reach positions <= r1 only
    qb = qs[g0:g1, r0:r1]
    S, gates = ws.take(0, G, R, n), ws.take(gates_at, G, R, n)
    torch.matmul(qb, k[g0:g1, :n].transpose(1, 2), out=S)
    most = _entry(rows, "cope_gates_rows", S.dtype)(*_address(S, gates), *map(ctypes.c_int64, (G * R, R, n, r0)))
    reach = min(last, int(most * (1 + REACH_MARGIN)) + 1)  # past the largest p of the tile, with a margin
    table_logits = ws.take(2, G, R, reach + 2)
    torch.matmul(qb, E[:, : reach + 2], out=table_logits)
    return S, gates, table_logits, (G * R, R, n, reach + 2, r0, last)


def fused_weights(rows, ws, qs, k, E, clamp_at, g0, g1, r0, r1, floor):
    """`_scores`, `_causal` and `_weights` of one tile in the fused kernel: exp(score - rowmax), the future 0, in
    buffer 0, with each row's max and sum (buffers 3 and 4)."""
    S, gates, table_logits, shape = _tile(rows, ws, qs, k, E, clamp_at, g0, g1, r0, r1, gates_at=1)
    rowmax, total = ws.take(3, g1 - g0, r1 - r0, 1), ws.take(4, g1 - g0, r1 - r0, 1)
    _entry(rows, "cope_forward_rows", S.dtype)(
        *_address(S, gates, table_logits, rowmax, total), *map(ctypes.c_int64, shape), ctypes.c_double(floor)
    )
    return S, rowmax, total


def fused_recompute(rows, ws, qs, k, E, clamp_at, g0, g1, r0, r1, lse, floor):
    """The backward pass's recomputation in the fused kernel: the attention weights a in buffer 0, g (1 - g) in
    buffer 5, w and D in buffers 1 and 4, lo (int32) in the index buffer; as `_scores` returns them."""
    S, slopes, table_logits, shape = _tile(rows, ws, qs, k, E, clamp_at, g0, g1, r0, r1, gates_at=5)
    G, R, n = g1 - g0, r1 - r0, r1
    w, D = ws.take(1, G, R, n), ws.take(4, G, R, n)
    lo = ws.index.view(torch.int32)[: G * R * n].view(G, R, n)
    centres = lse[g0:g1, r0:r1].contiguous()  # held here: the kernel reads it through a raw address
    _entry(rows, "cope_recompute_rows", S.dtype)(
        *_address(S, slopes, lo, w, D, table_logits, centres), *map(ctypes.c_int64, shape), ctypes.c_double(floor)
    )
    return S, w, lo, D, shape[3] - 1


def fused_gradient(rows, ws, A, grad, delta, lo, w, D, slopes, g0, g1, r0, r1, cols):
    """The gradient chain of one tile in the fused kernel: `grad` (dA on entry) becomes the gradient of the gate
    and score logit s q.k; returns dT, the table logits' gradient (buffer 3)."""
    G, R, n = g1 - g0, r1 - r0, r1
    scattered = ws.take(3, G, R, cols + 1)
    deltas = delta[g0:g1, r0:r1].contiguous()  # held here: the kernel reads it through a raw address
    _entry(rows, "cope_gradient_rows", A.dtype)(
        *_address(A, grad, deltas, lo, w, D, slopes, scattered),
        *map(ctypes.c_int64, (G * R, R, n, cols + 1, r0)),
    )
    return scattered
