"""Callbacks the training tests share: a kill at a chosen step, to check what a resumed run does."""

from __future__ import annotations

from lightning.pytorch.callbacks import Callback


class SimulatedKill(Exception):
    pass


class Kill(Callback):
    """Stands in for a killed process: raises once `global_step` reaches `at`. (Not KeyboardInterrupt: Lightning
    turns that into sys.exit and ignores SIGINT from then on, which would leak into the other tests.)"""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_step == self.at:
            raise SimulatedKill(f"killed at step {self.at}")
