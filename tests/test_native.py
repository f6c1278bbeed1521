"""models.native: a C++ file built once into a cache keyed by its source and flags, loaded through ctypes; a
build that fails gives None and a reason naming the file, and leaves nothing half-written in the cache."""

from __future__ import annotations

import shutil

import pytest

from models import native

pytestmark = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="no compiler")

ADD = 'extern "C" int add(int a, int b) { return a + b; }\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBENCH_NATIVE_CACHE", str(tmp_path / "cache"))
    native.library.cache_clear()
    yield tmp_path / "cache"
    native.library.cache_clear()


def test_builds_once_and_loads(tmp_path, cache):
    source = tmp_path / "adder.cpp"
    source.write_text(ADD)
    lib = native.library(source, ())
    assert lib.add(2, 3) == 5
    built = list(cache.iterdir())
    assert len(built) == 1 and built[0].name.startswith("adder-") and built[0].suffix == ".so"
    stamp = built[0].stat().st_mtime_ns
    native.library.cache_clear()
    assert native.library(source, ()).add(4, 5) == 9
    assert [p.stat().st_mtime_ns for p in cache.iterdir()] == [stamp]  # taken from the cache, not rebuilt


def test_another_source_or_flags_build_another_library(tmp_path, cache):
    source = tmp_path / "adder.cpp"
    source.write_text(ADD)
    native.library(source, ())
    native.library(source, ("-O1",))
    source.write_text(ADD.replace("a + b", "a + b + 1"))
    native.library.cache_clear()  # a process loads a source once; a new process meets the changed file
    assert native.library(source, ()).add(2, 3) == 6
    assert len(list(cache.iterdir())) == 3


def test_a_failed_build_says_why_and_leaves_no_file(tmp_path, cache):
    source = tmp_path / "broken.cpp"
    source.write_text('extern "C" int add(int a, int b) { return a + ; }\n')
    assert native.library(source, ()) is None
    why = native.why_not(source)
    assert "building broken.cpp failed" in why and "error" in why
    assert not cache.exists() or list(cache.iterdir()) == []


def test_no_compiler_says_so(tmp_path, cache, monkeypatch):
    source = tmp_path / "adder.cpp"
    source.write_text(ADD)
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    assert native.library(source, ()) is None
    assert "no-such-compiler --version failed" in native.why_not(source)
