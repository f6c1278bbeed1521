"""Attention windows (models.windows): the sliding and chunked masks as the references define them, the blocked
fused paths and the FlexAttention block mask against one dense masked softmax in float64, the kernel they run in,
and their size at evaluation lengths past the training context."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from models.encodings import build_encoding
from models.gpt import GPT, GPTConfig, fused_causal_attention
from models.windows import AttentionWindow, flex_windowed_attention, visible_keys, windowed_attention

F64 = torch.float64


def dense_masked_attention(q, k, v, allowed, scale):
    """softmax(q k^T scale, -inf where not `allowed`) v, written out."""
    logits = (q @ k.transpose(-1, -2) * scale).masked_fill(~allowed, float("-inf"))
    return logits.softmax(-1) @ v


def random_qkv(T, B=2, H=3, D=8, seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, D, generator=g, dtype=dtype) for _ in range(3)]


def test_sliding_window_sees_the_last_w_tokens_its_own_included():
    """transformers' sliding_window_overlay: kv_idx > q_idx - sliding_window, on top of causality."""
    allowed = visible_keys(AttentionWindow("sliding", 3), 6, torch.device("cpu"))
    assert allowed.int().tolist() == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [0, 1, 1, 1, 0, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 0, 1, 1, 1],
    ]


def test_chunked_window_sees_its_own_chunk_up_to_itself():
    """transformers' chunked_overlay: kv_idx // chunk_size == q_idx // chunk_size, on top of causality; chunks
    counted from the first token."""
    allowed = visible_keys(AttentionWindow("chunked", 3), 7, torch.device("cpu"))
    assert allowed.int().tolist() == [
        [1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0, 0],
        [0, 0, 0, 1, 0, 0, 0],
        [0, 0, 0, 1, 1, 0, 0],
        [0, 0, 0, 1, 1, 1, 0],
        [0, 0, 0, 0, 0, 0, 1],
    ]
    assert torch.equal(visible_keys(None, 5, torch.device("cpu")), torch.ones(5, 5, dtype=torch.bool).tril())


@pytest.mark.parametrize("kind, size", [("sliding", 3), ("sliding", 64), ("chunked", 5), ("chunked", 16)])
def test_mean_keys_is_the_average_row_of_the_mask(kind, size):
    window = AttentionWindow(kind, size)
    for T in (1, 7, 16, 100, 131):
        assert window.mean_keys(T) == pytest.approx(visible_keys(window, T, torch.device("cpu")).sum().item() / T)


