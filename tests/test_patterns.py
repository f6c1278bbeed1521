"""Roster 3 (SPEC 1c): the layer patterns, partial rotation and FoPE. Each layer's attention logits against SPEC
1c's definition written out by loops in float64; the layer lists at the presets' depths; the invariants (relative
position on rotary layers, no position on NoPE layers, the windows' reach at evaluation lengths, the temperature
at chosen positions); FoPE against its references' layout and initialisation; refusals, FLOPs and descriptions.
The comparison with the reference implementations' own modules is tests/test_reference_patterns.py."""

from __future__ import annotations

import math

import pytest
import torch

from models.encodings import build_encoding
from models.encodings.pattern import Layer, LayerPattern
from models.encodings.rope import rope_frequencies
from models.encodings.yarn import with_yarn
from models.gpt import GPT, GPTConfig
from models.windows import visible_keys
from tests.reference_encodings import fope_in_neox_layout, layer_logits_by_loops, neox_to_adjacent, rotated_by_loop

F64 = torch.float64
PATTERNS = ("nope_every", "irope", "rnope_swa", "local_global")


def encoding(name, n_layer=4, n_head=2, d=8, context=64, **options):
    return build_encoding(name, options, n_layer=n_layer, n_head=n_head, d_model=d * n_head, context=context).double()


def fp32(values):
    """The frequencies as the suite stores them (fp32, SPEC 1 numerics), for a float64 comparison."""
    return [float(torch.tensor(v, dtype=torch.float32)) for v in values]


