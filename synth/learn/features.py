"""Log-mel features of one channel, 16 kHz, 25 ms window, 10 ms hop, stacked per label frame.

The model reads one vector per label frame: the ``hops_per_frame`` log-mel columns of that frame,
so frame ``k`` only ever sees audio of ``[k*P, (k+1)*P)``. Written with numpy (one rFFT per
channel and a triangular mel matrix): no librosa/torchaudio dependency for ~30 lines, and the
extraction runs at several hundred times real time on one core.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

SAMPLE_RATE = 16000
HOP = 160          # 10 ms
WIN = 400          # 25 ms
N_FFT = 512
N_MELS = 40
FEATURE_VERSION = "logmel-16k-w400-h160-m40-v1"
LOG_FLOOR = 1e-6


def hops_per_frame(frame_period_s: float) -> int:
    """Feature hops in one label frame (80 ms -> 8); a frame must be a whole number of hops."""
    hops = round(frame_period_s * SAMPLE_RATE / HOP)
    if hops < 1 or abs(hops * HOP - frame_period_s * SAMPLE_RATE) > 1e-6:
        raise ValueError(f"frame period {frame_period_s} s is not a whole number of 10 ms hops")
    return hops


def _hz_to_mel(f):
    return 2595.0 * np.log10(1.0 + np.asarray(f, dtype=np.float64) / 700.0)


def _mel_to_hz(m):
    return 700.0 * (10.0 ** (np.asarray(m, dtype=np.float64) / 2595.0) - 1.0)


@lru_cache(maxsize=4)
def mel_matrix(n_mels: int = N_MELS, n_fft: int = N_FFT, sr: int = SAMPLE_RATE) -> np.ndarray:
    """HTK-style triangular mel filters, ``(n_fft // 2 + 1, n_mels)`` float32."""
    fft_hz = np.linspace(0, sr / 2, n_fft // 2 + 1)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(20.0), _hz_to_mel(sr / 2), n_mels + 2))
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    up = (fft_hz[None, :] - lo) / (mid - lo)
    down = (hi - fft_hz[None, :]) / (hi - mid)
    return np.maximum(0.0, np.minimum(up, down)).T.astype(np.float32)


def resample_to_16k(x: np.ndarray, sr: int) -> np.ndarray:
    """``x`` at 16 kHz (polyphase, scipy); unchanged when it already is."""
    if sr == SAMPLE_RATE:
        return np.asarray(x, dtype=np.float32)
    from math import gcd

    from scipy.signal import resample_poly

    g = gcd(sr, SAMPLE_RATE)
    return resample_poly(np.asarray(x, dtype=np.float32), SAMPLE_RATE // g, sr // g).astype(np.float32)


def log_mel(x: np.ndarray, n_hops: int) -> np.ndarray:
    """``(n_hops, N_MELS)`` float32 log-mel of 16 kHz mono ``x``; hop ``j`` is the window ending at
    sample ``(j + 1) * HOP`` (only audio up to the end of the hop: causal)."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 2:
        x = x.mean(axis=1)
    need = n_hops * HOP
    padded = np.zeros(WIN - HOP + need, dtype=np.float32)
    take = min(len(x), need)
    padded[WIN - HOP:WIN - HOP + take] = x[:take]
    frames = np.lib.stride_tricks.sliding_window_view(padded, WIN)[::HOP][:n_hops]
    spec = np.abs(np.fft.rfft(frames * np.hanning(WIN).astype(np.float32), n=N_FFT, axis=1)) ** 2
    return np.log(spec.astype(np.float32) @ mel_matrix() + LOG_FLOOR).astype(np.float32)


def frame_features(x: np.ndarray, sr: int, n_frames: int, frame_period_s: float) -> np.ndarray:
    """``(n_frames, hops_per_frame * N_MELS)`` float16: one channel's log-mel, stacked per label frame."""
    hpf = hops_per_frame(frame_period_s)
    mel = log_mel(resample_to_16k(x, sr), n_frames * hpf)
    return mel.reshape(n_frames, hpf * N_MELS).astype(np.float16)