@pytest.mark.parametrize(
    "kind, size, T",
    [
        ("sliding", 1, 9),  # only the query itself
        ("sliding", 5, 37),  # queries in blocks of 64 past the window: one block, the first one
        ("sliding", 5, 200),  # several blocks, T not a multiple of the block
        ("sliding", 80, 300),  # a window longer than the query block
        ("sliding", 299, 300),
        ("chunked", 4, 37),  # T not a multiple of the chunk
        ("chunked", 64, 128),
        ("chunked", 7, 7),  # one chunk: plain causal attention
    ],
)
def test_blocked_paths_equal_one_dense_masked_softmax(kind, size, T):
    window = AttentionWindow(kind, size)
    q, k, v = random_qkv(T)
    scale = 1 / math.sqrt(8)
    expected = dense_masked_attention(q, k, v, visible_keys(window, T, q.device), scale)
    assert torch.allclose(windowed_attention(q, k, v, window, 0.0, scale), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("window", [AttentionWindow("sliding", 24), AttentionWindow("chunked", 40)])
def test_flex_attention_block_mask_equals_the_dense_mask(window):
    """The CUDA path's FlexAttention block mask (the window's mask_mod), run eagerly on the CPU in float64."""
    q, k, v = random_qkv(300, H=2, D=16, seed=1)
    expected = dense_masked_attention(q, k, v, visible_keys(window, 300, q.device), 0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager FlexAttention says it is a reference implementation
        y = flex_windowed_attention(q, k, v, window, scale=0.25, compiled=False)
    assert torch.allclose(y, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("window", [AttentionWindow("sliding", 32), AttentionWindow("chunked", 32)])
def test_windowed_attention_stays_in_the_cpu_flash_kernel(window):
    """No T x T scores: the windowed paths run SDPA's fused CPU kernel, never the math kernel that materialises
    them (a 3-D mask would send the blocked sliding path there)."""
    q, k, v = random_qkv(256, dtype=torch.float32)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        windowed_attention(q, k, v, window, 0.0, 0.125)
    ops = {event.name for event in prof.events()}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in ops
    assert "aten::_scaled_dot_product_attention_math" not in ops


def test_gradients_through_the_blocked_paths_equal_the_dense_ones():
    g = torch.Generator().manual_seed(5)
    weight = torch.randn(1, 2, 90, 4, generator=g, dtype=F64)
    for window in (AttentionWindow("sliding", 7), AttentionWindow("chunked", 16)):
        grads = []
        for blocked in (True, False):
            q, k, v = (t.requires_grad_() for t in random_qkv(90, B=1, H=2, D=4, seed=2))
            if blocked:
                y = windowed_attention(q, k, v, window, 0.0, 0.5)
            else:
                y = dense_masked_attention(q, k, v, visible_keys(window, 90, q.device), 0.5)
            grads.append(torch.autograd.grad((y * weight).sum(), (q, k, v)))
        for blocked, dense in zip(*grads, strict=True):
            assert torch.allclose(blocked, dense, rtol=0, atol=1e-12)


def test_a_window_as_long_as_the_sequence_is_plain_causal_attention():
    q, k, v = random_qkv(20)
    causal = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    for window in (AttentionWindow("sliding", 20), AttentionWindow("chunked", 20)):
        assert window.covers(20) and not window.covers(21)
        assert torch.allclose(fused_causal_attention(q, k, v, 0.0, 0.3, window), causal, rtol=0, atol=1e-14)


@pytest.mark.parametrize("kind, size", [("ring", 4), ("sliding", 0), ("chunked", 2.5), ("sliding", True)])
def test_a_bad_window_is_refused_by_name(kind, size):
    with pytest.raises(ValueError, match=r"attention window"):
        AttentionWindow(kind, size)


def test_windows_keep_their_training_size_at_2x_4x_8x_the_context():
    """A model trained at L = 64 with windows of L/32 = 2 tokens (the scale rule's floor set to 1) scores 128, 256,
    512 tokens with the same 2-token windows (the layers' masks are built from the encoding's training context, not
    the sequence): a token's output in the window-only first layers depends on no token more than 1 position back,
    at every length."""
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=11, context=64, n_layer=2, n_head=2, d_model=16, pe="rnope_swa",
                       pe_options={"min_tokens": 1})  # fmt: skip
    model = GPT(config).double().eval()
    assert [str(block.attn.window) for block in model.blocks] == ["sliding 2", "sliding 2"]
    for T in (128, 256, 512):
        tokens = torch.randint(0, 11, (1, T), generator=torch.Generator().manual_seed(T))
        changed = tokens.clone()
        changed[0, T // 2] = (changed[0, T // 2] + 1) % 11
        differs = (model(tokens) - model(changed)).abs().amax(-1)[0] > 1e-12
        # two sliding layers of 2: token T/2 reaches itself and the next two positions, nothing else
        assert differs.nonzero().flatten().tolist() == [T // 2, T // 2 + 1, T // 2 + 2]


def test_only_fused_mechanisms_may_define_windows():
    from models.encodings import PositionalEncoding

    with pytest.raises(TypeError, match="attention windows.*fused causal kernel"):

        class WindowedBias(PositionalEncoding):  # noqa: F841  (the class statement itself must fail)
            name = "windowed_bias"
            mechanism = "bias"

            def logit_bias(self, state, layer, x):
                return state

            def attention_window(self, layer):
                return AttentionWindow("sliding", 4)


def test_the_window_path_makes_no_tensor_off_the_models_device():
    """The sliding and chunked paths on the meta device (every mask made on the inputs' device)."""
    for pe in ("rnope_swa", "irope"):
        enc = build_encoding(pe, {}, n_layer=4, n_head=2, d_model=16, context=256)
        assert enc.attention_window(0) is not None
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=11, context=256, n_layer=4, n_head=2, d_model=16, pe=pe)).to("meta")
        logits = model(torch.zeros(2, 300, dtype=torch.long, device="meta"))
        logits.sum().backward()
        assert logits.device.type == "meta"
