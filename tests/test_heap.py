"""synth.executor.heap: glibc's mmap threshold, fixed so freed big blocks leave the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from synth.executor import heap

needs_glibc = pytest.mark.skipif(not heap.glibc(), reason="mallopt's parameters are glibc's")

# Frees 40 blocks of 2 MiB that sit below a live block, after an 8 MiB block freed first
# (which, left to glibc, raises its mmap threshold to 8 MiB, so the 2 MiB blocks come from the
# heap and their memory stays); prints the MB of RSS that freeing them gave back.
FREED_MB = textwrap.dedent("""
    import ctypes, sys
    from synth.executor.heap import return_big_blocks

    def rss_mb():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024

    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    if sys.argv[1] == "fixed":
        assert return_big_blocks()
    libc.free(libc.malloc(8 << 20))
    blocks = [libc.malloc(2 << 20) for _ in range(40)]
    for b in blocks:
        ctypes.memset(b, 1, 2 << 20)
    pin = libc.malloc(100_000)  # above the blocks (too big for a hole left below them): the heap cannot shrink past it
    before = rss_mb()
    for b in blocks:
        libc.free(b)
    print(before - rss_mb())
""")


def _freed_mb(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", FREED_MB, mode], capture_output=True, text=True, check=True)
    return float(out.stdout)


@needs_glibc
def test_freed_big_blocks_go_back_to_the_kernel():
    assert _freed_mb("fixed") > 70  # 80 MB freed, all of it returned
    assert _freed_mb("default") < 10  # glibc's dynamic threshold keeps it: the case the fix is for


@needs_glibc
def test_set_once_then_a_no_op(monkeypatch):
    monkeypatch.setattr(heap, "_SET", {})
    assert heap.return_big_blocks() is True

    def no_second_call(*a, **k):
        raise AssertionError("mallopt called again")

    monkeypatch.setattr(heap.ctypes, "CDLL", no_second_call)
    assert heap.return_big_blocks() is True


def test_not_glibc_is_a_no_op(monkeypatch):
    monkeypatch.setattr(heap, "_SET", {})
    monkeypatch.setattr(heap, "glibc", lambda: False)
    monkeypatch.setattr(heap.ctypes, "CDLL", lambda *a, **k: pytest.fail("mallopt called without glibc"))
    assert heap.return_big_blocks() is False
    assert heap.return_big_blocks() is False


@pytest.mark.parametrize("bad", [0, 64 * 1024, 33 * 1024 * 1024])
def test_threshold_bounds(bad):
    with pytest.raises(ValueError, match="mmap threshold must be 128 KiB..32 MiB"):
        heap.return_big_blocks(bad)
