"""The rotary family (rope, hope, prope, lerope, rope_dup, hdrope, darope, yarn, xpos) and PoPE: each against a plain
re-statement of its equation, the relative-position identity, the special cases that tie them together, the
gradients of the fast implementations against finite differences, and each encoding's FLOP count by hand."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from models.encodings import build_encoding
from models.encodings.hdrope import paley_conference_matrix
from models.encodings.rope import fast_band_count, rope_frequencies, rotate, unit_rotations
from models.encodings.xpos import decay_powers
from models.encodings.yarn import with_yarn, yarn_frequencies
from models.gpt import GPT, GPTConfig

F64 = torch.float64


def encoding(name, d=8, heads=1, context=16, layers=1, **options):
    return build_encoding(name, options, n_layer=layers, n_head=heads, d_model=d * heads, context=context).double()


def transform(enc, q, k, x=None, layer=0):
    """q, k: (B, H, T, d) at positions 0..T-1."""
    T = q.shape[2]
    if x is None:
        x = torch.zeros(q.shape[0], T, enc.d_model, dtype=F64)
    return enc.transform_qk(q, k, enc.prepare(torch.arange(T)), x, layer)


def scores(enc, q, k, x=None):
    q2, k2 = transform(enc, q, k, x)
    return q2 @ k2.transpose(-1, -2)


def rotate_pairs(x, angles):
    """Reference RoPE on one vector: band j rotates the pair (x_{2j}, x_{2j+1}) by angles[j], by a plain loop."""
    out = list(x)
    for j in range(len(x) // 2):
        c, s = math.cos(angles[j]), math.sin(angles[j])
        out[2 * j] = x[2 * j] * c - x[2 * j + 1] * s
        out[2 * j + 1] = x[2 * j] * s + x[2 * j + 1] * c
    return out


def same_vector_at_every_position(vec, T):
    return vec.view(1, 1, 1, -1).expand(1, 1, T, -1).contiguous()


RELATIVE = [
    ("rope", {"base": 10_000.0}),
    ("hope", {"base": 10_000.0}),
    ("prope", {"p": 0.5}),
    ("lerope", {}),
    ("rope_dup", {"block": 4}),
    ("hdrope", {"block": 4}),
    ("hdrope", {"block": 8}),
    ("pope", {}),
    ("xpos", {"scale_base": 8.0}),  # a strong decay, so the relative identity covers it
]


@pytest.mark.parametrize("name, options", RELATIVE)
def test_score_depends_only_on_relative_position(name, options):
    enc = encoding(name, d=16, context=64, **options)
    with torch.no_grad():  # learned positional parameters away from their initial values
        for p in enc.parameters():
            p.uniform_(-1.0, 0.0)
    g = torch.Generator().manual_seed(0)
    q_vec, k_vec = torch.randn(16, generator=g, dtype=F64), torch.randn(16, generator=g, dtype=F64)
    s = scores(enc, same_vector_at_every_position(q_vec, 40), same_vector_at_every_position(k_vec, 40))[0, 0]
    for offset in (0, 1, 7, 20):
        diagonal = torch.diagonal(s, offset=offset)  # q at m, k at m + offset
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-9), (name, offset)
    assert not torch.allclose(torch.diagonal(s, 1)[0], torch.diagonal(s, 5)[0])  # position does matter


def test_darope_fast_bands_depend_only_on_relative_position():
    """q and k nonzero on the fast bands only: the data-aware slow bands do not enter the score."""
    enc = encoding("darope", d=16, context=64, base=10_000.0)
    K = enc.n_fast
    assert K == fast_band_count(rope_frequencies(16, 10_000.0), 64) == 3  # theta >= 2 pi / 64: 1, .32, .1
    g = torch.Generator().manual_seed(1)
    q_vec, k_vec = torch.zeros(16, dtype=F64), torch.zeros(16, dtype=F64)
    for vec in (q_vec, k_vec):  # fast band j pairs dims 2j and 2j + 1
        vec[: 2 * K] = torch.randn(2 * K, generator=g)
    x = torch.randn(1, 40, 16, generator=g, dtype=F64)  # content that moves the slow coordinate
    s = scores(enc, same_vector_at_every_position(q_vec, 40), same_vector_at_every_position(k_vec, 40), x)[0, 0]
    for offset in (0, 3, 11):
        diagonal = torch.diagonal(s, offset=offset)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-9)


def test_fast_band_counts_match_spec_table():
    """SPEC section 1: fast bands of d/2 at base 10k and 500k for each domain's head dim and context."""
    for d, L, at_10k, at_500k in [(32, 2048, 11, 8), (64, 2048, 21, 15), (64, 1000, 18, 13), (32, 1024, 9, 7)]:
        assert fast_band_count(rope_frequencies(d, 10_000.0), L) == at_10k
        assert fast_band_count(rope_frequencies(d, 500_000.0), L) == at_500k


