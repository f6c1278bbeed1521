"""Train one run (domain [task] x encoding x seed), evaluate it, and write its manifest.

    python -m pipelines.train pe=nope seed=1 domain.args.task=fixed_offset [preset=paper] [logger=tensorboard]

The run folder is <runs_root>/<domain>[/<task>]/<pe id>/seed<k>/ (pipelines.runs.layout). A run with done.json is
skipped; a run with a checkpoint resumes from it. The folder ends with:
  manifest.json   resolved config, git sha, package versions, data hashes, parameters, encoding, tokens/s
  model.pt        final weights and model config
  metrics/        per-example and per-position metrics per evaluation split (see pipelines.runs.metrics)
  logs/           metrics.csv: step, train/loss, lr, train/tokens_per_s, val/loss (logger=tensorboard|wandb adds
                  tensorboard/ or wandb/; pipelines.experiment.loggers)
  done.json       written last; its presence means the run is complete
A rope run with evaluation splits longer than its context also writes <pe id>+yarn/seed<k>/ beside it: the same
model evaluated with YaRN. A NaN loss stops the run with failed.json and no results; the last good checkpoint stays.
A folder another process is training is refused with its lock's owner named and exit status 75
(pipelines.runs.lock.LOCKED_EXIT), so a sweep reports it as running elsewhere, not failed.
"""

from __future__ import annotations

import sys

import hydra
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig

from pipelines.experiment.training import train_and_evaluate
from pipelines.runs.lock import LOCKED_EXIT, RunLockedError
from pipelines.runs.metrics import summary_path


@hydra.main(config_path="../configs", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        folder = train_and_evaluate(cfg)
    except RunLockedError as err:  # not a failure of this run: another process trains it
        print(f"RunLockedError: {err}", file=sys.stderr, flush=True)
        sys.exit(LOCKED_EXIT)  # SystemExit passes through Hydra, which would report any Exception as exit 1
    if rank_zero_only.rank == 0:  # under DDP the other ranks leave the evaluation and its files to rank 0
        print(f"run: {folder}")
        print(summary_path(folder).read_text())


if __name__ == "__main__":
    main()
