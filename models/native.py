"""Small C++ kernels beside the models, built once per machine and called through ctypes.

A kernel here is one C++ file of `extern "C"` functions over raw buffers (no torch headers, so it builds in about a
second). `library(source, flags)` compiles it with the system's C++ compiler into a cache folder keyed by the
source, the flags and the compiler's version, writing to a temporary name and renaming (two processes building at
once each write their own file and the last rename wins, whole). Where it cannot be had (no compiler, a failed
build, a CPU without what the flags ask) it returns None and `why_not(source)` says why: the caller keeps its
PyTorch path, which must compute the same values to float rounding (the kernel's tests check both).

The cache folder is $POSBENCH_NATIVE_CACHE, or ~/.cache/posbench/native.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

BASE_FLAGS = ("-O3", "-std=c++17", "-fPIC", "-shared")
_reasons: dict[Path, str] = {}


def cache_dir() -> Path:
    return Path(os.environ.get("POSBENCH_NATIVE_CACHE") or Path.home() / ".cache" / "posbench" / "native")


def cpu_has_avx2() -> bool:
    """torch's own reading of the CPU (its kernels' dispatch): AVX2, or AVX-512 (whose CPUs all have AVX2)."""
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


@functools.cache
def library(source: Path, flags: tuple[str, ...]) -> ctypes.CDLL | None:
    """The compiled `source`, loaded; None (the reason in `why_not`) where it cannot be built or loaded."""
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        return _unavailable(source, "no C++ compiler (c++, g++ or $CXX) on the PATH")
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        return _unavailable(source, f"{compiler} --version failed: {error}")
    key = hashlib.sha256("\0".join([source.read_text(), *flags, version]).encode()).hexdigest()[:16]
    target = cache_dir() / f"{source.stem}-{key}.so"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(suffix=".so", dir=target.parent, prefix=f".{source.stem}-")
        os.close(fd)
        command = [compiler, *BASE_FLAGS, *flags, str(source), "-o", partial]
        built = subprocess.run(command, capture_output=True, text=True)
        if built.returncode != 0:
            os.unlink(partial)
            return _unavailable(source, f"building {source.name} failed ({' '.join(command)}): {built.stderr[-600:]}")
        os.replace(partial, target)
    try:
        return ctypes.CDLL(str(target))
    except OSError as error:
        return _unavailable(source, f"loading {target} failed: {error}")


def why_not(source: Path) -> str | None:
    """Why `library(source, ...)` returned None, or None if it has not failed."""
    return _reasons.get(source)


def _unavailable(source: Path, reason: str) -> None:
    _reasons[source] = reason
    return None
