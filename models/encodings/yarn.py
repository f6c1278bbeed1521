"""YaRN at evaluation time (Peng et al., 2023, "YaRN: Efficient Context Window Extension of Large Language
Models"; SPEC section 1): a trained `rope` model evaluated at L_eval > L without further training.

With scale s = L_eval / L and r(j) = L theta_j / (2 pi) the number of turns band j makes in the training
window, NTK-by-parts interpolates between the band indices where r = beta_fast = 32 and r = beta_slow = 1:

    j_fast = floor(d ln(L / (2 pi beta_fast)) / (2 ln base)),  j_slow = ceil(d ln(L / (2 pi beta_slow)) / (2 ln base))
    gamma_j = clamp((j - j_fast) / (j_slow - j_fast), 0, 1)
    theta_j' = (1 - gamma_j) theta_j + gamma_j theta_j / s

so bands with more than 32 turns keep theta_j and bands with less than one turn are interpolated (theta_j / s).
cos and sin are multiplied by 0.1 ln(s) + 1 (so the logits by its square). s = 1 is plain RoPE.
Computed as RoPE (models.encodings.rope) with its (cos, sin) table scaled by that magnitude; FLOPs as RoPE's.
`with_yarn(model, eval_length)` returns a copy of a trained rope model with this encoding swapped in.
"""

from __future__ import annotations

import math

import torch

from models.encodings.base import register
from models.encodings.options import Option
from models.encodings.rope import RoPE, rope_frequencies

BETA_FAST, BETA_SLOW = 32.0, 1.0


def yarn_frequencies(theta: torch.Tensor, head_dim: int, base: float, context: int, scale: float) -> torch.Tensor:
    if scale <= 1.0:
        return theta.clone()

    def band_with_turns(turns: float) -> float:
        return head_dim * math.log(context / (2 * math.pi * turns)) / (2 * math.log(base))

    low = max(math.floor(band_with_turns(BETA_FAST)), 0)
    high = min(math.ceil(band_with_turns(BETA_SLOW)), head_dim - 1)  # as the reference code
    if high == low:
        high += 1e-3  # a ramp of width zero: a step at `low`
    band = torch.arange(theta.numel(), dtype=torch.float64)
    gamma = ((band - low) / (high - low)).clamp(0.0, 1.0)
    return ((1 - gamma) * theta.double() + gamma * theta.double() / scale).float()


@register
class YaRN(RoPE):
    """Evaluation only: pipelines.train refuses it (there is nothing to train that `rope` does not)."""

    name = "yarn"
    option_rules = {"scale": Option("number", ">= 1", lambda v: v >= 1, why="s = L_eval / L: YaRN extends the context")}
    evaluation_only = True

    def __init__(self, *, base: float = 10_000.0, scale: float = 1.0, **dims: int) -> None:
        if scale < 1.0:
            raise ValueError(f"YaRN extends the context: scale must be >= 1, got {scale}")
        self.scale = float(scale)
        super().__init__(base=base, **dims)

    def frequencies(self) -> torch.Tensor:
        theta = rope_frequencies(self.head_dim, self.base)
        return yarn_frequencies(theta, self.head_dim, self.base, self.context, self.scale)

    @property
    def magnitude(self) -> float:
        return 0.1 * math.log(self.scale) + 1.0

    def prepare(self, pos):
        return super().prepare(pos) * self.magnitude  # (T, d/2, 2): cos and sin, both scaled

    def describe(self):
        return {**super().describe(), "scale": self.scale}


def with_yarn(model, eval_length: int):
    """A copy of a trained `rope` GPT (models.gpt) whose encoding is YaRN at s = eval_length / L (same weights:
    RoPE and YaRN hold no parameters)."""
    if model.cfg.pe != "rope":
        raise ValueError(f"YaRN applies to a trained rope model; this one uses {model.cfg.pe!r}")
    options = {"base": model.encoding.base, "scale": max(1.0, eval_length / model.cfg.context)}
    return model.with_encoding("yarn", options)
