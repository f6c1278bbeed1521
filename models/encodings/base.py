"""The contract every positional encoding fulfils, and the registry that finds them.

An encoding is exactly one mechanism, declared by its class attribute `mechanism`, and it overrides
exactly the hook that belongs to that mechanism (checked when the class is defined):

| mechanism   | hook            | what it does                                                              |
|-------------|-----------------|---------------------------------------------------------------------------|
| "none"      | (none)          | no positional signal; the causal mask is the only order information       |
| "embedding" | `embed`         | adds a positional vector to the token embeddings                          |
| "qk"        | `transform_qk`  | rewrites q and k per position (may read the block's normalised input and  |
|             |                 | may change the q/k width); attention stays fused                          |
| "bias"      | `logit_bias`    | an additive (heads, T, T) term on the scaled attention logits             |
| "scores"    | `attend`        | replaces the attention computation entirely (it gets q, k, v)             |

`prepare(pos)` runs once per forward pass, so per-position tables (cos/sin, biases) are built once and
shared by every layer. Because the hook set is fixed per mechanism, a model can never carry two
positional mechanisms at once (say a learned table left on beside RoPE).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import pkgutil
from typing import Any, ClassVar

import torch
from torch import nn

HOOK_OF_MECHANISM = {
    "none": None,
    "embedding": "embed",
    "qk": "transform_qk",
    "bias": "logit_bias",
    "scores": "attend",
}

_REGISTRY: dict[str, type[PositionalEncoding]] = {}


def outside_autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """A region kept in the tensors' own precision under mixed-precision autocast (angle math in fp32). Devices
    without autocast (meta, used to check that a forward pass makes no tensor on the wrong device) need none."""
    if device.type in ("cpu", "cuda", "mps", "xpu"):
        return torch.autocast(device_type=device.type, enabled=False)
    return contextlib.nullcontext()


class PositionalEncoding(nn.Module):
    """Base class. Subclasses set `name` and `mechanism` and override that mechanism's hook."""

    name: ClassVar[str]
    mechanism: ClassVar[str]
    evaluation_only: ClassVar[bool] = False  # applied to a trained model at evaluation (YaRN), never trained

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.mechanism not in HOOK_OF_MECHANISM:
            raise TypeError(f"{cls.__name__}: mechanism {cls.mechanism!r} is not one of {list(HOOK_OF_MECHANISM)}")
        overridden = [
            hook
            for hook in HOOK_OF_MECHANISM.values()
            if hook is not None and getattr(cls, hook) is not getattr(PositionalEncoding, hook)
        ]
        expected = [HOOK_OF_MECHANISM[cls.mechanism]] if HOOK_OF_MECHANISM[cls.mechanism] else []
        if overridden != expected:
            raise TypeError(
                f"{cls.__name__} declares mechanism {cls.mechanism!r} but overrides hooks {overridden}; "
                f"an encoding is exactly one mechanism and must override exactly {expected}"
            )

    def __init__(self, n_layer: int, n_head: int, d_model: int, context: int) -> None:
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model={d_model} is not divisible by n_head={n_head}")
        self.n_layer, self.n_head, self.d_model, self.context = n_layer, n_head, d_model, context
        self.head_dim = d_model // n_head

    # ---- shared by all mechanisms -------------------------------------------------------------------
    @property
    def fused(self) -> bool:
        """True when attention runs as `scaled_dot_product_attention(is_causal=True)` (FlashAttention on GPU)."""
        return self.mechanism in ("none", "embedding", "qk")

    @property
    def max_positions(self) -> int | None:
        """Longest sequence the encoding can represent, or None for no limit."""
        return None

    @property
    def softmax_scale(self) -> float:
        return 1.0 / math.sqrt(self.head_dim)

    def prepare(self, pos: torch.Tensor) -> Any:
        """Per-forward state shared by all layers; `pos` is a (T,) long tensor of the positions 0..T-1. An encoding
        with `max_positions` refuses a longer sequence by its shape (reading the positions' values would wait for
        the device every step)."""
        limit = self.max_positions
        if limit is not None and pos.shape[-1] > limit:
            raise ValueError(
                f"encoding {self.name!r} represents positions 0..{limit - 1}; "
                f"asked for positions up to {pos.shape[-1] - 1}"
            )
        return pos

    def flops_per_token(self, T: int) -> float:
        """Forward FLOPs per token that this encoding adds to the whole model (all layers) on sequences of T
        tokens, on top of the plain decoder of `models.flops` (causal attention at width head_dim, no positional
        signal). Conventions: a multiply-add is 2 FLOPs, any other elementwise op (cos, exp, sigmoid, a compare
        included) is 1; a causal query attends (T + 1) / 2 keys on average. Training counts 3x forward."""
        return 0.0

    def optimizer_groups(self) -> list[dict[str, Any]]:
        """Parameter groups the encoding wants for itself (each a dict with "params" and options such as
        "weight_decay" or "clip_norm"). Parameters not claimed here follow the default rule."""
        return []

    def describe(self) -> dict[str, Any]:
        """What a manifest and `pipelines.roster` report about this encoding."""
        n_total = sum(p.numel() for p in self.parameters())
        return {
            "name": self.name,
            "mechanism": self.mechanism,
            "fused_attention": self.fused,
            "parameters": n_total,
            "parameters_per_layer": n_total / self.n_layer,
        }

    # ---- hooks (override exactly one, the one of `mechanism`) ---------------------------------------
    def embed(self, x: torch.Tensor, state: Any) -> torch.Tensor:
        raise NotImplementedError

    def transform_qk(
        self, q: torch.Tensor, k: torch.Tensor, state: Any, x: torch.Tensor, layer: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q, k: (B, H, T, D); x: (B, T, d_model), the block's normalised input. Returns new q, k."""
        raise NotImplementedError

    def logit_bias(self, state: Any, layer: int) -> torch.Tensor:
        """(H, T, T) term added to the logits after the softmax scaling; the model adds the causal mask."""
        raise NotImplementedError

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, state: Any, layer: int, dropout_p: float
    ) -> torch.Tensor:
        """Full causal attention; returns (B, H, T, Dv)."""
        raise NotImplementedError


def register(cls: type[PositionalEncoding]) -> type[PositionalEncoding]:
    """Class decorator: make an encoding available under `cls.name`."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"two encodings are named {cls.name!r}: {_REGISTRY[cls.name]} and {cls}")
    _REGISTRY[cls.name] = cls
    return cls


def _discover() -> None:
    """Import every module of this package once, so a new encoding file needs no other edit."""
    package = importlib.import_module(__package__)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{__package__}.{module.name}")


def available() -> list[str]:
    _discover()
    return sorted(_REGISTRY)


def encoding_class(name: str) -> type[PositionalEncoding]:
    _discover()
    if name not in _REGISTRY:
        raise ValueError(f"unknown positional encoding {name!r}; valid names: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def build_encoding(
    name: str, options: dict[str, Any], *, n_layer: int, n_head: int, d_model: int, context: int
) -> PositionalEncoding:
    cls = encoding_class(name)
    try:
        return cls(n_layer=n_layer, n_head=n_head, d_model=d_model, context=context, **options)
    except TypeError as err:
        raise ValueError(f"bad options {options} for encoding {name!r}: {err}") from err
