"""Attention temperature tuning: Llama 4's NoPE layers (transformers `models/llama4/modeling_llama4.py`, after
Nakanishi, 2025, arXiv 2501.19399 "Scalable-Softmax Is Superior for Attention"). No rotation; the query at position
m is scaled by

    tau(m) = 1 + attn_scale * log(1 + floor((m + 1) / floor_scale))

so a query's logits sharpen, in steps of floor_scale tokens, as the context it attends over grows: tau = 1 below
floor_scale - 1, then 1 + attn_scale ln 2, 1 + attn_scale ln 3, ... Keys are unchanged. Reference values at
Llama 4 scale: attn_scale 0.1, floor_scale 8192 (1/32 of its 256K training context); here floor_scale defaults
to the same fraction of the training context L (models.encodings.pattern.tokens_of; SPEC 1c), attn_scale as is.
m is the absolute position (the reference takes the cache position), so past L the temperature keeps rising.

Position enters only as this per-query scale: score(m, n) = tau(m) q_m . k_n, the same for every key, so the
order of the keys is invisible, as in NoPE.

FLOPs (`flops_per_token`): one multiplication per element of q, d_model per layer; the (T,) table is per forward
pass (neglected, as RoPE's).
"""

import torch

from models.encodings.base import PositionalEncoding, register
from models.encodings.options import Option
from models.encodings.pattern import REFERENCE_FRACTION, tokens_of
from models.encodings.rope import at_least_fp32


@register
class AttentionTemperature(PositionalEncoding):
    name = "temperature"
    mechanism = "qk"
    option_rules = {
        "attn_scale": Option("number", ">= 0", lambda v: v >= 0, why="tau(m) = 1 + attn_scale log1p(floor(...))"),
        "floor_scale": Option(
            "whole", ">= 1", lambda v: v >= 1, optional=True, why="tokens per step of the temperature; null: L / 32"
        ),
    }

    def __init__(self, *, attn_scale: float = 0.1, floor_scale: int | None = None, **dims: int) -> None:
        super().__init__(**dims)
        self.attn_scale = float(attn_scale)
        self.floor_scale = tokens_of(REFERENCE_FRACTION, self.context) if floor_scale is None else int(floor_scale)

    def temperature(self, pos: torch.Tensor) -> torch.Tensor:
        """(T,) tau(m), in fp32 as the reference computes it."""
        m = pos.to(torch.float32)
        return 1.0 + self.attn_scale * torch.log1p(torch.floor((m + 1.0) / self.floor_scale))

    def prepare(self, pos: torch.Tensor) -> torch.Tensor:
        """(T, 1): each position's query scale, broadcast over the head dimension."""
        return self.temperature(super().prepare(pos))[:, None]

    def transform_qk(self, q, k, state, x, layer):
        return (at_least_fp32(q) * state).to(q.dtype), k

    def flops_per_token(self, T: int) -> float:
        """d_model * n_layer: the query scaled in every layer."""
        return float(self.d_model * self.n_layer)

    def describe(self):
        return {**super().describe(), "attn_scale": self.attn_scale, "floor_scale": self.floor_scale}
