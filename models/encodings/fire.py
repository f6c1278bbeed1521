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

with on_p the units active on piece p. This is the MLP's value up to rounding and its gradient too (on_p is the
ReLU's derivative). Per layer, psi on the T lags and on the T queries' normalisers, then two paths:
- the queries below L_thr (every query in training, where L_thr starts at L) share one normaliser psi(L_thr), so
  their input depends on i - j only: f on the T lags, laid out by lag with one gather, as KERPLE's table (in
  training on the CPU, attention takes the (H, T) values themselves for those queries: `lag_bias`, models.
  biased_attention.lag_biased_attention);
- the queries past it (beyond the training context at evaluation): the (T, T) inputs by one gather and a product,
  each input's piece by binary search among the sorted switch points, and A_p z + B_p by two gathers from the
  (H, 33) tables and a multiply-add.
Both give the same value for an input (bit for bit); the gradients sum in another order. Which queries sit below
L_thr is read on the host: free on the CPU; on CUDA every query takes the second path, so that no shape depends on
a value the host would wait for. The lag table made FIRE's training step as cheap as KERPLE's (JSB cpu preset, one
thread: 1.42 s -> 1.02 s against rope10k's 0.79 s; issue 50, docs/presets.md).

FLOPs per token (`flops_per_token`): one add of the bias per visible key, head and layer, n_layer * H * (T + 1)
/ 2, as ALiBi; building the (H, T, T) term is per layer but shared by the batch, so left out.
"""

import torch
from torch import nn

from models.encodings.base import LagTerm, PositionalEncoding, causal_logits, outside_autocast, register
from models.encodings.options import Option
from models.encodings.relative_bias import LagLogits, lag_logits

EPS = 1e-6  # added to the normaliser, as in that code


def uniform(*shape: int, fan_in: int) -> torch.Tensor:
    """nn.Linear's default initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = fan_in**-0.5
    return torch.empty(*shape).uniform_(-bound, bound)


def piecewise_linear(pieces: tuple[torch.Tensor, torch.Tensor, torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
    """f_theta at every input in [0, 1] from its linear pieces (`FIRE.linear_pieces`): (H, *inputs.shape), each
    input's piece found by binary search among the switch points, then slope * z + intercept."""
    switches, slope, intercept = pieces
    piece = torch.searchsorted(switches, inputs).flatten()
    shape = (slope.shape[0], *inputs.shape)
    return torch.addcmul(intercept.index_select(1, piece).view(shape), slope.index_select(1, piece).view(shape), inputs)


@register
class FIRE(PositionalEncoding):
    name = "fire"
    takes_random_positions = False  # its lag table covers the distances of one window
    mechanism = "bias"
    revision = 3  # 2: query-blocked flash at evaluation, the gradient summed by lag; 3: lag-biased attention (base)
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
        on_lags, past, shared = self.terms(state, layer)
        T = state.lags.shape[0]
        rows = [] if on_lags is None else [on_lags.index_select(1, state.lag_index[: shared * T]).view(-1, shared, T)]
        bias = torch.cat(rows + [past], dim=1) if past is not None else rows[0]
        return state.logits.masked(bias)

    def lag_bias(self, state: LagLogits, layer, x):
        """f on the T lags for the queries below L_thr (every query in training while L_thr >= L; evaluation
        within the context), the values `logit_bias` lays out for them, with the dense rows of the queries past it;
        None where no query is below it (or off the CPU, where none counts)."""
        on_lags, past, shared = self.terms(state, layer)
        if on_lags is None:
            return None
        rest = None if past is None else (past.to(state.logits.dtype) + state.logits.mask[0, :, shared:])[None]
        return LagTerm(on_lags, shared, rest)

    def terms(self, state: LagLogits, layer: int) -> tuple[torch.Tensor | None, torch.Tensor | None, int]:
        """(f on the T lags, (H, T), for the queries below L_thr, or None if there are none; f on every (i, j) of
        the queries past it, (H, T - shared, T), unmasked, or None if there are none; how many are below it)."""
        with outside_autocast(state.lags.device):  # the MLP in fp32: bf16 would merge neighbouring distances
            threshold, distance, normaliser = self.psi(state, layer)
            pieces, T = self.linear_pieces(layer), state.lags.shape[0]
            shared = self.rows_sharing_the_threshold(state.logits.pos, threshold)
            on_lags = past = None
            if shared:  # f on the T lags once: psi(i - j) / psi(L_thr) depends on i - j only
                on_lags = piecewise_linear(pieces, distance * normaliser[0].reciprocal())  # (H, T)
            if shared < T:  # every (i, j) of the queries past L_thr: psi(i - j) / psi(i)
                index = state.lag_index[shared * T :]
                inputs = distance.index_select(0, index).view(T - shared, T) * normaliser[shared:, None].reciprocal()
                past = piecewise_linear(pieces, inputs)  # a product's backward is cheaper than a quotient's
        return on_lags, past, shared

    def psi(self, state: LagLogits, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """L_thr, psi on the T lags and each query's normaliser psi(max(L_thr, i)) + EPS, in fp32."""
        c = self.c[layer].abs()
        threshold = (self.threshold_scale[layer] * self.context).abs()
        distance = torch.log1p(c * state.lags)
        normaliser = torch.log1p(c * torch.maximum(state.logits.pos.float(), threshold)) + EPS
        return threshold, distance, normaliser

    @staticmethod
    def rows_sharing_the_threshold(pos: torch.Tensor, threshold: torch.Tensor) -> int:
        """How many leading queries (positions ascend) sit below L_thr and so share its normaliser (a query at L_thr
        itself takes the general path, where max(L_thr, i) splits its gradient as autograd does at a tie). On the CPU
        a count (reading L_thr is free); elsewhere 0, every query on the general path, so that no shape depends on a
        value the host would wait for."""
        if pos.device.type != "cpu":
            return 0
        return int((pos.float() < threshold).sum())

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
