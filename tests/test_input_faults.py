"""Bad input named before anything is written (issue 26, section 4): every encoding's options by type and range,
the seed before a run folder exists, and the command lines of `pipelines.generate` and `pipelines.samples`."""

from __future__ import annotations

import math

import pytest
import torch

from models.encodings import available, build_encoding, encoding_class
from models.gpt import GPTConfig
from pipelines.experiment.config import compose_config
from pipelines.experiment.training import train_and_evaluate
from pipelines.generate import main as generate_main
from pipelines.samples import main as samples_main

DIMS = dict(n_layer=2, n_head=2, d_model=32, context=16)


def config(tmp_path, *overrides):
    return compose_config(["debug=fast", f"runs_root={tmp_path}", "domain.args.task=reverse_string", *overrides])


# ---- a run: the encoding's options and the seed, before any folder --------------------------------------------------
@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("pe.options.base=-1", "base=-1 (must be a number > 1"),
        ("pe.options.base=0", "base=0 (must be a number > 1"),
        ("pe.options.base=abc", "base='abc' (must be a number > 1"),
        ("+pe.options.random_positions=0", "random_positions=0 (must be a whole number >= 1"),
        ("+pe.options.random_positions_eval=sometimes", "random_positions_eval='sometimes' (must be true or false"),
        ("+pe.options.bsae=10", "unknown option 'bsae'"),
        ("seed=abc", "seed = 'abc' (must be a whole number >= 0"),
        ("seed=1.5", "seed = 1.5 (must be a whole number >= 0"),
        ("seed=true", "seed = True (must be a whole number >= 0"),
    ],
)
def test_bad_encoding_options_and_seeds_fail_by_name_before_anything_is_written(tmp_path, override, named):
    with pytest.raises(ValueError) as error:
        train_and_evaluate(config(tmp_path, override))
    assert named in str(error.value)
    assert not tmp_path.joinpath("synthetic").exists()  # no empty seed folder, no failed run left behind


# (encoding, option, bad values): every declared option of every encoding, by type and by range
BAD_OPTIONS = [
    ("rope", "base", [-1, 0, 1, 0.5, "abc", math.nan, math.inf, True, None]),
    ("hope", "base", [0, -10_000]),
    ("prope", "base", [0]),
    ("prope", "p", [-0.1, 1.5, "half", math.nan]),
    ("darope", "base", [0, -1]),
    ("darope", "n_slow", [-1, 1.5, "abc", True]),
    ("lerope", "base", [0]),
    ("lerope", "clip_norm", [0, -1.0, "x", math.inf]),
    ("hdrope", "block", [6, 2, 4.0, "4"]),
    ("hdrope", "base", [0]),
    ("rope_dup", "block", [3, 0, 4.5]),
    ("rope_dup", "base", [1]),
    ("pope", "base", [0, -1, "10k"]),
    ("xpos", "base", [0]),
    ("xpos", "gamma", [0, -0.4, math.nan]),
    ("xpos", "scale_base", [0, -512, "512"]),
    ("yarn", "base", [0]),
    ("yarn", "scale", [0.5, 0, math.nan, "2"]),
    ("ape_sin", "scale", [math.nan, math.inf, "abc"]),
    ("cope", "tile_bytes", [0, -1, 1.5, "8M"]),
    ("fire", "width", [0, -3, 2.5]),
    ("t5_bias", "buckets", [0, 3, 32.0, "32"]),
    ("t5_bias", "max_distance", [0, -1, 128.5]),
    ("alibi", "random_positions", [0, -8, 1.5, "8", True]),
    ("ape_sin", "random_positions_eval", ["no", 0, 1, None]),
]


@pytest.mark.parametrize(("name", "option", "values"), BAD_OPTIONS)
def test_every_encoding_option_is_checked_by_type_and_range_naming_it(name, option, values):
    for value in values:
        with pytest.raises(ValueError, match=rf"encoding '{name}': option {option}=") as error:
            build_encoding(name, {option: value}, **DIMS)
        assert repr(value) in str(error.value)


