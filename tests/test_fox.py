"""FoX (models/encodings/fox.py): the cumulative forget gate by hand, its logit term against a double loop, the
attention against explicit softmax(q k^T / sqrt(d) + bias) v, open gates as NoPE, gradients, fp32 gate math under
bf16 autocast (the bf16 parts that carry F), no T x T tensor, the reference code's init, FLOPs and description."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from models.encodings import build_encoding
from models.encodings.fox import exact_parts
from models.gpt import GPT, GPTConfig
from pipelines.benchmarks.step import LiveTensorMemory

DIMS = dict(n_layer=2, n_head=4, d_model=32, context=16)


def model_of(pe: str, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=23, context=16, n_layer=2, n_head=4, d_model=32, pe=pe))


def with_spread_gates(model: GPT, seed: int = 1) -> GPT:
    """Gates away from their init (all near 1/2): weights N(0, 0.3^2) and biases N(1, 1), per layer and head."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.encoding.gate_weight.copy_(torch.randn(model.encoding.gate_weight.shape, generator=g) * 0.3)
        model.encoding.gate_bias.copy_(torch.randn(model.encoding.gate_bias.shape, generator=g) + 1.0)
    return model


def logit_term(fox, x: torch.Tensor, layer: int) -> torch.Tensor:
    """What the widened q', k' add to q . k / sqrt(d): q' . k' with q = k = 0, (B, H, T, T), in float64."""
    B, T, _ = x.shape
    zeros = torch.zeros(B, fox.n_head, T, fox.head_dim, dtype=x.dtype)
    q2, k2 = fox.transform_qk(zeros, zeros, fox.prepare(torch.arange(T)), x, layer)
    return q2.double() @ k2.double().transpose(-1, -2)


def explicit_bias(fox, x: torch.Tensor, layer: int) -> torch.Tensor:
    """sum_{l=j+1..i} log sigmoid(w_h . x_l + b_h) for j <= i, -inf above the diagonal: (B, H, T, T), float64."""
    w, b = fox.gate_weight[layer].double(), fox.gate_bias[layer].double()
    log_forget = torch.nn.functional.logsigmoid(x.double() @ w.T + b).transpose(1, 2)  # (B, H, T)
    T = x.shape[1]
    bias = torch.full((*log_forget.shape, T), float("-inf"), dtype=torch.float64)
    for i in range(T):
        for j in range(i + 1):
            bias[..., i, j] = log_forget[..., j + 1 : i + 1].sum(-1)
    return bias


def test_cumulative_gate_by_hand():
    """One layer, two heads, d_model 2. Head 0 reads x[0] (w = (1, 0), b = 0), so f_t = sigmoid(x_t[0]) is chosen
    by x; head 1 has w = 0 and b = log 3, so f_t = 3/4 everywhere."""
    fox = build_encoding("fox", {}, n_layer=1, n_head=2, d_model=2, context=4).double()
    with torch.no_grad():
        fox.gate_weight.copy_(torch.tensor([[[1.0, 0.0], [0.0, 0.0]]], dtype=torch.float64))
        fox.gate_bias.copy_(torch.tensor([[0.0, math.log(3.0)]], dtype=torch.float64))
    forget = [0.5, 0.8, 0.25, 0.9]
    x = torch.tensor([[[math.log(f / (1 - f)), 7.0] for f in forget]], dtype=torch.float64)  # x[1] is ignored
    cumulative = fox.cumulative_log_forget(x, layer=0)
    assert cumulative[0, 0].tolist() == pytest.approx([math.log(math.prod(forget[: t + 1])) for t in range(4)])
    assert cumulative[0, 1].tolist() == pytest.approx([(t + 1) * math.log(0.75) for t in range(4)])
    term = logit_term(fox, x, layer=0)
    for i in range(4):
        for j in range(i + 1):
            expected = sum(math.log(forget[l]) for l in range(j + 1, i + 1))  # sum_{l=j+1..i} log f_l
            assert term[0, 0, i, j].item() == pytest.approx(expected, abs=1e-12)
            assert term[0, 1, i, j].item() == pytest.approx((i - j) * math.log(0.75), abs=1e-12)
    assert term[0, 0, 3, 1].item() == pytest.approx(math.log(0.25 * 0.9))  # f_2 f_3
    assert torch.all(term[0].diagonal(dim1=1, dim2=2) == 0)  # a key forgets nothing at its own position


