"""Positional encodings: each against its equation, relative-position identities, causality, one mechanism."""

from __future__ import annotations

import math

import pytest
import torch

from models.encodings import PositionalEncoding, available, build_encoding, register
from models.encodings.alibi import alibi_slopes
from models.gpt import GPT, GPTConfig

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


def test_registry_lists_the_foundation_encodings():
    assert {"rope", "nope", "alibi", "ape_learned"} <= set(available())


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
    cos, sin = rope.prepare(torch.arange(3))
    rotated, _ = rope.transform_qk(x, x, (cos, sin), None, 0)
    # pairs are (x0, x2) on band 0 and (x1, x3) on band 1
    c0, s0, c1, s1 = math.cos(2), math.sin(2), math.cos(0.2), math.sin(0.2)
    expected = [1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 1 * s0 + 3 * c0, 2 * s1 + 4 * c1]
    assert rotated[0, 0, 2].tolist() == pytest.approx(expected, abs=1e-6)
    assert rotated[0, 0, 0].tolist() == pytest.approx([1.0, 2.0, 3.0, 4.0])


def test_rope_angles_stay_fp32_under_bf16():
    rope = build_encoding("rope", {"base": 500_000.0}, **DIMS)
    cos, sin = rope.prepare(torch.arange(2048))
    assert cos.dtype == torch.float32
    q = torch.randn(1, 4, 2048, 8).bfloat16()
    q2, _ = rope.transform_qk(q, q, (cos, sin), None, 0)
    assert q2.dtype == torch.bfloat16


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


def test_alibi_bias_is_minus_slope_times_distance():
    alibi = build_encoding("alibi", {}, n_layer=1, n_head=2, d_model=8, context=8)
    bias = alibi.logit_bias(alibi.prepare(torch.arange(4)), layer=0)
    assert bias.shape == (2, 4, 4)
    assert bias[0, 3, 0].item() == pytest.approx(-0.0625 * 3)  # 2 heads: slopes 1/16, 1/256
    assert bias[1, 2, 1].item() == pytest.approx(-(2**-8))
    assert torch.all(bias.diagonal(dim1=1, dim2=2) == 0)


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
    """Changing a future token changes no earlier output."""
    model = small_model(pe).eval()
    tokens = torch.randint(0, 23, (2, 12), generator=torch.Generator().manual_seed(3))
    changed = tokens.clone()
    changed[:, 8] = (changed[:, 8] + 1) % 23
    out, out_changed = model(tokens), model(changed)
    assert torch.allclose(out[:, :8], out_changed[:, :8], atol=1e-6)
    assert not torch.allclose(out[:, 8:], out_changed[:, 8:], atol=1e-6)


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
