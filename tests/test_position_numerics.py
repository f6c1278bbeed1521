"""Numerics and device independence of positions (issue 26, section 6): xPos stays finite under SDPA's math kernel
at any span of positions, and randomized evaluation positions are the CPU draw on every device."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from models.encodings import PositionalEncoding, build_encoding
from models.encodings import base as encodings_base
from models.encodings.rope import rotate, unit_rotations
from models.encodings.xpos import decay_powers, window_centre
from models.gpt import GPT, GPTConfig

F64 = torch.float64


def xpos_model(**options) -> GPT:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=11, context=16, n_layer=2, n_head=2, d_model=32, pe="xpos", pe_options=options)
    return GPT(cfg).eval()


def spread(T: int, span: int) -> torch.Tensor:
    """T sorted positions from 0 to `span` (a short sequence whose positions lie far apart)."""
    return torch.linspace(0, span, T).round().long()


@pytest.mark.parametrize("span", [30_000, 40_000, 60_000, 200_000])
def test_xpos_is_finite_under_the_math_kernel_at_any_span(span):
    """The math kernel adds the -inf causal mask to q.k: an overflowing masked product (inf) made NaN from 36k on."""
    model = xpos_model()
    tokens = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(1))
    pos = spread(12, span)
    with torch.no_grad():
        default = model(tokens, pos)
        with sdpa_kernel(SDPBackend.MATH):
            math_kernel = model(tokens, pos)
    assert torch.isfinite(math_kernel).all() and torch.isfinite(default).all()
    assert torch.allclose(math_kernel, default, rtol=1e-4, atol=1e-4)  # the kernel does not change the answer


def test_xpos_with_randomized_positions_over_60k_is_finite_under_the_math_kernel():
    """Ruoss et al.'s positions over [0, 8L) with L = 7500: spans of ~60k from a 16-token sequence."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, context=7500, n_layer=1, n_head=2, d_model=32, pe="xpos",
                          pe_options={"random_positions": 8})).eval()  # fmt: skip
    tokens = torch.randint(0, 11, (1, 16), generator=torch.Generator().manual_seed(1))
    span = PositionalEncoding.prepare(model.encoding, torch.arange(16))
    assert span.max() - span.min() > 50_000
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        assert torch.isfinite(model(tokens)).all()


def scores_of(xpos, q, k, pos):
    q2, k2 = xpos.transform_qk(q, k, xpos.prepare(pos), None, 0)
    return q2 @ k2.transpose(-1, -2)


def test_xpos_masked_entries_stay_finite_and_visible_scores_keep_the_identity_at_60k():
    """Every score is finite in fp32, the future ones included. A visible score is RoPE's per band times
    zeta_j^((m' - n')/B), where m', n' are the positions clipped to c +- W_j (the decay saturates W_j from the
    window's centre, W_j = B log(2^50) / log(1 / zeta_j)): the identity itself wherever both lie within W_j."""
    d, T, span = 8, 64, 60_000
    xpos = build_encoding("xpos", {}, n_layer=1, n_head=1, d_model=d, context=64)
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 1, T, d, generator=g), torch.randn(1, 1, T, d, generator=g)
    pos = spread(T, span)
    got = scores_of(xpos, q, k, pos)[0, 0]
    assert torch.isfinite(got).all()  # masked entries included: nothing for the -inf mask to turn into NaN

    centre = (pos.min() + pos.max()).double() / 2
    zeta = xpos.zeta.double()
    reach = xpos.scale_base * 50 * torch.log(torch.tensor(2.0, dtype=F64)) / -torch.log(zeta)  # W_j
    clipped = torch.minimum(torch.maximum(pos.double()[:, None], centre - reach), centre + reach)  # (T, d/2)
    rotation = unit_rotations(xpos.angles(pos).double())
    q_bands = torch.view_as_complex(rotate(q.double(), rotation).unflatten(-1, (-1, 2)).contiguous())[0, 0]
    k_bands = torch.view_as_complex(rotate(k.double(), rotation).unflatten(-1, (-1, 2)).contiguous())[0, 0]
    rope_terms = (q_bands[:, None, :] * k_bands[None, :, :].conj()).real  # (T, T, d/2): RoPE's band-j term
    decay = zeta ** ((clipped[:, None, :] - clipped[None, :, :]) / xpos.scale_base)
    expected = (rope_terms * decay).sum(-1)
    visible = torch.ones(T, T, dtype=torch.bool).tril()
    assert torch.allclose(got.double()[visible], expected[visible], rtol=1e-4, atol=1e-5)
    # where no position is clipped the decay is xPos's own: zeta_j^((m - n)/B)
    inside = ((pos.double() - centre).abs()[:, None] <= reach[None, :]).all(-1)
    pairs = visible & inside[:, None] & inside[None, :]
    distance = (pos[:, None] - pos[None, :]).double()
    exact = (rope_terms * zeta ** (distance[..., None] / xpos.scale_base)).sum(-1)
    assert pairs.sum() > T and torch.allclose(got.double()[pairs], exact[pairs], rtol=1e-4, atol=1e-5)


def test_xpos_tables_are_unchanged_where_the_decay_does_not_saturate():
    """Up to a span of 2 W_0 (28k tokens at B = 512) the tables are the plain powers, bit for bit: no number of a
    run within it changes."""
    xpos = build_encoding("xpos", {}, n_layer=1, n_head=2, d_model=32, context=2048)
    for pos in (torch.arange(2048), spread(64, 28_000), torch.arange(100) + 10**6):
        q_table, k_table = xpos.prepare(pos)
        up, down = decay_powers(pos, xpos.zeta, xpos.scale_base, window_centre(pos, xpos.zeta.dtype))
        rotation = unit_rotations(xpos.angles(pos))
        assert torch.equal(q_table, rotation * up[..., None]) and torch.equal(k_table, rotation * down[..., None])


# ---- randomized positions at evaluation: the CPU draw, moved -------------------------------------------------------
def test_evaluation_positions_are_drawn_on_the_cpu_whatever_the_device(monkeypatch):
    """The draw of an evaluation pass is the CPU generator's, seeded by T, then moved to the positions' device: a
    CUDA (here: meta) evaluation scores the positions a CPU one does."""
    encoding = build_encoding("rope", {"random_positions": 8}, n_layer=1, n_head=2, d_model=16, context=16).eval()
    on_cpu = PositionalEncoding.prepare(encoding, torch.arange(12))
    draws = []
    real_randperm = torch.randperm

    def spy(*args, generator=None, device=None, **kwargs):
        drawn = real_randperm(*args, generator=generator, device=device, **kwargs)
        draws.append((torch.device(device or "cpu"), generator.device if generator is not None else None, drawn))
        return drawn

    monkeypatch.setattr(encodings_base.torch, "randperm", spy)
    on_meta = PositionalEncoding.prepare(encoding, torch.arange(12, device="meta"))
    assert on_meta.device.type == "meta" and on_meta.shape == (12,)
    ((device, generator_device, drawn),) = draws
    assert device.type == "cpu" and generator_device is not None and generator_device.type == "cpu"
    assert torch.equal(drawn[:12].sort().values, on_cpu)  # the CPU evaluation's positions exactly
