"""A warm sweep worker keeps the batches of a synthetic stream for the next run of the same task and seed
(domains.base.STREAM_CACHE): the batches, and so the runs, are the very ones drawn afresh."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from domains import base
from domains.base import STREAM_CACHE_ENV, TrainStream, _StreamCache
from pipelines.experiment.config import compose_config
from pipelines.experiment.training import train_and_evaluate


def counting_draw(calls: list):
    def draw(rng: np.random.Generator):
        calls.append(1)
        tokens = rng.integers(0, 50, size=8)
        return tokens, tokens % 2 == 0

    return draw


@pytest.fixture
def fresh_cache(monkeypatch):
    cache = _StreamCache(base.STREAM_CACHE_BYTES)
    monkeypatch.setattr(base, "STREAM_CACHE", cache)
    monkeypatch.setenv(STREAM_CACHE_ENV, "1")
    return cache


def test_a_second_stream_of_the_same_key_and_seed_reads_the_first_ones_batches_unchanged(fresh_cache):
    first_calls, second_calls, other_calls = [], [], []
    first = TrainStream(counting_draw(first_calls), seed=3, batch_size=4, key=("task", 8))
    drawn = [first.drawn(step) for step in range(5)]
    kept = [first.arrays(step) for step in range(5)]
    assert len(first_calls) == 4 * 5 * 2  # drawn() draws, and the first arrays() draws once to keep them
    kept[0]["tokens"][:] = -1  # a run that wrote into its batch cannot reach the next run's
    second = TrainStream(counting_draw(second_calls), seed=3, batch_size=4, key=("task", 8))
    again = [second.arrays(step) for step in range(5)]
    assert second_calls == []  # every batch was kept
    for expected, got in zip(drawn, again, strict=True):
        assert expected.keys() == got.keys() and all(np.array_equal(expected[k], got[k]) for k in expected)
    # another seed, another key, or no key: drawn afresh
    TrainStream(counting_draw(other_calls), seed=4, batch_size=4, key=("task", 8)).arrays(0)
    TrainStream(counting_draw(other_calls), seed=3, batch_size=4, key=("task", 16)).arrays(0)
    TrainStream(counting_draw(other_calls), seed=3, batch_size=4).arrays(0)
    assert len(other_calls) == 3 * 4


def test_the_cache_is_off_unless_a_worker_turns_it_on(fresh_cache, monkeypatch):
    monkeypatch.delenv(STREAM_CACHE_ENV)
    calls = []
    for _ in range(2):
        TrainStream(counting_draw(calls), seed=0, batch_size=2, key=("task",)).arrays(0)
    assert len(calls) == 4 and not fresh_cache.batches


def test_the_oldest_batches_leave_first_within_the_byte_limit(monkeypatch):
    cache = _StreamCache(limit=3 * 2 * 8 * 9)  # three batches of 2 windows of 8 tokens (int64 + bool)
    monkeypatch.setattr(base, "STREAM_CACHE", cache)
    monkeypatch.setenv(STREAM_CACHE_ENV, "1")
    stream = TrainStream(counting_draw([]), seed=0, batch_size=2, key=("task",))
    for step in range(5):
        stream.arrays(step)
    assert [key[-1] for key in cache.batches] == [2, 3, 4] and cache.bytes == 3 * 2 * 8 * 9


def test_runs_trained_one_after_another_with_the_cache_equal_runs_trained_without_it(tmp_path, monkeypatch):
    """rope10k then alibi on one task and seed in one process, as a warm worker trains them: the second reads the
    first's batches; both score every test example as the runs trained with nothing kept."""

    def train(runs: Path, cached: bool) -> None:
        monkeypatch.setattr(base, "STREAM_CACHE", _StreamCache(base.STREAM_CACHE_BYTES))
        monkeypatch.setenv(STREAM_CACHE_ENV, "1" if cached else "0")
        for pe in ("rope10k", "alibi"):
            overrides = ["domain=synthetic", "domain.args.task=reverse_string", "preset=tiny", f"pe={pe}", "seed=1"]
            train_and_evaluate(compose_config([*overrides, "trainer.max_steps=40", f"runs_root={runs}"]))
        assert bool(base.STREAM_CACHE.batches) is cached

    train(tmp_path / "kept", cached=True)
    train(tmp_path / "drawn", cached=False)
    files = sorted(path.relative_to(tmp_path / "drawn") for path in (tmp_path / "drawn").rglob("*.per_example.csv"))
    trained = [name for name in files if "+yarn" not in str(name)]
    assert {name.parts[2] for name in trained} == {"rope10k", "alibi"} and len(trained) == 2 * 3  # 3 splits each
    for name in files:
        assert (tmp_path / "kept" / name).read_bytes() == (tmp_path / "drawn" / name).read_bytes(), name
