"""One layer of each pattern against the reference implementation's own attention module (transformers, pinned in
the dev extra: SPEC 1c). The reference module and ours get the same projection weights (q and k rows permuted
from the reference's NeoX halves to the suite's adjacent pairs where the reference pairs that way), the same input
in float64, and the reference's own position tables and attention mask (its masking_utils at "sdpa", whose softmax
stays in float64: "eager" rounds it to fp32). What stays in fp32: the rotary tables on both sides (the references
compute cos and sin in fp32, the suite stores theta in fp32) and, in Llama 4, the reference's whole rotation
(`apply_rotary_emb` rotates `xq.float()`). Tolerances follow: 1e-12 on the layers without rotation, 1e-6 on the
rotary ones; the largest differences measured (outputs of magnitude about 1) are in each test's docstring.

FoPE has no reference module here: vLLM, whose `FourierRotaryEmbedding` is the shipped one, is not installed (it
pins its own torch build, a CUDA wheel that would replace the suite's pinned CPU torch), and the authors' OLMo fork
is not packaged; tests/test_patterns.py checks FoPE against their formula in their layout instead
(tests/reference_encodings.fope_in_neox_layout).
"""

from __future__ import annotations

import importlib

import pytest
import torch

from models.encodings import build_encoding
from models.gpt import CausalSelfAttention, GPTConfig
from tests.reference_encodings import neox_to_adjacent

transformers = pytest.importorskip(
    "transformers", reason="the reference modules come with the dev extra: pip install -e '.[dev]' (transformers)"
)
from transformers import masking_utils  # noqa: E402  (after the skip, so that a missing transformers skips)

F64 = torch.float64
D_MODEL, HEADS, HEAD_DIM, T, L = 32, 2, 16, 40, 64
TOKEN_IDS = dict(vocab_size=10, pad_token_id=None, bos_token_id=None, eos_token_id=None)


def reference(model: str):
    """transformers' configuration and modeling modules of `model`, or a skip naming what is missing."""
    try:
        return (
            importlib.import_module(f"transformers.models.{model}.configuration_{model}"),
            importlib.import_module(f"transformers.models.{model}.modeling_{model}"),
        )
    except ImportError as err:
        pytest.skip(f"transformers {transformers.__version__} has no {model} reference module: {err}")


def ours(pe: str, options: dict, layer: int, n_layer: int, ref: torch.nn.Module, neox: bool):
    """Our attention layer `layer` of pattern `pe` in float64, with the reference module's projection weights."""
    cfg = GPTConfig(vocab_size=10, context=L, n_layer=n_layer, n_head=HEADS, d_model=D_MODEL, pe=pe, pe_options=options)
    encoding = build_encoding(pe, options, n_layer=n_layer, n_head=HEADS, d_model=D_MODEL, context=L).double()
    attention = CausalSelfAttention(cfg, layer, encoding).double().eval()
    wq, wk = ref.q_proj.weight, ref.k_proj.weight
    if neox:
        perm = torch.cat([h * HEAD_DIM + neox_to_adjacent(HEAD_DIM) for h in range(HEADS)])
        wq, wk = wq[perm], wk[perm]
    with torch.no_grad():
        attention.qkv.weight.copy_(torch.cat((wq, wk, ref.v_proj.weight)))
        attention.proj.weight.copy_(getattr(ref, "o_proj", None).weight if hasattr(ref, "o_proj") else ref.dense.weight)
    return attention, encoding


def reference_mask(config, x, kind: str):
    """The reference's own mask for a layer of `kind` ("full", "sliding", "chunked"), never the is_causal shortcut."""
    build = {
        "full": masking_utils.create_causal_mask,
        "sliding": masking_utils.create_sliding_window_causal_mask,
        "chunked": masking_utils.create_chunked_causal_mask,
    }[kind]
    return build(
        config=config,
        inputs_embeds=x,
        attention_mask=None,
        cache=None,
        position_ids=torch.arange(T)[None],
        allow_is_causal_skip=False,
    )


@pytest.fixture
def x():
    torch.manual_seed(0)
    return torch.randn(1, T, D_MODEL, dtype=F64)