def test_an_encoding_whose_init_takes_an_option_without_a_rule_is_refused_when_defined():
    """So a new option cannot skip the check: defining the class fails, naming the option."""
    from models.encodings.rope import RoPE

    with pytest.raises(TypeError, match=r"Sloppy: options \['warp'\] of its __init__ have no rule"):

        class Sloppy(RoPE):
            def __init__(self, *, warp: float = 1.0, **kwargs):
                super().__init__(**kwargs)

    for name in available():  # and every registered encoding declares exactly what its __init__ chain takes
        cls = encoding_class(name)
        assert set(cls.declared_options()) == cls.init_keywords(), name


def test_a_model_config_refuses_bad_options_without_touching_the_random_stream():
    state = torch.get_rng_state()
    GPTConfig(vocab_size=11, context=16, n_layer=1, n_head=2, d_model=32, pe="darope", pe_options={"base": 500_000})
    assert torch.equal(torch.get_rng_state(), state)  # checking the options draws no initial weights
    for options, named in [({"base": 0}, "option base=0"), ({"n_slow": 9}, "n_slow must lie in 0..8")]:
        with pytest.raises(ValueError, match=named):
            GPTConfig(vocab_size=11, context=16, n_layer=1, n_head=2, d_model=32, pe="darope", pe_options=options)


# ---- pipelines.generate -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argument", "value", "named"),
    [
        ("--temperature", "nan", "argument --temperature: must be a finite number >= 0.0001, got 'nan'"),
        ("--temperature", "1e-45", "argument --temperature: must be a finite number >= 0.0001, got '1e-45'"),
        ("--temperature", "inf", "argument --temperature: must be a finite number >= 0.0001, got 'inf'"),
        ("--temperature", "0", "argument --temperature: must be a finite number >= 0.0001, got '0'"),
        ("--new-tokens", "1000000000000", "argument --new-tokens: must be a whole number in 0..1000000, got"),
        ("--new-tokens", "1e12", "argument --new-tokens: must be a whole number in 0..1000000, got '1e12'"),
        ("--new-tokens", "-1", "argument --new-tokens: must be a whole number in 0..1000000, got '-1'"),
        ("--prompt-tokens", "0", "argument --prompt-tokens: must be a whole number >= 1, got '0'"),
        ("--seed", "-1", "argument --seed: must be a whole number >= 0, got '-1'"),
    ],
)
def test_generate_refuses_bad_numbers_by_name(tmp_path, capsys, argument, value, named):
    with pytest.raises(SystemExit) as exit_:
        generate_main([str(tmp_path / "run"), "--out", str(tmp_path / "x.mid"), argument, value])
    assert exit_.value.code == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "x.mid").exists()


# ---- pipelines.samples --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--task", "parity", "--n", "-2"], "argument --n: must be a whole number >= 1, got '-2'"),
        (["--task", "parity", "--n", "0"], "argument --n: must be a whole number >= 1, got '0'"),
        (["--task", "parity", "--seed", "-1"], "argument --seed: must be a whole number >= 0, got '-1'"),
        (["--task", "parity", "--max-len", "0"], "argument --max-len: must be a whole number >= 1, got '0'"),
        (["--domain", "jsb", "--max-tokens", "-1"], "argument --max-tokens: must be a whole number >= 1, got '-1'"),
    ],
)
def test_samples_refuses_bad_counts_and_seeds_by_name(tmp_path, monkeypatch, capsys, arguments, named):
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))  # nothing is fetched: the arguments fail first
    monkeypatch.setenv("POSBENCH_MIRROR", str(tmp_path / "mirror"))
    with pytest.raises(SystemExit) as exit_:
        samples_main(arguments)
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert named in captured.err and captured.out == ""
    assert not (tmp_path / "data").exists()
