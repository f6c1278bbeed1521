"""The learned attention biases of SPEC section 1b (T5's buckets, KERPLE, FIRE), each against its equation by hand;
relative-position invariance where it holds; the causal mask; what is built once per forward pass."""

from __future__ import annotations

import math

import pytest
import torch

import models.encodings.t5_bias as t5_module
from models.encodings import build_encoding
from models.encodings.fire import FIRE
from models.encodings.t5_bias import causal_bucket
from models.gpt import GPT, GPTConfig

DIMS = dict(n_layer=2, n_head=3, d_model=12, context=8)


def bias_of(encoding, T: int, layer: int = 0, start: int = 0) -> torch.Tensor:
    """The (H, T, T) term of `layer` for positions start..start+T-1."""
    state = encoding.prepare(torch.arange(start, start + T))
    term = encoding.logit_bias(state, layer, torch.zeros(1, T, encoding.d_model))
    assert term.shape == (1, encoding.n_head, T, T) and term.is_contiguous()  # the layout SDPA's fast kernels take
    return term[0]


def assert_causal_mask(term: torch.Tensor) -> None:
    future = torch.ones(term.shape[-2:], dtype=torch.bool).triu(1)
    assert torch.all(term[:, future] == float("-inf")) and torch.all(term[:, ~future].isfinite())


# ---- T5 ------------------------------------------------------------------------------------------------------
def t5_bucket_by_hand(n: int) -> int:
    if n < 16:
        return n
    return min(31, 16 + math.floor(math.log(n / 16) / math.log(128 / 16) * 16))


def test_t5_bucket_of_every_distance_up_to_300():
    got = causal_bucket(torch.arange(301)).tolist()
    assert got == [t5_bucket_by_hand(n) for n in range(301)]
    assert got[15:18] == [15, 16, 16] and got[127:130] == [31, 31, 31]  # exact below 16; the last from 128 on


def test_t5_bias_is_the_table_entry_of_the_bucket_with_the_causal_mask():
    t5 = build_encoding("t5_bias", {}, **DIMS)
    assert t5.table.shape == (3, 32) and torch.all(t5.table == 0)  # H x 32, initialised 0
    with torch.no_grad():
        t5.table.copy_(torch.randn(3, 32, generator=torch.Generator().manual_seed(0)))
    T = 200
    term = bias_of(t5, T)
    assert_causal_mask(term)
    for i, j in [(0, 0), (5, 2), (20, 0), (40, 3), (150, 10), (199, 0)]:
        for h in range(3):
            assert term[h, i, j].item() == t5.table[h, t5_bucket_by_hand(i - j)].item()


def test_t5_bias_depends_only_on_the_distance():
    t5 = build_encoding("t5_bias", {}, **DIMS)
    with torch.no_grad():
        t5.table.normal_(generator=torch.Generator().manual_seed(1))
    assert torch.equal(bias_of(t5, 40), bias_of(t5, 40, start=13))
    term = bias_of(t5, 40)
    assert torch.equal(term[:, 30, 10], term[:, 25, 5])  # same distance, same bias


def test_t5_term_is_built_once_per_forward_and_shared_by_the_layers(monkeypatch):
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return causal_bucket(*args, **kwargs)

    monkeypatch.setattr(t5_module, "causal_bucket", counted)
    model = GPT(GPTConfig(vocab_size=11, context=8, n_layer=3, n_head=3, d_model=12, pe="t5_bias"))
    model(torch.zeros(2, 8, dtype=torch.long))
    assert len(calls) == 1
    t5 = model.encoding
    state = t5.prepare(torch.arange(8))
    x = torch.zeros(1, 8, 12)
    assert t5.logit_bias(state, 0, x) is t5.logit_bias(state, 2, x)


# ---- KERPLE --------------------------------------------------------------------------------------------------
def set_kerple(kerple, r1, r2):
    with torch.no_grad():
        kerple.r1.copy_(torch.tensor(r1))
        kerple.r2.copy_(torch.tensor(r2))


