"""NoPE every period-th layer, RoPE elsewhere: SmolLM3 (transformers `models/smollm3/configuration_smollm3.py`,
SPEC 1c), and the interleave of Llama 4's iRoPE without its other parts.

    layer l (0-based) is NoPE  if (l + 1) % period == 0,  else RoPE at `base`

The reference writes it `no_rope_layers[i] = int((i + 1) % no_rope_layer_interval != 0)` (1: the layer rotates),
interval 4: layers 3, 7, 11, ... have no position; every layer attends to every earlier key. At 4 layers (the cpu
presets) that is one NoPE layer, the last; at 2 (the tiny presets) none, and the model is rope10k's; JSB paper
(8): layers 3 and 7.

Composed (models.encodings.pattern): the RoPE layers are `rope` at `base`, the NoPE layers `nope`.
"""

from models.encodings.base import register
from models.encodings.pattern import PERIOD, Layer, LayerPattern, every_period_th
from models.encodings.rope import BASE


@register
class NoPEEvery(LayerPattern):
    name = "nope_every"
    option_rules = {"period": PERIOD, "base": BASE}

    def __init__(self, *, period: int = 4, base: float = 10_000.0, **dims: int) -> None:
        self.period, self.base = int(period), float(base)
        super().__init__(**dims)

    def layer_plan(self) -> list[Layer]:
        rope, nope = Layer("rope", {"base": self.base}), Layer("nope")
        return [nope if every_period_th(layer, self.period) else rope for layer in range(self.n_layer)]
