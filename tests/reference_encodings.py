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
