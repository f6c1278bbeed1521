"""Attention with a logit term in query blocks (models.biased_attention): the same values and gradients as one dense
masked softmax written out by hand, and as SDPA's kernels over every key; a term of the distance alone attended from
its values on the lags (`lag_biased_attention`) the same, its values' gradient included; which path each case
takes; the bias encodings' models train and score to the same loss and gradients on either path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import models.biased_attention as biased_module
import models.gpt as gpt_module
from models.biased_attention import (
    LagTerm,
    _sums_by_lag,
    biased_attention,
    flash_attention,
    lag_biased_attention,
    math_attention,
    query_blocked,
    tiled_causal_attention,
)
from models.gpt import GPT, GPTConfig
from tests.training_fixtures import short_training_scores

F64 = torch.float64


def random_case(T: int, B: int = 2, H: int = 3, D: int = 8, batch_bias: bool = False, seed: int = 0):
    """q, k, v (B, H, T, D) and a causal bias (1 or B, H, T, T): random below the diagonal, -inf above it."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, T, D, generator=g, dtype=F64) for _ in range(3))
    values = torch.randn(B if batch_bias else 1, H, T, T, generator=g, dtype=F64)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return q, k, v, values.masked_fill(future, float("-inf"))


def dense_by_hand(q, k, v, bias, scale):
    """The equation: softmax over every key of scale * q.k + bias (the -inf entries give weight exactly 0)."""
    scores = torch.einsum("bhid,bhjd->bhij", q, k) * scale + bias
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    return torch.einsum("bhij,bhjd->bhid", weights / weights.sum(-1, keepdim=True), v)


@pytest.mark.parametrize("T, block", [(1, 4), (37, 8), (64, 16), (100, 256), (130, 64)])
@pytest.mark.parametrize("batch_bias", [False, True])
def test_query_blocks_equal_the_dense_softmax_in_values_and_every_gradient(T, block, batch_bias):
    """T not a multiple of the block, one block, and blocks of one query's worth: q, k, v and the bias (shared by
    the batch as the encodings build it, or one per sequence) get the dense equation's gradients."""
    weight = torch.randn(2, 3, T, 8, generator=torch.Generator().manual_seed(9), dtype=F64)
    results = []
    for blocked in (True, False):
        q, k, v, bias = (t.clone().requires_grad_() for t in random_case(T, batch_bias=batch_bias))
        y = query_blocked(q, k, v, bias, 0.3, math_attention, block) if blocked else dense_by_hand(q, k, v, bias, 0.3)
        results.append((y, *torch.autograd.grad((y * weight).sum(), (q, k, v, bias))))
    for name, got, want in zip(("y", "dq", "dk", "dv", "dbias"), *results, strict=True):
        assert torch.allclose(got, want, rtol=0, atol=1e-12), name
    assert torch.all(results[0][4][..., torch.ones(T, T, dtype=torch.bool).triu(1)] == 0)  # no gradient to masked


@pytest.mark.parametrize("learned", [True, False])
def test_both_cpu_paths_agree_with_sdpa_over_every_key(learned):
    """A learned bias (math softmax in blocks) against SDPA's math kernel, a fixed one (flash in blocks: ALiBi, or
    any bias in evaluation) against SDPA's flash kernel over all T keys; q, k and v get the same gradients."""
    q, k, v, bias = (t.float() for t in random_case(600, D=16))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    inputs = (q, k, v, bias.requires_grad_()) if learned else (q, k, v)
    weight = torch.randn_like(q)
    outputs = []
    for path in (biased_attention, lambda *a: F.scaled_dot_product_attention(*a[:3], attn_mask=a[3], scale=a[5])):
        y = path(q, k, v, bias, 0.0, 0.25)
        outputs.append((y, *torch.autograd.grad((y * weight).sum(), inputs)))
    for name, got, want in zip(("y", "dq", "dk", "dv", "dbias"), *outputs, strict=False):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-5), name


def test_flash_blocks_equal_the_dense_softmax_in_values_and_gradients():
    """The fixed-bias path on its own, with T not a multiple of the block: the equation by hand, in fp32."""
    q, k, v, bias = (t.float() for t in random_case(70, D=16))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    weight = torch.randn_like(q)
    results = []
    for y in (query_blocked(q, k, v, bias, 0.3, flash_attention, 16), dense_by_hand(q, k, v, bias, 0.3)):
        results.append((y, *torch.autograd.grad((y * weight).sum(), (q, k, v))))
    for name, got, want in zip(("y", "dq", "dk", "dv"), *results, strict=True):
        assert torch.allclose(got, want, rtol=1e-4, atol=2e-6), name