def test_hope_rotates_fast_bands_and_leaves_slow_bands():
    """d=8, base 10k, L=16: theta = 1, 0.1, 0.01, 0.001; 2 pi / 16 = 0.39, so only band 0 is fast."""
    enc = encoding("hope", d=8, context=16, base=10_000.0)
    assert enc.theta.tolist() == pytest.approx([1.0, 0.0, 0.0, 0.0])
    vec = torch.arange(1.0, 9.0, dtype=F64)
    q2, _ = transform(enc, same_vector_at_every_position(vec, 6), same_vector_at_every_position(vec, 6))
    assert q2[0, 0, 5].tolist() == pytest.approx(rotate_pairs(vec.tolist(), [5.0, 0.0, 0.0, 0.0]))


def test_prope_keeps_the_highest_frequency_fraction():
    enc = encoding("prope", d=8, p=0.5, base=10_000.0)  # theta = 1, 0.1, 0.01, 0.001; keep j < 0.5 * 4
    assert enc.theta.tolist() == pytest.approx([1.0, 0.1, 0.0, 0.0])
    vec = torch.arange(1.0, 9.0, dtype=F64)
    q2, _ = transform(enc, same_vector_at_every_position(vec, 4), same_vector_at_every_position(vec, 4))
    assert q2[0, 0, 3].tolist() == pytest.approx(rotate_pairs(vec.tolist(), [3.0, 0.3, 0.0, 0.0]))
    assert encoding("prope", d=8, p=0.75).theta.gt(0).sum() == 3


def model_logits(pe, seed=0, **options):
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=19, context=24, n_layer=2, n_head=2, d_model=32, pe=pe, pe_options=options))
    tokens = torch.randint(0, 19, (2, 24), generator=torch.Generator().manual_seed(5))
    return model.double().eval()(tokens)


def test_prope_with_p_one_is_rope_and_with_p_zero_is_nope():
    assert torch.equal(model_logits("prope", p=1.0, base=10_000.0), model_logits("rope", base=10_000.0))
    assert torch.equal(model_logits("prope", p=0.0), model_logits("nope"))
    assert not torch.allclose(model_logits("prope", p=0.5), model_logits("nope"))


def test_lerope_equals_rope_at_initialisation_and_scales_frequencies_by_exp_a():
    assert torch.equal(model_logits("lerope", base=10_000.0), model_logits("rope", base=10_000.0))
    enc = encoding("lerope", d=8, base=10_000.0)
    with torch.no_grad():
        enc.log_scale.copy_(torch.tensor([0.0, math.log(2.0), -1.0, 0.5]))
    vec = torch.arange(1.0, 9.0, dtype=F64)
    q2, _ = transform(enc, same_vector_at_every_position(vec, 3), same_vector_at_every_position(vec, 3))
    theta = [1.0, 0.1 * 2.0, 0.01 * math.exp(-1.0), 0.001 * math.exp(0.5)]
    assert q2[0, 0, 2].tolist() == pytest.approx(rotate_pairs(vec.tolist(), [2 * t for t in theta]))


def test_rope_dup_uses_each_of_d_over_4_frequencies_on_two_planes():
    assert encoding("rope_dup", d=8, base=100.0).theta.tolist() == pytest.approx([1.0, 1.0, 0.1, 0.1])
    eight = encoding("rope_dup", d=16, block=8, base=100.0).theta.tolist()
    assert eight == pytest.approx([1.0] * 4 + [0.1] * 4)


