"""Positional encodings: each against its equation, relative-position identities, causality, one mechanism."""

from __future__ import annotations

import math

import pytest
import torch

from models.encodings import PositionalEncoding, available, build_encoding, encoding_class, register
from models.encodings.alibi import alibi_slopes
from models.gpt import GPT, GPTConfig
from tests.reference_encodings import cope_by_loops

DIMS = dict(n_layer=2, n_head=4, d_model=32, context=16)


def small_model(pe: str, **options) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=23, context=16, n_layer=2, n_head=4, d_model=32, pe=pe, pe_options=options))


def qk_score(encoding, q_vec, k_vec, m, n):
    """Score q at position m against k at position n through the encoding's q/k hook (one head)."""
    T = max(m, n) + 1
    q = torch.zeros(1, 1, T, q_vec.numel(), dtype=torch.float64)
    k = torch.zeros_like(q)
    q[0, 0, m], k[0, 0, n] = q_vec, k_vec
    state = encoding.prepare(torch.arange(T))
    x = torch.zeros(1, T, encoding.d_model, dtype=torch.float64)
    q2, k2 = encoding.transform_qk(q, k, state, x, layer=0)
    return (q2[0, 0, m] * k2[0, 0, n]).sum().item()


def test_registry_lists_the_whole_roster():
    shipped = {name for name in available() if encoding_class(name).__module__.startswith("models.encodings.")}
    assert shipped == {
        *("rope", "nope", "hope", "prope", "pope", "cope", "darope", "lerope", "hdrope", "rope_dup"),
        *("alibi", "ape_sin", "ape_learned", "yarn"),
        *("t5_bias", "kerple", "fire", "xpos", "fox"),
        *("nope_every", "irope", "rnope_swa", "local_global", "partial_rotary", "fope", "temperature"),
    }


def test_unknown_encoding_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown positional encoding 'sinusoid'.*alibi.*rope"):
        build_encoding("sinusoid", {}, **DIMS)


def test_bad_option_names_the_encoding():
    with pytest.raises(ValueError, match="bad options.*rope"):
        build_encoding("rope", {"bsae": 10}, **DIMS)


@pytest.mark.parametrize("base", [10_000.0, 500_000.0])
def test_rope_score_depends_only_on_relative_position(base):
    rope = build_encoding("rope", {"base": base}, **DIMS).double()
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(8, generator=g, dtype=torch.float64), torch.randn(8, generator=g, dtype=torch.float64)
    for offset in (0, 1, 5):
        scores = [qk_score(rope, q, k, m, m + offset) for m in (0, 3, 9)]
        assert scores == pytest.approx([scores[0]] * 3, abs=1e-9)
    assert qk_score(rope, q, k, 0, 1) != pytest.approx(qk_score(rope, q, k, 0, 4), abs=1e-6)


def test_rope_matches_hand_computed_rotation():
    """d=4, base 100: theta = (1, 1/10). Position 2 rotates band 0 by 2 rad and band 1 by 0.2 rad."""
    rope = build_encoding("rope", {"base": 100.0}, n_layer=1, n_head=1, d_model=4, context=4)
    assert rope.theta.tolist() == pytest.approx([1.0, 0.1])
    x = torch.tensor([1.0, 2.0, 3.0, 4.0]).view(1, 1, 1, 4).expand(1, 1, 3, 4).contiguous()
    rotated, _ = rope.transform_qk(x, x, rope.prepare(torch.arange(3)), None, 0)
    # pairs are (x0, x1) on band 0 and (x2, x3) on band 1
    c0, s0, c1, s1 = math.cos(2), math.sin(2), math.cos(0.2), math.sin(0.2)
    expected = [1 * c0 - 2 * s0, 1 * s0 + 2 * c0, 3 * c1 - 4 * s1, 3 * s1 + 4 * c1]
    assert rotated[0, 0, 2].tolist() == pytest.approx(expected, abs=1e-6)
    assert rotated[0, 0, 0].tolist() == pytest.approx([1.0, 2.0, 3.0, 4.0])