def kernels(q, k, v, bias, dropout_p):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        biased_attention(q, k, v, bias, dropout_p, 0.25)
    return {event.name for event in prof.events()}


def test_only_a_bias_that_needs_a_gradient_leaves_sdpas_kernels_and_not_with_attention_dropout():
    q, k, v, bias = (t.float() for t in random_case(64))
    fixed = kernels(q, k, v, bias, 0.0)  # ALiBi's slopes, or any bias in evaluation: SDPA's flash kernel
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in fixed and "aten::softmax" not in fixed
    assert "aten::cat" in fixed  # in query blocks, over the keys up to each block's last query
    learned = kernels(q, k, v, bias.requires_grad_(), 0.0)
    assert "aten::scaled_dot_product_attention" not in learned and "aten::softmax" in learned
    with torch.random.fork_rng():  # attention dropout: SDPA with its own random stream, as before
        assert "aten::scaled_dot_product_attention" in kernels(q, k, v, bias, 0.1)


def test_cross_attention_shapes_are_refused():
    q, k, v, bias = random_case(8)
    with pytest.raises(ValueError, match=r"T x T self-attention, got q \(2, 3, 8, 8\), k \(2, 3, 4, 8\)"):
        query_blocked(q, k[..., :4, :], v[..., :4, :], bias[..., :4], 1.0, math_attention)


def lag_case(T: int, B: int = 2, H: int = 3, D: int = 8, strength: float = 1.0, dtype=F64, seed: int = 0):
    """q, k, v (B, H, T, D) and a term's values on the lags (H, T), with its dense (1, H, T, T) layout."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, T, D, generator=g, dtype=dtype) for _ in range(3))
    values = strength * torch.randn(H, T, generator=g, dtype=dtype)
    return q, k, v, values


def dense_of(values: torch.Tensor) -> torch.Tensor:
    """values (H, T) on the lags -> (1, H, T, T): entry (i, j) the value at lag i - j, -inf above the diagonal."""
    T = values.shape[-1]
    lag = torch.arange(T)[:, None] - torch.arange(T)[None, :]
    return values[:, lag.clamp(min=0)].masked_fill(lag < 0, float("-inf"))[None]


@pytest.mark.parametrize("T, rows, tile_bytes", [(1, 64, 4 << 20), (37, 8, 4 << 20), (100, 16, 1), (130, 64, 1 << 20),
                                                 (300, 64, 4 << 20)])  # fmt: skip
def test_lag_attention_equals_the_dense_softmax_in_values_and_every_gradient(T, rows, tile_bytes, monkeypatch):
    """Tiles of one query, T not a multiple of the rows, one sequence of the batch per tile (tile_bytes 1) or all:
    q, k, v and the values on the lags get the gradients of the equation over the dense term, in fp64."""
    monkeypatch.setattr(biased_module, "LAG_ROWS", rows)
    monkeypatch.setattr(biased_module, "LAG_TILE_BYTES", tile_bytes)
    q, k, v, values = (t.requires_grad_() for t in lag_case(T))
    weight = torch.randn(2, 3, T, 8, generator=torch.Generator().manual_seed(9), dtype=F64)
    results = []
    for lagged in (True, False):
        term = LagTerm(values, T)
        y = lag_biased_attention(q, k, v, term, 0.3) if lagged else dense_by_hand(q, k, v, dense_of(values), 0.3)
        results.append((y, *torch.autograd.grad((y * weight).sum(), (q, k, v, values))))
    for name, got, want in zip(("y", "dq", "dk", "dv", "dvalues"), *results, strict=True):
        assert torch.allclose(got, want, rtol=0, atol=1e-12), name


def test_lag_attention_with_keys_below_the_exp_floor_equals_sdpa_in_fp32():
    """A term as strong as ALiBi's first head (-n / 4) and stronger: most centred scores fall below log(FLT_MIN), where
    the kernel clamps before its exp (the weight of such a key is < 1.6e-38, against a row total >= 1); the future stays
    exactly 0. Against SDPA's math kernel over every key, value and gradients, to fp32 rounding."""
    q, k, v, _ = lag_case(400, D=16, dtype=torch.float32)
    lags = torch.arange(400, dtype=torch.float32)
    values = -torch.tensor([0.25, 1.0, 4.0])[:, None] * lags
    q, k, v, values = (t.requires_grad_() for t in (q, k, v, values))
    weight = torch.randn_like(q)
    outputs = []
    for lagged in (True, False):
        y = (lag_biased_attention(q, k, v, LagTerm(values, 400), 0.25) if lagged else
             F.scaled_dot_product_attention(q, k, v, attn_mask=dense_of(values), scale=0.25))  # fmt: skip
        outputs.append((y, *torch.autograd.grad((y * weight).sum(), (q, k, v, values))))
    for name, got, want in zip(("y", "dq", "dk", "dv", "dvalues"), *outputs, strict=True):
        assert torch.allclose(got, want, rtol=1e-4, atol=2e-5), name


