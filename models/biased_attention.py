"""Causal attention with an additive logit term (the "bias" mechanism: ALiBi, T5's buckets, KERPLE, FIRE, ...).

    y_i = sum_j softmax_j(scale * q_i . k_j + bias_ij) v_j        bias_ij = -inf for j > i (the encoding's mask)

`scaled_dot_product_attention(attn_mask=bias)` computes it. On the CPU its flash kernel takes a float mask, but
only one that needs no gradient (ALiBi's fixed slopes, or any encoding in evaluation); a learned term (T5's table,
KERPLE's r1 and r2, FIRE's MLP) sends training to the math kernel, which builds the whole T x T scores (the half
above the diagonal included, only to mask it) and adds a "safe" softmax's checks for fully masked rows. There,
`query_blocked_attention` computes the same sum in blocks of QUERY_BLOCK queries, each over the keys up to the
block's last query only: the keys after it are masked for every query of the block, so leaving them out changes
nothing but the work (about half the scores at T >> QUERY_BLOCK), and every row keeps its own key, so a plain
softmax is safe. Autograd differentiates it, the bias included; the values and gradients agree with the math kernel
to float rounding (tests/test_biased_attention.py).

Measured on the 2-core development machine (under load: ratios only), torch 2.13, float32, one thread, B 4, 2 heads
of 64, T 1024, a learned (H, T) lag table laid out as T5 does, forward and backward of one attention: SDPA (math
kernel) 336-338 ms; query blocks of 1024 (one block) 210 ms, 256: 116-126 ms, 128: 111-137 ms, 64: 133 ms;
`is_causal` flash without a bias 75-91 ms. Training with attention dropout keeps SDPA (its dropout draws its own
random stream, which a blocked path would not reproduce), and so does CUDA, whose memory-efficient kernel takes the
bias gradient fused. In a whole training step at the MAESTRO cpu preset (idle machine, `make throughput`):
T5's bias 0.66x of rope10k's tokens/s before, 0.93x after; KERPLE 0.65x -> 0.88x; FIRE 0.54x -> 0.67x
(docs/presets.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

QUERY_BLOCK = 256  # queries per block (the measurement above: 128 to 256 are fastest at T 1024)


def biased_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, dropout_p: float, scale: float
) -> torch.Tensor:
    """softmax(scale * q k^T + bias) v for q, k, v (B, H, T, D) and a bias (1 or B, H, T, T) that masks j > i."""
    if bias.requires_grad and dropout_p == 0.0 and q.device.type == "cpu":
        return query_blocked_attention(q, k, v, bias, scale)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p, scale=scale)


def query_blocked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, scale: float, block: int = QUERY_BLOCK
) -> torch.Tensor:
    """The same attention, QUERY_BLOCK queries at a time over the keys up to the block's last query (the module
    docstring: exact when the bias masks every key after its query, as a bias encoding's term does)."""
    T = q.shape[-2]
    if k.shape[-2] != T or bias.shape[-2:] != (T, T):
        raise ValueError(f"query-blocked attention needs T x T self-attention, got q {tuple(q.shape)}, k "
                         f"{tuple(k.shape)}, bias {tuple(bias.shape)}")  # fmt: skip
    outputs = []
    for start in range(0, T, block):
        end = min(start + block, T)
        scores = torch.matmul(q[..., start:end, :], k[..., :end, :].transpose(-2, -1)) * scale
        weights = torch.softmax(scores + bias[..., start:end, :end], dim=-1)
        outputs.append(torch.matmul(weights, v[..., :end, :]))
    return torch.cat(outputs, dim=-2)