def thetas(base, d=8):
    """base^(-2b/d), b = 0 .. d/2 - 1, in float64 from the definition."""
    return [base ** (-2 * b / d) for b in range(d // 2)]


def hook_logits(enc, q, k, layer):
    """(B, H, T, T) logits of `layer` through the encoding's hooks, as models.gpt attends: transform_qk, q.k^T times
    the softmax scale, -inf outside the causal window."""
    T = q.shape[-2]
    q2, k2 = enc.transform_qk(q, k, enc.prepare(torch.arange(T)), None, layer)
    logits = q2 @ k2.transpose(-1, -2) * enc.softmax_scale
    return logits.masked_fill(~visible_keys(enc.attention_window(layer), T, q.device), float("-inf"))


def temperature(attn_scale, floor_scale):
    return lambda i: 1 + attn_scale * math.log(1 + math.floor((i + 1) / floor_scale))


TEMPERATURE_ATOL = 1e-5  # tau is computed in fp32, as the reference computes it: 1 ulp of tau times logits of ~10


# Each layer as SPEC 1c defines it, at L = 64, head dim 8, base 10k (and Gemma 3's 1M on its global layer); the
# fractions give windows of 10 and 9 tokens and a temperature floor of 9 (over 20 positions: two or three windows).
LAYER_CASES = [
    ("nope_every", {}, 4, {0: dict(theta=thetas(1e4)), 2: dict(theta=thetas(1e4)), 3: dict()}),
    (
        "irope",
        {"chunk_fraction": 10 / 64, "floor_fraction": 9 / 64},
        4,
        {
            0: dict(theta=thetas(1e4), qk_norm=True, window=("chunked", 10)),
            3: dict(temperature=temperature(0.1, 9)),
        },
    ),
    ("rnope_swa", {"window_fraction": 9 / 64}, 4, {1: dict(theta=thetas(1e4), window=("sliding", 9)), 3: dict()}),
    (
        "local_global",
        {"window_fraction": 9 / 64},
        6,
        {0: dict(theta=thetas(1e4), window=("sliding", 9)), 5: dict(theta=thetas(1e6))},
    ),
]


@pytest.mark.parametrize("name, options, n_layer, layers", LAYER_CASES)
def test_each_layers_logits_are_spec_1cs_by_loops(name, options, n_layer, layers):
    enc = encoding(name, n_layer=n_layer, **options)
    g = torch.Generator().manual_seed(3)
    q, k = (torch.randn(1, 2, 20, 8, generator=g, dtype=F64) * 2 for _ in range(2))
    for layer, reference in layers.items():
        if "theta" in reference:
            reference = {**reference, "theta": fp32(reference["theta"])}
        got = hook_logits(enc, q, k, layer)
        for h in range(2):
            expected = layer_logits_by_loops(q[0, h], k[0, h], **reference)
            assert torch.equal(got[0, h].isinf(), expected.isinf()), (name, layer)
            atol = TEMPERATURE_ATOL if "temperature" in reference else 1e-12
            assert torch.allclose(got[0, h], expected, rtol=0, atol=atol), (name, layer)


def test_the_rotary_layers_frequencies_are_base_to_the_minus_2b_over_d():
    for name, base in (("nope_every", 1e4), ("rnope_swa", 1e4), ("irope", 1e4)):
        part = encoding(name, d=32).parts[0]
        assert part.theta.tolist() == pytest.approx(thetas(base, 32), rel=1e-7)
    parts = encoding("local_global", n_layer=6, d=32).parts
    assert [p.theta.tolist() for p in parts] == [
        pytest.approx(thetas(1e4, 32), rel=1e-7),
        pytest.approx(thetas(1e6, 32), rel=1e-7),
    ]


# Which layers have no position (NoPE, or Gemma 3's global layers), at the presets' depths: tiny 2, cpu 4,
# Sleep-EDF paper 6, JSB paper 8, MAESTRO paper 12, HRG paper 24 (SPEC 1c's table).
ODD_LAYERS = {
    "nope_every": {2: [], 4: [3], 6: [3], 8: [3, 7], 12: [3, 7, 11], 24: [3, 7, 11, 15, 19, 23]},
    "irope": {2: [], 4: [3], 6: [3], 8: [3, 7], 12: [3, 7, 11], 24: [3, 7, 11, 15, 19, 23]},
    "rnope_swa": {2: [], 4: [3], 6: [3], 8: [3, 7], 12: [3, 7, 11], 24: [3, 7, 11, 15, 19, 23]},
    "local_global": {2: [], 4: [], 6: [5], 8: [5], 12: [5, 11], 24: [5, 11, 17, 23]},
}


@pytest.mark.parametrize("name", PATTERNS)
def test_the_layers_at_the_presets_depths(name):
    for n_layer, odd in ODD_LAYERS[name].items():
        enc = encoding(name, n_layer=n_layer)
        windowed = [layer for layer in range(n_layer) if enc.attention_window(layer) is not None]
        if name == "local_global":  # the global layers: base 1M, every earlier key
            assert [layer for layer, plan in enumerate(enc.plan) if plan.options.get("base") == 1e6] == odd
        else:
            assert [layer for layer, plan in enumerate(enc.plan) if plan.encoding != "rope"] == odd
        expected_windowed = [] if name == "nope_every" else [layer for layer in range(n_layer) if layer not in odd]
        assert windowed == expected_windowed


@pytest.mark.parametrize("name", PATTERNS)
def test_rotary_layers_score_by_relative_position_only(name):
    enc = encoding(name, n_layer=6, n_head=1, d=16, context=256)
    g = torch.Generator().manual_seed(1)
    q_vec, k_vec = torch.randn(16, generator=g, dtype=F64), torch.randn(16, generator=g, dtype=F64)
    rotary = [layer for layer, plan in enumerate(enc.plan) if plan.encoding == "rope"]
    assert rotary
    for layer in rotary:
        for offset in (0, 1, 5):
            scores = [pair_score(enc, q_vec, k_vec, m, m + offset, layer) for m in (0, 3, 9, 40)]
            assert scores == pytest.approx([scores[0]] * 4, abs=1e-9), (layer, offset)
        assert pair_score(enc, q_vec, k_vec, 0, 1, layer) != pytest.approx(pair_score(enc, q_vec, k_vec, 0, 4, layer))


def pair_score(enc, q_vec, k_vec, m, n, layer):
    """q_vec at position m against k_vec at position n through the layer's hook (no window, no scale)."""
    T = max(m, n) + 1
    q, k = torch.zeros(2, 1, 1, T, q_vec.numel(), dtype=F64)
    q[0, 0, m], k[0, 0, n] = q_vec, k_vec
    q2, k2 = enc.transform_qk(q, k, enc.prepare(torch.arange(T)), None, layer)
    return float(q2[0, 0, m] @ k2[0, 0, n])


@pytest.mark.parametrize("name", ["nope_every", "rnope_swa"])
def test_nope_layers_pass_q_and_k_through(name):
    enc = encoding(name)
    q, k = torch.randn(2, 2, 2, 30, 8, dtype=F64)
    q2, k2 = enc.transform_qk(q, k, enc.prepare(torch.arange(30)), None, 3)
    assert torch.equal(q2, q) and torch.equal(k2, k)


def test_iropes_nope_layer_scales_the_query_only_so_the_keys_order_is_invisible():
    """tau(m) q_m . k_n: the same for a key vector at any earlier position n."""
    enc = encoding("irope", floor_fraction=9 / 64)
    g = torch.Generator().manual_seed(2)
    q_vec, k_vec = torch.randn(8, generator=g, dtype=F64), torch.randn(8, generator=g, dtype=F64)
    for m in (5, 12, 30):
        scores = [pair_score(enc, q_vec, k_vec, m, n, 3) for n in (0, 1, m // 2, m)]
        tau = 1 + 0.1 * math.log(1 + math.floor((m + 1) / 9))
        assert scores == pytest.approx([tau * float(q_vec @ k_vec)] * 4, rel=1e-6)


def test_the_temperature_at_chosen_positions():
    """tau(m) = 1 + 0.1 ln(1 + floor((m + 1) / 32)) at L = 1024 (floor L/32 = 32): 1 up to m = 30, then steps of
    ln 2, ln 3, ...; at the end of the training window ln 33, at 8L ln 257. Hand-computed values."""
    enc = encoding("temperature", context=1024)
    assert enc.floor_scale == 32
    tau = enc.temperature(torch.tensor([0, 30, 31, 62, 63, 1023, 8191])).tolist()
    expected = [1.0, 1.0, 1.0693147181, 1.0693147181, 1.1098612289, 1.3496507561, 1.5549076085]
    assert tau == pytest.approx(expected, rel=1e-7)
    irope = encoding("irope", context=1024)  # the pattern's NoPE layer: the same temperature
    assert irope.parts[1].floor_scale == 32 and irope.parts[1].attn_scale == 0.1


def test_iropes_ablations_drop_the_normalisation_or_the_temperature_and_nothing_else():
    """Issue 48's ablations, as their configs build them at the JSB cpu model: `qk_norm: false` leaves the rotary
    layers' q and k as rope rotates them (irope normalises them to mean square 1 per head vector: checked by hand);
    `attn_scale: 0` makes the NoPE layer pass q and k through. Every other layer is irope's, bit for bit."""
    from pipelines.experiment.config import compose_config

    def built(pe, **options):
        cfg = compose_config(["domain=jsb", "preset=cpu", f"pe={pe}"])
        opts = {**dict(cfg.pe.options), **options}
        return build_encoding(cfg.pe.name, opts, n_layer=4, n_head=2, d_model=16, context=1024).double()

    irope, no_norm, no_temp = built("irope"), built("irope_no_qknorm"), built("irope_no_temp")
    rope = encoding("rope", n_head=2, d=8, context=1024, base=1e4)
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 1, 2, 100, 8, generator=g, dtype=F64)
    T = torch.arange(100)

    def hooks(enc, layer):
        return enc.transform_qk(q, k, enc.prepare(T), None, layer)

    rotated = rope.transform_qk(q, k, rope.prepare(T), None, 0)
    for layer in (0, 1, 2):
        assert all(torch.equal(a, b) for a, b in zip(hooks(no_norm, layer), rotated, strict=True))
        normed_q, normed_k = hooks(irope, layer)
        for normed, plain in ((normed_q, rotated[0]), (normed_k, rotated[1])):
            by_hand = plain / torch.sqrt(plain.pow(2).mean(-1, keepdim=True) + 1e-5)
            assert torch.allclose(normed, by_hand, atol=1e-12)
        assert all(torch.equal(a, b) for a, b in zip(hooks(no_temp, layer), hooks(irope, layer), strict=True))
        assert no_norm.attention_window(layer) == irope.attention_window(layer) == no_temp.attention_window(layer)
    assert all(torch.equal(a, b) for a, b in zip(hooks(no_temp, 3), (q, k), strict=True))
    assert not torch.equal(hooks(irope, 3)[0], q)  # irope's own NoPE layer does scale the query (past m = 30)
    assert all(torch.equal(a, b) for a, b in zip(hooks(no_norm, 3), hooks(irope, 3), strict=True))


def test_irope_sliding_changes_only_the_rotary_layers_window_from_chunks_to_a_sliding_one():
    """Issue 66's ablation, as its config builds it at the MAESTRO pattern study's model (L 1024, 4 layers): every
    layer's q/k hook is irope's bit for bit; the three rotary layers attend over the last 32 tokens instead of their
    chunk of 32 (a query at a chunk's start sees 32 keys, not 1: counted by hand), the NoPE layer over every key."""
    from pipelines.experiment.config import compose_config

    def built(pe):
        cfg = compose_config(["domain=maestro", "preset=cpu", f"pe={pe}"])
        return build_encoding(cfg.pe.name, dict(cfg.pe.options), n_layer=4, n_head=2, d_model=16, context=1024)

    irope, sliding = built("irope").double(), built("irope_sliding").double()
    g = torch.Generator().manual_seed(6)
    q, k = torch.randn(2, 1, 2, 100, 8, generator=g, dtype=F64)
    T = torch.arange(100)
    for layer in range(4):
        ours = sliding.transform_qk(q, k, sliding.prepare(T), None, layer)
        theirs = irope.transform_qk(q, k, irope.prepare(T), None, layer)
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    assert [str(sliding.attention_window(layer)) for layer in range(3)] == 3 * ["sliding 32"]
    assert [str(irope.attention_window(layer)) for layer in range(3)] == 3 * ["chunked 32"]
    assert sliding.attention_window(3) is None and irope.attention_window(3) is None
    positions = torch.arange(100)
    seen = sliding.attention_window(0).allows(positions[:, None], positions[None, :]).sum(-1)
    chunk_seen = irope.attention_window(0).allows(positions[:, None], positions[None, :]).sum(-1)
    assert seen[64].item() == 32 and chunk_seen[64].item() == 1  # query 64 starts the third chunk
    assert seen.tolist() == [min(m + 1, 32) for m in range(100)]
    assert chunk_seen.tolist() == [m % 32 + 1 for m in range(100)]


def test_irope_sliding_is_irope_with_the_same_weights_and_differs_only_where_a_window_reaches_past_its_chunk():
    """The whole model: built under one seed, irope and irope_sliding hold the same parameters bit for bit (the
    option draws nothing). Their rotary layers' masks differ exactly by the keys a sliding window of C sees in the
    previous chunk (j < C floor(i / C) and i - j < C: a double loop, not AttentionWindow), none removed; the NoPE
    layer's mask is the causal one in both. So the outputs agree to rounding at every position of the first chunk
    (the two masks are equal there) and nowhere after it (where a query's window is its chunk, the keys it reads
    already differ in the layer below)."""
    C, T = 8, 29  # chunk_fraction 1/8 of L = 64: chunks of 8; T spans three chunks and part of a fourth

    def model(sliding):
        torch.manual_seed(3)
        options = dict(chunk_fraction=0.125, floor_fraction=0.125, sliding_window=sliding)
        config = GPTConfig(vocab_size=19, context=64, n_layer=4, n_head=2, d_model=16, pe="irope", pe_options=options)
        return GPT(config)

    chunked, sliding = model(False).double(), model(True).double()
    ours, theirs = sliding.state_dict(), chunked.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[name], theirs[name]) for name in ours)
    added = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        for j in range(i + 1):
            added[i, j] = j < C * (i // C) and i - j < C  # in an earlier chunk, inside the window
    for layer in range(3):
        chunk_mask = visible_keys(chunked.encoding.attention_window(layer), T, torch.device("cpu"))
        window_mask = visible_keys(sliding.encoding.attention_window(layer), T, torch.device("cpu"))
        assert torch.equal(window_mask & ~chunk_mask, added) and not torch.any(chunk_mask & ~window_mask)
    assert chunked.encoding.attention_window(3) is None and sliding.encoding.attention_window(3) is None
    assert added.sum().item() == sum(C - 1 - i % C for i in range(C, T))  # per query past the first chunk
    tokens = torch.randint(0, 19, (2, T), generator=torch.Generator().manual_seed(4))
    out_chunked, out_sliding = chunked(tokens), sliding(tokens)
    assert torch.allclose(out_chunked[:, :C], out_sliding[:, :C], atol=1e-12)
    differs = (out_chunked - out_sliding).abs().amax(dim=(0, 2)) > 1e-6
    assert differs[C:].all()


def test_local_global_at_the_cpu_presets_depth_is_the_window_alone():
    """The third ablation needs no config of its own: at the cpu presets' 4 layers Gemma 3's rule has no global
    layer, so local_global is RoPE 10k over a sliding window of L/32 in every layer (JSB cpu: 32), with no NoPE
    layer and no normalisation: rnope_swa without its global NoPE layer."""
    from pipelines.experiment.config import compose_config

    cfg = compose_config(["domain=jsb", "preset=cpu", "pe=local_global"])
    model = cfg.model
    enc = build_encoding("local_global", dict(cfg.pe.options), n_layer=model.n_layer, n_head=model.n_head,
                         d_model=model.d_model, context=model.context)  # fmt: skip
    assert model.n_layer == 4 and enc.describe()["layers"] == 4 * ["rope(base=10000) sliding 32"]


@pytest.mark.parametrize("name", ["irope", "rnope_swa", "local_global"])
def test_the_windows_reach_at_three_times_the_training_length(name):
    """At L = 64 (windows of L/32 = 2, the scale rule's floor set to 1), scored at T = 192: every layer's attention
    weights are positive exactly where its window (or, on the global layers, causality) lets the query see the
    key."""
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=13, context=64, n_layer=6, n_head=2, d_model=16, pe=name, pe_options={"min_tokens": 1}
    )
    model = GPT(config).double().eval()
    tokens = torch.randint(0, 13, (1, 192), generator=torch.Generator().manual_seed(0))
    windows = [model.encoding.attention_window(layer) for layer in range(6)]
    assert {str(w) for w in windows} - {"None"} == {"chunked 2" if name == "irope" else "sliding 2"}
    for window, weights in zip(windows, model.attention_weights(tokens), strict=True):
        assert torch.equal(weights[0] > 0, visible_keys(window, 192, weights.device).expand(2, -1, -1))


# ---- partial rotation ---------------------------------------------------------------------------------------------


def test_partial_rotation_spreads_ropes_range_over_its_bands_where_prope_truncates_it():
    """d = 32, base 10k: 25% is 4 bands at 10^(-4j/4) = 1, 0.1, 0.01, 0.001 (Qwen3-Next's rule, rotary_dim = 8);
    p-RoPE at p = 0.25 keeps 4 bands of the full spectrum, 10^(-4j/16) = 1, 0.562, 0.316, 0.178."""
    partial = encoding("partial_rotary", n_head=1, d=32, fraction=0.25)
    assert partial.theta.tolist() == pytest.approx([1.0, 0.1, 0.01, 0.001] + [0.0] * 12, rel=1e-6)
    prope = encoding("prope", n_head=1, d=32, p=0.25)
    assert prope.theta.tolist() == pytest.approx([1.0, 0.5623413, 0.3162278, 0.1778279] + [0.0] * 12, rel=1e-6)
    ten = encoding("partial_rotary", n_head=1, d=32, fraction=0.1)  # round(1.6) = 2 bands: 1, 10^-2
    assert ten.theta.tolist() == pytest.approx([1.0, 0.01] + [0.0] * 14, rel=1e-6)
    ten_64 = encoding("partial_rotary", n_head=1, d=64, fraction=0.1)  # round(3.2) = 3 bands: 10^(-4j/3)
    assert ten_64.theta.tolist()[:4] == pytest.approx([1.0, 10 ** (-4 / 3), 10 ** (-8 / 3), 0.0], rel=1e-6)
    assert ten_64.describe()["rotated_dims"] == 6


def test_partial_rotation_is_a_rope_of_the_rotated_width_beside_untouched_dimensions():
    partial = encoding("partial_rotary", n_head=2, d=32, fraction=0.25)
    rope8 = encoding("rope", n_head=2, d=8)  # RoPE over the first 8 dimensions only, same base
    q, k = torch.randn(2, 3, 2, 40, 32, dtype=F64)
    q2, k2 = partial.transform_qk(q, k, partial.prepare(torch.arange(40)), None, 0)
    r, s = rope8.transform_qk(q[..., :8], k[..., :8], rope8.prepare(torch.arange(40)), None, 0)
    assert torch.allclose(q2[..., :8], r, atol=1e-12) and torch.allclose(k2[..., :8], s, atol=1e-12)
    assert torch.equal(q2[..., 8:], q[..., 8:]) and torch.equal(k2[..., 8:], k[..., 8:])


# ---- FoPE ---------------------------------------------------------------------------------------------------------


def fope(d=32, n_head=2, n_layer=2, context=1024, **options):
    return encoding("fope", n_layer=n_layer, n_head=n_head, d=d, context=context, **options)


def test_fope_keeps_the_bands_that_turn_in_the_training_window():
    """theta_j >= 2 pi / L: d = 32, base 10k, L = 1024: 9 bands (JSB cpu); L = 2048: 11 (JSB paper)."""
    assert fope().fourier_bands == 9 and fope(context=2048).fourier_bands == 11
    enc = fope()
    assert enc.cos_mix.shape == enc.sin_mix.shape == (2, 2, 9, 9)
    assert enc.theta[9:].eq(0).all() and enc.theta[:9].gt(2 * math.pi / 1024).all()


def test_fope_equals_its_references_formula_in_their_layout():
    """Against fope_in_neox_layout (vLLM's forward_native, the authors' apply_rotary_pos_emb), per layer and head,
    the heads' dimensions permuted from NeoX halves to adjacent pairs; mixing moved off its initial values."""
    enc = fope(d=16, context=64)  # K = 6 of 8 bands at L = 64
    K = enc.fourier_bands
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        enc.cos_mix.normal_(generator=g)
        enc.sin_mix.normal_(generator=g)
    x = torch.randn(1, 2, 50, 16, generator=g, dtype=F64)  # past L: FoPE is defined at every position
    state = enc.prepare(torch.arange(50))
    perm = neox_to_adjacent(16)
    for layer in range(2):
        rotated, _ = enc.transform_qk(x[..., perm], x[..., perm], state, None, layer)
        for h in range(2):
            expected = fope_in_neox_layout(
                x[0, h], torch.arange(50), enc.theta[:K], enc.cos_mix[layer, h], enc.sin_mix[layer, h]
            )
            assert torch.allclose(rotated[0, h], expected[:, perm], rtol=0, atol=1e-12)


def test_fope_one_band_by_hand():
    """Output band 0 at m = 3 with the mixing set by hand, d = 4, base 100 (theta = 1, 0.1), L = 64 (2 pi / L =
    0.098: both bands kept, K = 2): c = A00 cos(3) + A10 cos(0.3), s = B00 sin(3) + B10 sin(0.3), and the pair
    (1, 2) becomes (1 c - 2 s, 1 s + 2 c)."""
    enc = encoding("fope", n_layer=1, n_head=1, d=4, context=64, base=100.0)
    assert enc.fourier_bands == 2
    with torch.no_grad():
        enc.cos_mix.copy_(torch.tensor([[[[0.5, 0.0], [0.25, 1.0]]]]))
        enc.sin_mix.copy_(torch.tensor([[[[2.0, 0.0], [-1.0, 1.0]]]]))
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=F64).expand(1, 1, 4, 4)
    out, _ = enc.transform_qk(x, x, enc.prepare(torch.arange(4)), None, 0)
    c = 0.5 * math.cos(3 * 1.0) + 0.25 * math.cos(3 * 0.1)
    s = 2.0 * math.sin(3 * 1.0) - 1.0 * math.sin(3 * 0.1)
    assert out[0, 0, 3, :2].tolist() == pytest.approx([1 * c - 2 * s, 1 * s + 2 * c], abs=1e-7)


