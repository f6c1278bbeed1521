"""The CPU a benchmark ran on: printed with every table of `make throughput` and written to its CSV and JSON, since
a ratio to rope10k holds only for the CPU kind it was measured on (docs/presets.md: the bias paths gain 1.25x from an
AVX2 CPU to an AVX-512 one where RoPE's fused kernel gains 2.3x).

Its kind is named as a run's manifest names it (pipelines.runs.manifest.cpu_description: the model and the flags of
CPU_FLAGS), the key that prices runs from runs of the same kind (pipelines.launch.costs); the vector extensions are
every SIMD flag /proc/cpuinfo lists of VECTOR_EXTENSIONS, and torch's kernels are those of its CPU capability.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from pipelines.runs.manifest import cpu_description

VECTOR_EXTENSIONS = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl",
    "avx512ifma", "avx512vbmi", "avx512_vbmi2", "avx512_vnni", "avx512_bitalg", "avx512_vpopcntdq", "avx512_bf16",
    "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16", "neon", "asimd", "sve", "sve2",
)  # fmt: skip


def cpu_figures(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """{"cpu": the model, "cpu_flags": as a manifest records them (the kind), "vector_extensions": every one of
    VECTOR_EXTENSIONS it has (None where /proc/cpuinfo is not there to say), "cpu_capability": the vector width of
    torch's CPU kernels, "cores": logical CPUs}."""
    flags = None
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip().lower() in ("flags", "features"):
                flags = set(value.split())
                break
    except OSError:
        pass
    return {
        **cpu_description(cpuinfo),
        "vector_extensions": None if flags is None else [name for name in VECTOR_EXTENSIONS if name in flags],
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cores": os.cpu_count(),
    }


def cpu_line(figures: dict[str, Any]) -> str:
    """One line: `CPU: <model> (<n> cores); vector extensions: <...>; torch kernels: <capability>`."""
    extensions = figures.get("vector_extensions")
    listed = "unknown" if extensions is None else " ".join(extensions) or "none"
    return (
        f"CPU: {figures.get('cpu') or 'unknown'} ({figures.get('cores')} cores); vector extensions: {listed}; "
        f"torch kernels: {figures.get('cpu_capability')}"
    )
