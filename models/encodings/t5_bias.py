"""T5's relative position bias (Raffel et al., 2020, "Exploring the Limits of Transfer Learning with a Unified
Text-to-Text Transformer", section 2.1; SPEC section 1b).

    score(i, j) = q_i . k_j / sqrt(d) + b_h[bucket(i - j)]      for j <= i

one learned scalar b_h[k] per head and bucket, the (H x 32) table shared by all layers as in T5, initialised 0.
Causal bucketing of n = i - j >= 0 with 32 buckets and max distance 128 (T5's `_relative_position_bucket` with
bidirectional=False):

    bucket(n) = n                                                        n < 16
              = min(31, 16 + floor(log(n / 16) / log(128 / 16) * 16))    n >= 16

so each distance below 16 has its own bucket, 16..127 share 16 log-spaced ones and every n >= 128 the last. T5
adds the bias to logits it never scales (its q.k has no 1/sqrt(d)); here it comes after the scaling, as SPEC
fixes for every bias encoding. The table takes no weight decay: T5 trained without any, and its entries are
logit offsets, not weights on an activation, so decay would pull every bucket toward "no positional preference"
at a rate set by the optimiser rather than by the data.

Built once per forward pass, since it is the same in every layer: `prepare` takes the buckets of the T lags
0..T-1 and the table's (H, T) values on them, which attention on the CPU takes as they are (`lag_bias`:
models.biased_attention.lag_biased_attention); laid out as the masked (1, H, T, T) term (relative_bias) once, if a
layer asks for it (`logit_bias`), and every layer gets that same tensor.

FLOPs per token (`flops_per_token`): one add of the bias per visible key, head and layer, n_layer * H * (T + 1)
/ 2, as ALiBi; the term is built once per forward pass and shared by the batch and the layers, so left out.
"""

import math

import torch
from torch import nn

from models.encodings.base import LagTerm, PositionalEncoding, causal_logits, register
from models.encodings.options import Option
from models.encodings.relative_bias import SharedLagTerm, lag_logits


def causal_bucket(lags: torch.Tensor, buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """T5's bucket of each distance n >= 0 (any dtype) as a long tensor: exact below buckets / 2, then
    log-spaced up to max_distance, the last bucket beyond."""
    exact = buckets // 2
    n = lags.float()
    spread = torch.log(n.clamp(min=exact) / exact) / math.log(max_distance / exact) * (buckets - exact)
    far = (exact + spread.long()).clamp(max=buckets - 1)  # .long() truncates: the floor of a value >= 0
    return torch.where(n < exact, n.long(), far)


@register
class T5Bias(PositionalEncoding):
    name = "t5_bias"
    takes_random_positions = False  # its lag table covers the distances of one window
    mechanism = "bias"
    revision = 3  # 2: query-blocked flash attention in evaluation; 3: lag-biased attention (models.encodings.base)
    option_rules = {  # and max_distance > buckets / 2, checked when built
        "buckets": Option("whole", "even and >= 2", lambda v: v >= 2 and v % 2 == 0),
        "max_distance": Option("whole", ">= 2", lambda v: v >= 2, why="the longest distance bucketed"),
    }

    def __init__(self, *, buckets: int = 32, max_distance: int = 128, **dims: int) -> None:
        super().__init__(**dims)
        if buckets < 2 or buckets % 2 or max_distance <= buckets // 2:
            raise ValueError(
                f"t5_bias needs an even number of buckets >= 2 and max_distance > buckets / 2, "
                f"got buckets={buckets}, max_distance={max_distance}"
            )
        self.buckets, self.max_distance = int(buckets), int(max_distance)
        self.table = nn.Parameter(torch.zeros(self.n_head, self.buckets))  # b_h[k], shared by all layers

    def prepare(self, pos: torch.Tensor) -> SharedLagTerm:
        """The bias on the lags, once per forward pass: the same in every layer."""
        lagged = lag_logits(causal_logits(super().prepare(pos)))
        bucket = causal_bucket(lagged.lags, self.buckets, self.max_distance)
        return SharedLagTerm(lagged, self.table.index_select(1, bucket))

    def logit_bias(self, state, layer, x):
        return state.dense

    def lag_bias(self, state, layer, x):
        return LagTerm(state.values, state.values.shape[-1])

    def flops_per_token(self, T: int) -> float:
        """n_layer * n_head * (T + 1) / 2: the add of the bias per visible key, head and layer."""
        return self.n_layer * self.n_head * (T + 1) / 2

    def optimizer_groups(self):
        return [{"params": [self.table], "weight_decay": 0.0}]

    def describe(self):
        return {**super().describe(), "buckets": self.buckets, "max_distance": self.max_distance, "shared": True}
