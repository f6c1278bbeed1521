"""A sweep as SLURM job arrays through Hydra's submitit launcher (configs/hydra/launcher/slurm.yaml: partition,
GPUs, time, array parallelism, requeue on preemption). A requeued task finds its run folder's checkpoint."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from pipelines.launch.jobs import Job
from pipelines.runs.layout import DONE


def slurm_command(jobs: list[Job], launcher_overrides: list[str] = ()) -> list[str]:
    """One Hydra multirun over the jobs' (encoding, seed[, task]) with the submitit SLURM launcher."""
    varying = {}
    for job in jobs:
        for override in job.overrides:
            key, value = override.split("=", 1)
            varying.setdefault(key, [])
            if value not in varying[key]:
                varying[key].append(value)
    sweep = [f"{key}={','.join(values)}" for key, values in varying.items()]
    return [sys.executable, "-m", "pipelines.train", "-m", "hydra/launcher=slurm", *sweep, *launcher_overrides]


def run_slurm(jobs: list[Job], launcher_overrides: list[str] = (), runner: Callable = subprocess.run) -> int:
    todo = [job for job in jobs if not (job.folder / DONE).exists()]
    if not todo:
        print("every run of the sweep is finished")
        return 0
    command = slurm_command(todo, launcher_overrides)
    print(f"submitting {len(todo)} runs as a SLURM job array:\n  {' '.join(command)}", flush=True)
    return runner(command).returncode
