"""The presets (configs/preset/): every domain composes at each, and the CPU preset sits between tiny and paper on the
same code path (a `debug=fast` run of each domain at the CPU preset: tests/test_domain_faults.py)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from pipelines.experiment.config import CONFIG_DIR, compose_config, config_options, domain_names

SIZES = ("n_layer", "d_model", "context")


def test_the_presets_are_tiny_cpu_and_paper():
    assert sorted(config_options("preset")) == ["cpu", "paper", "tiny"]


@pytest.mark.parametrize("domain", domain_names())
def test_every_domain_composes_at_every_preset_with_its_own_model_and_trainer(domain):
    for preset in config_options("preset"):
        cfg = compose_config([f"domain={domain}", f"preset={preset}"])
        assert cfg.preset == preset and cfg.domain.name == domain
        for group in ("model", "trainer"):
            assert cfg[group] == OmegaConf.load(CONFIG_DIR / group / f"{domain}_{preset}.yaml"), group


@pytest.mark.parametrize("domain", domain_names())
def test_the_cpu_preset_lies_between_tiny_and_paper(domain):
    tiny, cpu, paper = (compose_config([f"domain={domain}", f"preset={p}"]) for p in ("tiny", "cpu", "paper"))
    for size in SIZES:
        assert tiny.model[size] <= cpu.model[size] <= paper.model[size], size
    assert tiny.trainer.max_steps <= cpu.trainer.max_steps <= paper.trainer.max_steps
    # the paper's head size, so that a rotary encoding splits its bands as at paper scale for the same context
    assert cpu.model.d_model // cpu.model.n_head == paper.model.d_model // paper.model.n_head
    # the paper's recipe: the optimiser's betas and weight decay, and lr : min_lr as the paper's
    for key in ("beta1", "beta2", "weight_decay", "grad_clip"):
        assert cpu.trainer.optim[key] == paper.trainer.optim[key], key
    assert cpu.trainer.optim.lr / cpu.trainer.optim.min_lr == pytest.approx(10.0)