def test_fope_with_identity_mixing_is_hope():
    enc, hope = fope(context=256), encoding("hope", n_head=2, d=32, context=256, base=1e4)
    with torch.no_grad():
        enc.cos_mix.copy_(torch.eye(enc.fourier_bands).expand_as(enc.cos_mix))
        enc.sin_mix.copy_(torch.eye(enc.fourier_bands).expand_as(enc.sin_mix))
    q, k = torch.randn(2, 2, 2, 300, 32, dtype=F64)
    ours = enc.transform_qk(q, k, enc.prepare(torch.arange(300)), None, 1)
    theirs = hope.transform_qk(q, k, hope.prepare(torch.arange(300)), None, 1)
    for a, b in zip(ours, theirs, strict=True):
        assert torch.allclose(a, b, rtol=0, atol=1e-12)


def test_fope_is_initialised_as_the_references_draw_it():
    """Per layer: xavier_normal_(gain 0.3) on a (H, K, K) tensor for the sine mixing, then the cosine one, plus the
    identity (the authors' FourierEmbedding.reset_parameters, `eye_xavier_norm`): replayed from the same seed."""
    torch.manual_seed(11)
    enc = encoding("fope", n_layer=3, n_head=4, d=32, context=1024)
    torch.manual_seed(11)
    for layer in range(3):
        sin_draw, cos_draw = torch.empty(4, 9, 9), torch.empty(4, 9, 9)
        torch.nn.init.xavier_normal_(sin_draw, gain=0.3)
        torch.nn.init.xavier_normal_(cos_draw, gain=0.3)
        assert torch.equal(enc.sin_mix[layer].float(), sin_draw + torch.eye(9))
        assert torch.equal(enc.cos_mix[layer].float(), cos_draw + torch.eye(9))
    noise = torch.cat([encoding("fope", n_layer=8, n_head=4, d=32, context=1024).sin_mix.flatten() for _ in range(5)])
    std = 0.3 * math.sqrt(2 / (9 * 9 + 4 * 9))  # xavier on (H, K, K): fan_in K^2, fan_out H K
    off_diagonal = noise.view(-1, 9, 9)[:, ~torch.eye(9, dtype=torch.bool)]
    assert off_diagonal.std().item() == pytest.approx(std, rel=0.05)