def max_difference(attention, encoding, x, expected):
    with torch.no_grad():
        return (attention(x, encoding.prepare(torch.arange(T))) - expected).abs().max().item()


def test_llama4_irope_layers_equal_llama4_text_attention(x):
    """Llama4TextAttention: layer 0 (RoPE, q/k RMS-normalised, chunks of 8) 1.2e-7 (the reference rotates in
    fp32); layer 3 (NoPE, temperature with floor 4 and attn_scale 0.1, every earlier key) 1.1e-16."""
    configuration, modeling = reference("llama4")
    config = configuration.Llama4TextConfig(
        hidden_size=D_MODEL, num_attention_heads=HEADS, num_key_value_heads=HEADS, head_dim=HEAD_DIM,
        num_hidden_layers=4, intermediate_size=64, intermediate_size_mlp=64, attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0}, use_qk_norm=True, rms_norm_eps=1e-5,
        attention_chunk_size=8, attn_temperature_tuning=True, floor_scale=4, attn_scale=0.1,
        attn_implementation="sdpa", **TOKEN_IDS,
    )  # fmt: skip
    assert config.no_rope_layers == [1, 1, 1, 0]
    assert config.layer_types == ["chunked_attention"] * 3 + ["full_attention"]
    freqs = modeling.Llama4TextRotaryEmbedding(config)(x, torch.arange(T)[None])
    options = {"chunk_fraction": 8 / L, "floor_fraction": 4 / L, "min_tokens": 1}  # the references: a floor of 4
    for layer, kind, tolerance in ((0, "chunked", 1e-6), (3, "full", 1e-12)):
        ref = modeling.Llama4TextAttention(config, layer).double().eval()
        with torch.no_grad():
            expected, _ = ref(x, freqs, reference_mask(config, x, kind))
        attention, encoding = ours("irope", options, layer, 4, ref, neox=False)
        assert max_difference(attention, encoding, x, expected) < tolerance, layer


def test_nope_every4_layers_equal_smollm3_attention(x):
    """SmolLM3Attention (NeoX halves): layer 0 (RoPE) 9.1e-9, layer 3 (NoPE) 1.7e-16."""
    configuration, modeling = reference("smollm3")
    config = configuration.SmolLM3Config(
        hidden_size=D_MODEL, num_attention_heads=HEADS, num_key_value_heads=HEADS, num_hidden_layers=4,
        intermediate_size=64, attention_bias=False, rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
        use_sliding_window=False, attn_implementation="sdpa", **TOKEN_IDS,
    )  # fmt: skip
    assert config.no_rope_layers == [1, 1, 1, 0]
    cos_sin = modeling.SmolLM3RotaryEmbedding(config)(x, torch.arange(T)[None])
    for layer, tolerance in ((0, 1e-6), (3, 1e-12)):
        ref = modeling.SmolLM3Attention(config, layer).double().eval()
        with torch.no_grad():
            expected, _ = ref(x, cos_sin, reference_mask(config, x, "full"))
        attention, encoding = ours("nope_every", {}, layer, 4, ref, neox=True)
        assert max_difference(attention, encoding, x, expected) < tolerance, layer


def test_rnope_swa_layers_equal_cohere2_attention(x):
    """Cohere2Attention (adjacent pairs, as here): layer 0 (RoPE, window 6) 2.1e-8; layer 3 (NoPE, every earlier
    key) 1.1e-16."""
    configuration, modeling = reference("cohere2")
    config = configuration.Cohere2Config(
        hidden_size=D_MODEL, num_attention_heads=HEADS, num_key_value_heads=HEADS, num_hidden_layers=4,
        intermediate_size=64, attention_bias=False, rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
        sliding_window=6, attn_implementation="sdpa", **TOKEN_IDS,
    )  # fmt: skip
    assert config.layer_types == ["sliding_attention"] * 3 + ["full_attention"]
    cos_sin = modeling.Cohere2RotaryEmbedding(config)(x, torch.arange(T)[None])
    for layer, kind, tolerance in ((0, "sliding", 1e-6), (3, "full", 1e-12)):
        ref = modeling.Cohere2Attention(config, layer).double().eval()
        with torch.no_grad():
            expected, _ = ref(x, cos_sin, reference_mask(config, x, kind))
        attention, encoding = ours("rnope_swa", {"window_fraction": 6 / L, "min_tokens": 1}, layer, 4, ref, neox=False)
        assert max_difference(attention, encoding, x, expected) < tolerance, layer


