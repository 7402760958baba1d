"""Small signal helpers on float32 mono arrays (levels, trimming, resampling, fades)."""

from __future__ import annotations

from math import gcd

import numpy as np
from scipy.signal import resample_poly


def frame_rms_db(x: np.ndarray, win: int) -> np.ndarray:
    """RMS in dBFS of consecutive windows of ``win`` samples (the last one zero-padded)."""
    if len(x) == 0:
        return np.zeros(0)
    n = -(-len(x) // win)
    padded = np.zeros(n * win, dtype=np.float64)
    padded[: len(x)] = x
    rms = np.sqrt(np.mean(padded.reshape(n, win) ** 2, axis=1))
    return 20 * np.log10(np.maximum(rms, 1e-12))


def active_bounds(x: np.ndarray, sample_rate: int, rel_db: float = -40.0,
                  window_ms: int = 10) -> tuple[int, int] | None:
    """``[start, end)`` of the part of ``x`` above ``rel_db`` relative to its loudest window."""
    win = max(1, sample_rate * window_ms // 1000)
    db = frame_rms_db(x, win)
    if len(db) == 0 or db.max() < -90:
        return None
    idx = np.flatnonzero(db > db.max() + rel_db)
    return int(idx[0] * win), int(min(len(x), (idx[-1] + 1) * win))


def resample(x: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    if from_rate == to_rate:
        return x.astype(np.float32)
    g = gcd(from_rate, to_rate)
    return resample_poly(x, to_rate // g, from_rate // g).astype(np.float32)


def active_rms_db(x: np.ndarray, sample_rate: int, window_ms: int = 10) -> float:
    """Speech-active level: RMS over windows within 40 dB of the loudest one."""
    win = max(1, sample_rate * window_ms // 1000)
    db = frame_rms_db(x, win)
    if len(db) == 0:
        return -120.0
    act = db[db > db.max() - 40]
    return float(10 * np.log10(np.mean(10 ** (act / 10))))


def fade_out(x: np.ndarray, length: int) -> np.ndarray:
    """A copy of ``x`` with a raised-cosine fade over its last ``length`` samples."""
    y = x.copy()
    length = min(length, len(y))
    if length > 0:
        y[-length:] *= (0.5 * (1 + np.cos(np.linspace(0, np.pi, length)))).astype(y.dtype)
    return y
