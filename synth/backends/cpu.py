"""What this CPU can do, as the libraries in this process see it: for engines that pick a graph
by it and for benchmarks that print it.

Figures for neural TTS differ 4-6x between CPUs of one cloud machine kind (AVX-512 VNNI Xeons
against AVX2-only EPYCs): every bench output names the CPU and these flags. The flags are those
CPUID reports to this process (numpy's dispatcher reads them), which ``bench/as-avx2`` masks;
``/proc/cpuinfo`` is the fallback.
"""

from __future__ import annotations

import platform
from functools import lru_cache

# numpy's names -> the /proc/cpuinfo names they are printed as
SPEED_FLAGS = {"AVX2": "avx2", "FMA3": "fma", "AVX512F": "avx512f", "AVX512BW": "avx512bw",
               "AVX512VNNI": "avx512_vnni", "AVX512BF16": "avx512_bf16"}


@lru_cache(maxsize=1)
def _proc_cpuinfo() -> tuple[str, frozenset[str]]:
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


@lru_cache(maxsize=1)
def flags() -> frozenset[str]:
    """Speed flags (``/proc/cpuinfo`` names) that CPUID gives this process."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as feats
    except ImportError:  # pragma: no cover - numpy < 2
        return frozenset(f for f in SPEED_FLAGS.values() if f in _proc_cpuinfo()[1])
    return frozenset(name for key, name in SPEED_FLAGS.items() if feats.get(key))


def has_vnni() -> bool:
    """Does onnxruntime's int8 GEMM get its fast path here (AVX-512 VNNI)?"""
    return "avx512_vnni" in flags()


def describe() -> str:
    """One line for a bench output: model name and the flags that decide speed."""
    model, kernel = _proc_cpuinfo()
    have = [f for f in SPEED_FLAGS.values() if f in flags()]
    masked = sorted(f for f in SPEED_FLAGS.values() if f in kernel and f not in flags())
    note = f" (masked for this process: {' '.join(masked)})" if masked else ""
    return f"{model}; flags: {' '.join(have) or 'none of ' + ' '.join(SPEED_FLAGS.values())}{note}"
