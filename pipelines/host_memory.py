"""Freed tensor memory stays with the C allocator for the next step, instead of going back to the kernel.

A training step on the CPU allocates and frees the same large tensors every step: a bias encoding's (H, T, T)
term and its gradient, the (B, H, T, T) scores of attention's math path, FIRE's and CoPE's (T, T) tables. glibc's
malloc serves an allocation above its mmap threshold (adjusted at run time, at most 32 MiB on 64-bit Linux) with a
fresh mapping and unmaps it on free, so the next step's tensor faults in every page again and the kernel zeroes
each one. Measured at the JSB cpu preset (one thread, `resource.getrusage` around one training step): rope10k 14k
minor page faults a step, T5 35-52k, KERPLE up to 100k, FIRE 81-115k; at T 2048 KERPLE 351-356k and FIRE
377-547k, where KERPLE's step took 1.70 s against 0.93 s without them (docs/presets.md, issue 50).

`keep_freed_memory` turns mmap off for allocations (M_MMAP_MAX 0: every block comes from the heap) and raises the
heap's trim threshold (M_TRIM_THRESHOLD), so a freed block is reused by the next step's allocation of that size:
no page faults once the heap has settled (a few steps; tests/test_host_memory.py). The cost is resident memory: the
process keeps its peak (FIRE at T 2048, batch 1: 1,041 MiB flat against 640-800 MiB with the defaults) and the
heap grows once more where an aligned allocation does not fit a freed block. Results are unchanged (only where
memory comes from). Elsewhere than glibc (macOS, musl) it does nothing and says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_MAX = -4
TRIM_THRESHOLD = 2**31 - 1  # bytes; mallopt takes an int: free memory above 2 GiB at the heap's top still goes back


@functools.cache
def keep_freed_memory() -> str:
    """Set glibc's malloc to keep freed blocks (once per process); returns what this process's allocator does, as
    the run's manifest records it."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "default (no glibc mallopt)"
    if mallopt(M_MMAP_MAX, 0) != 1 or mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1:
        return "default (mallopt refused)"
    return "glibc heap: mmap off, trim above 2 GiB"


def allocator_state() -> str:
    """What `keep_freed_memory` set in this process, or that it was not called."""
    return keep_freed_memory() if keep_freed_memory.cache_info().currsize else "default"
