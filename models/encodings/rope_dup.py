"""rope_dup: the control for HD-RoPE (SPEC section 1). Plain 2-D RoPE whose d/N distinct frequencies

    theta_i = base^(-N i / d),    i = 0..d/N - 1

are each used on N/2 planes (N = 4 by default, 8 for the 8-D HD-RoPE). HD-RoPE with block size N equals this
encoding after the fixed orthogonal change of basis Q (which W_q and W_k can absorb), so a run of both tests
whether HD-RoPE's mixing matters or only its frequency allocation. Base 500k by SPEC's convention.
Computed and counted as RoPE (models.encodings.rope): 6 d_model FLOPs per token and layer.
"""

import torch

from models.encodings.base import register
from models.encodings.options import Option
from models.encodings.rope import RoPE, rope_frequencies


@register
class DuplicatedRoPE(RoPE):
    name = "rope_dup"
    option_rules = {"block": Option("whole", "in {2, 4, 8}", lambda v: v in (2, 4, 8), why="dividing the head dim")}

    def __init__(self, *, block: int = 4, base: float = 500_000.0, **dims: int) -> None:
        self.block = int(block)
        super().__init__(base=base, **dims)

    def frequencies(self) -> torch.Tensor:
        if self.block not in (2, 4, 8) or self.head_dim % self.block:
            raise ValueError(f"block must be 2, 4 or 8 and divide the head dim {self.head_dim}; got {self.block}")
        # rope_frequencies(2d/N) = base^(-N i / d) for i < d/N; band j of the d/2 uses frequency j // (N/2)
        distinct = rope_frequencies(2 * self.head_dim // self.block, self.base)
        return distinct.repeat_interleave(self.block // 2)

    def describe(self):
        return {**super().describe(), "block": self.block}