def test_kerple_bias_is_minus_r1_log_of_one_plus_r2_times_distance():
    kerple = build_encoding("kerple", {}, **DIMS)
    assert torch.all((kerple.r1 >= 0) & (kerple.r1 <= 2)) and torch.all((kerple.r2 >= 0) & (kerple.r2 <= 1))
    set_kerple(kerple, [[0.5, 1.0, 2.0], [1.5, 0.2, 0.7]], [[1.0, 0.1, 0.5], [0.3, 0.9, 0.05]])
    term = bias_of(kerple, 10, layer=1)
    assert_causal_mask(term)
    r1, r2 = [1.5, 0.2, 0.7], [0.3, 0.9, 0.05]
    for i, j in [(0, 0), (3, 1), (9, 0), (7, 6)]:
        for h in range(3):
            assert term[h, i, j].item() == pytest.approx(-r1[h] * math.log(1 + r2[h] * (i - j)), rel=1e-6)


def test_kerple_clamps_its_parameters_at_one_hundredth_and_still_passes_the_gradient():
    kerple = build_encoding("kerple", {}, **DIMS)
    set_kerple(kerple, [[-0.5, 1.0, 0.001]] * 2, [[1.0, -3.0, 0.5]] * 2)
    term = bias_of(kerple, 6)
    assert kerple.r1[0].tolist() == pytest.approx([0.01, 1.0, 0.01])  # projected, as the reference code does
    assert kerple.r2[0].tolist() == pytest.approx([1.0, 0.01, 0.5])
    assert term[0, 5, 0].item() == pytest.approx(-0.01 * math.log(1 + 5.0), rel=1e-6)
    assert term[1, 4, 1].item() == pytest.approx(-1.0 * math.log(1 + 0.01 * 3), rel=1e-6)
    term[:, ~torch.ones(6, 6, dtype=torch.bool).triu(1)].sum().backward()
    assert torch.all(kerple.r1.grad[0] != 0) and torch.all(kerple.r2.grad[0] != 0)  # the clamp does not stop it


def test_kerple_bias_depends_only_on_the_distance_and_differs_by_layer():
    kerple = build_encoding("kerple", {}, **DIMS)
    assert torch.equal(bias_of(kerple, 12), bias_of(kerple, 12, start=7))
    assert not torch.allclose(bias_of(kerple, 12, layer=0), bias_of(kerple, 12, layer=1))


# ---- FIRE ----------------------------------------------------------------------------------------------------
def hand_set_fire(c: float = 0.5, threshold_scale: float = 1.0):
    """Width 2, two heads, L = 8: f(z) = W2 relu(w z + b) with w = (2, -3), b = (-0.5, 1): unit 0 switches on at
    z = 0.25, unit 1 off at z = 1/3."""
    fire = build_encoding("fire", {"width": 2}, n_layer=1, n_head=2, d_model=8, context=8)
    with torch.no_grad():
        fire.hidden_weight.copy_(torch.tensor([[2.0, -3.0]]))
        fire.hidden_bias.copy_(torch.tensor([[-0.5, 1.0]]))
        fire.out_weight.copy_(torch.tensor([[[1.0, 0.5], [-2.0, 1.5]]]))
        fire.c.fill_(c)
        fire.threshold_scale.fill_(threshold_scale)
    return fire


def fire_by_hand(i: int, j: int, c: float = 0.5, threshold: float = 8.0) -> list[float]:
    def psi(x):
        return math.log(c * x + 1)

    z = psi(i - j) / (psi(max(threshold, i)) + 1e-6)
    hidden = [max(0.0, 2 * z - 0.5), max(0.0, -3 * z + 1)]
    return [1.0 * hidden[0] + 0.5 * hidden[1], -2.0 * hidden[0] + 1.5 * hidden[1]]


