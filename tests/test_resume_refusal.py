"""A run folder is one experiment (issue 26, section 2): resuming it with other settings or other data than its
checkpoint was trained with is refused before anything is written, naming the folder, the setting and both
values; the loader's workers may differ, and the resumed run then reproduces the uninterrupted one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from domains.synthetic.datamodule import SyntheticDataModule
from pipelines.experiment.config import compose_config
from pipelines.experiment.training import TRAINED_WITH, train_and_evaluate
from pipelines.runs.layout import run_folder
from tests.log_fixtures import train_losses
from tests.training_fixtures import Kill, SimulatedKill


def config(root, *extra):
    return compose_config(
        [
            "debug=fast",
            f"runs_root={root}",
            "domain.args.task=reverse_string",
            "trainer.max_steps=6",
            "trainer.ckpt_every=3",
            *extra,
        ]
    )


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Path:
    """runs_root of a run killed at step 4: its checkpoint is at step 3."""
    root = tmp_path_factory.mktemp("killed")
    with pytest.raises(SimulatedKill):
        train_and_evaluate(config(root), callbacks=[Kill(at=4)])
    return root


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    """The uninterrupted run's folder."""
    return train_and_evaluate(config(tmp_path_factory.mktemp("straight")))


def copy_of(killed: Path, tmp_path: Path) -> Path:
    shutil.copytree(killed, tmp_path / "runs")
    return tmp_path / "runs"


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("trainer.optim.lr=0.001", "trainer.optim.lr 0.001, the checkpoint was trained with 0.003"),
        ("trainer.batch_size=2", "trainer.batch_size 2, the checkpoint was trained with 4"),
        ("pe.options.base=500000", "pe.options.base 500000, the checkpoint was trained with 10000"),
        ("trainer.max_steps=12", "trainer.max_steps 12, the checkpoint was trained with 6"),
        ("model.n_layer=3", "model.n_layer 3, the checkpoint was trained with 2"),
    ],
)
def test_a_resume_with_another_setting_is_refused_naming_the_folder_the_setting_and_both_values(
    killed, tmp_path, override, named
):
    cfg = config(copy_of(killed, tmp_path), override)
    folder = run_folder(cfg)
    before = files(folder)
    with pytest.raises(ValueError) as error:
        train_and_evaluate(cfg)
    assert str(error.value).startswith(f"{folder}: {named}. A run folder is one experiment"), str(error.value)
    assert files(folder) == before  # refused before anything was written: checkpoint, logs, failed.json as they were


@pytest.mark.slow
def test_a_resume_with_other_data_is_refused_naming_the_data_hash(killed, tmp_path, monkeypatch):
    cfg = config(copy_of(killed, tmp_path))
    state = torch.load(run_folder(cfg) / "checkpoints/last.ckpt", weights_only=False)
    trained = state.get(TRAINED_WITH, {}).get("data_hashes", {})
    monkeypatch.setattr(SyntheticDataModule, "data_hashes", lambda self: {**trained, "eval/test": "0" * 64})
    with pytest.raises(ValueError, match=rf"data hash eval/test {'0' * 64}, the checkpoint was trained with "):
        train_and_evaluate(cfg)


@pytest.mark.slow
def test_a_checkpoint_without_its_training_record_is_still_checked_on_its_model_and_optimiser(killed, tmp_path):
    """A checkpoint written before the record existed: DecoderLM's hyperparameters tell the model, optimiser, seed."""
    cfg = config(copy_of(killed, tmp_path), "model.n_layer=3")
    path = run_folder(cfg) / "checkpoints/last.ckpt"
    state = torch.load(path, weights_only=False)
    state.pop(TRAINED_WITH, None)
    torch.save(state, path)
    with pytest.raises(ValueError, match=r"seed0: model.n_layer 3, the checkpoint was trained with 2\. "):
        train_and_evaluate(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["thread", "process"])
def test_a_resume_with_other_loader_workers_and_cadences_reproduces_the_uninterrupted_run(
    killed, straight, tmp_path, method
):
    """The loader's workers cannot change the batches, nor the validation, checkpoint and evaluation settings the
    weights: a resume may change them (pipelines.runs.settings.RESULT_NEUTRAL) and trains what the uninterrupted
    run trained."""
    changed = ["trainer.num_workers=2", f"trainer.worker_method={method}", "trainer.keep_checkpoint=true"]
    changed += ["trainer.eval_batch_size=4", "trainer.val_every=2", "trainer.ckpt_every=2"]
    resumed = train_and_evaluate(config(copy_of(killed, tmp_path), *changed))
    assert train_losses(resumed) == train_losses(straight)
    a, b = (torch.load(folder / "model.pt", weights_only=True)["state_dict"] for folder in (straight, resumed))
    for name, tensor in a.items():
        assert torch.equal(tensor, b[name]), name