def test_paley_matrices_are_spec_c4_and_orthogonal():
    c4 = paley_conference_matrix(4)
    assert c4.tolist() == [[0, 1, 1, 1], [1, 0, -1, 1], [1, 1, 0, -1], [1, -1, 1, 0]]
    for order in (4, 8):
        c = paley_conference_matrix(order)
        assert torch.equal(c @ c.T, (order - 1) * torch.eye(order, dtype=F64))
        assert torch.all(c.diagonal() == 0) and set(c.flatten().tolist()) == {-1.0, 0.0, 1.0}
        blocks = build_encoding("hdrope", {"block": order}, n_layer=1, n_head=1, d_model=16, context=16).block_basis
        q = c / math.sqrt(order - 1)
        assert torch.allclose(blocks.double(), torch.block_diag(*[q] * (16 // order)), atol=1e-7)  # Q on every block
        assert torch.allclose(q @ q.T, torch.eye(order, dtype=F64), atol=1e-12)
    with pytest.raises(ValueError, match="Paley-I"):
        paley_conference_matrix(6)


def hdrope_by_blocks(vec, m, block, base):
    """Reference HD-RoPE on one vector at position m: block i of N channels times Q R(m theta_i) Q^T with
    theta_i = base^(-N i / d), R = blockdiag(R2, ..., R2) (N/2 planes), Q = C / sqrt(N - 1), by a loop over blocks."""
    d = len(vec)
    q_basis = paley_conference_matrix(block) / math.sqrt(block - 1)
    out = torch.empty_like(vec)
    for i in range(d // block):
        phi = m * base ** (-block * i / d)
        r2 = torch.tensor([[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]], dtype=F64)
        channels = slice(block * i, block * (i + 1))
        out[channels] = q_basis @ torch.block_diag(*[r2] * (block // 2)) @ q_basis.T @ vec[channels]
    return out


@pytest.mark.parametrize("block, d", [(4, 8), (8, 16)])
def test_hdrope_scores_are_those_of_q_r_qt(block, d):
    """q'.k' equals (Q R_m Q^T q) . (Q R_n Q^T k) per block for every pair of positions (the implementation drops
    the back-rotation by Q, which cancels in the score, so the scores are what is compared)."""
    base, T = 100.0, 6
    enc = encoding("hdrope", d=d, block=block, base=base)
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(1, 1, T, d, generator=g, dtype=F64), torch.randn(1, 1, T, d, generator=g, dtype=F64)
    got = scores(enc, q, k)[0, 0]
    for m in range(T):
        for n in range(T):
            expected = hdrope_by_blocks(q[0, 0, m], m, block, base) @ hdrope_by_blocks(k[0, 0, n], n, block, base)
            assert got[m, n].item() == pytest.approx(expected.item(), abs=1e-6)  # theta is stored in fp32


def test_hdrope_model_equals_rope_dup_after_the_basis_change():
    """W_q, W_k of an hdrope model, multiplied by the fixed orthogonal basis change, give a rope_dup model
    with identical logits: Q is absorbable, so the pair isolates whether the mixing matters."""
    d, heads = 8, 2
    torch.manual_seed(0)
    cfg = dict(vocab_size=19, context=24, n_layer=2, n_head=heads, d_model=d * heads)
    hd = GPT(GPTConfig(**cfg, pe="hdrope", pe_options={"block": 4, "base": 100.0})).double().eval()
    dup = GPT(GPTConfig(**cfg, pe="rope_dup", pe_options={"block": 4, "base": 100.0})).double().eval()
    dup.load_state_dict(hd.state_dict())
    # hdrope plane (4i + 2p, 4i + 2p + 1) of y = Q^T x per block is rope_dup's band 2i + p on the same two dims
    change = torch.block_diag(*[paley_conference_matrix(4).T / math.sqrt(3)] * (d // 4))  # rope_dup's q = change @ q
    with torch.no_grad():
        for block in dup.blocks:
            weight = block.attn.qkv.weight  # rows: q heads, k heads, v heads
            for h in range(2 * heads):  # the q and k heads
                rows = slice(h * d, (h + 1) * d)
                weight[rows] = change @ weight[rows]
    tokens = torch.randint(0, 19, (2, 24), generator=torch.Generator().manual_seed(1))
    assert torch.allclose(hd(tokens), dup(tokens), atol=1e-9)
    assert not torch.allclose(hd(tokens), GPT(GPTConfig(**cfg, pe="rope_dup")).double().eval()(tokens), atol=1e-3)


def test_darope_matches_its_equation():
    """Per-head coordinate c_h = L sigmoid(w_h . x_m + alpha_h beta_m) on the slow bands, by a plain loop."""
    d, heads, L = 8, 2, 16
    enc = encoding("darope", d=d, heads=heads, context=L, base=10_000.0)  # theta = 1, .1, .01, .001: 1 fast band
    assert (enc.n_fast, enc.n_slow) == (1, 3)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        enc.prior_weight.copy_(torch.tensor([[0.7, -0.3]]))
    T = 5
    x = torch.randn(1, T, d * heads, generator=g, dtype=F64)
    q = torch.randn(1, heads, T, d, generator=g, dtype=F64)
    q2, _ = transform(enc, q, q, x)
    w, alpha = enc.coordinate_weight[0].detach(), enc.prior_weight[0].detach()
    for h in range(heads):
        for m in range(T):
            beta = math.log((m + 0.5) / L / (1 - (m + 0.5) / L))
            c = L / (1 + math.exp(-(float(w[h] @ x[0, m]) + float(alpha[h]) * beta)))
            angles = [m * 1.0, c * 0.1, c * 0.01, c * 0.001]
            assert q2[0, h, m].tolist() == pytest.approx(rotate_pairs(q[0, h, m].tolist(), angles), abs=1e-6)


def test_darope_n_slow_override():
    enc = encoding("darope", d=64, context=2048, base=500_000.0, n_slow=16)  # MAESTRO: 16 instead of 17
    assert (enc.n_fast, enc.n_slow) == (16, 16)
    assert encoding("darope", d=64, context=2048, base=500_000.0).n_slow == 17
    with pytest.raises(ValueError, match="n_slow"):
        encoding("darope", d=8, n_slow=5)


def test_darope_with_w_zero_alpha_one_gives_rope_scores_inside_the_window():
    """c_h = L sigmoid(logit((m + 0.5) / L)) = m + 0.5: RoPE angles plus a constant offset, which cancels."""
    L = 64
    dar, rope = encoding("darope", d=16, heads=2, context=L), encoding("rope", d=16, heads=2, context=L, base=5e5)
    with torch.no_grad():
        dar.coordinate_weight.zero_()
        dar.prior_weight.fill_(1.0)
    g = torch.Generator().manual_seed(4)
    q, k = torch.randn(2, 2, L, 16, generator=g, dtype=F64), torch.randn(2, 2, L, 16, generator=g, dtype=F64)
    x = torch.randn(2, L, 32, generator=g, dtype=F64)
    assert torch.allclose(scores(dar, q, k, x), scores(rope, q, k), atol=1e-8)


def test_darope_without_slow_band_contribution_is_hope():
    """Coordinates driven to c_h = 0 (sigmoid of a very negative logit): the slow bands stop turning, as HoPE's."""
    dar, hope = encoding("darope", d=16, context=64), encoding("hope", d=16, context=64)
    with torch.no_grad():
        dar.coordinate_weight.fill_(-100.0)
        dar.prior_weight.zero_()
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(1, 1, 30, 16, generator=g, dtype=F64), torch.randn(1, 1, 30, 16, generator=g, dtype=F64)
    x = torch.ones(1, 30, 16, dtype=F64)
    dar_q, dar_k = transform(dar, q, k, x)
    hope_q, hope_k = transform(hope, q, k)
    assert torch.allclose(dar_q, hope_q, atol=1e-12) and torch.allclose(dar_k, hope_k, atol=1e-12)


def test_darope_coordinates_stay_fp32_under_bf16_autocast():
    enc = build_encoding("darope", {}, n_layer=1, n_head=2, d_model=32, context=64)
    x = torch.randn(1, 64, 32)
    state = enc.prepare(torch.arange(64))
    reference = enc.coordinates(x, state["prior"], 0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under_autocast = enc.coordinates(x, state["prior"], 0)
        q = torch.randn(1, 2, 64, 16).bfloat16()
        q2, _ = enc.transform_qk(q, q, state, x.bfloat16(), 0)
    assert under_autocast.dtype == torch.float32 and torch.equal(under_autocast, reference)
    assert q2.dtype == torch.bfloat16


def test_xpos_matches_hand_computed_decayed_rotation():
    """d=4, base 100: theta = (1, 1/10); gamma 0.4: zeta = (0.4/1.4, 0.9/1.4) = (2/7, 9/14). B = 2 and positions
    0..2 (centre c = 1): q at m is rotated by m theta_j and scaled by zeta_j^((m - 1)/2), k by zeta_j^(-(m - 1)/2)."""
    xpos = build_encoding("xpos", {"base": 100.0, "scale_base": 2.0}, n_layer=1, n_head=1, d_model=4, context=4)
    assert xpos.zeta.tolist() == pytest.approx([2 / 7, 9 / 14])
    x = same_vector_at_every_position(torch.tensor([1.0, 2.0, 3.0, 4.0]), 3)
    q, k = xpos.transform_qk(x, x, xpos.prepare(torch.arange(3)), None, 0)
    for m in (0, 2):
        angles = [m * 1.0, m * 0.1]
        rotated = rotate_pairs([1.0, 2.0, 3.0, 4.0], angles)
        up = [(2 / 7) ** ((m - 1) / 2)] * 2 + [(9 / 14) ** ((m - 1) / 2)] * 2  # both components of a band alike
        assert q[0, 0, m].tolist() == pytest.approx([u * r for u, r in zip(up, rotated, strict=True)], rel=1e-6)
        assert k[0, 0, m].tolist() == pytest.approx([r / u for u, r in zip(up, rotated, strict=True)], rel=1e-6)
    assert q[0, 0, 1].tolist() == pytest.approx(rotate_pairs([1.0, 2.0, 3.0, 4.0], [1.0, 0.1]), rel=1e-6)  # m = c


def test_xpos_score_depends_only_on_relative_position_for_any_centre():
    """c cancels: the score matrix is the same for every centre, and each of its diagonals is constant; the score
    is RoPE's per band times zeta_j^((m - n)/B). The encoding itself takes the window's centre."""
    xpos = encoding("xpos", d=8, context=64, scale_base=4.0)
    g = torch.Generator().manual_seed(2)
    q, k = (same_vector_at_every_position(torch.randn(8, generator=g, dtype=F64), 20) for _ in range(2))
    pos = torch.arange(20)
    rotation = unit_rotations(xpos.angles(pos))

    def scores_at(centre):
        up, down = decay_powers(pos, xpos.zeta, xpos.scale_base, centre)
        q2, k2 = rotate(q, rotation * up[..., None]), rotate(k, rotation * down[..., None])
        return (q2 @ k2.transpose(-1, -2))[0, 0]

    reference = scores_at(9.5)
    for centre in (0.0, 3.0, 19.0, -40.0, 1000.0):
        assert torch.allclose(scores_at(centre), reference, rtol=1e-10, atol=1e-12), centre
    for offset in (0, -1, -6, -13):  # q at m, k at m + offset <= m
        diagonal = torch.diagonal(reference, offset=offset)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), rtol=1e-10)
    assert torch.allclose(scores(xpos, q, k)[0, 0], reference, rtol=1e-10)  # c = (0 + 19) / 2
    # one band: the score is RoPE's times zeta_0^((m - n)/B)
    q1, k1 = torch.zeros_like(q), torch.zeros_like(k)
    q1[..., :2], k1[..., :2] = q[..., :2], k[..., :2]
    rope = scores(encoding("rope", d=8, context=64), q1, k1)[0, 0]
    distance = (pos[:, None] - pos[None, :]).to(F64)
    assert torch.allclose(scores(xpos, q1, k1)[0, 0], rope * xpos.zeta[0] ** (distance / 4.0), rtol=1e-10)


def test_xpos_tables_and_rotation_stay_fp32_under_bf16_autocast():
    xpos = build_encoding("xpos", {}, n_layer=1, n_head=2, d_model=32, context=2048)
    reference_tables = xpos.prepare(torch.arange(2048))
    q = torch.randn(1, 2, 2048, 16).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tables = xpos.prepare(torch.arange(2048))
        q2, k2 = xpos.transform_qk(q, q, tables, None, 0)
    assert all(t.dtype == torch.float32 and torch.equal(t, r) for t, r in zip(tables, reference_tables, strict=True))
    q_ref, k_ref = xpos.transform_qk(q.float(), q.float(), reference_tables, None, 0)
    assert q2.dtype == k2.dtype == torch.bfloat16
    assert torch.equal(q2, q_ref.bfloat16()) and torch.equal(k2, k_ref.bfloat16())  # fp32 math, one rounding


def test_yarn_frequencies():
    """d=64, base 10k, L=2048, s=4: bands with > 32 turns in L keep theta, bands with < 1 turn use theta / s,
    and the ramp in between is linear in the band index between floor/ceil of the 32- and 1-turn bands."""
    d, base, L, s = 64, 10_000.0, 2048, 4.0
    theta = rope_frequencies(d, base).double()
    scaled = yarn_frequencies(theta, d, base, L, s).double()
    turns = L * theta / (2 * math.pi)
    assert torch.allclose(scaled[turns > 32], theta[turns > 32])
    assert torch.allclose(scaled[turns < 1], theta[turns < 1] / s)
    low = math.floor(d * math.log(L / (2 * math.pi * 32)) / (2 * math.log(base)))  # 8.06
    high = math.ceil(d * math.log(L / (2 * math.pi * 1)) / (2 * math.log(base)))  # 20.1
    assert (low, high) == (8, 21)
    j = 15
    gamma = (j - low) / (high - low)
    assert scaled[j].item() == pytest.approx((1 - gamma) * theta[j].item() + gamma * theta[j].item() / s, rel=1e-6)
    assert torch.equal(yarn_frequencies(theta, d, base, L, 1.0), theta)


def test_yarn_scale_one_is_the_identity_and_scale_s_multiplies_by_its_magnitude():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=19, context=16, n_layer=2, n_head=2, d_model=32, pe="rope")).eval()
    tokens = torch.randint(0, 19, (2, 64), generator=torch.Generator().manual_seed(1))
    assert torch.equal(with_yarn(model, 16)(tokens[:, :16]), model(tokens[:, :16]))
    yarn = with_yarn(model, 64)
    assert yarn.encoding.scale == 4.0 and yarn.encoding.magnitude == pytest.approx(0.1 * math.log(4.0) + 1)
    rotation = yarn.encoding.prepare(torch.arange(3))  # (T, d/2, 2): cos and sin, times mscale
    assert rotation[0].flatten().tolist() == pytest.approx([yarn.encoding.magnitude, 0.0] * 8)  # cos 1, sin 0
    assert rotation[2].norm(dim=-1).tolist() == pytest.approx([yarn.encoding.magnitude] * 8)
    assert not torch.allclose(yarn(tokens), model(tokens))
    with pytest.raises(ValueError, match="trained rope model"):
        with_yarn(GPT(GPTConfig(vocab_size=19, context=16, n_layer=1, n_head=2, d_model=32, pe="nope")), 64)


def test_hdrope_mixing_stays_fp32_under_bf16_autocast():
    enc = build_encoding("hdrope", {}, n_layer=1, n_head=2, d_model=32, context=64)
    q = torch.randn(1, 2, 64, 16).bfloat16()
    state = enc.prepare(torch.arange(64))
    reference, _ = enc.transform_qk(q, q, state, None, 0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rotated, _ = enc.transform_qk(q, q, state, None, 0)
    assert rotated.dtype == torch.bfloat16 and torch.equal(rotated, reference)


def test_compiled_and_eager_rotations_agree(monkeypatch):
    """`rotate` runs a complex product in eager mode and the real form under torch.compile: same values, and the
    same gradients for x and for a rotation table that carries one (LeRoPE, DaRoPE), on strided q/k views."""
    g = torch.Generator().manual_seed(6)
    qkv = torch.randn(2, 5, 3 * 3 * 4, generator=g, dtype=F64, requires_grad=True)
    q = qkv.view(2, 5, 3, 3, 4).permute(2, 0, 3, 1, 4)[0]  # (B, H, T, d) view into the projection, as in the model
    angle = torch.randn(2, 3, 5, 2, generator=g, dtype=F64, requires_grad=True)
    weight = torch.randn(2, 3, 5, 4, generator=g, dtype=F64)

    def run():
        loss = (rotate(q, unit_rotations(angle)) * weight).sum()
        return (loss, *torch.autograd.grad(loss, (qkv, angle)))

    eager = run()
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    real_form = run()
    for a, b in zip(eager, real_form, strict=True):
        assert torch.allclose(a, b, atol=1e-12)


def central_differences(loss, param, eps=1e-6):
    numeric = torch.zeros_like(param)
    for i in range(param.numel()):
        with torch.no_grad():
            param.view(-1)[i] += eps
            up = loss().item()
            param.view(-1)[i] -= 2 * eps
            down = loss().item()
            param.view(-1)[i] += eps
        numeric.view(-1)[i] = (up - down) / (2 * eps)
    return numeric


@pytest.mark.parametrize("name", ["lerope", "darope", "pope", "hdrope"])
def test_gradients_match_finite_differences(name):
    """The fast paths (complex products, angle sums, the dropped back-rotation) differentiate correctly: the
    gradient of a weighted sum of scores for q, k and every learned positional parameter, against central
    differences in float64."""
    enc = encoding(name, d=8, heads=2, context=16)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():  # away from the initial values, and delta inside its clamp range [-2 pi, 0]
        for param in enc.parameters():
            param.uniform_(-1.5, -0.5, generator=g)
    q, k = (torch.randn(2, 2, 6, 8, generator=g, dtype=F64, requires_grad=True) for _ in range(2))
    x = torch.randn(2, 6, 16, generator=g, dtype=F64)  # DaRoPE's coordinates read it
    weight = torch.randn(2, 2, 6, 6, generator=g, dtype=F64)

    def loss():
        return (scores(enc, q, k, x) * weight).sum()

    assert torch.autograd.gradcheck(lambda q, k: scores(enc, q, k, x), (q, k))
    for param in [q, k, *enc.parameters()]:
        (analytic,) = torch.autograd.grad(loss(), param)
        assert torch.allclose(analytic, central_differences(loss, param), atol=1e-6, rtol=1e-5)


# Hand counts at n_layer=2, n_head=4, d_model=32 (head dim d=8), L=T=16; forward FLOPs per token added to the
# decoder. Rotation: 3 FLOPs per element (complex product: 4 multiplications, 2 additions) of q and of k.
ROTATION = 2 * 32 * 3  # per layer
FLOP_COUNTS = [
    ("rope", {}, 2 * ROTATION),
    ("hope", {}, 2 * ROTATION),  # slow bands are multiplied by cos 0 = 1, sin 0 = 0 all the same
    ("prope", {}, 2 * ROTATION),
    ("lerope", {}, 2 * ROTATION),  # the (T, d/2) table with exp(a) is per forward pass: neglected
    ("rope_dup", {}, 2 * ROTATION),
    ("yarn", {"scale": 2.0}, 2 * ROTATION),
    ("xpos", {}, 2 * ROTATION),  # the decay is folded into the per-forward (cos, sin) tables: neglected
    # dense (8 x 8) basis change per head: 2 * 8 FLOPs per element of q and of k, then the rotation
    ("hdrope", {}, 2 * (2 * 32 * (2 * 8) + ROTATION)),
    # base 500k, d=8: theta = 1, .038, .0014, .00005 and 2 pi / 16 = .39, so K=1 fast and S=3 slow bands.
    # projection 2*32*4, alpha*beta + logit 2*4, sigmoid and *L 2*4, slow angles with cos and sin 3*4*3
    ("darope", {}, 2 * (2 * 32 * 4 + 2 * 4 + 2 * 4 + 3 * 4 * 3 + ROTATION)),
    # q.k at width 16 instead of 8 and P.V on v zero-padded to 16: per head 2 * 8 * (16 + 1) / 2 each, 4 heads;
    # softplus of q and k 2*32, magnitudes times cos and sin 2*2*32
    ("pope", {}, 2 * (2 * (4 * 2 * 8 * 17 // 2) + 2 * 32 + 4 * 32)),
]


@pytest.mark.parametrize("name, options, expected", FLOP_COUNTS)
def test_flops_per_token_by_hand(name, options, expected):
    enc = build_encoding(name, options, n_layer=2, n_head=4, d_model=32, context=16)
    assert enc.flops_per_token(16) == expected


@pytest.mark.parametrize("name, matmul_flops", [("hdrope", 2 * 32 * (2 * 8)), ("darope", 2 * 32 * 4)])
def test_matmul_part_of_the_count_is_what_runs(name, matmul_flops):
    """torch's FLOP counter sees the matrix products of one layer's transform: HD-RoPE's dense (d x d) basis change
    of q and k, DaRoPE's (d_model x H) coordinate projection; per token they match the hand count's matmul term."""
    enc = build_encoding(name, {}, n_layer=1, n_head=4, d_model=32, context=16)
    B, T = 3, 16
    q = k = torch.randn(B, 4, T, 8)
    state = enc.prepare(torch.arange(T))
    with FlopCounterMode(display=False) as counter:
        enc.transform_qk(q, k, state, torch.randn(B, T, 32), 0)
    assert counter.get_total_flops() == matmul_flops * B * T
