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
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

QUERY_BLOCK = 256  # queries per block (the measurements above: 128 to 256 are fastest at T 1024, 256 for flash)


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
