"""The raw-file hash cache (domains.hash_cache): what keeps each preparation, and so each training run's start,
from re-reading the raw data."""

from __future__ import annotations

import csv
import hashlib
import json
import os
from pathlib import Path

import pytest

from domains import fetch as fetch_module
from domains import hash_cache
from domains.maestro.archive import CSV_NAME
from domains.store import sha256_file
from pipelines.experiment.config import stored_datamodule
from tests.maestro_fixtures import small_maestro_mirror
from tests.sample_fixtures import SAMPLES


@pytest.fixture
def counted_hashing(monkeypatch):
    """Every whole-file sha256 the preparation computes, by file name."""
    reads: list[str] = []

    def counting(path, *args, **kwargs):
        reads.append(Path(path).name)
        return sha256_file(path, *args, **kwargs)

    monkeypatch.setattr(hash_cache, "sha256_file", counting)
    monkeypatch.setattr(fetch_module, "sha256_file", counting)
    return reads


def test_hash_cache_reads_an_unchanged_file_once_and_a_touched_one_again(tmp_path, counted_hashing):
    first, second = tmp_path / "a.edf", tmp_path / "b.edf"
    first.write_bytes(b"first raw file")
    second.write_bytes(b"second raw file")
    expected = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in (first, second)}
    assert hash_cache.cached_sha256([first, second]) == expected and counted_hashing == ["a.edf", "b.edf"]
    assert hash_cache.cached_sha256([first, second]) == expected and counted_hashing == ["a.edf", "b.edf"]
    stat = first.stat()
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # touched: same bytes, newer mtime
    assert hash_cache.cached_sha256([first, second]) == expected and counted_hashing[2:] == ["a.edf"]
    first.write_bytes(b"first raw file, longer")  # rewritten: another size
    assert hash_cache.cached_sha256([first])[first] == hashlib.sha256(first.read_bytes()).hexdigest()
    assert counted_hashing[3:] == ["a.edf"]
    assert json.loads((tmp_path / hash_cache.CACHE_NAME).read_text()).keys() == {"a.edf", "b.edf"}
    second.unlink()
    (tmp_path / hash_cache.CACHE_NAME).write_text("{not json")  # a damaged cache: everything is hashed again
    assert hash_cache.cached_sha256([first])[first] == hashlib.sha256(first.read_bytes()).hexdigest()
    assert counted_hashing[4:] == ["a.edf"]
    assert json.loads((tmp_path / hash_cache.CACHE_NAME).read_text()).keys() == {"a.edf"}  # b.edf is gone


def test_a_second_preparation_reads_no_raw_file_and_a_touched_one_is_read_again(tmp_path, monkeypatch, counted_hashing):
    monkeypatch.setenv("POSBENCH_MIRROR", str(SAMPLES))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    meta = stored_datamodule("jsb").prepare_data()
    # the mirror copy's check, under its temporary name; raw_hashes reuses its digest
    assert len(counted_hashing) == 1 and counted_hashing[0].startswith(".Jsb16thSeparated.npz.")
    assert stored_datamodule("jsb").prepare_data() == meta and counted_hashing[1:] == []
    raw = tmp_path / "data" / "raw" / "jsb" / "Jsb16thSeparated.npz"
    stat = raw.stat()
    os.utime(raw, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    monkeypatch.delenv("POSBENCH_MIRROR")  # with the mirror, a local copy unlike it would be copied again
    assert stored_datamodule("jsb").prepare_data() == meta and counted_hashing[1:] == ["Jsb16thSeparated.npz"]


def test_maestro_rehashes_nothing_when_its_files_are_unchanged(tmp_path, monkeypatch, counted_hashing):
    monkeypatch.setenv("POSBENCH_MIRROR", str(small_maestro_mirror(tmp_path / "mirror")))
    monkeypatch.setenv("POSBENCH_DATA", str(tmp_path / "data"))
    overrides = ["domain.args.tokenize_workers=1"]
    meta = stored_datamodule("maestro", overrides).prepare_data()
    assert sorted(counted_hashing) == sorted([CSV_NAME, *(Path(name).name for name in performance_names(meta))])
    assert stored_datamodule("maestro", overrides).prepare_data() == meta and len(counted_hashing) == 4


def performance_names(meta: dict) -> list[str]:
    store = Path(os.environ["POSBENCH_DATA"]) / "stores" / "maestro"
    with open(store / "performances.csv", newline="") as handle:
        names = [row["midi_filename"] for row in csv.DictReader(handle) if row["split"] != "missing"]
    assert len(names) == meta["performances"]["present"] == 3
    return names
