"""RNoPE-SWA: Cohere's Command R7B and Command A (Yang et al., 2025, arXiv 2501.18795, "Rope to Nope and Back
Again: A New Hybrid Attention Strategy"; transformers `models/cohere2/`, SPEC 1c).

    layer l is global NoPE        if (l + 1) % period == 0  (period 4: `sliding_window_pattern`)
    otherwise sliding-window RoPE at `base`, window W: query i sees keys i - W < j <= i

The reference rotates the sliding layers only (`if self.sliding_window is not None: ... apply_rotary_pos_emb`)
and lets the full-attention layers see every earlier key without position. Window 4096 at Command R7B's 128K
context (1/32); here `window_fraction` of the training context L (1/32 by default: JSB cpu 32 tokens, JSB paper
64). At 4 layers: three sliding RoPE layers and one global NoPE layer, as the reference's period; at 2 layers two
sliding RoPE layers and no global one (a model that sees 2 (W - 1) + 1 tokens back at most).

Composed (models.encodings.pattern): `rope` at `base` with the sliding window; `nope`.
"""

from models.encodings.base import register
from models.encodings.pattern import (
    FRACTION,
    MIN_TOKENS,
    MIN_TOKENS_OPTION,
    PERIOD,
    REFERENCE_FRACTION,
    Layer,
    LayerPattern,
    every_period_th,
    tokens_of,
)
from models.encodings.rope import BASE
from models.windows import AttentionWindow


@register
class RNoPESWA(LayerPattern):
    name = "rnope_swa"
    option_rules = {"period": PERIOD, "base": BASE, "window_fraction": FRACTION, "min_tokens": MIN_TOKENS_OPTION}

    def __init__(
        self,
        *,
        period: int = 4,
        base: float = 10_000.0,
        window_fraction: float = REFERENCE_FRACTION,
        min_tokens: int = MIN_TOKENS,
        **dims: int,
    ) -> None:
        self.period, self.base, self.window_fraction = int(period), float(base), float(window_fraction)
        self.min_tokens = int(min_tokens)
        super().__init__(**dims)

    def layer_plan(self) -> list[Layer]:
        window = AttentionWindow("sliding", tokens_of(self.window_fraction, self.context, self.min_tokens))
        local, global_ = Layer("rope", {"base": self.base}, window=window), Layer("nope")
        return [global_ if every_period_th(layer, self.period) else local for layer in range(self.n_layer)]
