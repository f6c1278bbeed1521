"""The train/evaluate pipelines end to end on the tiny preset: resume, skip, NaN, manifest, bad names."""

from __future__ import annotations

import csv
import json
import math
import os
import re

import pytest
import torch
from hydra.errors import MissingConfigException
from lightning.pytorch.callbacks import Callback

from models.training import NonFiniteLossError, OptimConfig
from pipelines.evaluate import main as evaluate_main
from pipelines.experiment.config import compose_config
from pipelines.experiment.training import train_and_evaluate as run
from pipelines.runs.layout import run_folder as run_dir
from pipelines.runs.model_file import load_run_model
from tests.log_fixtures import train_losses as losses
from tests.training_fixtures import Kill, SimulatedKill


class PoisonWeights(Callback):
    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_step == self.at:
            with torch.no_grad():
                module.model.token_embedding.weight.fill_(float("nan"))


def config(tmp_path, *overrides):
    return compose_config(
        [
            "debug=fast",
            f"runs_root={tmp_path}",
            "trainer.max_steps=8",
            "trainer.ckpt_every=3",
            "domain.args.task=reverse_string",
            *overrides,
        ]
    )


@pytest.mark.slow
def test_resume_after_a_kill_mid_epoch_reproduces_the_uninterrupted_run(tmp_path):
    straight = run(config(tmp_path / "a"))
    cfg = config(tmp_path / "b")
    with pytest.raises(SimulatedKill):
        run(cfg, callbacks=[Kill(at=5)])
    folder = run_dir(cfg)
    assert not (folder / "done.json").exists() and (folder / "checkpoints" / "last.ckpt").exists()
    assert torch.load(folder / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 3
    resumed = run(cfg)
    assert [s for s, _ in losses(resumed)] == list(range(8))
    assert losses(resumed) == losses(straight)
    a, b = load_run_model(straight), load_run_model(resumed)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


@pytest.mark.slow
def test_a_finished_run_is_skipped(tmp_path):
    cfg = config(tmp_path)
    folder = run(cfg)
    stamp = (folder / "done.json").stat().st_mtime_ns
    assert run(cfg, callbacks=[Kill(at=0)]) == folder  # Kill would fire if training started again
    assert (folder / "done.json").stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_run_folder_manifest_and_metrics(tmp_path):
    cfg = config(tmp_path, "pe=alibi", "seed=2")
    folder = run(cfg)
    assert folder == tmp_path / "synthetic" / "reverse_string" / "alibi" / "seed2"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["run"] == {
        "domain": "synthetic",
        "task": "reverse_string",
        "pe": "alibi",
        "pe_id": "alibi",
        "seed": 2,
        "preset": "tiny",
    }
    assert manifest["config"]["trainer"]["max_steps"] == 8
    assert manifest["n_params"] == load_run_model(folder).num_parameters()
    assert manifest["encoding"]["fused_attention"] is False and manifest["encoding"]["mechanism"] == "bias"
    assert manifest["tokens_per_s"] > 0 and manifest["chance"] == pytest.approx(0.1)
    assert set(manifest["data_hashes"]) == {"eval/test", "eval/test_2x", "eval/test_8x"}
    assert {"torch", "lightning", "numpy", "python"} <= set(manifest["packages"])
    assert len(manifest["git"]["sha"]) == 40 and isinstance(manifest["git"]["dirty"], bool)
    summary = json.loads((folder / "metrics" / "summary.json").read_text())["splits"]
    for split in ("test", "test_2x", "test_8x"):
        with open(folder / "metrics" / f"{split}.per_example.csv") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == summary[split]["examples"] == 8
        assert summary[split]["nll"] == pytest.approx(sum(float(r["nll"]) for r in rows) / 8)


@pytest.mark.slow
def test_evaluate_command_rewrites_the_same_metrics(tmp_path):
    folder = run(config(tmp_path))
    before = (folder / "metrics" / "test.per_example.csv").read_text()
    (folder / "metrics" / "test.per_example.csv").unlink()
    evaluate_main([str(folder), "--device", "cpu"])
    assert (folder / "metrics" / "test.per_example.csv").read_text() == before


@pytest.mark.slow
def test_weights_saved_in_an_older_model_format_are_refused_naming_the_file(tmp_path):
    folder = run(config(tmp_path))
    saved = torch.load(folder / "model.pt", weights_only=True)
    assert saved["format"] == 2 and load_run_model(folder) is not None
    del saved["format"]  # what runs trained before rotary pairs became (2j, 2j+1) saved
    torch.save(saved, folder / "model.pt")
    with pytest.raises(ValueError, match=r"model\.pt: weights saved in model format 1, this code reads format 2"):
        load_run_model(folder)


@pytest.mark.slow
def test_learned_table_is_not_evaluated_past_its_length(tmp_path):
    folder = run(config(tmp_path, "pe=ape_learned"))
    summary = json.loads((folder / "metrics" / "summary.json").read_text())["splits"]
    assert "nll" in summary["test"]
    assert "represents 32 positions; test_2x needs 64" in summary["test_2x"]["skipped"]


@pytest.mark.slow
def test_nan_loss_stops_the_run_keeps_the_last_good_checkpoint_and_writes_no_results(tmp_path):
    cfg = config(tmp_path)
    with pytest.raises(NonFiniteLossError, match="loss is nan at step 4"):
        run(cfg, callbacks=[PoisonWeights(at=4)])
    folder = run_dir(cfg)
    assert torch.load(folder / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 3
    assert [step for step, _ in losses(folder)] == [0, 1, 2, 3]  # the steps before the bad one are logged
    assert not (folder / "metrics").exists() and not (folder / "done.json").exists()
    assert "NonFiniteLossError" in json.loads((folder / "failed.json").read_text())["error"]


def test_unknown_names_fail_before_training_with_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="unknown synthetic task 'parrity'.*parity"):
        run(config(tmp_path, "domain.args.task=parrity"))
    with pytest.raises(MissingConfigException, match="pe/rope1k"):
        config(tmp_path, "pe=rope1k")
    with pytest.raises(MissingConfigException, match="domain/jsb2"):
        config(tmp_path, "domain=jsb2")
    assert not any(tmp_path.iterdir())


def test_schedule_is_linear_warmup_then_cosine_to_min_lr():
    cfg = OptimConfig(lr=1.0, min_lr=0.1, warmup_steps=4, max_steps=104)
    assert [cfg.lr_at(s) for s in range(4)] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert cfg.lr_at(54) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi / 2)))
    assert cfg.lr_at(104) == pytest.approx(0.1) and cfg.lr_at(500) == pytest.approx(0.1)


