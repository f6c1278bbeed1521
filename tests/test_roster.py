"""The roster configs, the roster listing, and YaRN's place in the pipeline (evaluated, never trained)."""

from __future__ import annotations

import json

import pytest

from models.encodings import build_encoding
from pipelines.experiment.config import compose_config, config_options, describe_roster, model_config, roster
from pipelines.experiment.training import train_and_evaluate as run
from pipelines.roster import format_rows
from pipelines.roster import main as roster_main

# SPEC base convention: every other rotary method uses 500k (xpos: 10k by SPEC 1b; rope10k_rand randomizes rope10k)
# (roster 3's patterns: rope10k's base, so that each differs from its reference by the pattern only; SPEC 1c)
BASE_10K = {"rope10k", "pope", "lerope", "prope", "xpos", "rope10k_rand"}
BASE_10K |= {"nope_every4", "irope", "rnope_swa", "partial25", "partial10", "fope", "fope_learned"}
BASE_10K |= {"irope_no_qknorm", "irope_no_temp", "irope_sliding"}  # its ablations (issues 48, 66)


def test_rosters_are_specs():
    assert roster("paper") == ["rope10k", "rope500k", "nope", "hope", "pope", "darope"]
    assert roster("full") == [
        *("rope10k", "rope500k", "nope", "hope", "pope", "darope"),
        *("cope", "prope", "lerope", "hdrope", "rope_dup", "alibi", "ape_sin"),
    ]
    assert roster("patterns") == [
        *("rope10k", "nope_every4", "irope", "rnope_swa", "local_global", "partial25", "partial10", "fope"),
    ]
    assert roster("irope_ablations") == ["rope10k", "irope", "irope_no_qknorm", "irope_no_temp", "irope_sliding"]


def test_irope_ablations_are_irope_with_one_option_changed():
    """Each ablation of the roster is irope's config with exactly one option changed (issues 48, 66): what makes
    it an ablation, and what a study holding irope can join as a family of its own."""
    options = {entry: dict(compose_config([f"pe={entry}"]).pe.options) for entry in roster("irope_ablations")[1:]}
    names = {entry: compose_config([f"pe={entry}"]).pe.name for entry in options}
    assert set(names.values()) == {"irope"}
    changed = {
        entry: {key: value for key, value in opts.items() if options["irope"].get(key) != value}
        for entry, opts in options.items()
        if entry != "irope"
    }
    assert changed == {
        "irope_no_qknorm": {"qk_norm": False},
        "irope_no_temp": {"attn_scale": 0},
        "irope_sliding": {"sliding_window": True},
    }
    assert all(set(options["irope"]) <= set(opts) for opts in options.values())  # none drops an option of irope's


@pytest.mark.parametrize("entry", config_options("pe"))
def test_every_pe_config_builds_with_specs_base(entry):
    cfg = compose_config([f"pe={entry}"])
    assert cfg.pe.id == entry
    enc = build_encoding(cfg.pe.name, dict(cfg.pe.options), n_layer=2, n_head=4, d_model=64, context=256)
    if hasattr(enc, "base"):
        assert enc.base == (10_000.0 if entry in BASE_10K else 500_000.0), entry


def test_roster_listing_reports_extra_parameters_and_fused_path():
    rows = {row["id"]: row for row in describe_roster("full", "synthetic", "paper")}  # 4 layers, 8 heads, d 256
    assert rows["darope"]["parameters_per_layer"] == 8 * (256 + 1)
    assert rows["pope"]["parameters"] == 4 * 8 * 32  # phase bias per layer, head and component
    assert rows["cope"]["parameters_per_layer"] == 32 * (256 + 1)  # d x npos, npos = L + 1
    assert rows["lerope"]["parameters"] == 16  # d/2 scales shared by every layer and head
    assert {r for r, row in rows.items() if not row["fused_attention"]} == {"cope", "alibi"}
    assert (rows["darope"]["fast_bands"], rows["darope"]["slow_bands"]) == (5, 11)  # d=32, L=256, base 500k
    table = format_rows(list(rows.values()))
    assert table.splitlines()[2].split()[:6] == ["rope10k", "rope", "qk", "yes", "0", "0.0"]


def test_roster_command_prints_the_model_size(capsys):
    assert roster_main(["--roster", "paper", "--preset", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "2 layers, 4 heads, d_model 64, head dim 16, context 32" in out
    assert len([line for line in out.splitlines() if line.split() and line.split()[0] in roster("paper")]) == 6


def test_yarn_is_refused_for_training():
    cfg = compose_config(["pe=rope10k", "pe.name=yarn", "pe.id=yarn"])
    with pytest.raises(ValueError, match="applied at evaluation time.*train pe=rope10k"):
        model_config(cfg, vocab_size=128)


@pytest.mark.slow
def test_a_rope_run_writes_its_yarn_sibling(tmp_path):
    """YaRN at s = 1 on the in-distribution split is plain RoPE (same metrics); on the 8x split it differs."""
    folder = run(
        compose_config(
            ["debug=fast", f"runs_root={tmp_path}", "trainer.max_steps=4", "domain.args.task=needle", "pe=rope10k"]
        )
    )
    sibling = folder.parent.parent / "rope10k+yarn" / "seed0"
    assert (sibling / "done.json").is_file()
    rope = json.loads((folder / "metrics" / "summary.json").read_text())["splits"]
    yarn = json.loads((sibling / "metrics" / "summary.json").read_text())["splits"]
    assert yarn["test"]["nll"] == pytest.approx(rope["test"]["nll"], abs=1e-9)
    assert yarn["test_8x"]["nll"] != pytest.approx(rope["test_8x"]["nll"], abs=1e-6)
    manifest = json.loads((sibling / "manifest.json").read_text())
    assert manifest["run"]["pe_id"] == "rope10k+yarn" and manifest["derived_from"] == str(folder)
    nope = run(compose_config(["debug=fast", f"runs_root={tmp_path}", "trainer.max_steps=2", "pe=nope"]))
    assert not (nope.parent.parent / "nope+yarn").exists()


def test_darope_takes_the_papers_16_slow_bands_at_maestros_paper_preset_only():
    """Paper 000 appendix C (SPEC 1): MAESTRO's DaRoPE has 16 slow bands where the wavelength rule gives 17;
    elsewhere the rule holds (JSB paper: 8 of 16 bands slow at base 500k and L = 2048)."""
    slow = {
        (domain, preset): next(r for r in describe_roster("paper", domain, preset) if r["id"] == "darope")["slow_bands"]
        for domain, preset in (("maestro", "paper"), ("maestro", "tiny"), ("jsb", "paper"))
    }
    assert slow == {("maestro", "paper"): 16, ("maestro", "tiny"): 5, ("jsb", "paper"): 8}
