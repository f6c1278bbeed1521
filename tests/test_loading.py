"""The training input on torchdata.nodes (domains.loading, issue 17): for every domain, the batches it yields are
byte-identical to the stream's own (today's) batches, for 0, 1 and 2 workers of both kinds, from the first step and
from a resumed step; an abandoned, closed or dropped loader leaves no worker thread or process behind."""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader

from domains.loading import train_loader
from pipelines.experiment.config import build_datamodule, compose_config, domain_names
from tests.domain_fixtures import DOMAIN_DATA

STEPS = 5


def as_bytes(batches: list[dict[str, torch.Tensor]]) -> list[dict[str, tuple]]:
    return [{key: (t.dtype, tuple(t.shape), t.numpy().tobytes()) for key, t in batch.items()} for batch in batches]


def first(loader, n: int) -> list[dict[str, torch.Tensor]]:
    return list(itertools.islice(iter(loader), n))


@pytest.fixture(scope="module", params=domain_names())
def datamodule(request, tmp_path_factory):
    """A domain's DataModule at the tiny preset over its test data, prepared (module-scoped: prepared once)."""
    domain = request.param
    root = tmp_path_factory.mktemp(domain)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("POSBENCH_DATA", str(root / "data"))
        overrides = DOMAIN_DATA[domain](root, monkeypatch)
        dm = build_datamodule(compose_config([f"domain={domain}", "debug=fast", *overrides]))
        dm.prepare_data()
        dm.setup("fit")
        yield dm


@pytest.mark.slow
@pytest.mark.parametrize(
    "workers, method", [(0, "thread"), (1, "thread"), (2, "thread"), (1, "process"), (2, "process")]
)
def test_nodes_batches_are_byte_identical_to_the_streams_for_any_workers(datamodule, workers, method):
    stream = datamodule.train_stream()
    today = as_bytes(first(DataLoader(stream, batch_size=None, num_workers=0), STEPS))
    assert as_bytes(first(train_loader(stream, workers, method), STEPS)) == today
    # a run resumed at step 2 gets batches 2, 3, ... of the uninterrupted run
    stream.start_step = 2
    assert as_bytes(first(train_loader(stream, workers, method), STEPS - 2)) == today[2:]


def test_the_datamodule_trains_from_the_nodes_loader_with_its_workers():
    cfg = compose_config(
        ["debug=fast", "domain.args.task=parity", "trainer.num_workers=2", "trainer.worker_method=process"]
    )
    dm = build_datamodule(cfg)
    loader = dm.train_dataloader()
    batches = first(loader, 3)
    assert [b["tokens"].shape[0] for b in batches] == [cfg.trainer.batch_size] * 3
    assert as_bytes(batches) == as_bytes([dm.train_stream().batch(step) for step in range(3)])


def test_an_unknown_worker_method_is_refused_by_name():
    with pytest.raises(ValueError, match="^synthetic: worker_method must be one of thread, process, got 'fork'$"):
        build_datamodule(compose_config(["debug=fast", "trainer.worker_method=fork"]))


def _workers_left(before: set, patience_s: float = 10.0) -> tuple[list, list]:
    """The loader threads and worker processes not in `before` still alive after up to `patience_s` (they stop
    asynchronously; a multiprocessing queue's feeder thread is not the loader's: it ends when its queue is
    collected)."""
    deadline = time.monotonic() + patience_s
    while True:
        threads = [t for t in threading.enumerate() if t not in before and t.name != "QueueFeederThread"]
        processes = [p for p in multiprocessing.active_children() if p not in before]
        if (not threads and not processes) or time.monotonic() > deadline:
            return threads, processes
        time.sleep(0.05)


@pytest.mark.parametrize("method", ["thread", "process"])
def test_an_abandoned_closed_or_dropped_loader_leaves_no_worker_behind(method):
    """Lightning calls iter() once to probe a loader and again to train: the probe's workers must stop, the second
    iterator start at the stream's start step, close() stop the rest, and an iterator dropped unfinished (the
    loader with it, as when a training fails) stop its workers when it is collected."""
    cfg = compose_config(["debug=fast", "domain.args.task=parity", "trainer.num_workers=2"])
    dm = build_datamodule(cfg)
    stream = dm.train_stream()
    expected = as_bytes([stream.batch(step) for step in range(3)])
    before = {*threading.enumerate(), *multiprocessing.active_children()}  # other tests' loaders not yet collected
    loader = train_loader(stream, 2, method)
    probe = iter(loader)
    next(probe)
    started = [p for p in multiprocessing.active_children() if p not in before]
    assert len(started) == (2 if method == "process" else 0)
    assert as_bytes(list(itertools.islice(iter(loader), 3))) == expected  # the probe is shut down, not continued
    loader.close()
    assert _workers_left(before) == ([], [])
    dropped = iter(train_loader(stream, 2, method))
    next(dropped)
    del dropped  # its last reference: the generator is finalized here, as a failed training drops it
    assert _workers_left(before) == ([], [])