def test_paper_preset_composes_with_the_paper_sizes():
    cfg = compose_config(["preset=paper"])
    assert (cfg.model.n_layer, cfg.model.d_model, cfg.model.context) == (4, 256, 256)


@pytest.mark.slow
def test_resume_reproduces_the_run_with_dropout(tmp_path):
    """Dropout masks depend on (seed, step) only, so a resumed run with dropout matches too."""
    straight = run(config(tmp_path / "a", "model.dropout=0.2"))
    cfg = config(tmp_path / "b", "model.dropout=0.2")
    with pytest.raises(SimulatedKill):
        run(cfg, callbacks=[Kill(at=4)])
    assert losses(run(cfg)) == losses(straight)


@pytest.mark.slow
def test_train_command_line(tmp_path):
    """The Hydra entry point itself, as a user types it."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "pipelines.train", "debug=fast", "pe=nope", f"runs_root={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "POSBENCH_PROGRESS": "0"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"run: {tmp_path}/synthetic/parity/nope/seed0" in result.stdout
    assert (tmp_path / "synthetic" / "parity" / "nope" / "seed0" / "done.json").exists()


def test_a_run_without_a_bar_prints_its_progress_as_lines_while_it_trains_and_scores(tmp_path, monkeypatch, capsys):
    """A sweep's training process (POSBENCH_PROGRESS=0: no bar) wrote nothing to its log for the minutes it trained
    and scored: every POSBENCH_PROGRESS_EVERY seconds (1 us here: each step and batch) it prints its step, loss,
    tokens/s and training time left, then each split's scoring, batch by batch."""
    monkeypatch.setenv("POSBENCH_PROGRESS", "0")
    monkeypatch.setenv("POSBENCH_PROGRESS_EVERY", "0.000001")
    run(config(tmp_path, "trainer.max_steps=6", "trainer.eval_batch_size=2", "pe=nope"))
    out = capsys.readouterr().out
    label = "synthetic/reverse_string/nope/seed0"
    assert f"] {label}: training from step 0 of 6\n" in out
    steps = re.findall(
        rf"\] {label}: step (\d)/6 \(\d+%\), loss [\d.]+, [\d,]+ tokens/s, about \d+ s of training left", out
    )
    assert steps == ["1", "2", "3", "4", "5"]  # every step but the last (nothing left to say of training then)
    assert f"] {label}: scoring test (8 examples in 4 batches)\n" in out
    assert re.findall(rf"\] {label}: scoring test: batch (\d)/4 \(\d+%\), about \d+ s left", out) == ["1", "2", "3"]
    monkeypatch.setenv("POSBENCH_PROGRESS_EVERY", "0")  # turned off (the demo's warm workers)
    run(config(tmp_path, "trainer.max_steps=6", "pe=nope", "seed=1"))
    assert "training from step" not in capsys.readouterr().out