@pytest.mark.parametrize("R, r0", [(1, 0), (4, 0), (4, 6), (3, 9)])
def test_sums_by_lag_sum_each_diagonal_of_a_tile(R, r0):
    tile = torch.randn(R, r0 + R, generator=torch.Generator().manual_seed(R + r0), dtype=F64)
    want = torch.zeros(r0 + R, dtype=F64)
    for r in range(R):
        for j in range(r0 + R):
            if r0 + r - j >= 0:
                want[r0 + r - j] += tile[r, j]
    future = torch.tensor([[r0 + r - j < 0 for j in range(r0 + R)] for r in range(R)])
    assert torch.allclose(_sums_by_lag(tile.masked_fill(future, 0.0), r0), want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("rows", [1, 29, 37])
def test_lag_attention_of_the_leading_queries_and_dense_rows_after_them(rows, monkeypatch):
    """FIRE's term past its threshold: the first `rows` queries on the lag values, the rest on their own dense rows
    over every key; against the equation over the whole dense term, value and every gradient (the rows' included)."""
    monkeypatch.setattr(biased_module, "LAG_ROWS", 8)
    T = 37
    q, k, v, values = lag_case(T)
    g = torch.Generator().manual_seed(5)
    rest = torch.randn(1, 3, T - rows, T, generator=g, dtype=F64)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)[rows:]
    q, k, v, values, rest = (t.requires_grad_() for t in (q, k, v, values, rest))
    weight = torch.randn(2, 3, T, 8, generator=g, dtype=F64)
    results = []
    for lagged in (True, False):
        masked_rest = rest.masked_fill(future, float("-inf"))
        if lagged:
            y = lag_biased_attention(q, k, v, LagTerm(values, rows, masked_rest if rows < T else None), 0.3)
        else:
            dense = torch.cat((dense_of(values)[:, :, :rows], masked_rest), dim=2)
            y = dense_by_hand(q, k, v, dense, 0.3)
        wrt = (q, k, v, values, rest) if rows < T else (q, k, v, values)
        results.append((y, *torch.autograd.grad((y * weight).sum(), wrt)))
    for name, got, want in zip(("y", "dq", "dk", "dv", "dvalues", "drest"), *results, strict=False):
        assert torch.allclose(got, want, rtol=0, atol=1e-12), name


@pytest.mark.parametrize("T, rows, tile_bytes", [(1, 64, 4 << 20), (37, 8, 1), (130, 64, 1 << 20)])
def test_tiled_attention_equals_the_causal_softmax_with_q_and_k_wider_than_v(T, rows, tile_bytes, monkeypatch):
    """PoPE's training path: q and k of width 16, v of 8 (as PoPE's 2d beside d), the lag route's tiles with no term.
    Against the equation under the causal mask alone, in fp64, value and the gradients of q, k and v; and against
    SDPA's flash kernel on v padded to q's width (evaluation's path), in fp32."""
    monkeypatch.setattr(biased_module, "LAG_ROWS", rows)
    monkeypatch.setattr(biased_module, "LAG_TILE_BYTES", tile_bytes)
    g = torch.Generator().manual_seed(T)
    q, k = (torch.randn(2, 3, T, 16, generator=g, dtype=F64).requires_grad_() for _ in range(2))
    v = torch.randn(2, 3, T, 8, generator=g, dtype=F64).requires_grad_()
    weight = torch.randn(2, 3, T, 8, generator=g, dtype=F64)
    causal = torch.zeros(1, 1, T, T, dtype=F64).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    results = []
    for tiled in (True, False):
        y = tiled_causal_attention(q, k, v, 0.3) if tiled else dense_by_hand(q, k, v, causal, 0.3)
        results.append((y, *torch.autograd.grad((y * weight).sum(), (q, k, v))))
    for name, got, want in zip(("y", "dq", "dk", "dv"), *results, strict=True):
        assert torch.allclose(got, want, rtol=0, atol=1e-12), name
    q32, k32, v32 = (t.detach().float() for t in (q, k, v))
    padded = F.scaled_dot_product_attention(q32, k32, F.pad(v32, (0, 8)), is_causal=True, scale=0.3)[..., :8]
    assert torch.allclose(tiled_causal_attention(q32, k32, v32, 0.3), padded, rtol=0, atol=1e-5)


