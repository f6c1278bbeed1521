"""Attention with a logit term in query blocks (models.biased_attention): the same values and gradients as one dense
masked softmax written out by hand, and as SDPA's kernels over every key; which path each case takes; the bias
encodings' models train and score to the same loss and gradients on either path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import models.biased_attention as biased_module
from models.biased_attention import biased_attention, flash_attention, math_attention, query_blocked
from models.gpt import GPT, GPTConfig

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


@pytest.mark.parametrize("pe", ["t5_bias", "kerple", "fire", "alibi"])
def test_a_bias_model_has_the_same_loss_and_gradients_on_either_path(pe, monkeypatch):
    """The whole decoder, past its first QUERY_BLOCK queries: the blocked paths against SDPA over every key for every
    parameter's gradient, the encoding's own included (ALiBi's slopes are fixed: its bias takes the flash blocks)."""
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

    blocked = loss_and_grads()

    def sdpa_over_every_key(q, k, v, bias, scale, attend):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)

    monkeypatch.setattr(biased_module, "query_blocked", sdpa_over_every_key)
    sdpa = loss_and_grads()
    assert abs(blocked[0].item() - sdpa[0].item()) < 1e-6
    for (name, _), got, want in zip(model.named_parameters(), blocked[1], sdpa[1], strict=True):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-6), name
    named = zip(model.named_parameters(), blocked[1], strict=True)
    encoding_grads = [g for (name, _), g in named if name.startswith("encoding.")]
    if pe != "alibi":
        assert encoding_grads and all(g.abs().sum() > 0 for g in encoding_grads)  # the bias does learn on this path
