"""The shared decoder: a nanoGPT-style causal transformer that trains every positional encoding.

Read top to bottom: config -> attention -> MLP -> block -> model. The positional encoding is one object
(`models.encodings`) consulted at its hook point, layer by layer: each layer's hook call carries its index, and
each layer attends within the window the encoding gives it (`attention_window`: every earlier key unless a layer
pattern says otherwise). The model itself carries no positional signal of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from models.biased_attention import biased_attention, lag_biased_attention, tiled_causal_attention, tiled_route
from models.encodings import PositionalEncoding, build_encoding
from models.encodings.base import attention_dtype
from models.windows import AttentionWindow, visible_keys, windowed_attention


@dataclass
class GPTConfig:
    vocab_size: int
    context: int  # training context L (tokens); encodings derive their band split etc. from it
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    dropout: float = 0.0
    bias: bool = False
    norm: str = "layernorm"  # "layernorm" | "rmsnorm"
    tie_embeddings: bool = True
    mlp_ratio: int = 4
    pe: str = "rope"  # the positional encoding's implementation: its name in the models.encodings registry
    pe_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.norm not in ("layernorm", "rmsnorm"):
            raise ValueError(f"norm must be 'layernorm' or 'rmsnorm', got {self.norm!r}")
        sizes = {"vocab_size": 1, "context": 2, "n_layer": 1, "n_head": 1, "d_model": 1, "mlp_ratio": 1}
        small = [f"{name}={getattr(self, name)} (must be >= {least})" for name, least in sizes.items()
                 if not getattr(self, name) >= least]  # fmt: skip
        if small:
            raise ValueError(f"model config: {'; '.join(small)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"model config: dropout={self.dropout} (must be in [0, 1))")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_head={self.n_head}")
        self.check_encoding()

    def check_encoding(self) -> None:
        """Build the encoding once and drop it, so that its options (types, ranges, and what depends on the model's
        sizes) are refused by name with the config, before a run writes anything; on the CPU, with the random
        stream put back as it was (building draws initial weights)."""
        with torch.random.fork_rng(devices=[]), torch.device("cpu"):
            build_encoding(
                self.pe, dict(self.pe_options), n_layer=self.n_layer, n_head=self.n_head, d_model=self.d_model,
                context=self.context,
            )  # fmt: skip


def make_norm(cfg: GPTConfig) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return nn.RMSNorm(cfg.d_model)
    return nn.LayerNorm(cfg.d_model, bias=cfg.bias)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig, layer: int, encoding: PositionalEncoding) -> None:
        super().__init__()
        self.layer = layer
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.dropout = cfg.dropout
        self.resid_dropout = nn.Dropout(cfg.dropout)
        # Held in a list so the encoding's parameters are registered once, on the model, not per layer.
        self._encoding = [encoding]
        self.window = encoding.attention_window(layer)  # None: every earlier key (models.windows)

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of the block's normalised input x (B, T, d_model), each (B, H, T, head_dim)."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)
        return q, k, v

    def forward(self, x: torch.Tensor, state: Any) -> torch.Tensor:
        B, T, _ = x.shape
        encoding = self._encoding[0]
        q, k, v = self.heads(x)
        dropout_p = self.dropout if self.training else 0.0
        if encoding.mechanism == "scores":
            y = encoding.attend(q, k, v, state, self.layer, dropout_p)
        else:
            if encoding.mechanism == "qk":
                q, k = encoding.transform_qk(q, k, state, x, self.layer)
            if encoding.mechanism == "bias":
                lags = encoding.lag_bias(state, self.layer, x) if tiled_route(q, dropout_p) else None
                if lags is not None and lags.requires_grad:  # a learned term of the distance alone, in training:
                    lags = lags.to(attention_dtype(q.device))  # in the attention dtype, as `logit_bias`'s term
                    y = lag_biased_attention(q, k, v, lags, encoding.softmax_scale)
                else:  # the causal mask comes with it; in the attention dtype (`.to` copies only for fp64)
                    logits_term = encoding.logit_bias(state, self.layer, x).to(q.dtype)
                    y = biased_attention(q, k, v, logits_term, dropout_p, encoding.softmax_scale)
            elif encoding.tiled_training and tiled_route(q, dropout_p):  # never windowed: checked at its class
                y = tiled_causal_attention(q, k, v, encoding.softmax_scale)  # PoPE: P.V at v's width
            else:
                y = fused_causal_attention(q, k, v, dropout_p, encoding.softmax_scale, self.window)
        y = y.transpose(1, 2).reshape(B, T, -1)
        return self.resid_dropout(self.proj(y))

    def attention_weights(self, x: torch.Tensor, state: Any) -> torch.Tensor:
        """The softmax weights (B, H, T, T) this layer attends with (row i: query i over keys j), which the fused
        kernels never return, written out in forward's order: q, k (after `transform_qk`: rotated, or widened by
        PoPE and FoX) -> q.k^T times the encoding's softmax scale -> plus `logit_bias` (the causal mask included),
        or the causal mask (within the layer's window) -> softmax. A "scores" encoding computes its own
        (`attention_weights` beside `attend`). Without dropout: the weights of a model in eval mode. Memory: one
        (B, H, T, T) tensor."""
        encoding = self._encoding[0]
        q, k, _ = self.heads(x)
        if encoding.mechanism == "scores":
            return encoding.attention_weights(q, k, state, self.layer)
        if encoding.mechanism == "qk":
            q, k = encoding.transform_qk(q, k, state, x, self.layer)
        logits = q @ k.transpose(-2, -1) * encoding.softmax_scale
        if encoding.mechanism == "bias":
            logits = logits + encoding.logit_bias(state, self.layer, x).to(q.dtype)
        else:
            logits = logits.masked_fill(~visible_keys(self.window, q.shape[-2], q.device), float("-inf"))
        return torch.softmax(logits, dim=-1)


def fused_causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout_p: float,
    scale: float,
    window: AttentionWindow | None = None,
) -> torch.Tensor:
    """`scaled_dot_product_attention(is_causal=True)`, or within a layer's window (models.windows: the fused kernels
    on blocks of the sequence, FlexAttention on CUDA). When an encoding widens q and k (PoPE: 2 x head_dim), v is
    zero-padded to their width and the padding sliced off the output: the flash kernels (CPU and GPU) need one
    head width for q, k and v, and without them SDPA falls back to kernels that are several times slower (on
    CPU the math kernel, which materialises the T x T scores). The zero columns cost only the extra P.V work, which
    PoPE's training on the CPU avoids in tiles (`tiled_training`: models.biased_attention.tiled_causal_attention)."""
    width = v.shape[-1]
    if q.shape[-1] != width:
        v = F.pad(v, (0, q.shape[-1] - width))
    if window is None:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout_p, scale=scale)
    else:
        y = windowed_attention(q, k, v, window, dropout_p, scale)
    return y[..., :width]


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    """Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: GPTConfig, layer: int, encoding: PositionalEncoding) -> None:
        super().__init__()
        self.norm_attn = make_norm(cfg)
        self.attn = CausalSelfAttention(cfg, layer, encoding)
        self.norm_mlp = make_norm(cfg)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, state: Any) -> torch.Tensor:
        x = x + self.attn(self.norm_attn(x), state)
        return x + self.mlp(self.norm_mlp(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoding = build_encoding(
            cfg.pe,
            dict(cfg.pe_options),
            n_layer=cfg.n_layer,
            n_head=cfg.n_head,
            d_model=cfg.d_model,
            context=cfg.context,
        )
        self.token_embedding = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.embedding_dropout = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg, layer, self.encoding) for layer in range(cfg.n_layer))
        self.norm_final = make_norm(cfg)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.head.weight = self.token_embedding.weight
        self._init_gpt2()

    def _init_gpt2(self) -> None:
        """GPT-2 init: N(0, 0.02) for weights, zero biases, residual projections scaled by 1/sqrt(2 n_layer).
        The encoding's own parameters keep the initialisation its paper specifies."""
        for name, module in self.named_modules():
            if name.startswith("encoding"):
                continue
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
        for name, param in self.named_parameters():
            if name.endswith("proj.weight") and not name.startswith("encoding"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * self.cfg.n_layer))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def with_encoding(self, pe: str, pe_options: dict[str, Any]) -> GPT:
        """A copy with the same weights and another parameter-free encoding (YaRN at evaluation), on the same
        device and in the same train/eval mode."""
        other = GPT(replace(self.cfg, pe=pe, pe_options=pe_options))
        if any(True for _ in other.encoding.parameters()) or any(True for _ in self.encoding.parameters()):
            raise ValueError(f"swapping {self.cfg.pe!r} for {pe!r}: only encodings without parameters carry over")
        other.load_state_dict(self.state_dict())
        return other.to(next(self.parameters()).device).train(self.training)

    def _embed(self, tokens: torch.Tensor, pos: torch.Tensor | None = None) -> tuple[Any, torch.Tensor]:
        """The encoding's per-forward state and the first block's input (B, T, d_model). `pos` defaults to 0..T-1."""
        if pos is None:
            pos = torch.arange(tokens.shape[1], device=tokens.device)
        state = self.encoding.prepare(pos)
        x = self.token_embedding(tokens)
        if self.encoding.mechanism == "embedding":
            x = self.encoding.embed(x, state)
        return state, self.embedding_dropout(x)

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        """tokens: (B, T) -> logits (B, T, vocab). `pos` defaults to 0..T-1."""
        state, x = self._embed(tokens, pos)
        for block in self.blocks:
            x = block(x, state)
        return self.head(self.norm_final(x))

    # ---- looking inside (pipelines.inspection): what forward computes, layer by layer, without gradients ----------
    @torch.no_grad()
    def layer_inputs(self, tokens: torch.Tensor, pos: torch.Tensor | None = None) -> tuple[Any, list[torch.Tensor]]:
        """The encoding's per-forward state and each layer's normalised attention input x (B, T, d_model): what
        the encoding's hooks read (DaRoPE's coordinates and FoX's gates come from it)."""
        state, x = self._embed(tokens, pos)
        inputs = []
        for block in self.blocks:
            inputs.append(block.norm_attn(x))
            x = block(x, state)
        return state, inputs

    @torch.no_grad()
    def attention_weights(self, tokens: torch.Tensor, pos: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Each layer's softmax attention weights (B, H, T, T) for `tokens` (CausalSelfAttention.attention_weights);
        a model in eval mode attends with exactly these. Memory: n_layer (B, H, T, T) tensors."""
        state, inputs = self.layer_inputs(tokens, pos)
        return [block.attn.attention_weights(x, state) for block, x in zip(self.blocks, inputs, strict=True)]