def test_the_tiles_compute_in_fp32_under_bf16_autocast():
    """Under the CPU's bf16 autocast (the GPU check's steps on a CPU) the tiles' products stay in the inputs' fp32:
    the same values and gradients as without autocast, not an error of mixed dtypes."""
    g = torch.Generator().manual_seed(3)
    q, k = (torch.randn(1, 2, 70, 16, generator=g).requires_grad_() for _ in range(2))
    v = torch.randn(1, 2, 70, 8, generator=g).requires_grad_()
    results = []
    for autocast in (True, False):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = tiled_causal_attention(q, k, v, 0.25)
        results.append((y, *torch.autograd.grad(y.sum(), (q, k, v))))
    for got, want in zip(*results, strict=True):
        assert got.dtype == torch.float32 and torch.equal(got, want)


def test_tiled_attention_refuses_other_shapes():
    q, v = torch.zeros(1, 2, 8, 16), torch.zeros(1, 2, 8, 4)
    with pytest.raises(ValueError, match=r"q, k of one width; got q \(1, 2, 8, 16\), k \(1, 2, 8, 8\)"):
        tiled_causal_attention(q, torch.zeros(1, 2, 8, 8), v, 1.0)
    with pytest.raises(ValueError, match=r"k \(1, 2, 7, 16\)"):
        tiled_causal_attention(q, torch.zeros(1, 2, 7, 16), v, 1.0)


def test_lag_attention_refuses_other_shapes():
    q, k, v, values = lag_case(8)
    with pytest.raises(ValueError, match=r"got q \(2, 3, 8, 8\), k \(2, 3, 8, 8\), values \(3, 7\), rows 7"):
        lag_biased_attention(q, k, v, LagTerm(values[:, :7], 7), 1.0)
    with pytest.raises(ValueError, match=r"values \(3, 8\), rows 0"):
        lag_biased_attention(q, k, v, LagTerm(values, 0), 1.0)
    with pytest.raises(ValueError, match=r"the 3 queries after the lag term's 5 need their \(T - rows, T\) rows"):
        lag_biased_attention(q, k, v, LagTerm(values, 5), 1.0)


def model_kernels(model: GPT, tokens: torch.Tensor, grad: bool) -> set[str]:
    with profile(activities=[ProfilerActivity.CPU]) as prof, torch.set_grad_enabled(grad):
        model(tokens)
    return {event.name for event in prof.events()}


@pytest.mark.parametrize("pe", ["t5_bias", "kerple", "fire", "alibi"])
def test_which_path_each_bias_takes(pe):
    """A learned term of the distance alone trains on the lag route and scores on the flash blocks over its dense
    term; ALiBi's fixed slopes take the flash blocks in both; FIRE past its threshold (a sequence longer than L_thr)
    trains its queries below it on the lag route and those past it on a plain softmax over their dense rows."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, context=16, n_layer=1, n_head=2, d_model=16, pe=pe))
    tokens = torch.randint(0, 11, (1, 16))
    training = model_kernels(model, tokens, grad=True)
    assert ("TiledAttention" in training) == (pe != "alibi")
    flash = "aten::_scaled_dot_product_flash_attention_for_cpu"
    assert (flash in training) == (pe == "alibi")
    assert flash in model_kernels(model.eval(), tokens, grad=False)
    if pe == "fire":
        past = model_kernels(model.train(), torch.randint(0, 11, (1, 24)), grad=True)
        assert "TiledAttention" in past and "aten::softmax" in past


def test_pope_trains_in_the_tiles_and_scores_on_the_flash_kernel():
    """PoPE (`tiled_training`): in training on the CPU its attention runs in the tiles with v at its own width; in
    evaluation, and in training with attention dropout, on SDPA's flash kernel with v padded to q's width."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, context=16, n_layer=1, n_head=2, d_model=16, pe="pope"))
    tokens = torch.randint(0, 11, (1, 16))
    flash = "aten::_scaled_dot_product_flash_attention_for_cpu"
    training = model_kernels(model, tokens, grad=True)
    assert "TiledAttention" in training and flash not in training
    scoring = model_kernels(model.eval(), tokens, grad=False)
    assert flash in scoring and "TiledAttention" not in scoring
    dropped = GPT(GPTConfig(vocab_size=11, context=16, n_layer=1, n_head=2, d_model=16, pe="pope", dropout=0.1))
    assert "TiledAttention" not in model_kernels(dropped.train(), tokens, grad=True)