def test_rope_angles_stay_fp32_under_bf16():
    rope = build_encoding("rope", {"base": 500_000.0}, **DIMS)
    rotation = rope.prepare(torch.arange(2048))
    assert rotation.dtype == torch.float32  # cos and sin
    q = torch.randn(1, 4, 2048, 8).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q2, _ = rope.transform_qk(q, q, rotation, None, 0)
    reference, _ = rope.transform_qk(q.float(), q.float(), rotation, None, 0)
    assert q2.dtype == torch.bfloat16 and torch.equal(q2, reference.bfloat16())  # fp32 math, one rounding


@pytest.mark.parametrize(
    "n_head, expected",
    [
        (8, [2 ** -(i + 1) for i in range(8)]),  # 1/2, 1/4, ..., 1/256
        # 6 heads: the 4-head slopes 2^-2, 2^-4, 2^-6, 2^-8, then every other one of the 8-head slopes
        (6, [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]),
        # 12 heads: the 8-head slopes, then the 1st, 3rd, 5th, 7th of the 16-head slopes 2^-0.5, 2^-1.5, ...
        (12, [2 ** -(i + 1) for i in range(8)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5]),
    ],
)
def test_alibi_slopes(n_head, expected):
    assert alibi_slopes(n_head) == pytest.approx(expected)


def test_alibi_bias_is_minus_slope_times_distance_with_the_causal_mask():
    alibi = build_encoding("alibi", {}, n_layer=1, n_head=2, d_model=8, context=8)
    bias = alibi.logit_bias(alibi.prepare(torch.arange(4)), layer=0, x=torch.zeros(1, 4, 8))
    assert bias.shape == (1, 2, 4, 4) and bias.is_contiguous()  # the layout SDPA's fast kernels take
    assert bias[0, 0, 3, 0].item() == pytest.approx(-0.0625 * 3)  # 2 heads: slopes 1/16, 1/256
    assert bias[0, 1, 2, 1].item() == pytest.approx(-(2**-8))
    assert torch.all(bias[0].diagonal(dim1=1, dim2=2) == 0)
    future = torch.ones(4, 4, dtype=torch.bool).triu(1)
    assert torch.all(bias[0][:, future] == float("-inf")) and torch.all(bias[0][:, ~future].isfinite())


def test_alibi_model_matches_explicit_attention():
    """The fused path (SDPA with a float mask) equals softmax(qk/sqrt(d) + bias + causal) v by hand."""
    model = small_model("alibi").double()
    attn = model.blocks[0].attn
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    q, k, v = attn.qkv(x).view(2, 5, 3, 4, 8).permute(2, 0, 3, 1, 4)
    slopes = torch.tensor(alibi_slopes(4), dtype=torch.float64)
    i, j = torch.arange(5)[:, None], torch.arange(5)[None, :]
    logits = q @ k.transpose(-1, -2) / math.sqrt(8) - slopes[:, None, None] * (i - j)
    logits = logits.masked_fill(j > i, float("-inf"))
    expected = attn.proj((logits.softmax(-1) @ v).transpose(1, 2).reshape(2, 5, 32))
    got = attn(x, model.encoding.prepare(torch.arange(5)))
    assert torch.allclose(got, expected, atol=1e-10)


