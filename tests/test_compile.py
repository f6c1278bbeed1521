"""`trainer.compile=true` (issue 17): the training step runs through torch.compile and trains the same model as the
eager step, within float tolerance, with checkpoint keys unchanged."""

from __future__ import annotations

import pytest
import torch
from lightning.pytorch.callbacks import Callback

from pipelines.experiment.config import compose_config
from pipelines.experiment.training import train_and_evaluate
from pipelines.runs.model_file import load_run_model


class StepLosses(Callback):
    """Each optimiser step's loss, read on the host (a test may wait for the device every step)."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.losses.append(outputs["global_loss"].item())


@pytest.mark.slow
def test_compiled_training_agrees_with_eager_training_over_a_few_steps(tmp_path):
    torch._dynamo.reset()
    losses, models = {}, {}
    for compiled in (False, True):
        recorder = StepLosses()
        cfg = compose_config(
            [
                "debug=fast",
                f"runs_root={tmp_path / f'compiled_{compiled}'}",
                "domain.args.task=reverse_string",
                "pe=rope10k",
                "trainer.max_steps=5",
                f"trainer.compile={str(compiled).lower()}",
            ]
        )
        folder = train_and_evaluate(cfg, callbacks=[recorder])
        losses[compiled], models[compiled] = recorder.losses, load_run_model(folder)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # the compiled run did compile
    assert len(losses[True]) == len(losses[False]) == 5
    assert losses[True] == pytest.approx(losses[False], rel=1e-4, abs=1e-5)
    assert losses[True][-1] < losses[True][0]  # it trained
    eager, compiled = models[False].state_dict(), models[True].state_dict()
    assert eager.keys() == compiled.keys()  # the eager model's keys: a compiled run's files load anywhere
    for name, tensor in eager.items():
        torch.testing.assert_close(compiled[name], tensor, rtol=1e-3, atol=1e-4, msg=name)
