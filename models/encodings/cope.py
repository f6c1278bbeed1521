"""CoPE: contextual position encoding (Golovneva et al., 2024; facebookresearch/RAM `context_position.py`;
SPEC section 1).

Positions are counted by content: a query i gates every earlier key j and the position of j is the number of
open gates between them,

    g_ij = sigmoid(q_i . k_j / sqrt(d))            for j <= i (0 above the diagonal)
    p_ij = min(sum_{t=j..i} g_it, npos - 1)         npos = L + 1
    z_ij = (1 - w) q_i . E[floor(p_ij)] + w q_i . E[ceil(p_ij)],    w = p_ij - floor(p_ij)
    a_ij = softmax_j((q_i . k_j + z_ij) / sqrt(d))  (position logits added before the scaling, as released)

E (d x npos, zero-initialised) is one table per layer shared by the heads. CoPE needs the whole score matrix
before the softmax, so it cannot use the fused kernel: it is the one encoding that replaces the attention.
"""

import torch
import torch.nn.functional as F
from torch import nn

from models.encodings.base import PositionalEncoding, register


@register
class CoPE(PositionalEncoding):
    name = "cope"
    mechanism = "scores"

    def __init__(self, **dims: int) -> None:
        super().__init__(**dims)
        self.npos = self.context + 1
        self.table = nn.Parameter(torch.zeros(self.n_layer, self.head_dim, self.npos))

    def prepare(self, pos: torch.Tensor) -> torch.Tensor:
        pos = super().prepare(pos)
        return torch.ones(pos.numel(), pos.numel(), dtype=torch.bool, device=pos.device).triu(1)  # future keys

    def attend(self, q, k, v, state, layer, dropout_p):
        future = state
        logits = q @ k.transpose(-1, -2)  # (B, H, T, T), unscaled
        gates = torch.sigmoid(logits * self.softmax_scale).masked_fill(future, 0.0)
        # p_ij = sum of the gates from j to i: a cumulative sum from the right (entries past i are 0)
        positions = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=self.npos - 1)
        lower = positions.floor()
        weight = positions - lower
        lower = lower.long()
        upper = (lower + 1).clamp(max=self.npos - 1)
        table_logits = q @ self.table[layer].to(q.dtype)  # (B, H, T, npos): q_i . E[p] for every integer p
        position_logits = torch.lerp(table_logits.gather(-1, lower), table_logits.gather(-1, upper), weight)
        scores = ((logits + position_logits) * self.softmax_scale).masked_fill(future, float("-inf"))
        attention = F.softmax(scores.float(), dim=-1).to(v.dtype)
        if dropout_p > 0:
            attention = F.dropout(attention, p=dropout_p)
        return attention @ v
