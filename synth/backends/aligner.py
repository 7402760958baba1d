"""Word times for speech whose engine gives none (XTTS-v2 is autoregressive: no durations).

The method of aeneas: speak the same words with eSpeak NG, whose word events give their times,
then carry those times onto the recording by dynamic time warping of the two signals' MFCCs.
eSpeak's rate is set so its rendering is as long as the recording, which keeps the warp near
the diagonal; the warp is asymmetric (every reference frame maps to one recording frame, the
recording may move 0, 1 or 2 frames per reference frame), so it needs one vector operation per
reference frame and no Python loop over the cost matrix.

Checked against Kokoro's own per-token durations (``tests/test_aligner.py``; numbers from
``bench/aligner.py`` in the README): word boundaries of en, zh and code-switched sentences.
"""

from __future__ import annotations

import numpy as np
from scipy.fft import dct

from ..audio import active_bounds, resample
from ..schema.plan import PlannedWord
from .tts import Voice

NAME = "dtw-espeak"  # word_timing = "aligner:" + NAME in session records
RATE = 16000
HOP = 160  # 10 ms
WIN = 400  # 25 ms
N_MELS, N_MFCC = 40, 13


def _mel_bank(n_fft: int, sr: int, n_mels: int) -> np.ndarray:
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    mels = np.linspace(hz_to_mel(60.0), hz_to_mel(sr / 2 - 200), n_mels + 2)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    bins = np.fft.rfftfreq(n_fft, 1.0 / sr)
    bank = np.zeros((n_mels, len(bins)))
    for i in range(n_mels):
        lo, mid, hi = hz[i], hz[i + 1], hz[i + 2]
        bank[i] = np.clip(np.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)), 0, None)
    return bank


_BANK = _mel_bank(512, RATE, N_MELS)


def mfcc(x: np.ndarray) -> np.ndarray:
    """``(frames, 13)`` MFCCs of 16 kHz audio, mean and variance normalised per utterance."""
    x = np.asarray(x, np.float64)
    x = np.append(x[0], x[1:] - 0.97 * x[:-1]) if len(x) > 1 else x
    x = np.pad(x, (WIN // 2, WIN // 2))
    n = max(1, 1 + (len(x) - WIN) // HOP)
    idx = np.arange(WIN)[None, :] + HOP * np.arange(n)[:, None]
    frames = x[np.minimum(idx, len(x) - 1)] * np.hamming(WIN)
    power = np.abs(np.fft.rfft(frames, 512)) ** 2
    logmel = np.log(power @ _BANK.T + 1e-10)
    c = dct(logmel, type=2, axis=1, norm="ortho")[:, :N_MFCC]
    d = np.gradient(c, axis=0) if len(c) > 1 else np.zeros_like(c)
    c = np.hstack([c, d])
    return (c - c.mean(0)) / (c.std(0) + 1e-8)


def warp(ref: np.ndarray, rec: np.ndarray) -> np.ndarray:
    """For each reference frame, the recording frame the cheapest monotonic warp maps it to."""
    n, m = len(ref), len(rec)
    a = ref / (np.linalg.norm(ref, axis=1, keepdims=True) + 1e-8)
    b = rec / (np.linalg.norm(rec, axis=1, keepdims=True) + 1e-8)
    cost = 1.0 - a @ b.T  # cosine distance, (n, m)
    big = np.inf
    acc = np.full((n, m), big)
    step = np.zeros((n, m), np.int8)  # 0, 1 or 2 recording frames moved from the row above
    acc[0, 0] = cost[0, 0]
    for i in range(1, n):
        prev = acc[i - 1]
        options = np.stack([prev, np.concatenate([[big], prev[:-1]]), np.concatenate([[big, big], prev[:-2]])])
        best = options.argmin(0)
        acc[i] = cost[i] + options[best, np.arange(m)]
        step[i] = best
    path = np.empty(n, np.int64)
    j = m - 1 if np.isfinite(acc[-1, -1]) else int(np.argmin(acc[-1]))
    for i in range(n - 1, -1, -1):
        path[i] = j
        j -= int(step[i, j])
    return np.maximum(path, 0)


def _snap_to_pauses(spans: list[list[int]], rec: np.ndarray, rel_db: float, reach: int = 12, shortest: int = 6) -> None:
    """Move each boundary between two words onto a pause of the recording near it: the warp
    places boundaries well inside speech but smears them across pauses, whose length the
    reference does not share. ``reach`` and ``shortest`` are in 10 ms frames."""
    n = len(rec) // HOP
    if n == 0:
        return
    db = 10 * np.log10(np.mean(rec[: n * HOP].reshape(n, HOP).astype(np.float64) ** 2, axis=1) + 1e-12)
    quiet = db < db.max() + rel_db + 5
    for a, b in zip(spans, spans[1:]):
        at = (a[1] + b[0]) // 2 // HOP
        lo_f, hi_f = max(a[0] // HOP + 1, at - reach), min(b[1] // HOP - 1, at + reach)
        best, i = None, lo_f
        while i < hi_f:  # the longest quiet run inside the window, nearest the boundary on ties
            if quiet[i]:
                j = i
                while j < hi_f and quiet[j]:
                    j += 1
                key = (j - i, -abs((i + j) // 2 - at))
                if j - i >= shortest and (best is None or key > best[0]):
                    best = (key, i, j)
                i = j
            else:
                i += 1
        if best is not None:
            a[1], b[0] = best[1] * HOP, best[2] * HOP


def align_words(audio: np.ndarray, sample_rate: int, words: list[PlannedWord], reference=None,
                trim_rel_db: float = -40.0) -> list[tuple[int, int]]:
    """``[on, off)`` in samples of ``audio`` for every word, by warping an eSpeak NG rendering.

    ``reference`` is the engine that speaks the reference (default: eSpeak NG with its
    default voices); it must return word times of its own.
    """
    if reference is None:
        from .espeak import EspeakTTS

        reference = EspeakTTS({"en": "en-us", "zh": "cmn"}, trim_rel_db)
    rec = resample(np.asarray(audio, np.float32), sample_rate, RATE)
    bounds = active_bounds(rec, RATE, trim_rel_db) or (0, len(rec))
    lo, hi = bounds
    voice = Voice("m1", 170, 50, 50)
    ref = reference.synthesize(words, voice, RATE)
    ratio = len(ref.audio) / max(1, hi - lo)  # speak the reference as long as the recording
    voice = Voice("m1", int(np.clip(round(170 * ratio), 80, 450)), 50, 50)
    ref = reference.synthesize(words, voice, RATE)
    path = warp(mfcc(ref.audio), mfcc(rec[lo:hi]))
    last = len(path) - 1
    scale = sample_rate / RATE
    spans = []
    for t in ref.words:
        i_on = min(last, t.on // HOP)
        i_off = min(last, max(i_on, (t.off - 1) // HOP))
        on = lo + int(path[i_on]) * HOP
        off = lo + min(int(path[i_off]) * HOP + HOP, hi - lo)
        spans.append([on, max(on, off)])
    for a, b in zip(spans, spans[1:]):  # a word ends where the next begins, at the latest
        a[1] = max(a[0], min(a[1], b[0]))
    _snap_to_pauses(spans, rec, trim_rel_db)
    return [(int(round(a * scale)), int(round(b * scale))) for a, b in spans]