def test_fope_mixing_is_fixed_unless_learned_and_then_undecayed():
    fixed = GPT(GPTConfig(vocab_size=11, context=64, n_layer=2, n_head=2, d_model=32, pe="fope"))
    assert not [n for n, _ in fixed.named_parameters() if n.startswith("encoding.")]
    assert {"encoding.cos_mix", "encoding.sin_mix"} <= set(fixed.state_dict())  # saved with the run: resumable
    learned = GPT(GPTConfig(11, 64, n_layer=2, n_head=2, d_model=32, pe="fope", pe_options={"learned": True}))
    names = [n for n, _ in learned.named_parameters() if n.startswith("encoding.")]
    assert names == ["encoding.cos_mix", "encoding.sin_mix"]
    (group,) = learned.encoding.optimizer_groups()
    assert group["weight_decay"] == 0.0 and len(group["params"]) == 2
    tokens = torch.randint(0, 11, (2, 40), generator=torch.Generator().manual_seed(0))
    learned(tokens).logsumexp(-1).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in group["params"])


# ---- refusals, FLOPs, descriptions ------------------------------------------------------------------------------


class BiasInALayer(LayerPattern):
    name = "bias_in_a_layer"

    def layer_plan(self):
        return [Layer("alibi") if layer == 1 else Layer("rope") for layer in range(self.n_layer)]


