"""Layer patterns: which layers get positions, with what encoding, over what window (SPEC section 1c).

A pattern is a per-layer list: layer l has an encoding (a registry name and its options), an attention window
(models.windows; None: every earlier key) and, for Llama 4's RoPE layers, an RMS normalisation of q and k after
the encoding. Each subclass states its list in `layer_plan` (one file per pattern: nope_every, irope, rnope_swa,
local_global); this class builds each distinct (encoding, options) once from the registry, so RoPE is the one
`models.encodings.rope` in every pattern, and dispatches:

    prepare(pos)                 each distinct encoding's per-forward state, once (shared by its layers)
    transform_qk(..., layer)     that layer's encoding's hook (a "none" layer passes q and k through), then
                                 q / rms(q) and k / rms(k) where the layer normalises them
    attention_window(layer)      that layer's window

so a pattern is itself one "qk" encoding of the suite's contract. Each layer's encoding must be "none" or "qk",
trained (not YaRN), without windows of its own, at the pattern's softmax scale 1/sqrt(d), and not itself a
pattern: anything else is refused by name when the pattern is built.

Windows and the temperature's floor follow the training context by one rule (SPEC 1c): a length that the
reference states in tokens becomes the same fraction of L, never under MIN_TOKENS nor over L,
`tokens_of(fraction, L) = min(L, max(MIN_TOKENS, round(fraction L)))`. The references' windows are 1/32 of the
context they were trained at (Gemma 3: 1024 of 32K; Llama 4 Scout: 8192 of 256K; Command R7B: 4096 of 128K), so
each pattern's default fraction is 1/32: JSB cpu (L = 1024) 32 tokens, JSB paper (L = 2048) 64. The floor keeps a
window a window where L/32 would leave a handful of tokens or the query alone (the synthetic presets' L = 32: 1
token, every windowed layer a model without context): 8 tokens, the smallest window any published study's pattern
trained at (JSB and MAESTRO at the tiny preset, L = 256), two time steps of JSB's four voices; at L = 32 a windowed
layer then sees a quarter of the context, its global or NoPE layers all of it. The floor is the option `min_tokens`
of each windowed pattern (8 unless a config says otherwise: the tests that check a window's reach by hand on a few
tokens set it to 1).

Randomized positions are refused: a window counts tokens and a rotary layer positions, which random positions
would pull apart. YaRN is never applied (models.encodings.yarn.with_yarn takes a `rope` model only): the
patterns' windows, NoPE layers and temperature are how their references reach past the training length.

RMS normalisation (Llama 4's `Llama4TextL2Norm`, despite its name): x / sqrt(mean(x^2) + eps) over the head's
d components, eps = 1e-5 (its `rms_norm_eps`), computed in fp32 at least, no learned scale.

FLOPs (`flops_per_token`): each layer's encoding's own per-layer share; 3 FLOPs per element of q and k for an RMS
normalisation (square, sum, multiply); and a windowed layer's attention over fewer keys, as a negative share:
4 d_model (mean_keys(T) - (T + 1) / 2) per layer (models.flops counts q.k and p.v over (T + 1) / 2 keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from models.encodings.base import WINDOWED_MECHANISMS, PositionalEncoding, build_encoding
from models.encodings.options import Option
from models.encodings.rope import at_least_fp32
from models.windows import AttentionWindow

REFERENCE_FRACTION = 1 / 32  # window / training context at the references' scale (module docstring, SPEC 1c)
MIN_TOKENS = 8  # the scale rule's floor: no window, chunk or temperature floor is shorter (module docstring)
QK_NORM_EPS = 1e-5  # Llama 4's rms_norm_eps, which its Llama4TextL2Norm takes
FRACTION = Option(
    "number", "in (0, 1]", lambda v: 0 < v <= 1, why="a length as a fraction of the training context L (SPEC 1c)"
)
PERIOD = Option("whole", ">= 2", lambda v: v >= 2, why="every period-th layer (l + 1 = period, 2 period, ...)")
MIN_TOKENS_OPTION = Option("whole", ">= 1", lambda v: v >= 1, why="the scale rule's floor in tokens (SPEC 1c)")


def tokens_of(fraction: float, context: int, floor: int = MIN_TOKENS) -> int:
    """A length stated as a fraction of the training context, in tokens: round(fraction * L), at least `floor`
    (MIN_TOKENS; a pattern's option `min_tokens`) and at most L (the module docstring)."""
    return min(context, max(floor, round(fraction * context)))


def every_period_th(layer: int, period: int) -> bool:
    """True for layers 3, 7, 11, ... at period 4: the references' `(layer_idx + 1) % interval == 0`."""
    return (layer + 1) % period == 0


@dataclass(frozen=True)
class Layer:
    """One layer of a pattern: its encoding (registry name and options), its window, whether q and k are
    RMS-normalised after the encoding."""

    encoding: str
    options: dict[str, Any] = field(default_factory=dict)
    window: AttentionWindow | None = None
    qk_norm: bool = False

    @property
    def key(self) -> tuple:
        """Layers with the same encoding and options share one built encoding."""
        return self.encoding, tuple(sorted(self.options.items()))

    def label(self) -> str:
        """'rope(base=10000)', 'rope(base=10000) sliding 32', 'rope(base=10000) chunked 32 +qk-norm', 'nope'."""
        options = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.options.items())
        words = [f"{self.encoding}({options})" if options else self.encoding]
        words += [str(self.window)] if self.window else []
        words += ["+qk-norm"] if self.qk_norm else []
        return " ".join(words)