def test_fire_bias_is_the_mlp_of_the_interpolated_distance_below_and_past_the_threshold():
    fire = hand_set_fire()
    term = bias_of(fire, 20)
    assert_causal_mask(term)
    # i < L_thr = 8 (normaliser psi(8)) and i past it (normaliser psi(i)); z on both sides of both switches
    for i, j in [(0, 0), (1, 0), (5, 4), (7, 0), (7, 6), (8, 0), (12, 11), (12, 1), (19, 0), (19, 17)]:
        assert term[:, i, j].tolist() == pytest.approx(fire_by_hand(i, j), abs=1e-6)


def test_fire_threshold_is_a_learned_multiple_of_the_context_and_c_enters_as_its_absolute_value():
    fire = hand_set_fire(c=-0.5, threshold_scale=-0.5)  # L_thr = |-0.5| * 8 = 4, psi with |c| = 0.5
    term = bias_of(fire, 10)
    for i, j in [(2, 1), (4, 0), (6, 2), (9, 0)]:
        assert term[:, i, j].tolist() == pytest.approx(fire_by_hand(i, j, c=0.5, threshold=4.0), abs=1e-6)


@pytest.mark.parametrize("scale", [0.75, 2.0])  # L_thr 12: queries 13..23 past it; L_thr 32: every query below it
@pytest.mark.parametrize("path", ["cpu", "general"])  # general: every query on the (T, T) path, as on CUDA
def test_fire_pieces_give_the_mlp_value_and_gradient(scale, path, monkeypatch):
    """Default width 32 with random units (switch points inside and outside [0, 1], one unit with w = 0): the
    piecewise-linear evaluation equals the MLP evaluated on every entry, and so do the gradients, on the CPU's lag
    table (queries below L_thr) beside the general path and on the general path alone."""
    if path == "general":
        monkeypatch.setattr(FIRE, "rows_sharing_the_threshold", staticmethod(lambda pos, threshold: 0))
    fire = build_encoding("fire", {}, n_layer=2, n_head=3, d_model=12, context=16)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        fire.hidden_weight.normal_(generator=g).mul_(3.0)
        fire.hidden_weight[1, 0] = 0.0
        fire.hidden_bias.normal_(generator=g)
        fire.c.fill_(0.7)
        fire.threshold_scale.fill_(scale)
    T, layer = 24, 1
    weights = torch.randn(3, T, T, generator=g)
    visible = ~torch.ones(T, T, dtype=torch.bool).triu(1)

    (bias_of(fire, T, layer)[:, visible] * weights[:, visible]).sum().backward()
    got = {name: p.grad.clone() for name, p in fire.named_parameters()}
    fire.zero_grad()

    i, j = torch.arange(T)[:, None].float(), torch.arange(T)[None, :].float()
    c, threshold = fire.c[layer].abs(), (fire.threshold_scale[layer] * 16).abs()
    z = torch.log1p(c * (i - j).clamp(min=0)) / (torch.log1p(c * torch.maximum(i, threshold)) + 1e-6)
    hidden = torch.relu(z[..., None] * fire.hidden_weight[layer] + fire.hidden_bias[layer])
    expected = (hidden @ fire.out_weight[layer].T).permute(2, 0, 1)
    assert torch.allclose(bias_of(fire, T, layer)[:, visible], expected[:, visible], atol=1e-5)
    (expected[:, visible] * weights[:, visible]).sum().backward()
    for name, p in fire.named_parameters():
        assert torch.allclose(got[name], p.grad, atol=1e-4, rtol=1e-4), name
    assert got["threshold_scale"][layer] != 0 and got["c"][layer] != 0