def test_a_pattern_layer_that_is_not_a_fused_mechanism_is_refused_by_name():
    with pytest.raises(ValueError, match=r"bias_in_a_layer: layer 1's encoding 'alibi' has mechanism 'bias'"):
        BiasInALayer(n_layer=2, n_head=2, d_model=16, context=32)


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("irope", {"period": 1}, r"option period=1 \(must be a whole number >= 2"),
        ("rnope_swa", {"window_fraction": 0}, r"option window_fraction=0 \(must be a number in \(0, 1\]"),
        ("local_global", {"window_fraction": 1.5}, r"window_fraction=1.5"),
        ("partial_rotary", {"fraction": 0.0}, r"option fraction=0.0"),
        ("fope", {"learned": 1}, r"option learned=1 \(must be true or false"),
        ("irope", {"random_positions": 8}, r"irope does not take its signal from the positions"),
    ],
)
def test_bad_options_are_refused_by_name(name, options, message):
    with pytest.raises(ValueError, match=message):
        build_encoding(name, options, n_layer=4, n_head=2, d_model=32, context=64)


def test_yarn_is_refused_for_a_pattern_by_name():
    model = GPT(GPTConfig(vocab_size=11, context=64, n_layer=4, n_head=2, d_model=32, pe="irope"))
    with pytest.raises(ValueError, match="YaRN applies to a trained rope model; this one uses 'irope'"):
        with_yarn(model, 256)


