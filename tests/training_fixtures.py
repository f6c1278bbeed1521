"""Callbacks and helpers the training tests share: a kill at a chosen step (raised, or a real kill -9 of a
training subprocess), a record of the batches the model takes, to check what a resumed run does, and a short
training whose per-example scores two computation paths of one encoding must share."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import Callback

REPO = Path(__file__).resolve().parents[1]


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


def batch_digest(batch: dict[str, torch.Tensor]) -> str:
    """A digest of a training batch: every tensor's key, dtype, shape and bytes."""
    digest = hashlib.sha256()
    for key in sorted(batch):
        tensor = batch[key].detach().cpu().contiguous()
        digest.update(f"{key} {tensor.dtype} {tuple(tensor.shape)}".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()[:16]


class BatchRecorder(Callback):
    """Records (step, digest) of every batch the training step takes, in `seen`; with `path`, also appends each as
    a JSON line, flushed at once (a kill -9 loses nothing recorded)."""

    def __init__(self, path: Path | None = None) -> None:
        self.seen: list[tuple[int, str]] = []
        self.path = path

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        entry = (trainer.global_step, batch_digest(batch))
        self.seen.append(entry)
        if self.path is not None:
            with open(self.path, "a") as handle:
                handle.write(json.dumps(entry) + "\n")


def recorded(path: Path) -> list[tuple[int, str]]:
    return [tuple(json.loads(line)) for line in path.read_text().splitlines()]


def child_pids(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (from /proc: Linux)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    return children


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has finished: it waits only for its parent to reap it)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


class KillNine(Callback):
    """A real kill -9 of this process once `global_step` reaches `at`, after writing the pids of its children (its
    loader's worker processes) to `children` as JSON."""

    def __init__(self, at: int, children: Path) -> None:
        self.at, self.children = at, children

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if trainer.global_step == self.at:
            self.children.write_text(json.dumps(child_pids(os.getpid())))
            os.kill(os.getpid(), signal.SIGKILL)


def train_killed(overrides: list[str], at: int, folder: Path, timeout: float = 300) -> dict:
    """Train the run of `overrides` in a subprocess, recording its batches, and kill -9 it at step `at`. Returns
    {"returncode", "seen": [(step, digest)], "children": pids of its child processes at the kill, "output"}."""
    record, children = folder / "killed.batches.jsonl", folder / "killed.children.json"
    script = (
        "import json, sys; from tests.training_fixtures import train_until_killed; "
        "train_until_killed(*json.loads(sys.argv[1]))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "POSBENCH_PROGRESS": "0", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps([overrides, at, str(record), str(children)])],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return {
        "returncode": done.returncode,
        "seen": recorded(record) if record.exists() else [],
        "children": json.loads(children.read_text()) if children.exists() else None,
        "output": done.stdout[-3000:] + done.stderr[-3000:],
    }


def train_until_killed(overrides: list[str], at: int, record: str, children: str) -> None:
    """The subprocess of train_killed."""
    from pipelines.experiment.config import compose_config
    from pipelines.experiment.training import train_and_evaluate

    train_and_evaluate(compose_config(overrides), callbacks=[BatchRecorder(Path(record)), KillNine(at, Path(children))])
    raise SystemExit("the training was never killed")


def stream_digests(cfg, steps) -> list[tuple[int, str]]:
    """(step, digest) of the training stream's own batches: what every training of `cfg` must take."""
    from pipelines.experiment.config import build_datamodule

    stream = build_datamodule(cfg).train_stream()
    return [(step, batch_digest(stream.batch(step))) for step in steps]


def short_training_scores(pe: str, route: Callable[[bool], None]) -> list[torch.Tensor]:
    """Twenty AdamW steps of a small model of encoding `pe` from one initialisation on the same batches, once with
    `route(True)` called first and once after `route(False)` (each switching the path under test), then each
    example's mean NLL on one test batch: the two runs' scores, fp64."""
    from models.gpt import GPT, GPTConfig

    config = GPTConfig(vocab_size=30, context=64, n_layer=2, n_head=2, d_model=32, pe=pe)
    torch.manual_seed(0)
    initial = GPT(config).state_dict()
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, 30, (4, 65), generator=g) for _ in range(20)]
    test = torch.randint(0, 30, (8, 65), generator=g)
    scores = []
    for first in (True, False):
        route(first)
        model = GPT(config)
        model.load_state_dict(initial)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        for batch in batches:
            loss = F.cross_entropy(model(batch[:, :-1]).reshape(-1, 30), batch[:, 1:].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            logits = model.eval()(test[:, :-1])
        scores.append(F.cross_entropy(logits.transpose(1, 2), test[:, 1:], reduction="none").double().mean(1))
    return scores