def test_ape_learned_refuses_positions_past_its_table():
    model = small_model("ape_learned")
    model(torch.zeros(1, 16, dtype=torch.long))
    with pytest.raises(ValueError, match=r"ape_learned.*positions 0\.\.15.*16"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_ape_learned_adds_its_table_row():
    ape = build_encoding("ape_learned", {}, **DIMS)
    x = torch.zeros(1, 3, 32)
    out = ape.embed(x, ape.prepare(torch.arange(3)))
    assert torch.equal(out[0], ape.table.weight[:3])


def test_nope_output_is_permutation_equivariant_in_the_first_layer_scores():
    """Without position, swapping two earlier tokens leaves the last token's output unchanged (one layer)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=23, context=16, n_layer=1, n_head=4, d_model=32, pe="nope")).eval()
    a = torch.tensor([[3, 7, 9, 11, 5]])
    b = torch.tensor([[7, 3, 9, 11, 5]])
    assert torch.allclose(model(a)[0, -1], model(b)[0, -1], atol=1e-5)
    rope = small_model("rope").eval()
    assert not torch.allclose(rope(a)[0, -1], rope(b)[0, -1], atol=1e-5)


@pytest.mark.parametrize("pe", available())
def test_causality(pe):
    """Changing a future token changes no earlier output (learned positional parameters moved off their init,
    so CoPE's zero table and PoPE's zero phase bias take part)."""
    model = small_model(pe).eval()
    with torch.no_grad():
        for param in model.encoding.parameters():
            param.uniform_(-1.0, 0.0, generator=torch.Generator().manual_seed(4))
    tokens = torch.randint(0, 23, (2, 12), generator=torch.Generator().manual_seed(3))
    changed = tokens.clone()
    changed[:, 8] = (changed[:, 8] + 1) % 23
    out, out_changed = model(tokens), model(changed)
    assert torch.allclose(out[:, :8], out_changed[:, :8], atol=1e-6)
    assert not torch.allclose(out[:, 8:], out_changed[:, 8:], atol=1e-6)


@pytest.mark.parametrize("pe", available())
def test_attention_weights_times_v_reproduce_every_block(pe):
    """GPT.attention_weights writes out the softmax weights that the fused kernels (and CoPE's tiled one) never
    return; those weights @ v, through the block's output projection, residual and MLP, give the block's own output
    in float64. Context 8 and 20 tokens: CoPE's positions reach their clamp at npos - 1; the encoding's learned
    parameters are moved off their init (CoPE's zero table, PoPE's zero phases take part)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=23, context=8, n_layer=2, n_head=4, d_model=32, pe=pe)).double().eval()
    with torch.no_grad():
        for param in model.encoding.parameters():
            param.uniform_(-1.0, 0.0, generator=torch.Generator().manual_seed(4))
    T = min(20, model.encoding.max_positions or 20)
    tokens = torch.randint(0, 23, (2, T), generator=torch.Generator().manual_seed(3))
    seen = []  # each block's input and output in the model's own forward pass
    hooks = [block.register_forward_hook(lambda _, args, out: seen.append((args[0], out))) for block in model.blocks]
    with torch.no_grad():
        model(tokens)
        for hook in hooks:
            hook.remove()
        weights = model.attention_weights(tokens)
        for block, w, (x, out) in zip(model.blocks, weights, seen, strict=True):
            assert w.shape == (2, 4, T, T)
            assert torch.allclose(w.sum(-1), torch.ones(2, 4, T, dtype=torch.float64), atol=1e-12)
            assert torch.all(w.triu(1) == 0)  # causal
            _, _, v = block.attn.heads(block.norm_attn(x))
            y = x + block.attn.proj((w @ v).transpose(1, 2).reshape(2, T, 32))
            assert torch.allclose(y + block.mlp(block.norm_mlp(y)), out, rtol=0, atol=1e-12)


def test_an_encoding_with_two_mechanisms_is_refused():
    with pytest.raises(TypeError, match="exactly one mechanism"):

        class RopePlusTable(PositionalEncoding):  # noqa: F841  (the class statement itself must fail)
            name = "rope_plus_table"
            mechanism = "qk"

            def transform_qk(self, q, k, state, x, layer):
                return q, k

            def embed(self, x, state):
                return x


def test_an_encoding_missing_its_hook_is_refused():
    with pytest.raises(TypeError, match="overrides hooks"):

        @register
        class BiasWithoutHook(PositionalEncoding):
            name = "bias_without_hook"
            mechanism = "bias"


def test_model_carries_no_positional_signal_of_its_own():
    """Parameters outside `encoding.` are the same set for every encoding: no hidden table or bias."""
    names = {
        pe: {n for n, _ in small_model(pe).named_parameters() if not n.startswith("encoding.")} for pe in available()
    }
    assert all(n == names["nope"] for n in names.values())
    assert [n for n, _ in small_model("ape_learned").named_parameters() if n.startswith("encoding.")] == [
        "encoding.table.weight"
    ]


