"""What this CPU can do, for engines that pick a graph by it and for benchmarks that print it.

Figures for neural TTS differ 4-6x between CPUs of one cloud machine kind (AVX-512 VNNI Xeons
against AVX2-only EPYCs): every bench output names the CPU and these flags.
"""

from __future__ import annotations

import platform
from functools import lru_cache

SPEED_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8")


@lru_cache(maxsize=1)
def cpu_info() -> tuple[str, frozenset[str]]:
    """``(model name, flags)`` from ``/proc/cpuinfo``; ``(platform.processor(), {})`` elsewhere."""
    model, flags = platform.processor() or platform.machine(), frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = frozenset(value.split())
                    break
    except OSError:
        pass
    return model, flags


def has_vnni() -> bool:
    """Does onnxruntime's int8 GEMM get its fast path here (AVX-512 VNNI or AVX-VNNI)?"""
    return bool({"avx512_vnni", "avx_vnni"} & cpu_info()[1])


def describe() -> str:
    """One line for a bench output: model name and the flags that decide speed."""
    model, flags = cpu_info()
    have = [f for f in SPEED_FLAGS if f in flags]
    return f"{model}; flags: {' '.join(have) or 'none of ' + ' '.join(SPEED_FLAGS)}"