def test_local_global_layers_equal_gemma3_attention_without_its_qk_norms(x):
    """Gemma3Attention (NeoX halves) with its q/k RMSNorm replaced by the identity (not positions: SPEC 1c) and
    query_pre_attn_scalar = head dim: layer 0 (local, base 10k, window 6) 1.7e-8; layer 5 (global, base 1M) 5.1e-9."""
    configuration, modeling = reference("gemma3")
    config = configuration.Gemma3TextConfig(
        hidden_size=D_MODEL, num_attention_heads=HEADS, num_key_value_heads=HEADS, head_dim=HEAD_DIM,
        num_hidden_layers=6, intermediate_size=64, attention_bias=False, sliding_window=6,
        query_pre_attn_scalar=HEAD_DIM, attn_implementation="sdpa", **TOKEN_IDS,
    )  # fmt: skip
    assert config.layer_types == ["sliding_attention"] * 5 + ["full_attention"]
    assert config.rope_parameters["sliding_attention"]["rope_theta"] == 10_000.0
    assert config.rope_parameters["full_attention"]["rope_theta"] == 1_000_000.0
    rotary = modeling.Gemma3RotaryEmbedding(config)
    for layer, kind, tolerance in ((0, "sliding", 1e-6), (5, "full", 1e-6)):
        ref = modeling.Gemma3Attention(config, layer).double().eval()
        ref.q_norm, ref.k_norm = torch.nn.Identity(), torch.nn.Identity()
        with torch.no_grad():
            expected, _ = ref(
                x, rotary(x, torch.arange(T)[None], config.layer_types[layer]), reference_mask(config, x, kind)
            )
        attention, encoding = ours(
            "local_global", {"window_fraction": 6 / L, "min_tokens": 1}, layer, 6, ref, neox=True
        )
        assert max_difference(attention, encoding, x, expected) < tolerance, layer


def test_partial_rotation_equals_phi_attention(x):
    """PhiAttention with partial_rotary_factor 0.25 (rotary_ndims 4 of 16, NeoX halves of those) and its biases
    zeroed: the suite's partial rotation at 25% rotates dimensions 0..3 in adjacent pairs; the permutation maps
    the reference's rotated part onto them and leaves the pass-through part in place: 4.2e-9."""
    configuration, modeling = reference("phi")
    config = configuration.PhiConfig(
        hidden_size=D_MODEL, num_attention_heads=HEADS, num_key_value_heads=HEADS, num_hidden_layers=1,
        intermediate_size=64, partial_rotary_factor=0.25, rope_theta=10_000.0, qk_layernorm=False,
        attn_implementation="sdpa", **TOKEN_IDS,
    )  # fmt: skip
    ref = modeling.PhiAttention(config, 0).double().eval()
    with torch.no_grad():
        for linear in (ref.q_proj, ref.k_proj, ref.v_proj, ref.dense):
            linear.bias.zero_()
        expected, _ = ref(
            x, modeling.PhiRotaryEmbedding(config)(x, torch.arange(T)[None]), reference_mask(config, x, "full")
        )
    cfg = GPTConfig(vocab_size=10, context=L, n_layer=1, n_head=HEADS, d_model=D_MODEL, pe="partial_rotary")
    encoding = build_encoding("partial_rotary", {"fraction": 0.25}, n_layer=1, n_head=HEADS, d_model=D_MODEL, context=L)
    attention = CausalSelfAttention(cfg, 0, encoding.double()).double().eval()
    within = torch.cat((neox_to_adjacent(4), torch.arange(4, HEAD_DIM)))  # NeoX halves of the first 4 only
    perm = torch.cat([h * HEAD_DIM + within for h in range(HEADS)])
    with torch.no_grad():
        attention.qkv.weight.copy_(torch.cat((ref.q_proj.weight[perm], ref.k_proj.weight[perm], ref.v_proj.weight)))
        attention.proj.weight.copy_(ref.dense.weight)
    assert max_difference(attention, encoding, x, expected) < 1e-6
