"""Randomized positions (Ruoss et al., 2023; models/encodings/base.py): the draw, where it comes from, what each
encoding does with it, the shipped `*_rand` configs, and a resumed run that reproduces the uninterrupted one."""

from __future__ import annotations

import pytest
import torch

from models.encodings import PositionalEncoding, available, build_encoding, encoding_class
from models.encodings.alibi import alibi_slopes
from models.encodings.ape_sin import sinusoid_table
from models.encodings.base import causal_logits
from models.encodings.pattern import LayerPattern
from models.encodings.rope import unit_rotations
from models.gpt import GPT, GPTConfig
from pipelines.experiment.config import compose_config, encoding_of
from pipelines.experiment.training import train_and_evaluate
from pipelines.roster import format_rows
from pipelines.runs.layout import run_folder
from pipelines.runs.model_file import load_run_model
from tests.log_fixtures import train_losses
from tests.training_fixtures import Kill, SimulatedKill

DIMS = dict(n_layer=2, n_head=4, d_model=32, context=16)
RANDOMIZED = {"rope10k_rand": "rope", "ape_sin_rand": "ape_sin", "alibi_rand": "alibi"}  # config id: implementation


def randomized(name: str, ratio: int = 8, **options) -> PositionalEncoding:
    return build_encoding(name, {"random_positions": ratio, **options}, **DIMS)


def positions_used(encoding: PositionalEncoding, T: int) -> torch.Tensor:
    """The positions the encoding builds its tables from (the base class's part of `prepare`)."""
    return PositionalEncoding.prepare(encoding, torch.arange(T))


def test_training_positions_are_a_sorted_sample_of_distinct_integers_below_m():
    encoding = randomized("rope")  # M = 8 x 16
    torch.manual_seed(0)
    for T in (1, 5, 16, 128):
        pos = positions_used(encoding, T)
        assert pos.dtype == torch.long and pos.shape == (T,)
        assert torch.all(pos[1:] > pos[:-1])  # sorted and distinct
        assert pos.min() >= 0 and pos.max() < 128
    assert torch.equal(positions_used(encoding, 128), torch.arange(128))  # T = M takes every position
    with pytest.raises(ValueError, match=r"129 positions .* \[0, 128\)"):
        positions_used(encoding, 129)


def test_the_draw_is_a_function_of_the_seeded_stream():
    """models.training seeds torch before every training batch; the same seed draws the same positions, through
    the encoding and through the whole model."""
    encoding = randomized("rope")
    draws = []
    for seed in (3, 3, 4):
        torch.manual_seed(seed)
        draws.append(positions_used(encoding, 12))
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    model = GPT(GPTConfig(vocab_size=23, context=16, n_layer=2, n_head=4, d_model=32, pe="rope",
                          pe_options={"random_positions": 8}))  # fmt: skip
    tokens = torch.randint(0, 23, (2, 12), generator=torch.Generator().manual_seed(1))
    logits = []
    for seed in (3, 3, 4):
        torch.manual_seed(seed)
        logits.append(model(tokens))
    assert torch.equal(logits[0], logits[1]) and not torch.allclose(logits[0], logits[2])


def test_evaluation_draws_a_fixed_sample_per_length_and_leaves_the_global_stream_alone():
    encoding = randomized("rope").eval()
    state = torch.get_rng_state()
    first = positions_used(encoding, 12)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(positions_used(encoding, 12), first) and torch.all(first[1:] > first[:-1])
    assert not torch.equal(first, torch.arange(12))
    contiguous = randomized("rope", random_positions_eval=False).eval()
    assert torch.equal(positions_used(contiguous, 12), torch.arange(12))
    assert not torch.equal(positions_used(contiguous.train(), 12), torch.arange(12))  # training still draws


@pytest.mark.parametrize("pe", [name for name in available() if not encoding_class(name).evaluation_only])
def test_every_encoding_builds_its_state_from_the_base_prepare(pe, monkeypatch):
    """Random positions reach an encoding only through `PositionalEncoding.prepare`: every one calls it, once; a
    layer pattern once for itself and once in each distinct encoding of its layers, which gets its positions."""
    calls = []
    base_prepare = PositionalEncoding.prepare

    def spy(self, pos):
        calls.append(pos.shape)
        return base_prepare(self, pos)

    encoding = build_encoding(pe, {}, **DIMS)
    monkeypatch.setattr(PositionalEncoding, "prepare", spy)
    encoding.prepare(torch.arange(10))
    assert calls == [(10,)] * (1 + len(encoding.parts) if isinstance(encoding, LayerPattern) else 1)


