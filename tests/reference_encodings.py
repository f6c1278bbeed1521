"""Reference implementations written straight from an encoding's definition, slow and plain, for parity tests."""

from __future__ import annotations

import math

import torch


def cope_by_loops(q, k, v, table, npos):
    """Reference CoPE for one head, straight from the definition: double loop over query i and key j <= i."""
    T, d = q.shape
    out = torch.zeros_like(v)
    for i in range(T):
        gates = [torch.sigmoid(q[i] @ k[t] / math.sqrt(d)) for t in range(i + 1)]
        logits = []
        for j in range(i + 1):
            p = min(float(sum(gates[j : i + 1])), npos - 1)
            lo, hi = math.floor(p), min(math.floor(p) + 1, npos - 1)
            w = p - lo
            z = (1 - w) * (q[i] @ table[:, lo]) + w * (q[i] @ table[:, hi])
            logits.append((q[i] @ k[j] + z) / math.sqrt(d))
        weights = torch.softmax(torch.stack(logits), dim=0)
        out[i] = sum(weights[j] * v[j] for j in range(i + 1))
    return out


def visible(i, j, window):
    """SPEC 1c's windows, one pair at a time: window None, ("sliding", W) or ("chunked", C)."""
    if j > i:
        return False
    if window is None:
        return True
    kind, size = window
    return i - size < j if kind == "sliding" else i // size == j // size


def rotated_by_loop(x, m, theta):
    """RoPE on one vector at position m: the pair (x_{2b}, x_{2b+1}) turned by m theta_b, band by band."""
    out = [float(value) for value in x]
    for b, frequency in enumerate(theta):
        c, s = math.cos(m * frequency), math.sin(m * frequency)
        out[2 * b], out[2 * b + 1] = x[2 * b] * c - x[2 * b + 1] * s, x[2 * b] * s + x[2 * b + 1] * c
    return torch.tensor(out, dtype=torch.float64)


def layer_logits_by_loops(q, k, theta=None, qk_norm=False, temperature=None, window=None):
    """One head's (T, T) logits of a pattern's layer, straight from SPEC 1c: q_i and k_j rotated at i theta and
    j theta (theta None: a NoPE layer), then divided by sqrt(mean square + 1e-5) when the layer normalises them,
    q_i times temperature(i) when given; q_i . k_j / sqrt(d) where the window lets i see j, -inf elsewhere."""
    T, d = q.shape
    logits = torch.full((T, T), float("-inf"), dtype=torch.float64)
    for i in range(T):
        qi = q[i] if theta is None else rotated_by_loop(q[i], i, theta)
        if qk_norm:
            qi = qi / math.sqrt(float((qi**2).mean()) + 1e-5)
        if temperature is not None:
            qi = qi * temperature(i)
        for j in range(T):
            if visible(i, j, window):
                kj = k[j] if theta is None else rotated_by_loop(k[j], j, theta)
                if qk_norm:
                    kj = kj / math.sqrt(float((kj**2).mean()) + 1e-5)
                logits[i, j] = float(qi @ kj) / math.sqrt(d)
    return logits


def fope_in_neox_layout(x, positions, theta, cos_mix, sin_mix):
    """FoPE on one head's x (T, d) in the layout of vLLM's FourierRotaryEmbedding.forward_native and the authors'
    code: dimension i pairs with i + d/2 ("NeoX"). Over the K = len(theta) kept frequencies,
    c = cos(m theta) @ cos_mix and s = sin(m theta) @ sin_mix (T, K); padded to d/2 with c = 1, s = 0 (vLLM's
    unrotated channels); x c + rotate_half(x) s with (c, s) repeated over both halves."""
    T, d = x.shape
    angles = positions.to(torch.float64)[:, None] * theta.to(torch.float64)[None, :]
    c, s = angles.cos() @ cos_mix, angles.sin() @ sin_mix
    rest = d // 2 - c.shape[-1]
    c = torch.cat((c, torch.ones(T, rest, dtype=torch.float64)), dim=-1)
    s = torch.cat((s, torch.zeros(T, rest, dtype=torch.float64)), dim=-1)
    c, s = torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)
    half = d // 2
    rotate_half = torch.cat((-x[:, half:], x[:, :half]), dim=-1)
    return x * c + rotate_half * s


def neox_to_adjacent(d):
    """The permutation that takes a head's dimensions from NeoX halves (i with i + d/2) to the suite's adjacent pairs
    (2i with 2i + 1): adjacent[2i] = neox[i], adjacent[2i + 1] = neox[i + d/2]."""
    half = torch.arange(d // 2)
    return torch.stack((half, half + d // 2), dim=1).flatten()