def test_pope_score_is_the_polar_sum():
    """score(m, n) = sum_c softplus(q_c) softplus(k_c) cos((n - m) theta_c + delta_c), theta_c = base^(-c/d),
    with delta clamped to [-2 pi, 0]."""
    d = 4
    pope = build_encoding("pope", {"base": 100.0}, n_layer=1, n_head=1, d_model=d, context=8).double()
    assert pope.theta.tolist() == pytest.approx([1.0, 100**-0.25, 100**-0.5, 100**-0.75])
    with torch.no_grad():
        pope.phase_bias.copy_(torch.tensor([[[-0.5, 1.0, -7.0, -3.0]]]))  # 1.0 -> 0, -7 -> -2 pi
    delta = [-0.5, 0.0, -2 * math.pi, -3.0]
    g = torch.Generator().manual_seed(0)
    q_vec, k_vec = torch.randn(d, generator=g, dtype=torch.float64), torch.randn(d, generator=g, dtype=torch.float64)

    def softplus(x):
        return math.log1p(math.exp(x))

    for m, n in [(0, 0), (5, 2), (1, 6), (3, 7)]:
        expected = sum(
            softplus(q_vec[c]) * softplus(k_vec[c]) * math.cos((n - m) * 100 ** (-c / d) + delta[c]) for c in range(d)
        )
        assert qk_score(pope, q_vec, k_vec, m, n) == pytest.approx(expected, abs=1e-8)  # theta is stored in fp32


def test_pope_runs_fused_at_width_2d_with_the_original_scale():
    """The model's attention (SDPA on q, k of width 2d) equals softmax(q'.k' / sqrt(d)) v by hand, d = head dim."""
    model = small_model("pope").double()
    with torch.no_grad():
        model.encoding.phase_bias.uniform_(-6.0, 0.0)
    assert model.encoding.fused and model.encoding.softmax_scale == 1 / math.sqrt(8)
    attn, x = model.blocks[1].attn, torch.randn(2, 6, 32, dtype=torch.float64)
    q, k, v = attn.qkv(x).view(2, 6, 3, 4, 8).permute(2, 0, 3, 1, 4)
    state = model.encoding.prepare(torch.arange(6))
    q2, k2 = model.encoding.transform_qk(q, k, state, x, layer=1)
    assert q2.shape == (2, 4, 6, 16)
    logits = (q2 @ k2.transpose(-1, -2) / math.sqrt(8)).masked_fill(torch.ones(6, 6).triu(1).bool(), float("-inf"))
    expected = attn.proj((logits.softmax(-1) @ v).transpose(1, 2).reshape(2, 6, 32))
    assert torch.allclose(attn(x, state), expected, atol=1e-10)


def test_pope_phases_stay_fp32_under_bf16_autocast():
    pope = build_encoding("pope", {}, **DIMS)
    cos, sin = pope.prepare(torch.arange(16))
    q = torch.randn(1, 4, 16, 8).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q2, k2 = pope.transform_qk(q, q, (cos, sin), None, 0)
    assert cos.dtype == sin.dtype == torch.float32 and q2.dtype == k2.dtype == torch.bfloat16
    reference, _ = pope.transform_qk(q.float(), q.float(), (cos, sin), None, 0)
    assert torch.equal(q2, reference.bfloat16())  # fp32 math, one rounding


def test_cope_matches_a_double_loop_over_i_and_j():
    cope = build_encoding("cope", {}, n_layer=2, n_head=2, d_model=8, context=4).double()
    assert cope.table.shape == (2, 4, 5) and torch.all(cope.table == 0)  # npos = L + 1, zero-initialised
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        cope.table.normal_(generator=g)
    T = 7  # longer than L: positions clamp to npos - 1
    q, k, v = (torch.randn(1, 2, T, 4, generator=g, dtype=torch.float64) * 2 for _ in range(3))
    out = cope.attend(q, k, v, cope.prepare(torch.arange(T)), layer=1, dropout_p=0.0)
    for h in range(2):
        expected = cope_by_loops(q[0, h], k[0, h], v[0, h], cope.table[1].detach(), npos=5)
        assert torch.allclose(out[0, h], expected, atol=1e-10)