def test_flops_per_token_by_hand():
    """irope, 4 layers, d_model 32, L = T = 64 (chunks of 2, floor 2: the scale rule's floor set to 1 so that the
    chunks are this small): per chunked RoPE layer the rotation
    6 * 32 and the q/k normalisation 3 * 2 * 32, minus the attention the chunks leave out, 4 * 32 * (32.5 - 1.5)
    (a query sees 1.5 keys on average instead of (T + 1) / 2); the NoPE layer's temperature 32."""
    enc = build_encoding("irope", {"min_tokens": 1}, n_layer=4, n_head=4, d_model=32, context=64)
    assert enc.flops_per_token(64) == 3 * (6 * 32 + 3 * 2 * 32 - 4 * 32 * 31.0) + 32
    swa = build_encoding("rnope_swa", {"window_fraction": 0.125}, n_layer=4, n_head=4, d_model=32, context=64)
    # windows of 8: a query sees (1 + ... + 8 + 56 * 8) / 64 = 7.5625 keys
    assert swa.flops_per_token(64) == 3 * (6 * 32 + 4 * 32 * (7.5625 - 32.5))
    assert build_encoding("nope_every", {}, n_layer=4, n_head=4, d_model=32, context=64).flops_per_token(64) == 3 * 192


def test_the_description_lists_every_layer():
    """What a run's manifest records under "encoding" (pipelines.runs.manifest): at the JSB cpu model."""
    described = build_encoding("irope", {}, n_layer=4, n_head=4, d_model=128, context=1024).describe()
    assert described["layers"] == 3 * ["rope(base=10000) chunked 32 +qk-norm"] + [
        "temperature(attn_scale=0.1, floor_scale=32)"
    ]
    assert (
        described["pattern"] == "3 x rope(base=10000) chunked 32 +qk-norm, temperature(attn_scale=0.1, floor_scale=32)"
    )
    assert described["mechanism"] == "qk" and described["fused_attention"] and described["parameters"] == 0
    gemma = build_encoding("local_global", {}, n_layer=8, n_head=6, d_model=192, context=2048).describe()
    assert gemma["pattern"] == "5 x rope(base=10000) sliding 64, rope(base=1e+06), 2 x rope(base=10000) sliding 64"


