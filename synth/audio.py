"""Small signal helpers on float32 mono arrays (levels, trimming, resampling, fades)."""

from __future__ import annotations

from functools import lru_cache
from math import gcd

import numpy as np
from scipy.signal import firwin, resample_poly


QUANTIZE_CHUNK = 1 << 20
"""Samples quantized at a time: the float temporaries of a 30-minute track would be 3 x 115 MB."""


def quantize(x: np.ndarray) -> np.ndarray:
    """int16 samples of ``x`` (full scale 32767), chunk by chunk (each sample on its own)."""
    out = np.empty(len(x), np.int16)
    for a in range(0, len(x), QUANTIZE_CHUNK):
        out[a : a + QUANTIZE_CHUNK] = np.clip(np.round(x[a : a + QUANTIZE_CHUNK] * 32767.0), -32768, 32767)
    return out


WINDOW_BLOCK = 8192
"""Windows squared at a time by ``window_mean_square`` (1.3 M samples of float64 at 10 ms, 16 kHz)."""


def window_mean_square(x: np.ndarray, win: int, n: int, block: int = WINDOW_BLOCK,
                       scale: float | None = None) -> np.ndarray:
    """Mean square (float64) of ``n`` consecutive windows of ``win`` samples of ``x``, zeros past its
    end. Block by block: each window's mean is its own reduction, so the values are those of one
    call on the whole zero-padded track, without its float64 copy (185 MB for 24 minutes).
    ``scale``: samples times it first (a power of two, as 1/32768 for int16: exact)."""
    out = np.empty(n, dtype=np.float64)
    for a in range(0, n, block):
        b = min(a + block, n)
        buf = np.zeros((b - a) * win, dtype=np.float64)
        seg = x[a * win : b * win]
        buf[: len(seg)] = seg
        if scale is not None:
            buf *= scale
        np.square(buf, out=buf)
        out[a:b] = np.mean(buf.reshape(b - a, win), axis=1)
    return out


def frame_rms_db(x: np.ndarray, win: int) -> np.ndarray:
    """RMS in dBFS of consecutive windows of ``win`` samples (the last one zero-padded)."""
    if len(x) == 0:
        return np.zeros(0)
    rms = np.sqrt(window_mean_square(x, win, -(-len(x) // win)))
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
    return polyphase(x, to_rate // g, from_rate // g).astype(np.float32)


def polyphase(x: np.ndarray, up: int, down: int) -> np.ndarray:
    """``scipy.signal.resample_poly(x, up, down)`` with its default filter designed once per
    ``(up, down, dtype)`` instead of on every call (a 22050 -> 16000 Hz filter has 8,821 taps:
    designing it cost more than filtering a short utterance). The samples are the same."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        return resample_poly(x, up, down)
    return resample_poly(x, up, down, window=_lowpass(up, down, x.dtype.str))


@lru_cache(maxsize=32)
def _lowpass(up: int, down: int, dtype: str) -> np.ndarray:
    """The FIR filter ``resample_poly`` designs for ``(up, down)`` with its default window."""
    g = gcd(up, down)
    max_rate = max(up // g, down // g)
    h = firwin(2 * 10 * max_rate + 1, 1.0 / max_rate, window=("kaiser", 5.0)).astype(dtype)
    h.flags.writeable = False  # resample_poly copies it before scaling
    return h


def active_rms_db(x: np.ndarray, sample_rate: int, window_ms: int = 10) -> float:
    """Speech-active level: RMS over windows within 40 dB of the loudest one."""
    win = max(1, sample_rate * window_ms // 1000)
    db = frame_rms_db(x, win)
    if len(db) == 0:
        return -120.0
    act = db[db > db.max() - 40]
    return float(10 * np.log10(np.mean(10 ** (act / 10))))


def gain_to_level(x: np.ndarray, sample_rate: int, level_db: float) -> float:
    """Linear gain that brings ``x``'s speech-active level to ``level_db`` (1.0 for silence)."""
    if not np.any(x):
        return 1.0
    return float(10 ** ((level_db - active_rms_db(x, sample_rate)) / 20))


def fade_out(x: np.ndarray, length: int) -> np.ndarray:
    """A copy of ``x`` with a raised-cosine fade over its last ``length`` samples."""
    y = x.copy()
    length = min(length, len(y))
    if length > 0:
        y[-length:] *= (0.5 * (1 + np.cos(np.linspace(0, np.pi, length)))).astype(y.dtype)
    return y


def prolong(x: np.ndarray, at: int, extra: int, sample_rate: int) -> np.ndarray:
    """``x`` with ``extra`` samples of sustained voice inserted at ``at`` (a drawn-out vowel).

    One pitch period found by autocorrelation in the 60 ms before ``at`` is repeated with short
    cross-fades, so the inserted part continues the voice rather than looping a noisy grain.
    """
    seg_len = int(0.06 * sample_rate)
    a = max(0, at - seg_len)
    seg = x[a:at].astype(np.float64)
    if len(seg) < seg_len // 2 or extra <= 0:
        return x
    lo, hi = sample_rate // 400, sample_rate // 70
    ac = np.correlate(seg - seg.mean(), seg - seg.mean(), "full")[len(seg) - 1:]
    period = lo + int(np.argmax(ac[lo:min(hi, len(ac) - 1)])) if len(ac) > lo + 1 else len(seg) // 2
    k = max(1, (seg_len // 2) // period)
    cycle = seg[-k * period:]
    reps = -(-extra // len(cycle))
    body = np.tile(cycle, reps)[:extra]
    fade = min(len(body) // 4, int(0.01 * sample_rate))
    if fade > 1:
        body[-fade:] *= np.linspace(1.0, 0.6, fade)  # settle into the release that follows
    return np.concatenate([x[:at], body.astype(x.dtype), x[at:]])