def test_ape_sin_table_is_vaswanis():
    ape = build_encoding("ape_sin", {}, n_layer=1, n_head=1, d_model=4, context=8)
    table = ape.prepare(torch.arange(3))
    assert table[0].tolist() == pytest.approx([0.0, 1.0, 0.0, 1.0])
    assert table[2].tolist() == pytest.approx([math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)])
    out = ape.embed(torch.ones(1, 3, 4), table)
    assert torch.allclose(out[0], 1 + 0.02 * math.sqrt(2) * table)  # at the tokens' scale: per-dim RMS 0.02
    assert ape.prepare(torch.arange(4096)).pow(2).mean().sqrt().item() * ape.scale == pytest.approx(0.02, rel=1e-2)
    assert ape.prepare(torch.arange(100)).shape == (100, 4)  # no table limit: defined past the training length


LEARNED = {
    "lerope": ["encoding.log_scale"],
    "pope": ["encoding.phase_bias"],
    "darope": ["encoding.coordinate_weight", "encoding.prior_weight"],
    "cope": ["encoding.table"],
    "ape_learned": ["encoding.table.weight"],
    "fox": ["encoding.gate_weight", "encoding.gate_bias"],
    "t5_bias": ["encoding.table"],
    "kerple": ["encoding.r1", "encoding.r2"],
    "fire": [
        "encoding.hidden_weight",
        "encoding.hidden_bias",
        "encoding.out_weight",
        "encoding.c",
        "encoding.threshold_scale",
    ],
}


@pytest.mark.parametrize("pe", available())
def test_every_learned_positional_parameter_receives_gradient(pe):
    model = small_model(pe)
    names = [n for n, _ in model.named_parameters() if n.startswith("encoding.")]
    assert names == LEARNED.get(pe, [])
    tokens = torch.randint(0, 23, (3, 16), generator=torch.Generator().manual_seed(0))
    torch.nn.functional.cross_entropy(model(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten()).backward()
    for name, param in model.named_parameters():
        if name.startswith("encoding."):
            assert param.grad is not None and param.grad.abs().sum() > 0, name


def optimizer_groups_of(pe):
    from models.training import DecoderLM

    model = dict(vocab_size=23, context=16, n_layer=2, n_head=4, d_model=32, pe=pe)
    module = DecoderLM(model=model, optim={"max_steps": 10})
    optimizer = module.configure_optimizers()["optimizer"]
    names = {id(p): n for n, p in module.model.named_parameters()}
    return [
        ({names[id(p)] for p in g["params"]}, g["weight_decay"], g.get("clip_norm")) for g in optimizer.param_groups
    ]


def test_lerope_scales_have_their_own_group_without_decay_and_are_clipped_alone():
    groups = optimizer_groups_of("lerope")
    assert groups[0] == ({"encoding.log_scale"}, 0.0, 1.0)
    assert all("encoding.log_scale" not in names for names, _, _ in groups[1:])


@pytest.mark.parametrize("pe, name", [("pope", "encoding.phase_bias"), ("darope", "encoding.prior_weight")])
def test_per_head_positional_parameters_take_no_weight_decay(pe, name):
    groups = optimizer_groups_of(pe)
    assert groups[0] == ({name}, 0.0, None)
    decayed = next(names for names, decay, _ in groups if decay > 0)
    assert name not in decayed and "blocks.0.attn.qkv.weight" in decayed


@pytest.mark.parametrize("pe", [name for name in available() if not encoding_class(name).evaluation_only])
def test_forward_and_backward_make_no_tensor_off_the_models_device(pe):
    """On the meta device every tensor an encoding makes from scratch without the input's device (a CPU-made table
    multiplied by GPU positions crashes on any GPU) fails with a device mismatch, and a host sync (`.item()`) fails
    too: the check a GPU run would do, without a GPU."""
    model = small_model(pe).to("meta")
    logits = model(torch.randint(0, 50, (2, 12), device="meta"))
    logits.sum().backward()
    assert logits.device.type == "meta"
    assert all(p.grad is not None and p.grad.device.type == "meta" for p in model.parameters() if p.requires_grad)