def test_fire_lag_table_gives_the_general_paths_values_bit_for_bit(monkeypatch):
    fire = build_encoding("fire", {}, n_layer=1, n_head=2, d_model=8, context=64)
    with torch.no_grad():
        fire.c.fill_(1.3)
        fire.threshold_scale.fill_(0.9)  # L_thr 57.6: queries 0..57 on the table, 58..99 past it
    assert FIRE.rows_sharing_the_threshold(torch.arange(100), fire.threshold_scale[0] * 64) == 58
    on_cpu = bias_of(fire, 100)
    monkeypatch.setattr(FIRE, "rows_sharing_the_threshold", staticmethod(lambda pos, threshold: 0))
    assert torch.equal(on_cpu, bias_of(fire, 100))


def test_fire_is_relative_below_the_threshold_only():
    fire = hand_set_fire()  # L_thr = 8
    below, shifted = bias_of(fire, 5), bias_of(fire, 5, start=3)  # queries 0..4 and 3..7: all below L_thr
    assert torch.allclose(below, shifted, atol=1e-6)
    past = bias_of(fire, 5, start=10)  # queries 10..14: normaliser psi(i) grows with i
    assert not torch.allclose(below, past, atol=1e-3)


def test_fire_terms_differ_by_layer_and_stay_fp32_inside_under_bf16_autocast():
    fire = build_encoding("fire", {}, **DIMS)
    assert not torch.allclose(bias_of(fire, 8, layer=0), bias_of(fire, 8, layer=1))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        term = bias_of(fire, 8)
    assert term.dtype == torch.bfloat16 and torch.equal(term, bias_of(fire, 8).bfloat16())  # one rounding


# ---- all three -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "pe, options, extra",
    [
        ("t5_bias", {}, {"buckets": 32, "max_distance": 128, "shared": True, "parameters": 3 * 32}),
        ("kerple", {}, {"kernel": "log", "clamp_min": 0.01, "parameters": 2 * 2 * 3}),
        ("fire", {}, {"mlp_width": 32, "threshold_init": 8, "parameters": 2 * (32 + 32 + 3 * 32 + 2)}),
    ],
)
def test_describe_reports_the_bias_and_its_parameters(pe, options, extra):
    described = build_encoding(pe, options, **DIMS).describe()
    assert described["mechanism"] == "bias" and described["fused_attention"] is False
    assert extra.items() <= described.items()


@pytest.mark.parametrize(
    "pe, undecayed",
    [
        ("t5_bias", {"encoding.table"}),
        ("kerple", {"encoding.r1", "encoding.r2"}),
        ("fire", {"encoding.hidden_bias", "encoding.c", "encoding.threshold_scale"}),
    ],
)
def test_positional_scalars_take_no_weight_decay(pe, undecayed):
    from models.training import DecoderLM

    model = dict(vocab_size=11, context=8, n_layer=2, n_head=3, d_model=12, pe=pe)
    module = DecoderLM(model=model, optim={"max_steps": 10})
    optimizer = module.configure_optimizers()["optimizer"]
    names = {id(p): n for n, p in module.model.named_parameters()}
    groups = [({names[id(p)] for p in g["params"]}, g["weight_decay"]) for g in optimizer.param_groups]
    assert groups[0] == (undecayed, 0.0)
    decayed = next(group for group, decay in groups if decay > 0)
    assert not decayed & undecayed
    if pe == "fire":
        assert {"encoding.hidden_weight", "encoding.out_weight"} <= decayed  # the MLP's weights, as any layer's


@pytest.mark.parametrize("pe", ["kerple", "fire"])
def test_per_layer_terms_share_the_forward_passs_lags(pe):
    model = GPT(GPTConfig(vocab_size=11, context=8, n_layer=2, n_head=3, d_model=12, pe=pe))
    state = model.encoding.prepare(torch.arange(8))
    x = torch.zeros(1, 8, 12)
    first, second = (model.encoding.logit_bias(state, layer, x) for layer in (0, 1))
    assert first is not second and not torch.equal(first, second)
    assert state.lags.tolist() == list(range(8)) and state.lag_index.shape == (64,)
