"""FoX: the Forgetting Transformer (Lin et al., ICLR 2025, "Forgetting Transformer: Softmax Attention with a
Forget Gate"; SPEC section 1b).

Per layer and head a forget gate reads the block's normalised input x_t, and a key loses the log of every gate
opened after it:

    f_t      = sigmoid(w_h . x_t + b_h)                      (per layer and head: w_h in R^d_model, b_h)
    F_i      = sum_{l <= i} log f_l                           (cumulative, fp32)
    score_ij = q_i . k_j / sqrt(d) + sum_{l=j+1..i} log f_l = q_i . k_j / sqrt(d) + F_i - F_j    for j <= i

No other positional signal. Initialisation as the paper's reference code (zhixuan-lin/forgetting-transformer,
src/forgetting_transformer/model/forgetting_transformer/modeling_forgetting_transformer.py): the gate is
`fgate_proj = nn.Linear(hidden_size, num_heads, bias=True)`, initialised by the model's `_init_weights` with
weights N(0, initializer_range^2), initializer_range = 0.02 (configs/model/forgetting_transformer.py), and a zero
bias: on a normalised x the gate logits start about N(0, 0.02^2 d_model), gates spread around 1/2 and F falls by
about log 2 per token; log f is `logsigmoid` of the fp32 logit. The bias takes no weight decay there
(`bias_weight_decay: False` in configs/config.py, applied by `group_parameters` in src/forgetting_transformer/
utils.py), nor here (`optimizer_groups`); w follows the default rule (decayed). The paper's "Pro" additions
(output gate, QK-norm, key/value shift) are architecture, not position, and are left out.

Option (issue 66; not the reference's default, and off unless a config sets it): `decay_time_min` and
`decay_time_max` start the gates open instead of at 1/2, with the reference's own formula for its data-independent
gates (`fgate_bias_init`, used there with `fgate_type` "bias_only" or "fixed" only; its "full" gate asserts it off):

    tau_h = exp(linspace(log decay_time_min, log decay_time_max, H))_h      (the same in every layer)
    b_h   = -log(expm1(1 / tau_h))        so that  sigmoid(b_h) = exp(-1 / tau_h)

at w . x = 0 a key then loses a factor e every tau_h tokens, where the zero bias loses a factor 2 every token.
Only b's initial value changes: w, its init and the random stream are untouched (w is drawn first; the bias draws
nothing either way). docs/presets.md, "FoX's plateau on MAESTRO (issue 66)", says why the option exists.

How it is computed: as widened q and k on the fused kernel, which is exact. The bias is a difference of a
per-query and a per-key number, so it is one more term of a dot product:

    q'_i = [q_i / sqrt(d), F_i, 1]     k'_j = [k_j, 1, -F_j]     q'_i . k'_j = q_i . k_j / sqrt(d) + F_i - F_j

and attention runs as `scaled_dot_product_attention(is_causal=True)` on q', k' with softmax scale 1 (the flash
kernel on CPU and GPU; models.gpt.fused_causal_attention zero-pads v to their width). Nothing of size T x T is
made, forward or backward: memory grows as T, as for RoPE. Autograd gives the gate's gradient: the kernel's dq'
and dk' on those columns are the row sums and minus the column sums of dS, the FlashAttention-style backward a
tiled kernel would write by hand. So the mechanism is "qk" (the contract lets transform_qk read x and change the
q/k width), not "bias".

Numerics. F is fp32 (outside autocast), and it is large: about -0.69 T at initialisation (-1400 at T = 2048),
while the softmax needs F_i - F_j to a small fraction of a unit. Under bf16 autocast the kernel takes q', k' in
bf16 but multiplies and sums in fp32; bf16 keeps 8 significant bits, so F_i is carried as three bf16 parts
(`exact_parts`: each the bf16 rounding of what the earlier ones left), whose sum is F_i to about 2^-24 relative:
q'_i = [q_i / sqrt(d), F_i parts (3), 1, 1, 1], k'_j = [k_j, 1, 1, 1, -F_j parts (3)], zero-padded to a multiple
of 8 columns (d + 8 for a head width that is one; CUDA's flash kernel pads to that anyway). In fp32 the second and
third parts are 0. The softmax scale is 1 and q carries 1/sqrt(d), so that the F columns meet no scaling whatever a
kernel does with the scale (one that scaled q or k in bf16 before the product would round the parts away; the
flash kernels and, in torch 2.13, the math fallback scale in fp32, but SDPA does not promise it). Under bf16 that
is one more rounding of q (none when d is a power of 4). fp16 autocast would overflow once |F| > 65504 (about
10^5 tokens at initialisation).

Cost, beside the gate: the q.k and P.V products at width d + 8 instead of d (+50% attention work at d = 16, +25%
at d = 32, +12.5% at d = 64). Measured on a 2-core CPU (synthetic tiny model, d = 16, fp32, one sequence;
`make throughput`'s context sweep): 0.84, 0.79, 0.78 x RoPE's training tokens/s at T = 256, 1024, 2048, with
RoPE's peak memory (growth T^0.98). The alternatives, and why not: (a) the contract's "bias" hook makes the
(B, H, T, T) term per layer (data-dependent, so neither shared by the batch nor by the layers) and sends SDPA to
its float-mask path, which skips no causal half and keeps the mask for backward: 13 x RoPE's peak memory at
T = 2048 (growth T^1.94) and, forward and backward on one thread, 0.57, 0.32, 0.15 x RoPE's tokens/s at
T = 256, 1024, 2048 (this form: 0.82, 0.85, 0.75); (b) a tiled kernel like CoPE's (FlashAttention with F_i - F_j
added per tile and a hand-written backward, dF = rowsum(dS) - colsum(dS)) would need x in `attend`, a contract
change, and would run as Python-level tiles of PyTorch ops, slower than the fused kernel that this form keeps.

FLOPs per token and layer (`flops_per_token`): the gate projection 2 d_model H, its bias H, the log-sigmoid 2 H
(sigmoid and log), the cumulative sum H, and per visible key the difference F_i - F_j and its addition to the
score, 2 H (T + 1) / 2. The widened q.k and P.V are how the bias is computed, not model FLOPs (as CoPE's
recomputation), and are not counted.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from models.encodings.base import PositionalEncoding, outside_autocast, register
from models.encodings.options import Option
from models.encodings.rope import at_least_fp32

INIT_STD = 0.02  # initializer_range of the reference code: gate weights N(0, 0.02^2), bias 0
PARTS = 3  # bf16 parts that carry an fp32 F (8 significant bits each)
WIDTH_MULTIPLE = 8  # q', k' padded to a multiple of 8 columns: the width the flash kernels take


@register
class FoX(PositionalEncoding):
    name = "fox"
    takes_random_positions = False  # the forget gates carry the order, not the positions given
    mechanism = "qk"
    option_rules = {
        "decay_time_min": Option("number", "> 0", lambda v: v > 0, optional=True, why="tokens per factor e at init"),
        "decay_time_max": Option("number", "> 0", lambda v: v > 0, optional=True, why="tokens per factor e at init"),
    }

    def __init__(self, *, decay_time_min: float | None = None, decay_time_max: float | None = None, **dims: int):
        super().__init__(**dims)
        self.gate_weight = nn.Parameter(torch.randn(self.n_layer, self.n_head, self.d_model) * INIT_STD)  # w_h
        self.decay_times = decay_times(decay_time_min, decay_time_max, self.n_head)
        self.gate_bias = nn.Parameter(torch.zeros(self.n_layer, self.n_head))  # b_h
        if self.decay_times is not None:
            with torch.no_grad():
                self.gate_bias.copy_(bias_of_decay_time(self.decay_times).expand(self.n_layer, -1))
        self.qk_width = math.ceil((self.head_dim + 2 * PARTS) / WIDTH_MULTIPLE) * WIDTH_MULTIPLE

    @property
    def softmax_scale(self) -> float:
        return 1.0  # q carries 1/sqrt(d), so that no kernel rescales the F columns (module docstring)

    def cumulative_log_forget(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        """F_i = sum_{l <= i} log f_l for every head: (B, H, T), in fp32 (fp64 for an fp64 model)."""
        with outside_autocast(x.device):  # autocast would run the projection in bf16
            weight, bias = at_least_fp32(self.gate_weight[layer]), at_least_fp32(self.gate_bias[layer])
            logits = at_least_fp32(x) @ weight.T + bias  # (B, T, H): one projection for all heads
            return F.logsigmoid(logits).transpose(1, 2).cumsum(-1)

    def transform_qk(self, q, k, state, x, layer):
        cumulative = exact_parts(self.cumulative_log_forget(x, layer), q.dtype)  # (B, H, T, PARTS)
        ones = torch.ones_like(cumulative)
        padding = q.new_zeros(*q.shape[:-1], self.qk_width - self.head_dim - 2 * PARTS)
        q2 = torch.cat((q * self.head_dim**-0.5, cumulative, ones, padding), dim=-1)
        k2 = torch.cat((k, ones, -cumulative, padding), dim=-1)  # negation is exact: the parts of -F
        return q2, k2

    def flops_per_token(self, T: int) -> float:
        """n_layer * H * (2 d_model + 4 + (T + 1)): gate projection, bias, log-sigmoid, cumulative sum, and the
        difference F_i - F_j and its addition per visible key."""
        return float(self.n_layer * self.n_head * (2 * self.d_model + 4 + (T + 1)))

    def optimizer_groups(self):
        return [{"params": [self.gate_bias], "weight_decay": 0.0}]

    def describe(self):
        gate = "sigmoid(w_h . x + b_h) per layer and head"
        described = {**super().describe(), "qk_width": self.qk_width, "gate": gate}
        if self.decay_times is not None:  # said only when set: the reference's runs describe themselves as before
            described["gate_bias_init"] = "decay times " + ", ".join(f"{t:.4g}" for t in self.decay_times.tolist())
        return described


def decay_times(low: float | None, high: float | None, n_head: int) -> torch.Tensor | None:
    """tau_h, log-spaced from `low` to `high` over the heads (the reference's `fgate_bias_init`), float64; None
    when neither is set (the reference's zero bias)."""
    if low is None and high is None:
        return None
    if low is None or high is None:
        raise ValueError(f"encoding 'fox': decay_time_min={low}, decay_time_max={high} (set both, or neither)")
    if low > high:
        raise ValueError(f"encoding 'fox': decay_time_min={low} > decay_time_max={high}")
    return torch.linspace(math.log(low), math.log(high), n_head, dtype=torch.float64).exp()


def bias_of_decay_time(tau: torch.Tensor) -> torch.Tensor:
    """b = -log(expm1(1 / tau)): the bias whose gate sigmoid(b) is exp(-1 / tau)."""
    return -torch.log(torch.expm1(1 / tau))


def exact_parts(value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """value (..., ) in fp32 or fp64 -> (..., PARTS) in `dtype` whose sum is value to fp32 precision: each part is
    the rounding of what the earlier ones left. Only the first part carries the gradient (every part stands for
    the same value in the score, so each receives the same gradient; the rest are rounding corrections)."""
    parts = [value.to(dtype)]
    rest = value.detach()
    for _ in range(PARTS - 1):
        rest = rest - parts[-1].detach().to(rest.dtype)
        parts.append(rest.to(dtype))
    return torch.stack(parts, dim=-1)
