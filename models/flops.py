"""Model FLOPs per token of the shared decoder, with each encoding's own share.

Counted per token of a sequence of T tokens, forward pass, a multiply-add as 2 FLOPs:

    per layer   qkv projection       2 * d * 3d
                attention            2 * 2 * d * (T + 1) / 2     q.k and p.v over the (T + 1) / 2 keys a causal
                                                                 query sees on average, all heads together
                output projection    2 * d * d
                MLP                  2 * 2 * d * r d             (r = mlp_ratio)
    once        output layer         2 * d * V
    encoding    encoding.flops_per_token(T)                      its own work, all layers (see each encoding)

Norms, GELU, the softmax, residual adds and the embedding lookup are left out (they are O(d) per token, not
matmuls). Training counts 3x the forward pass (backward = 2x forward), the usual convention for model FLOPs
utilisation; it leaves out recomputation, so an encoding whose backward recomputes its forward (CoPE) does more
work than it is credited with.
"""

from __future__ import annotations

from models.encodings import PositionalEncoding
from models.gpt import GPTConfig

TRAINING_MULTIPLIER = 3


def layer_flops_per_token(cfg: GPTConfig, T: int) -> dict[str, float]:
    """Forward FLOPs per token of one decoder layer without positional encoding, by component."""
    d = cfg.d_model
    keys = (T + 1) / 2
    return {
        "qkv": 2 * d * 3 * d,
        "attention": 2 * 2 * d * keys,
        "projection": 2 * d * d,
        "mlp": 2 * 2 * d * cfg.mlp_ratio * d,
    }


def forward_flops_per_token(cfg: GPTConfig, T: int, encoding: PositionalEncoding) -> dict[str, float]:
    """Forward FLOPs per token of the whole model at sequence length T: per component and "total"."""
    layer = layer_flops_per_token(cfg, T)
    counts = {name: cfg.n_layer * flops for name, flops in layer.items()}
    counts["output"] = 2 * cfg.d_model * cfg.vocab_size
    counts["encoding"] = float(encoding.flops_per_token(T))
    counts["total"] = sum(counts.values())
    return counts


def training_flops_per_token(cfg: GPTConfig, T: int, encoding: PositionalEncoding) -> float:
    return TRAINING_MULTIPLIER * forward_flops_per_token(cfg, T, encoding)["total"]