def rms_normalised(x: torch.Tensor) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) over the last dimension, in fp32 at least; returns x's dtype."""
    wide = at_least_fp32(x)
    return (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + QK_NORM_EPS)).to(x.dtype)


class LayerPattern(PositionalEncoding):
    """Base class of the patterns (module docstring). Subclasses set `name`, their options and `layer_plan`."""

    mechanism = "qk"
    takes_random_positions = False  # windows count tokens, rotary layers positions (module docstring)

    def __init__(self, **dims: int) -> None:
        super().__init__(**dims)
        self.plan = tuple(self.layer_plan())
        if len(self.plan) != self.n_layer or not all(isinstance(layer, Layer) for layer in self.plan):
            raise ValueError(f"{self.name}: layer_plan must give one Layer per layer ({self.n_layer}), got {self.plan}")
        index: dict[tuple, int] = {}
        parts = []
        for number, layer in enumerate(self.plan):
            if layer.key not in index:
                index[layer.key] = len(parts)
                parts.append(self._part(number, layer))
        self.parts = nn.ModuleList(parts)
        self.part_of_layer = tuple(index[layer.key] for layer in self.plan)

    def layer_plan(self) -> list[Layer]:
        """One Layer per layer, 0 .. n_layer - 1 (the model's sizes are set: self.n_layer, self.context, ...)."""
        raise NotImplementedError

    def _part(self, number: int, layer: Layer) -> PositionalEncoding:
        dims = dict(n_layer=self.n_layer, n_head=self.n_head, d_model=self.d_model, context=self.context)
        part = build_encoding(layer.encoding, dict(layer.options), **dims)
        refusal = None
        if isinstance(part, LayerPattern):
            refusal = "is itself a layer pattern"
        elif part.mechanism not in WINDOWED_MECHANISMS:
            refusal = f"has mechanism {part.mechanism!r}; a layer of a pattern is one of {list(WINDOWED_MECHANISMS)}"
        elif part.evaluation_only:
            refusal = "is applied at evaluation only"
        elif any(part.attention_window(layer) is not None for layer in range(self.n_layer)):
            refusal = "has attention windows of its own; the pattern sets each layer's window"
        elif part.softmax_scale != self.softmax_scale:
            refusal = f"attends at softmax scale {part.softmax_scale}, the pattern at {self.softmax_scale}"
        if refusal:
            raise ValueError(f"{self.name}: layer {number}'s encoding {layer.encoding!r} {refusal}")
        return part

    def prepare(self, pos: torch.Tensor) -> tuple:
        positions = super().prepare(pos)
        return tuple(part.prepare(positions) for part in self.parts)

    def transform_qk(self, q, k, state, x, layer):
        index = self.part_of_layer[layer]
        part = self.parts[index]
        if part.mechanism == "qk":
            q, k = part.transform_qk(q, k, state[index], x, layer)
        if self.plan[layer].qk_norm:
            q, k = rms_normalised(q), rms_normalised(k)
        return q, k

    def attention_window(self, layer: int) -> AttentionWindow | None:
        return self.plan[layer].window

    def flops_per_token(self, T: int) -> float:
        total = 0.0
        for layer, index in zip(self.plan, self.part_of_layer, strict=True):
            part = self.parts[index]
            total += part.flops_per_token(T) / part.n_layer  # the encoding's share in one layer
            if layer.qk_norm:
                total += 3.0 * 2 * self.d_model
            if layer.window is not None:
                total += 4.0 * self.d_model * (layer.window.mean_keys(T) - (T + 1) / 2)
        return total

    def optimizer_groups(self) -> list[dict[str, Any]]:
        return [group for part in self.parts for group in part.optimizer_groups()]

    def describe(self) -> dict[str, Any]:
        """The base description, `layers`: one label per layer (Layer.label), and `pattern`: the same, run-length
        encoded ('3 x rope(base=10000) sliding 32, nope')."""
        labels = [layer.label() for layer in self.plan]
        runs: list[list] = []
        for label in labels:
            if runs and runs[-1][1] == label:
                runs[-1][0] += 1
            else:
                runs.append([1, label])
        pattern = ", ".join(label if count == 1 else f"{count} x {label}" for count, label in runs)
        return {**super().describe(), "layers": labels, "pattern": pattern}
