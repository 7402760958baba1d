"""Synthetic non-verbal sounds and noises, each a pure function of its generator.

Laughter follows the acoustic descriptions of Bachorowski et al. (2001): a train of voiced
"ha" calls, each an aspirated onset and a short vowel, about 4-5 calls per second, pitch and
level falling over the bout, often closed by an inhalation.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import butter, lfilter, sosfilt

VOWEL_A = ((800, 80), (1200, 90), (2500, 120))  # formant (Hz, bandwidth Hz) of /a/
VOWEL_SCHWA = ((550, 80), (1500, 100), (2500, 120))


def _band(x: np.ndarray, sr: int, lo: float, hi: float, order: int = 4) -> np.ndarray:
    sos = butter(order, [lo, min(hi, sr / 2 * 0.95)], btype="band", fs=sr, output="sos")
    return sosfilt(sos, x)


def _lowpass(x: np.ndarray, sr: int, hz: float, order: int = 4) -> np.ndarray:
    return sosfilt(butter(order, hz, btype="low", fs=sr, output="sos"), x)


def _formants(x: np.ndarray, sr: int, formants) -> np.ndarray:
    """A cascade of two-pole resonators (Klatt-style), each with unit gain at its peak."""
    y = x
    for f, bw in formants:
        r = np.exp(-np.pi * bw / sr)
        a = [1.0, -2 * r * np.cos(2 * np.pi * f / sr), r * r]
        y = lfilter([1 - r], a, y)
    return y


def _norm(x: np.ndarray, peak: float = 0.5) -> np.ndarray:
    m = float(np.abs(x).max())
    return (x * (peak / m)).astype(np.float32) if m > 0 else x.astype(np.float32)


def _glottal(f0: np.ndarray, sr: int, rng: np.random.Generator, jitter: float = 0.01) -> np.ndarray:
    """A band-limited glottal pulse train following the contour ``f0`` (Hz per sample)."""
    f = f0 * (1 + jitter * rng.standard_normal(len(f0)))
    phase = np.cumsum(f / sr)
    saw = 2 * (phase - np.floor(phase)) - 1
    return _lowpass(np.diff(saw, prepend=saw[0]) * -1 + 0.02 * saw, sr, min(5000, sr / 2 * 0.9), 2)


def _env(n: int, attack: int, release: int) -> np.ndarray:
    e = np.ones(n)
    a, r = min(attack, n // 2), min(release, n // 2)
    if a:
        e[:a] = np.linspace(0, 1, a) ** 2
    if r:
        e[n - r:] = np.linspace(1, 0, r) ** 1.5
    return e


def breath(rng: np.random.Generator, sr: int, seconds: float, inhale: bool = True) -> np.ndarray:
    n = int(seconds * sr)
    x = _band(rng.standard_normal(n), sr, 400, 3500, 2)
    x = _formants(x, sr, VOWEL_SCHWA) * 0.3 + x
    rise = int(n * (0.7 if inhale else 0.3))
    e = np.concatenate([np.linspace(0, 1, rise) ** 1.5, np.linspace(1, 0, n - rise) ** 2])
    return _norm(x * e, 0.3)


def laughter(rng: np.random.Generator, sr: int, seconds: float, f0_hz: float, style: str) -> np.ndarray:
    """A laugh bout of about ``seconds``: ``style`` is chuckle, giggle, hearty or snicker."""
    ipi, voiced, breathy, inhale = {
        "chuckle": (0.24, 0.55, 0.5, False), "giggle": (0.15, 0.5, 0.3, False),
        "hearty": (0.21, 0.62, 0.35, True), "snicker": (0.18, 0.35, 0.9, False),
    }[style]
    calls = max(1, int(round(seconds / ipi)))
    pitch_up = {"giggle": 1.5, "hearty": 1.2}.get(style, 1.0)
    out = []
    for i in range(calls):
        frac = i / max(1, calls - 1)
        dur = ipi * voiced * rng.uniform(0.85, 1.15)
        n = int(dur * sr)
        t = np.arange(n) / n
        f_start = f0_hz * pitch_up * (1.25 - 0.35 * frac)  # pitch falls over the bout ...
        f0 = f_start * (1.05 - 0.2 * t)  # ... and within each call
        voice = _formants(_glottal(f0, sr, rng), sr, VOWEL_A)
        voice = voice / (np.abs(voice).max() + 1e-9)
        h = int(0.045 * sr)
        asp = _band(rng.standard_normal(n + h), sr, 500, 4500, 2)
        asp = asp / (np.abs(asp).max() + 1e-9)
        # the "h": aspiration rising into the vowel and dying away in its first 30 ms
        call = breathy * asp * np.concatenate([_env(h, h // 2, 0), np.exp(-np.arange(n) / (0.03 * sr))])
        call[h:] += (1 - 0.5 * breathy) * voice * _env(n, int(0.012 * sr), int(0.05 * sr))
        call *= _env(len(call), 0, int(0.01 * sr))
        out.append(call * (1.0 - 0.5 * frac))  # level falls too
        gap = max(0, int((ipi - dur) * sr * rng.uniform(0.7, 1.3)) - h)
        g = _band(rng.standard_normal(gap), sr, 500, 3000, 2) if gap > 16 else np.zeros(gap)
        out.append(0.01 * breathy * g * _env(gap, gap // 3, gap // 3))
    if inhale:
        out.append(0.5 * breath(rng, sr, rng.uniform(0.3, 0.45), inhale=True))
    return _norm(np.concatenate(out), 0.6)


def sigh(rng: np.random.Generator, sr: int, seconds: float, f0_hz: float) -> np.ndarray:
    n = int(seconds * sr)
    exhale = breath(rng, sr, seconds, inhale=False)
    f0 = f0_hz * np.linspace(1.1, 0.75, n)
    voice = _formants(_glottal(f0, sr, rng), sr, VOWEL_SCHWA)
    voice = voice / (np.abs(voice).max() + 1e-9) * _env(n, n // 3, n // 2)
    return _norm(exhale + 0.15 * voice, 0.4)


def cough(rng: np.random.Generator, sr: int, bursts: int, f0_hz: float) -> np.ndarray:
    out = []
    for _ in range(bursts):
        n = int(rng.uniform(0.16, 0.3) * sr)
        noise = _formants(rng.standard_normal(n), sr, ((600, 300), (1700, 400), (2800, 500)))
        noise = noise / (np.abs(noise).max() + 1e-9)
        m = int(0.06 * sr)
        voice = _formants(_glottal(np.full(m, f0_hz * 1.2), sr, rng, 0.05), sr, VOWEL_SCHWA)
        voice = np.pad(voice / (np.abs(voice).max() + 1e-9), (0, n - m))
        e = np.exp(-np.arange(n) / (0.07 * sr)) * _env(n, int(0.004 * sr), int(0.03 * sr))
        out += [(noise + 0.4 * voice) * e, np.zeros(int(rng.uniform(0.08, 0.2) * sr))]
    return _norm(np.concatenate(out), 0.7)


def throat_clear(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    n = int(seconds * sr)
    t = np.arange(n) / sr
    rough = 1 + 0.8 * np.sign(np.sin(2 * np.pi * rng.uniform(25, 40) * t))
    x = _formants(rng.standard_normal(n), sr, ((350, 150), (1200, 300))) * rough
    return _norm(x * _env(n, int(0.03 * sr), int(0.1 * sr)), 0.5)


def coloured_noise(rng: np.random.Generator, sr: int, seconds: float, exponent: float) -> np.ndarray:
    """Noise with power ~ 1/f^exponent (0 white, 1 pink, 2 brown), shaped in the FFT domain."""
    n = int(seconds * sr)
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1 / sr)
    f[0] = f[1]
    x = np.fft.irfft(spec / f ** (exponent / 2), n)
    x = _band(x, sr, 30, sr / 2 * 0.95, 2)
    return _norm(x, 0.3)


def hum(rng: np.random.Generator, sr: int, seconds: float, mains_hz: float, hvac: bool) -> np.ndarray:
    """Appliance hum: mains harmonics with slow wobble over low-passed noise (fridge, HVAC)."""
    n = int(seconds * sr)
    t = np.arange(n) / sr
    x = np.zeros(n)
    for k, a in ((1, 1.0), (2, 0.6), (3, 0.35), (4, 0.2), (6, 0.1)):
        wobble = 1 + 0.1 * np.sin(2 * np.pi * rng.uniform(0.05, 0.3) * t + rng.uniform(0, 6.3))
        x += a * wobble * np.sin(2 * np.pi * k * mains_hz * t + rng.uniform(0, 6.3))
    bed = _lowpass(rng.standard_normal(n), sr, 600 if hvac else 250, 2)
    x = 0.3 * x / np.abs(x).max() + (1.5 if hvac else 0.6) * bed / np.abs(bed).max()
    return _norm(x, 0.3)


def keyboard(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    """Typing: bursts of key clicks (short band-passed decays) with pauses between words."""
    n = int(seconds * sr)
    x = np.zeros(n)
    t = rng.uniform(0.1, 0.5)
    while t < seconds - 0.05:
        for _ in range(int(rng.integers(3, 9))):
            i = int(t * sr)
            m = int(rng.uniform(0.004, 0.012) * sr)
            click = _band(rng.standard_normal(m), sr, rng.uniform(1500, 3000), rng.uniform(5000, 7000), 2)
            click *= np.exp(-np.arange(m) / (0.002 * sr)) * rng.uniform(0.4, 1.0)
            x[i : i + m] += click[: n - i]
            t += rng.uniform(0.08, 0.22)
        t += rng.uniform(0.3, 1.5)
    return _norm(x, 0.5)


def dishes(rng: np.random.Generator, sr: int, seconds: float) -> np.ndarray:
    """Dish and cutlery clinks: inharmonic decaying partials at random times."""
    n = int(seconds * sr)
    x = np.zeros(n)
    for _ in range(int(seconds * rng.uniform(0.8, 2.0))):
        i = int(rng.uniform(0, seconds - 0.6) * sr)
        m = int(0.5 * sr)
        tt = np.arange(m) / sr
        f = rng.uniform(1800, 4500)
        s = sum(a * np.sin(2 * np.pi * f * r * tt) for r, a in ((1, 1), (2.76, 0.5), (5.4, 0.25)))
        x[i : i + m] += s * np.exp(-tt / rng.uniform(0.04, 0.15)) * rng.uniform(0.3, 1.0)
    return _norm(x, 0.5)


def media_filter(x: np.ndarray, sr: int, rng: np.random.Generator) -> np.ndarray:
    """A small TV/radio loudspeaker: band-limited, compressed, over a faint music bed."""
    y = _band(x, sr, rng.uniform(150, 300), rng.uniform(3500, 6000), 3)
    y = np.tanh(3 * y / (np.abs(y).max() + 1e-9)) / np.tanh(3)
    n = len(y)
    t = np.arange(n) / sr
    root = rng.uniform(110, 220)
    chord = sum(np.sin(2 * np.pi * root * r * t) for r in (1, 1.26, 1.5, 2))
    bed = chord * (0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(0.2, 0.5) * t)) / 4
    return _norm(y + 0.08 * bed, 0.5)
