"""FoPE: Fourier Position Embedding (Hua et al., 2024, arXiv 2412.17739, "Fourier Position Embedding: Enhancing
Attention's Periodic Extension for Length Generalization"; vLLM `model_executor/layers/rotary_embedding/fope.py`;
the authors' training code, github.com/TsinghuaC3I/Fourier-Position-Embedding `olmo/model.py`; SPEC 1c).

RoPE's bands theta_j = base^(-2j/d) that do not turn once in the training window (theta_j < 2 pi / L: SPEC 1's
slow bands) are dropped and their dimensions pass through unrotated. Over the K fast bands each output band is a
Fourier series: in layer l and head h, at position m, band i < K takes

    c_i(m) = sum_{j<K} A[l, h, j, i] cos(m theta_j),        s_i(m) = sum_{j<K} B[l, h, j, i] sin(m theta_j)

and the pair (x_{2i}, x_{2i+1}) of q and of k becomes (x_{2i} c_i - x_{2i+1} s_i, x_{2i} s_i + x_{2i+1} c_i):
RoPE's rotation with (cos, sin) replaced by (c, s), no longer on the unit circle. Bands i >= K: c = 1, s = 0.
With A = B = I it is HoPE (models.encodings.hope: RoPE on the fast bands), which it extends.

Initialisation, as the references: A = I + xavier_normal(gain) and B = I + xavier_normal(gain), drawn as
`torch.nn.init.xavier_normal_` on a (H, K, K) tensor per layer (the authors build one FourierEmbedding per block,
one matrix per head: `fourier_separate_head`; the B draw first, as theirs), so std = gain sqrt(2 / (K^2 + H K)).
gain 0.3: the authors' setting for their smallest model (60M; 0.4 at 180M, 0.6 at 1.2B; Intern-S1 ships
`fope_init_factor` 0.5). A and B stay at their initial values, as in the authors' configs (`fourier_learnable` is
False by default and in every config they ship; their paper's appendix code sets `requires_grad=False`) and in
vLLM (loaded with `requires_grad=False`); `learned: true` trains them (without weight decay).

Where the references differ, the choice taken:
- which bands: theta_j >= 2 pi / L as the authors' `clamp_floor_freq` (vLLM keeps theta_j > 2 pi / L);
- output bands: K, vLLM's square mixing (the authors' code caps them at d / 4, `min(input_dim, head_dim // 4)`,
  marked TODO there; at JSB cpu, K = 9 and d / 4 = 8);
- unrotated bands: c = 1, s = 0 as vLLM (its comment: padding sin with 1 "would mix in rotate_neox()"); the
  authors' training code pads both with 1, a fixed position-free map of each pair whose score contribution is
  twice the plain dot product;
- layout: the references pair each dimension with the one d/2 further (NeoX halves); here neighbours, a
  permutation of W_q and W_k's output columns.

Computed with RoPE's rotation (models.encodings.rope.rotate) on the (H, T, d/2) table of (c, s), which each layer
builds from the forward pass's (T, K) cos and sin. FLOPs: as RoPE, 6 d_model per token and layer; the per-layer
tables (4 H K^2 FLOPs per position, shared by the batch) are neglected, as RoPE's table is.
"""

import torch
from torch import nn

from models.encodings.base import outside_autocast, register
from models.encodings.hope import HoPE
from models.encodings.options import Option
from models.encodings.rope import fast_band_count, rotate


@register
class FoPE(HoPE):
    name = "fope"
    option_rules = {
        "init_gain": Option("number", ">= 0", lambda v: v >= 0, why="xavier_normal gain of the mixing's noise"),
        "learned": Option("flag"),
    }

    def __init__(self, *, base: float = 10_000.0, init_gain: float = 0.3, learned: bool = False, **dims: int) -> None:
        super().__init__(base=base, **dims)
        self.init_gain, self.learned = float(init_gain), bool(learned)
        self.fourier_bands = fast_band_count(self.theta, self.context)
        K = self.fourier_bands
        if K == 0:
            raise ValueError(f"fope: no band of base {self.base:g} turns within L = {self.context}; nothing to mix")
        sin_mix, cos_mix = torch.empty(2, self.n_layer, self.n_head, K, K)
        for layer in range(self.n_layer):
            nn.init.xavier_normal_(sin_mix[layer], gain=self.init_gain)
            nn.init.xavier_normal_(cos_mix[layer], gain=self.init_gain)
        sin_mix, cos_mix = sin_mix + torch.eye(K), cos_mix + torch.eye(K)
        if self.learned:
            self.cos_mix, self.sin_mix = nn.Parameter(cos_mix), nn.Parameter(sin_mix)
        else:
            self.register_buffer("cos_mix", cos_mix)
            self.register_buffer("sin_mix", sin_mix)

    def prepare(self, pos: torch.Tensor) -> torch.Tensor:
        """(T, K, 2): cos and sin of m theta_j over the fast bands."""
        return super().prepare(pos)[:, : self.fourier_bands]

    def table(self, state: torch.Tensor, layer: int) -> torch.Tensor:
        """(H, T, d/2, 2): (c_i, s_i) of `layer` on the fast bands, (1, 0) on the others, in fp32 at least."""
        with outside_autocast(state.device):
            cos = torch.einsum("tj,hji->hti", state[..., 0], self.cos_mix[layer].to(state.dtype))
            sin = torch.einsum("tj,hji->hti", state[..., 1], self.sin_mix[layer].to(state.dtype))
        mixed = torch.stack((cos, sin), dim=-1)
        H, T, K, _ = mixed.shape
        unrotated = mixed.new_tensor([1.0, 0.0]).expand(H, T, self.head_dim // 2 - K, 2)
        return torch.cat((mixed, unrotated), dim=-2)

    def transform_qk(self, q, k, state, x, layer):
        table = self.table(state, layer)
        return rotate(q, table), rotate(k, table)

    def optimizer_groups(self):
        return [{"params": [self.cos_mix, self.sin_mix], "weight_decay": 0.0}] if self.learned else []

    def describe(self):
        return {
            **super().describe(),
            "fourier_bands": self.fourier_bands,
            "init_gain": self.init_gain,
            "mixing": "learned" if self.learned else "fixed at initialisation",
        }