def test_layers_with_the_same_encoding_share_one_built_encoding():
    enc = encoding("local_global", n_layer=12)
    assert len(enc.parts) == 2 and enc.part_of_layer == (0,) * 5 + (1,) + (0,) * 5 + (1,)
    state = enc.prepare(torch.arange(10))
    assert len(state) == 2  # one table per distinct encoding per forward pass


def test_rotated_by_loop_is_ropes_rotation():
    """The loops' own rotation against models.encodings.rope's frequencies and rotation (float64)."""
    rope = encoding("rope", n_head=1, d=8, base=100.0)
    x = torch.randn(1, 1, 6, 8, dtype=F64)
    rotated, _ = rope.transform_qk(x, x, rope.prepare(torch.arange(6)), None, 0)
    theta = rope_frequencies(8, 100.0).tolist()
    for m in range(6):
        assert torch.allclose(rotated[0, 0, m], rotated_by_loop(x[0, 0, m], m, theta), atol=1e-12)


WINDOWED = {"irope": ("chunked", True), "rnope_swa": ("sliding", False), "local_global": ("sliding", False)}


@pytest.mark.parametrize("preset", ["tiny", "cpu", "paper"])
@pytest.mark.parametrize("domain", ["jsb", "maestro", "hrg", "sleep_edf", "synthetic"])
def test_every_window_at_every_preset_follows_the_scale_rule_and_its_floor(domain, preset):
    """SPEC 1c at each preset's configs: every window, chunk and temperature floor of a windowed pattern is
    L/32 rounded, at least 8 tokens and at most L (the synthetic presets' L = 32: 8, not the query alone)."""
    from pipelines.experiment.config import compose_config

    for name, (kind, has_floor) in WINDOWED.items():
        cfg = compose_config([f"domain={domain}", f"preset={preset}", f"pe={name}"])
        model = cfg.model
        enc = build_encoding(name, dict(cfg.pe.options), n_layer=model.n_layer, n_head=model.n_head,
                             d_model=model.d_model, context=model.context)  # fmt: skip
        L = model.context
        expected = min(L, max(8, round(L / 32)))
        windows = {enc.attention_window(layer) for layer in range(model.n_layer)} - {None}
        assert {(w.kind, w.size) for w in windows} == {(kind, expected)} and expected >= min(8, L), (name, L)
        if has_floor:
            floors = [part.floor_scale for part in enc.parts if hasattr(part, "floor_scale")]
            assert floors in ([], [expected]), (name, floors)
