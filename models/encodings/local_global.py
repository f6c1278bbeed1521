"""Local/global RoPE bases: Gemma 3 (Gemma Team, 2025, "Gemma 3 Technical Report"; transformers
`models/gemma3/`, SPEC 1c).

    layer l is global  if (l + 1) % period == 0  (period 6: five local layers to one global, `sliding_window_pattern`)
    local layers:   RoPE at `local_base` (10k, `rope_local_base_freq`), sliding window W: i - W < j <= i
    global layers:  RoPE at `global_base` (1M, `rope_theta`), every earlier key

Window 1024 at Gemma 3's 32K pre-training context (1/32); here `window_fraction` of the training context L (1/32
by default: JSB cpu 32 tokens, JSB paper 64). Only the positional part of Gemma 3's attention is taken: its q/k
RMSNorm (a learned scale, before the rotation, in every layer) and its `query_pre_attn_scalar` are not positions,
and the suite's decoder keeps softmax scale 1/sqrt(d).

Depth: the reference's rule has no global layer below 6 layers, so at 4 layers (the cpu presets) and 2 (tiny)
every layer is local and no layer sees past n_layer (W - 1) tokens; JSB paper (8 layers) has one global layer
(layer 5), Sleep-EDF paper (6) one, MAESTRO paper (12) two, HRG paper (24) four. `period` is an option: period 4
puts one global layer in a 4-layer model (its last), at 3 : 1 instead of 5 : 1.

Composed (models.encodings.pattern): `rope` twice, at the two bases, one with the sliding window.
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
class LocalGlobal(LayerPattern):
    name = "local_global"
    option_rules = {
        "period": PERIOD,
        "local_base": BASE,
        "global_base": BASE,
        "window_fraction": FRACTION,
        "min_tokens": MIN_TOKENS_OPTION,
    }

    def __init__(
        self,
        *,
        period: int = 6,
        local_base: float = 10_000.0,
        global_base: float = 1_000_000.0,
        window_fraction: float = REFERENCE_FRACTION,
        min_tokens: int = MIN_TOKENS,
        **dims: int,
    ) -> None:
        self.period, self.window_fraction, self.min_tokens = int(period), float(window_fraction), int(min_tokens)
        self.local_base, self.global_base = float(local_base), float(global_base)
        super().__init__(**dims)

    def layer_plan(self) -> list[Layer]:
        window = AttentionWindow("sliding", tokens_of(self.window_fraction, self.context, self.min_tokens))
        local = Layer("rope", {"base": self.local_base}, window=window)
        global_ = Layer("rope", {"base": self.global_base})
        return [global_ if every_period_th(layer, self.period) else local for layer in range(self.n_layer)]