def test_logit_term_matches_a_double_loop_over_i_and_j():
    fox = with_spread_gates(model_of("fox")).encoding.double()
    x = torch.randn(2, 7, 32, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    below = torch.ones(7, 7, dtype=torch.bool).tril()
    assert torch.allclose(logit_term(fox, x, 1)[..., below], explicit_bias(fox, x, 1)[..., below], atol=1e-12)


def test_attention_matches_explicit_softmax_with_the_bias():
    """The layer's fused attention on q', k' equals softmax(q k^T / sqrt(d) + bias) v with the causal mask, by hand
    in float64."""
    model = with_spread_gates(model_of("fox")).double()
    attn, x = model.blocks[1].attn, torch.randn(2, 9, 32, generator=torch.Generator().manual_seed(3)).double()
    q, k, v = attn.qkv(x).view(2, 9, 3, 4, 8).permute(2, 0, 3, 1, 4)
    logits = q @ k.transpose(-1, -2) / math.sqrt(8) + explicit_bias(model.encoding, x, 1)
    expected = attn.proj((logits.softmax(-1) @ v).transpose(1, 2).reshape(2, 9, 32))
    assert torch.allclose(attn(x, model.encoding.prepare(torch.arange(9))), expected, atol=1e-12)


def test_attention_is_causal_in_the_tokens_and_in_the_gates():
    """Changing the input at position 5 (its token and so its gate) changes no output before 5."""
    model = with_spread_gates(model_of("fox")).double()
    attn, state = model.blocks[0].attn, model.encoding.prepare(torch.arange(8))
    x = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    changed = x.clone()
    changed[:, 5] += 1.0
    out, out_changed = attn(x, state), attn(changed, state)
    assert torch.equal(out[:, :5], out_changed[:, :5])
    assert not torch.allclose(out[:, 5:], out_changed[:, 5:])


def test_open_gates_give_nopes_attention():
    """b -> +inf: every f_t = 1, log f_t = 0, no logit term: the model is NoPE with the same weights."""
    fox, nope = model_of("fox", seed=0).double(), model_of("nope", seed=1).double()
    nope.load_state_dict({n: p for n, p in fox.state_dict().items() if not n.startswith("encoding.")})
    with torch.no_grad():
        fox.encoding.gate_bias.fill_(1e4)  # log sigmoid(1e4) = 0 exactly in float64
    tokens = torch.randint(0, 23, (2, 12), generator=torch.Generator().manual_seed(5))
    assert torch.allclose(fox(tokens), nope(tokens), atol=1e-12)


def test_gradients_reach_the_gate_and_match_the_explicit_bias():
    """Gradients w.r.t. w, b and the q/k/v projection through the widened q', k' equal those of the explicit form."""
    model = with_spread_gates(model_of("fox")).double()
    attn, fox = model.blocks[1].attn, model.encoding
    x = torch.randn(2, 9, 32, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    grad_out = torch.randn(2, 9, 32, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    wrt = [fox.gate_weight, fox.gate_bias, attn.qkv.weight]
    got = torch.autograd.grad(attn(x, fox.prepare(torch.arange(9))), wrt, grad_out)
    q, k, v = attn.qkv(x).view(2, 9, 3, 4, 8).permute(2, 0, 3, 1, 4)
    logits = q @ k.transpose(-1, -2) / math.sqrt(8) + explicit_bias(fox, x, 1)
    expected = attn.proj((logits.softmax(-1) @ v).transpose(1, 2).reshape(2, 9, 32))
    want = torch.autograd.grad(expected, wrt, grad_out)
    for name, a, b in zip(["gate_weight", "gate_bias", "qkv"], got, want, strict=True):
        assert torch.allclose(a, b, atol=1e-12), name
    assert got[0][1].abs().sum() > 0 and got[1][1].abs().sum() > 0  # layer 1's w and b
    assert torch.all(got[0][0] == 0) and torch.all(got[1][0] == 0)  # layer 0's are not in this layer


def test_gate_math_is_fp32_under_bf16_autocast():
    """F in fp32 under autocast, and q', k' in bf16 carry it exactly enough: at T = 2048 with the gates at init
    (|F| ~ 1400, where one bf16 number is off by up to 4) the logit term F_i - F_j is right to 1e-3."""
    fox = build_encoding("fox", {}, **DIMS)
    x = torch.randn(1, 2048, 32, generator=torch.Generator().manual_seed(8))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cumulative = fox.cumulative_log_forget(x.bfloat16(), layer=0)
        zeros = torch.zeros(1, 4, 2048, 8, dtype=torch.bfloat16)
        q2, k2 = fox.transform_qk(zeros, zeros, fox.prepare(torch.arange(2048)), x, layer=0)
    assert cumulative.dtype == torch.float32 and q2.dtype == k2.dtype == torch.bfloat16
    exact = copy.deepcopy(fox).double().cumulative_log_forget(x.double(), layer=0)
    assert exact[..., -1].max() < -1000
    rows, cols = torch.tensor([5, 700, 2047, 2047, 1500]), torch.tensor([0, 690, 2040, 0, 1499])
    term = (q2[0, :, rows].double() * k2[0, :, cols].double()).sum(-1)  # (H, 5)
    assert torch.allclose(term, exact[0][:, rows] - exact[0][:, cols], atol=1e-3, rtol=0)
    one_part = exact.bfloat16().double()  # what a single bf16 column would carry
    assert (one_part - exact).abs().max() > 0.5


def test_exact_parts_sum_to_the_value_and_pass_the_gradient_once():
    value = torch.tensor([-1417.3371, -0.6931, 3.0e-5, 0.0], dtype=torch.float32, requires_grad=True)
    parts = exact_parts(value, torch.bfloat16)
    assert parts.dtype == torch.bfloat16 and parts.shape == (4, 3)
    assert torch.allclose(parts.double().sum(-1), value.double(), rtol=2**-23, atol=0)
    (parts.float() * torch.tensor([2.0, 3.0, 5.0])).sum().backward()
    assert value.grad.tolist() == [2.0] * 4  # the first part only: the others are rounding corrections
    assert torch.equal(exact_parts(value.detach(), torch.float32)[:, 1:], torch.zeros(4, 2))  # fp32: one part


def test_bf16_attention_is_as_close_to_float64_as_nopes():
    """Under bf16 autocast FoX's attention is as far from its float64 value as NoPE's is from NoPE's (the bf16
    rounding of q, k, v), at T = 512 where |F| ~ 350."""
    errors = {}
    for pe in ("fox", "nope"):
        model = model_of(pe)
        attn = model.blocks[0].attn
        x = torch.randn(1, 512, 32, generator=torch.Generator().manual_seed(9))
        state = model.encoding.prepare(torch.arange(512))
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            low = attn(x, state).double()
        reference = model.double().blocks[0].attn(x.double(), state)
        errors[pe] = (low - reference).abs().max().item()
    assert errors["fox"] < 2 * errors["nope"]


def test_no_t_by_t_tensor_forward_or_backward():
    """Every tensor made by one layer's forward and backward at T = 1024 together holds less than one T x T fp32
    matrix per head (the bias form would hold the (1, H, T, T) term itself)."""
    model = model_of("fox")
    attn, T = model.blocks[0].attn, 1024
    x = torch.randn(1, T, 32, requires_grad=True)
    state = model.encoding.prepare(torch.arange(T))
    with LiveTensorMemory() as tracker:
        attn(x, state).sum().backward()
    assert tracker.peak < T * T * 4


def test_init_is_the_reference_codes():
    """Gate weights N(0, 0.02^2) and bias 0 (zhixuan-lin/forgetting-transformer): on a normalised x the gate
    logits are about N(0, 0.02^2 d_model), so the gates spread around 1/2 (F ~ -0.7 per token)."""
    torch.manual_seed(0)
    fox = build_encoding("fox", {}, n_layer=4, n_head=8, d_model=256, context=16)
    assert fox.gate_weight.shape == (4, 8, 256) and fox.gate_bias.shape == (4, 8)
    assert fox.gate_weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert torch.all(fox.gate_bias == 0)
    x = torch.nn.functional.layer_norm(torch.randn(1, 64, 256), (256,))
    log_forget = fox.cumulative_log_forget(x, layer=0).diff(dim=-1)
    logits = torch.logit(log_forget.exp())
    assert logits.std().item() == pytest.approx(0.02 * 16, rel=0.15) and abs(logits.mean().item()) < 0.05
    assert log_forget.mean().item() == pytest.approx(math.log(0.5), rel=0.1)


def test_gate_bias_takes_no_weight_decay_and_the_weight_does():
    from models.training import DecoderLM

    module = DecoderLM(model=dict(vocab_size=23, context=16, n_layer=2, n_head=4, d_model=32, pe="fox"), optim={})
    groups = module.configure_optimizers()["optimizer"].param_groups
    names = {id(p): n for n, p in module.model.named_parameters()}
    assert [names[id(p)] for p in groups[0]["params"]] == ["encoding.gate_bias"] and groups[0]["weight_decay"] == 0
    decayed = {names[id(p)] for g in groups if g["weight_decay"] > 0 for p in g["params"]}
    assert "encoding.gate_weight" in decayed and "encoding.gate_bias" not in decayed


def test_flops_and_description_by_hand():
    fox = build_encoding("fox", {}, **DIMS)  # 2 layers, 4 heads, d_model 32, head dim 8
    # per layer and head: projection 2 * 32, bias 1, log-sigmoid 2, cumsum 1, and 2 per key over (16 + 1) / 2 keys
    assert fox.flops_per_token(16) == 2 * 4 * (64 + 1 + 2 + 1 + 17)
    assert fox.softmax_scale == 1.0  # q carries 1 / sqrt(d)
    described = fox.describe()
    assert described["name"] == "fox" and described["mechanism"] == "qk" and described["fused_attention"]
    assert described["parameters"] == 2 * 4 * 32 + 2 * 4 and described["parameters_per_layer"] == 132
    assert described["qk_width"] == 16  # 8 + 3 parts of F + 3 ones, padded to a multiple of 8
    assert build_encoding("fox", {}, n_layer=1, n_head=2, d_model=24, context=8).qk_width == 24  # 12 + 6 -> 24


def test_decay_time_option_changes_the_gate_bias_init_and_nothing_else():
    """Issue 66's option: under the same seed every parameter of the model is the default's bit for bit but the
    gate bias, which is -log(expm1(1 / tau_h)) with tau log-spaced over the heads (4, 16, 64 for 3 heads from 4 to
    64), the same in every layer: at x = 0 the logit term is then -(i - j) / tau_h, a factor e every tau_h tokens."""

    def model(**options):
        torch.manual_seed(0)
        return GPT(GPTConfig(vocab_size=23, context=16, n_layer=2, n_head=3, d_model=24, pe="fox", pe_options=options))

    default, opened = model().double(), model(decay_time_min=4, decay_time_max=64).double()
    ours, theirs = opened.state_dict(), default.state_dict()
    assert ours.keys() == theirs.keys()
    assert [name for name in ours if not torch.equal(ours[name], theirs[name])] == ["encoding.gate_bias"]
    assert torch.all(default.encoding.gate_bias == 0)
    gates = torch.sigmoid(opened.encoding.gate_bias)  # b was made in float32: right to its rounding
    for layer in range(2):
        assert gates[layer].tolist() == pytest.approx([math.exp(-1 / tau) for tau in (4, 16, 64)], rel=1e-7)
    term = logit_term(opened.encoding, torch.zeros(1, 9, 24, dtype=torch.float64), layer=1)
    i, j = torch.arange(9)[:, None], torch.arange(9)[None, :]
    for head, tau in enumerate((4, 16, 64)):
        assert torch.allclose(term[0, head][i >= j], (-(i - j) / tau)[i >= j].double(), atol=1e-6)
    assert opened.encoding.describe()["gate_bias_init"] == "decay times 4, 16, 64"
    assert "gate_bias_init" not in default.encoding.describe()  # the reference's runs describe themselves as before


@pytest.mark.parametrize(
    "options, refusal",
    [
        ({"decay_time_min": 4}, "set both, or neither"),
        ({"decay_time_max": 64}, "set both, or neither"),
        ({"decay_time_min": 64, "decay_time_max": 4}, "decay_time_min=64 > decay_time_max=4"),
        ({"decay_time_min": 0, "decay_time_max": 4}, "decay_time_min=0 .must be a number > 0"),
    ],
)
def test_decay_times_are_refused_by_name(options, refusal):
    with pytest.raises(ValueError, match=refusal):
        build_encoding("fox", options, **DIMS)
