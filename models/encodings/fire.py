"""FIRE: functional interpolation for relative positions (Li et al., 2024, "Functional Interpolation for Relative
Positions Improves Long Context Transformers", ICLR; SPEC section 1b).

    score(i, j) = q_i . k_j / sqrt(d) + f_theta(psi(i - j) / psi(max(L_thr, i)))      for j <= i
    psi(x) = log(c x + 1)

i is the query's position (0-based), f_theta: R -> R^H an MLP 1 -> 32 -> n_head with a ReLU; c > 0 and the
threshold L_thr are learned, initialised 1 and the training context L (SPEC). The input lies in [0, 1): the
distance is "interpolated" into the span the query sees, and short queries (i < L_thr) share one normaliser.

Choices the paper leaves open, taken from a public PyTorch implementation that cites it (github.com/mcleish7/
arithmetic: cramming/architectures/embeddings.py, class FIRE, used by attention.py):
- one FIRE per layer, MLP, c and L_thr alike: that code builds one module in every attention layer;
- c enters as |c|, psi(x) = log(|c| x + 1), which keeps it effectively positive;
- L_thr = |s| L with a learned multiplier s (init 1) of the fixed L: Adam moves a parameter by about the learning
  rate per step, so a raw L_thr in the thousands would hardly move while a multiplier moves by a relative amount;
- the normaliser is psi(max(L_thr, i)) + 1e-6;
- the MLP keeps nn.Linear's default initialisation, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases,
  but its output layer has no bias: a constant per head added to every logit of a query cancels in the softmax,
  so that bias would never receive a gradient (the attention equals that code's for any value of it);
- the initial c and L_thr are SPEC's (that code's defaults are c = 0.1 and L_thr = 512).
The MLP's weights take the model's weight decay, as any linear layer's; its hidden bias, c and s take none (the
default rule would decay the bias, stored as a (layer, unit) matrix; c and s are scalars setting the scale).

How it is computed, exactly and without the (T, T, 32) hidden layer (which would be 32 / H times the bias's
own memory, per layer, saved for backward): an MLP of one scalar input with ReLUs is piecewise linear in it.
Unit k switches at z = -b_k / w_k, so between consecutive switch points (at most 32 inside [0, 1]),

    f_theta(z) = A_p z + B_p,   A_p = W2 (w * on_p),   B_p = W2 (b * on_p),

with on_p the units active on piece p. Per layer: psi on the T lags and on the T queries' normalisers, the
(T, T) inputs by one gather and a product, each input's piece by binary search among the sorted switch points,
and the bias as A_p z + B_p (two gathers from the (H, 33) tables and a multiply-add). This is the MLP's value up
to rounding and its gradient too (on_p is the ReLU's derivative). Queries past L_thr (every query beyond the
training context at evaluation) take the same path, so no shape depends on the value of L_thr (no host sync);
a table on the lags, as KERPLE's, would serve only the queries below L_thr, and choosing between the two per
query would need L_thr's value on the host. Measured on CPU (T = 256, 4 heads, forward and backward) the term
costs about 3x KERPLE's, small beside the attention itself.

FLOPs per token (`flops_per_token`): one add of the bias per visible key, head and layer, n_layer * H * (T + 1)
/ 2, as ALiBi; building the (H, T, T) term is per layer but shared by the batch, so left out.
"""

import torch
from torch import nn

from models.encodings.base import PositionalEncoding, causal_logits, outside_autocast, register
from models.encodings.options import Option
from models.encodings.relative_bias import LagLogits, lag_logits

EPS = 1e-6  # added to the normaliser, as in that code


def uniform(*shape: int, fan_in: int) -> torch.Tensor:
    """nn.Linear's default initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = fan_in**-0.5
    return torch.empty(*shape).uniform_(-bound, bound)


@register
class FIRE(PositionalEncoding):
    name = "fire"
    takes_random_positions = False  # its lag table covers the distances of one window
    mechanism = "bias"
    option_rules = {"width": Option("whole", ">= 1", lambda v: v >= 1, why="the MLP's hidden units")}

    def __init__(self, *, width: int = 32, **dims: int) -> None:
        super().__init__(**dims)
        self.width = int(width)
        layers, heads = self.n_layer, self.n_head
        self.hidden_weight = nn.Parameter(uniform(layers, self.width, fan_in=1))  # w: 1 -> width
        self.hidden_bias = nn.Parameter(uniform(layers, self.width, fan_in=1))  # b
        self.out_weight = nn.Parameter(uniform(layers, heads, self.width, fan_in=self.width))  # W2: width -> H
        self.c = nn.Parameter(torch.ones(layers))
        self.threshold_scale = nn.Parameter(torch.ones(layers))  # s: L_thr = |s| L

    def prepare(self, pos: torch.Tensor) -> LagLogits:
        return lag_logits(causal_logits(super().prepare(pos)))

    def logit_bias(self, state: LagLogits, layer, x):
        with outside_autocast(state.lags.device):  # the MLP in fp32: bf16 would merge neighbouring distances
            inputs = self.interpolated_distances(state, layer)  # (T, T)
            switches, slope, intercept = self.linear_pieces(layer)
            piece = torch.searchsorted(switches, inputs).flatten()
            shape = (self.n_head, *inputs.shape)
            bias = torch.addcmul(
                intercept.index_select(1, piece).view(shape), slope.index_select(1, piece).view(shape), inputs
            )
        return state.logits.masked(bias)

    def interpolated_distances(self, state: LagLogits, layer: int) -> torch.Tensor:
        """psi(i - j) / psi(max(L_thr, i)) for every (i, j): (T, T), in [0, 1) on and below the diagonal."""
        c = self.c[layer].abs()
        threshold = (self.threshold_scale[layer] * self.context).abs()
        distance = torch.log1p(c * state.lags)  # psi on the T lags
        normaliser = torch.log1p(c * torch.maximum(state.logits.pos.float(), threshold)) + EPS
        return state.by_lag(distance) * normaliser.reciprocal()[:, None]  # a product's backward is cheaper

    def linear_pieces(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """f_theta on [0, 1] as linear pieces: the sorted switch points (width,), clamped into [0, 1], and each
        piece's slope and intercept per head, (H, width + 1); piece p spans (switch[p - 1], switch[p]]."""
        w, b = self.hidden_weight[layer], self.hidden_bias[layer]
        with torch.no_grad():  # where the units switch bounds the pieces; a ReLU's kink has no gradient
            switches = torch.where(w == 0, 0.0, -b / w).clamp(0.0, 1.0).sort().values
            bounds = torch.cat([switches.new_zeros(1), switches, switches.new_ones(1)])
            inside = (bounds[1:] + bounds[:-1]) / 2  # a point of each piece (a bound for an empty piece)
            active = (inside[:, None] * w + b > 0).to(w.dtype)  # (pieces, width)
        out_weight = self.out_weight[layer]
        return switches, out_weight @ (active * w).T, out_weight @ (active * b).T

    def flops_per_token(self, T: int) -> float:
        """n_layer * n_head * (T + 1) / 2: the add of the bias per visible key, head and layer."""
        return self.n_layer * self.n_head * (T + 1) / 2

    def optimizer_groups(self):
        return [{"params": [self.hidden_bias, self.c, self.threshold_scale], "weight_decay": 0.0}]

    def describe(self):
        return {**super().describe(), "mlp_width": self.width, "threshold_init": self.context, "c_init": 1.0}