def test_only_a_qk_encoding_without_windows_may_train_in_the_tiles():
    from models.encodings.base import PositionalEncoding

    with pytest.raises(TypeError, match="declares tiled_training with mechanism 'bias'"):

        class TiledBias(PositionalEncoding):  # noqa: F841 - defining the class is the check
            name = "tiled_bias_test"
            mechanism = "bias"
            tiled_training = True

            def logit_bias(self, state, layer, x):
                return state


@pytest.mark.parametrize("pe", ["t5_bias", "kerple", "fire", "alibi", "pope"])
def test_a_bias_model_has_the_same_loss_and_gradients_on_either_path(pe, monkeypatch):
    """The whole decoder, past its first QUERY_BLOCK queries and over several lag tiles: the CPU's paths (the lag route
    for the learned terms in training, the flash blocks for ALiBi's fixed one, the tiles without a term for PoPE)
    against SDPA over every key for every parameter's gradient, the encoding's own included."""
    T = biased_module.QUERY_BLOCK + 44
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=40, context=T, n_layer=2, n_head=2, d_model=16, pe=pe))
    with torch.no_grad():  # T5's table starts at 0, FIRE's and KERPLE's at their defaults: move every bias off them
        for p in model.encoding.parameters():
            p.add_(0.3 * torch.randn_like(p))
    tokens = torch.randint(0, 40, (2, T), generator=torch.Generator().manual_seed(1))

    def loss_and_grads():
        logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, 40), tokens.reshape(-1))
        return loss, torch.autograd.grad(loss, list(model.parameters()))

    cpu_paths = loss_and_grads()

    def sdpa_over_every_key(q, k, v, bias, scale, attend):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)

    monkeypatch.setattr(biased_module, "query_blocked", sdpa_over_every_key)
    monkeypatch.setattr(gpt_module, "tiled_route", lambda q, dropout_p: False)
    sdpa = loss_and_grads()
    assert abs(cpu_paths[0].item() - sdpa[0].item()) < 1e-6
    for (name, _), got, want in zip(model.named_parameters(), cpu_paths[1], sdpa[1], strict=True):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-6), name
    named = zip(model.named_parameters(), cpu_paths[1], strict=True)
    encoding_grads = [g for (name, _), g in named if name.startswith("encoding.")]
    if pe != "alibi":
        assert encoding_grads and all(g.abs().sum() > 0 for g in encoding_grads)  # the bias does learn on this path


@pytest.mark.parametrize("pe", ["t5_bias", "kerple", "fire", "pope"])
def test_a_short_training_on_either_path_scores_every_example_alike(pe, monkeypatch):
    """Twenty AdamW steps of a small model on the tiles (the lag route; PoPE's without a term) and on the path of
    the encoding's previous revision (the math blocks over the dense term; PoPE's flash kernel), from one
    initialisation on the same batches: each example's mean NLL agrees within 1e-4 nats, ten times inside the
    cross-machine bound that a run of another revision is reproduced within (pipelines.runs.tolerance)."""

    def route(lagged: bool) -> None:
        if not lagged:
            monkeypatch.setattr(gpt_module, "tiled_route", lambda q, dropout_p: False)

    scores = short_training_scores(pe, route)
    assert (scores[0] - scores[1]).abs().max() < 1e-4, (scores[0] - scores[1]).abs().max()
