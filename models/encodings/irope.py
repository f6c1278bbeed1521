"""iRoPE: Llama 4's layers (transformers `models/llama4/modeling_llama4.py` and `configuration_llama4.py`, SPEC 1c).

    layer l is NoPE  if (l + 1) % period == 0  (period 4, `no_rope_layer_interval`), else RoPE;
    RoPE layers:  q, k rotated at `base`, then q / rms(q) and k / rms(k) (`use_qk_norm`, applied to the rotating
                  layers only: `if self.config.use_qk_norm and self.use_rope`), and chunked attention: each query
                  sees the keys of its own chunk of C tokens, up to itself (`layer_types`: "chunked_attention" for
                  the rotating layers)
    NoPE layers:  every earlier key, no rotation, no normalisation; the query scaled by the attention temperature
                  tau(m) = 1 + attn_scale log(1 + floor((m + 1) / floor_scale))  (`attn_temperature_tuning`)

Reference values: attn_scale 0.1, floor_scale 8192, chunk 8192 (1/32 of Llama 4 Scout's 256K training context).
Here chunk and floor_scale are `chunk_fraction` and `floor_fraction` of the training context L (1/32 by default:
JSB cpu, L = 1024: 32 tokens; JSB paper, L = 2048: 64), attn_scale 0.1. A chunk boundary falls every C tokens from
the first, at every evaluation length. At 4 layers: three chunked RoPE layers and a global NoPE layer with the
temperature; at 2 layers no NoPE layer: two chunked, normalised RoPE layers.

Ablations (configs/pe/irope_no_qknorm.yaml, irope_no_temp.yaml; issue 48): `qk_norm: false` keeps the rotary
layers' q and k as rotated; `attn_scale: 0` makes tau(m) = 1, a plain NoPE layer. With both, the pattern is
chunked RoPE layers and a global NoPE layer; the window alone at the cpu presets' 4 layers is `local_global` (every
layer RoPE 10k over a sliding window of L/32: no global layer below 6 layers). `sliding_window: true`
(configs/pe/irope_sliding.yaml; issue 66) attends the rotary layers over a sliding window of C tokens instead of
chunks of C: a query at a chunk's start sees only itself in a chunked layer, C tokens in a sliding one.

Composed (models.encodings.pattern): `rope` at `base` with the chunked window and the pattern's RMS normalisation;
`temperature` (models.encodings.temperature) on the NoPE layers.
"""

from models.encodings.base import register
from models.encodings.options import Option
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
class IRoPE(LayerPattern):
    name = "irope"
    option_rules = {
        "period": PERIOD,
        "base": BASE,
        "chunk_fraction": FRACTION,
        "floor_fraction": FRACTION,
        "min_tokens": MIN_TOKENS_OPTION,
        "attn_scale": Option("number", ">= 0", lambda v: v >= 0, why="the temperature's slope (0: no temperature)"),
        "qk_norm": Option("flag", why="q and k RMS-normalised in the rotary layers (Llama 4's use_qk_norm)"),
        "sliding_window": Option("flag", why="the rotary layers see the last C tokens instead of their chunk of C"),
    }

    def __init__(
        self,
        *,
        period: int = 4,
        base: float = 10_000.0,
        chunk_fraction: float = REFERENCE_FRACTION,
        floor_fraction: float = REFERENCE_FRACTION,
        attn_scale: float = 0.1,
        min_tokens: int = MIN_TOKENS,
        qk_norm: bool = True,
        sliding_window: bool = False,
        **dims: int,
    ) -> None:
        self.period, self.base, self.min_tokens, self.qk_norm = int(period), float(base), int(min_tokens), qk_norm
        self.sliding_window = sliding_window
        self.chunk_fraction, self.floor_fraction, self.attn_scale = (
            float(chunk_fraction),
            float(floor_fraction),
            float(attn_scale),
        )
        super().__init__(**dims)

    def layer_plan(self) -> list[Layer]:
        kind = "sliding" if self.sliding_window else "chunked"
        chunk = AttentionWindow(kind, tokens_of(self.chunk_fraction, self.context, self.min_tokens))
        rope = Layer("rope", {"base": self.base}, window=chunk, qk_norm=self.qk_norm)
        floor = tokens_of(self.floor_fraction, self.context, self.min_tokens)
        nope = Layer("temperature", {"attn_scale": self.attn_scale, "floor_scale": floor})
        return [nope if every_period_th(layer, self.period) else rope for layer in range(self.n_layer)]