def test_rope_sin_and_alibi_use_the_drawn_positions():
    """Drawn with the same seed: RoPE's angles, the sinusoidal table and ALiBi's distances p_i - p_j."""
    T = 10
    for name, expected in [
        ("rope", lambda enc, p: unit_rotations(enc.angles(p))),
        ("ape_sin", lambda enc, p: sinusoid_table(p, 32)),
        ("alibi", lambda enc, p: causal_logits(p).masked(-torch.tensor(alibi_slopes(4))[:, None, None] *
                                                         (p[:, None] - p[None, :]).float())),
    ]:  # fmt: skip
        encoding = randomized(name)
        torch.manual_seed(7)
        state = encoding.prepare(torch.arange(T))
        torch.manual_seed(7)
        pos = positions_used(encoding, T)
        assert pos.max() >= T  # not 0..T-1
        assert torch.equal(state, expected(encoding, pos)), name


def test_an_encoding_with_a_position_limit_or_without_positions_refuses_the_option():
    with pytest.raises(ValueError, match=r"ape_learned represents positions 0\.\.15 only.*\[0, 128\)"):
        randomized("ape_learned")
    for name in ("nope", "cope", "fox", "t5_bias", "kerple", "fire"):  # no positions, or tables of one window
        with pytest.raises(ValueError, match=f"{name} does not take its signal from the positions"):
            randomized(name)
    with pytest.raises(ValueError, match="whole number >= 1"):
        randomized("rope", ratio=0)


@pytest.mark.parametrize("entry", RANDOMIZED)
def test_shipped_configs_compose_build_and_describe_the_randomization(entry):
    cfg = compose_config([f"pe={entry}", "domain=synthetic", "preset=tiny"])
    assert cfg.pe.id == entry and cfg.pe.name == RANDOMIZED[entry]
    described = encoding_of(cfg).describe()
    assert described["random_positions"] == 8 and described["random_positions_range"] == 8 * cfg.model.context
    assert described["random_positions_eval"] == "sampled"
    assert "random_positions=8, random_positions_eval=sampled" in format_rows([{"id": entry, **described}])


@pytest.mark.parametrize("entry", RANDOMIZED)
def test_randomized_model_makes_no_tensor_off_its_device(entry):
    """As tests/test_encodings.py's meta-device check, with the draw of training mode."""
    cfg = compose_config([f"pe={entry}"])
    model = GPT(GPTConfig(vocab_size=50, context=16, n_layer=2, n_head=4, d_model=32, pe=cfg.pe.name,
                          pe_options=dict(cfg.pe.options))).to("meta")  # fmt: skip
    logits = model(torch.randint(0, 50, (2, 12), device="meta"))
    logits.sum().backward()
    assert logits.device.type == "meta"


def randomized_run_config(runs_root):
    return compose_config(
        [
            "debug=fast",
            f"runs_root={runs_root}",
            "domain.args.task=reverse_string",
            "pe=rope10k_rand",
            "trainer.max_steps=8",
            "trainer.ckpt_every=3",
        ]
    )


@pytest.mark.slow
def test_resume_with_random_positions_reproduces_the_uninterrupted_run(tmp_path):
    """The positions are drawn from the stream models.training seeds per (seed, step): a run killed at step 5
    and resumed from its step-3 checkpoint logs the same losses and ends with the same weights."""
    straight = train_and_evaluate(randomized_run_config(tmp_path / "a"))
    cfg = randomized_run_config(tmp_path / "b")
    with pytest.raises(SimulatedKill):
        train_and_evaluate(cfg, callbacks=[Kill(at=5)])
    folder = run_folder(cfg)
    assert not (folder / "done.json").exists() and (folder / "checkpoints" / "last.ckpt").exists()
    resumed = train_and_evaluate(cfg)
    assert train_losses(resumed) == train_losses(straight)
    a, b = load_run_model(straight), load_run_model(resumed)
    assert a.encoding.random_positions == 8
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    assert not (straight.parent.parent / "rope10k_rand+yarn").exists()  # trained past L: no YaRN sibling
