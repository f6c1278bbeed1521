"""The LightningModule and evaluate(): loss masking, optimizer groups, clipping, per-example scoring."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from domains.base import windows_from_examples
from models.training import DecoderLM, evaluate, seed_generators, token_nll

MODEL = dict(vocab_size=17, context=12, n_layer=2, n_head=2, d_model=16)


def module(pe="rope", pe_options=None, **optim):
    torch.manual_seed(0)
    return DecoderLM(model={**MODEL, "pe": pe, "pe_options": pe_options or {}}, optim={"max_steps": 10, **optim})


def test_loss_counts_only_scored_tokens():
    lm = module()
    tokens = torch.randint(0, 17, (2, 12), generator=torch.Generator().manual_seed(0))
    scored = torch.zeros(2, 12, dtype=torch.bool)
    scored[:, 6:9] = True
    nll, _, mask = token_nll(lm.model, {"tokens": tokens, "scored": scored})
    logits = lm.model(tokens[:, :-1])
    expected = F.cross_entropy(logits[:, 5:8].reshape(-1, 17), tokens[:, 6:9].reshape(-1))
    assert ((nll * mask).sum() / mask.sum()).item() == pytest.approx(expected.item(), rel=1e-5)
    changed = tokens.clone()
    changed[:, 10] = (changed[:, 10] + 1) % 17  # an unscored target
    nll2, _, _ = token_nll(lm.model, {"tokens": changed, "scored": scored})
    assert torch.allclose((nll * mask).sum(), (nll2 * mask).sum())


def test_weight_decay_only_on_matrices():
    lm = module(weight_decay=0.1)
    optimizer = lm.configure_optimizers()["optimizer"]
    for group in optimizer.param_groups:
        assert all(p.ndim >= 2 for p in group["params"]) == (group["weight_decay"] == 0.1)
    n_params = sum(p.numel() for g in optimizer.param_groups for p in g["params"])
    assert n_params == lm.model.num_parameters()  # the tied head is counted once


def test_encoding_groups_come_first_without_decay_and_are_clipped_on_their_own():
    """LeRoPE's frequency scales: their own group, no decay, clipped to their own norm; the rest to grad_clip."""
    lm = module(pe="lerope", pe_options={"clip_norm": 0.5}, grad_clip=1.0)
    optimizer = lm.configure_optimizers()["optimizer"]
    own, scales = optimizer.param_groups[0], lm.model.encoding.log_scale
    assert own["params"] == [scales] and own["weight_decay"] == 0.0 and own["clip_norm"] == 0.5
    assert all(scales is not p for g in optimizer.param_groups[1:] for p in g["params"])
    for p in lm.parameters():
        p.grad = torch.full_like(p, 10.0)
    lm.configure_gradient_clipping(optimizer)
    assert scales.grad.norm().item() == pytest.approx(0.5, rel=1e-5)
    rest = [p.grad for g in optimizer.param_groups[1:] for p in g["params"]]
    assert torch.linalg.vector_norm(torch.cat([g.flatten() for g in rest])).item() == pytest.approx(1.0, rel=1e-5)


def test_evaluate_scores_each_example_whole_across_sliding_windows():
    lm = module().eval()
    gen = torch.Generator().manual_seed(1)
    examples = [torch.randint(0, 16, (n,), generator=gen).numpy() for n in (5, 12, 30)]
    windows = windows_from_examples(examples, context=12, stride=8, pad_id=16)
    result = evaluate(lm.model, DataLoader(windows, batch_size=3), len(examples), windows.max_length)
    assert result.tokens.tolist() == [4, 11, 29]
    with torch.no_grad():
        short = torch.as_tensor(examples[0])[None]
        direct = F.cross_entropy(lm.model(short[:, :-1])[0], short[0, 1:]).item()
    assert result.nll[0] == pytest.approx(direct, rel=1e-5)
    # per position: every scored position appears once per example that reaches it
    assert result.position_tokens[1:5].tolist() == [3, 3, 3, 3] and result.position_tokens[29] == 1
    assert result.position_nll_sum.sum() == pytest.approx((result.nll * result.tokens).sum(), rel=1e-6)
    assert result.summary()["examples"] == 3 and math.isfinite(result.summary()["nll"])


def test_seeding_the_cpu_generator_alone_draws_what_torch_manual_seed_draws():
    """A training batch on CPU seeds only the CPU generator (seed_generators: torch.manual_seed would also queue a
    seeding of every uninitialised accelerator, 1.6 ms a step); dropout masks and random positions are the same."""
    draws = []
    for seed_with in (torch.manual_seed, lambda s: seed_generators(s, torch.device("cpu"))):
        torch.manual_seed(123)  # another state first
        seed_with(2024)
        x = torch.ones(4, 64)
        draws.append((F.dropout(x, 0.3, training=True), torch.randperm(50), torch.rand(3)))
    for ours, theirs in zip(*draws, strict=True):
        assert torch.equal(ours, theirs)


@pytest.mark.parametrize("bar", [True, False])
def test_the_loss_is_logged_for_the_progress_bar_only_when_there_is_one(bar, tmp_path):
    """The bar shows the step's loss and learning rate; without a bar (a sweep's workers) nothing reads them, and
    they are not logged (6% of a tiny run's time)."""
    import lightning as L

    lm = module()
    tokens = torch.randint(0, 17, (2, 12), generator=torch.Generator().manual_seed(1))
    batches = [{"tokens": tokens, "scored": torch.ones(2, 12, dtype=torch.bool)}] * 3
    trainer = L.Trainer(
        max_steps=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=bar,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(lm, DataLoader(batches, batch_size=None), DataLoader(batches[:1], batch_size=None))
    assert ({"train/loss", "lr"} <= set(trainer.progress_bar_metrics)) is bar
    assert ("train/loss" in trainer.callback_metrics) is bar
