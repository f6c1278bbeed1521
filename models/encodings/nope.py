"""NoPE: no positional encoding (Kazemnejad et al., 2023).

    score(i, j) = q_i . k_j / sqrt(d)    for j <= i

Order reaches the model only through the causal mask.
"""

from models.encodings.base import PositionalEncoding, register


@register
class NoPE(PositionalEncoding):
    name = "nope"
    mechanism = "none"
