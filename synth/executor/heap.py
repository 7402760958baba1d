"""glibc's malloc, told to hand big freed blocks back to the kernel: a worker's peak RSS.

A worker makes sessions one after another; each allocates buffers of many MB (tracks, room
responses, mixes, onnxruntime's outputs) and frees them. glibc serves a block over its mmap
threshold with its own ``mmap`` and unmaps it on ``free``, but the threshold is *dynamic*: each
freed mmapped block raises it to that block's size (up to 32 MiB on 64-bit), after which blocks
of that size come from the heap arenas, whose freed memory is mostly kept. Setting the threshold
once fixes it (and turns the dynamic raise off), so every block of ``MMAP_THRESHOLD`` or more is
returned when freed. Memory only; the bytes a worker computes do not change.
"""

from __future__ import annotations

import ctypes
import platform
import sys

M_MMAP_THRESHOLD = -3  # mallopt parameter, <malloc.h>
MMAP_THRESHOLD = 128 * 1024
"""glibc's initial threshold, held fixed: an event's audio (a few seconds, 100 kB-1 MB) goes back to the
kernel once the mix has consumed it (a 35-minute group session's peak fell by ~120 MB with it,
bench/long_group_results_2026-12-06.txt)."""

_SET: dict[str, bool] = {}


def glibc() -> bool:
    """Is this process's C library glibc (mallopt with glibc's parameter numbers)?"""
    return sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def return_big_blocks(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes in this process, once; True when it
    is set (now or by an earlier call), False where the C library is not glibc or refused."""
    if not 128 * 1024 <= threshold <= 32 * 1024 * 1024:  # glibc's own bounds: 128 kB default, 32 MiB max
        raise ValueError(f"mmap threshold must be 128 KiB..32 MiB (got {threshold})")
    if threshold in _SET:
        return _SET[threshold]
    ok = False
    if glibc():
        try:
            ok = ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, threshold) == 1
        except (OSError, AttributeError):
            ok = False
    _SET.clear()
    _SET[threshold] = ok
    return ok
