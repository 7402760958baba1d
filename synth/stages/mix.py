"""Render the two channels from placed events and the drawn scene.

ch1 (system) is the system's clean speech. ch0 (user side) is what the device microphone hears:
every user-side source convolved with its room impulse response and set to its drawn level
relative to the user's speech, background noise at the drawn SNR, and (optional) the system's
own voice coming back from the loudspeaker at the drawn echo-return loss. Levels are
speech-active levels (``active_rms_db``: 10 ms windows within 40 dB of the loudest), so pauses do
not lower a talker's level; the noise level is its RMS over the whole session.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.signal import oaconvolve

from ..audio import active_rms_db, gain_to_level, quantize
from ..banks.bank import Bank, BankReadError, read_clip
from ..errors import SessionReject
from ..schema.scene import Scene
from ..schema.plan import talker
from ..schema.timeline import Timeline

SOURCES = ("user", "third_party", "background")


@dataclass(frozen=True)
class Mix:
    user_side: np.ndarray  # ch0: what the system's microphone hears
    system: np.ndarray  # ch1: the system's clean speech
    user_stem: np.ndarray  # the user's own dry voice at its written gain (for usr_vad)
    gains_db: dict
    person_stems: dict[str, np.ndarray] = field(default_factory=dict)  # a group's dry voices as written (int16)


def tracks_of(tl: Timeline, audio: dict[str, np.ndarray], names: tuple[str, ...] | None = None,
              consume: bool = False) -> dict[str, np.ndarray]:
    """One track per talker: user, third party, background, system, and each person of a group
    (or only ``names``). ``consume``: each event's audio leaves ``audio`` once it is in its track,
    so a caller that keeps no other reference frees it as the tracks grow."""
    n = tl.num_samples
    people = sorted({e.person for e in tl.events if e.person})
    tracks = {k: np.zeros(n, np.float32) for k in (names or (*SOURCES, "system", *people))}
    for e in tl.events:
        key = talker(e)
        if key in tracks:
            x = audio.pop(e.id) if consume else audio[e.id]
            x = x[: n - e.on_sample]
            tracks[key][e.on_sample : e.on_sample + len(x)] += x
            del x
    return tracks


CONVOLVE_CHUNK = 1 << 20
"""Samples per overlap-add chunk of a long room convolution (65 s at 16 kHz)."""
CONVOLVE_WHOLE = 1 << 23
"""Tracks up to this many samples (8.7 min at 16 kHz) are convolved in one ``oaconvolve``; one
call on a 20-minute track holds ~600 MB of FFT blocks at once."""


def convolve(x: np.ndarray, ir: np.ndarray, n: int, chunk: int = CONVOLVE_CHUNK,
             whole: int = CONVOLVE_WHOLE) -> np.ndarray:
    """The first ``n`` samples of ``x`` convolved with ``ir``, as float32. A track longer than
    ``whole`` is convolved ``chunk`` samples at a time, each chunk's float64 tail added to the
    next chunk before it is cast (so each sample is cast once, as in one call); silent chunks
    are skipped."""
    if len(x) <= whole:
        return oaconvolve(x, ir)[:n].astype(np.float32)
    out = np.zeros(n, np.float32)
    carry = np.zeros(0)
    for a in range(0, n, chunk):
        seg = x[a : min(a + chunk, n)]
        y = oaconvolve(seg, ir) if np.any(seg) else np.zeros(len(seg) + len(ir) - 1)
        y[: len(carry)] += carry[: len(y)]
        m = min(chunk, n - a)
        out[a : a + m] = y[:m]
        carry = y[m:]
    return out


def _to_level(x: np.ndarray, sr: int, level_db: float, chunk: int = CONVOLVE_CHUNK,
              own: bool = False) -> tuple[np.ndarray, float]:
    """``x`` at ``level_db`` (active level), multiplied chunk by chunk (no float64 copy of a long
    track); in place when ``x`` is the caller's own to change (``own``: a fresh convolution)."""
    g = gain_to_level(x, sr, level_db)
    out = x if own else np.empty(len(x), np.float32)
    for a in range(0, len(x), chunk):
        out[a : a + chunk] = x[a : a + chunk] * g
    return out, float(20 * np.log10(g))


def mix(tl: Timeline, audio: dict[str, np.ndarray], scene: Scene, irs: dict[str, np.ndarray],
        bank: Bank | None, peak_limit: float, consume: bool = False) -> Mix:
    """The channels of one session; ``irs`` are the scene room's impulse responses (or empty).

    Peak memory (a 30-minute group session): the noise is made first, before any track (its
    float64 layers are the largest temporaries); ``consume`` empties ``audio`` into the tracks
    (the caller keeps no other reference to it); the system's track is made after the user side's
    speech; a person's dry track is made when it is needed, twice (for their room and level, then
    for their stem), rather than all of them held, and their stem is quantized as it is summed
    into the user stem. Every sample is computed as before, in the same order (records re-render
    byte for byte)."""
    n, sr = tl.num_samples, tl.sample_rate
    noise = noise_db = None
    if scene.noise is not None:
        noise = _noise(scene, bank, n, sr)
        noise_db = 10 * np.log10(np.mean(noise.astype(np.float64) ** 2) + 1e-20)
    tracks = tracks_of(tl, audio, SOURCES, consume)

    def heard(name: str, x: np.ndarray) -> np.ndarray:
        return convolve(x, irs[name], n) if name in irs and np.any(x) else x

    gains: dict[str, float] = {}
    people = sorted(k for k in scene.levels_db if k not in SOURCES)
    if people:  # a group: every person at their own place and level; "user" speech is all of them
        user_speech, g_dry = _group_speech(tl, audio, people, heard, scene, sr, gains)
    else:
        user_speech, gains["user"] = _to_level(heard("user", tracks["user"]), sr, scene.levels_db["user"])
    tracks.update(tracks_of(tl, audio, ("system",), consume))
    speech_db = active_rms_db(user_speech, sr) if noise is not None else 0.0
    user_side = user_speech  # the speech becomes ch0 in place (no second track)
    del user_speech
    for name in ("third_party", "background"):
        if name in scene.levels_db and np.any(tracks[name]):
            wet, gains[name] = _to_level(heard(name, tracks.pop(name)), sr, scene.levels_db[name])
            user_side += wet
            del wet
    system = tracks["system"]
    if scene.echo is not None and np.any(system):
        echo_db = active_rms_db(system, sr) - scene.echo.erl_db
        echo, gains["echo"] = _to_level(heard("loudspeaker", system), sr, echo_db)
        user_side += echo
    if noise is not None:
        g_db = speech_db - scene.noise.snr_db - noise_db
        g = 10 ** (g_db / 20)  # a float64: each product in float64, then cast (as ``noise * g`` would)
        for a in range(0, n, CONVOLVE_CHUNK):
            noise[a : a + CONVOLVE_CHUNK] = noise[a : a + CONVOLVE_CHUNK] * g
        gains["noise"] = float(g_db)
        user_side += noise
        del noise
    # peak guard: one gain per channel, applied to the stems too so labels see what is written
    scale_u = min(1.0, peak_limit / max(float(np.abs(user_side).max()), 1e-9))
    scale_s = min(1.0, peak_limit / max(float(np.abs(system).max()), 1e-9))
    gains.update(peak_scale_user_side_db=20 * np.log10(scale_u), peak_scale_system_db=20 * np.log10(scale_s))
    stems = {}
    if people:  # each person's dry track again, at their gain: quantized, and summed into the user stem
        user = None
        for p in people:
            stem = tracks_of(tl, audio, (p,), consume)[p]
            stem *= g_dry[p] * scale_u
            stems[p] = quantize(stem)
            if user is None:
                user = stem  # the sum starts in the first stem (as np.sum over the stems would add)
            else:
                user += stem
            del stem
        tracks["user"] = user
        g_user = 1.0
    else:
        g_user = 10 ** (gains["user"] / 20) * scale_u
    # in place (every array here is this function's own): the copies would double the peak memory
    for x, g in ((user_side, scale_u), (system, scale_s), (tracks["user"], g_user)):
        x *= g
    return Mix(user_side, system, tracks["user"], {k: round(float(v), 3) for k, v in gains.items()}, stems)


def _group_speech(tl: Timeline, audio: dict, people: list[str], heard, scene: Scene, sr: int, gains: dict
                  ) -> tuple[np.ndarray, dict[str, float]]:
    """Every person's voice through their own room response at their level, summed: the user-side
    speech of a group (overlapping people add physically). Returns it and each person's gain.
    One person's track at a time (made from ``audio``, which keeps it for their stem)."""
    speech = np.zeros(tl.num_samples, np.float32)
    g_dry = {}
    for p in people:
        dry = tracks_of(tl, audio, (p,))[p]
        if not np.any(dry):
            g_dry[p] = 0.0
            continue
        wet, gains[p] = _to_level(heard(p, dry), sr, scene.levels_db[p], own=True)  # the dry track is made again
        del dry
        g_dry[p] = 10 ** (gains[p] / 20)
        speech += wet
        del wet
    return speech, g_dry


def _noise(scene: Scene, bank: Bank | None, n: int, sr: int) -> np.ndarray:
    """The noise layers, each looped from its offset to the session's length."""
    out = np.zeros(n, np.float64)
    for layer in scene.noise.layers:
        f = bank.find(layer.bank, layer.path) if bank is not None else None
        if f is None:
            raise SessionReject("mix", "noise_file_missing", f"{layer.bank}/{layer.path}")
        try:
            clip = read_clip(f, sr)
        except BankReadError as e:
            raise SessionReject("mix", "noise_file_unreadable", str(e)) from None
        x = loop(clip, int(layer.offset_s * sr) % len(clip), n, int(0.05 * sr))
        x /= np.sqrt(np.mean(np.square(x))) + 1e-12  # in place, as ``out += x / rms * g``
        x *= 10 ** (layer.gain_db / 20)
        out += x
        del x  # before the next layer's copy is made
    return out.astype(np.float32)


def loop(clip: np.ndarray, start: int, n: int, fade: int) -> np.ndarray:
    """``n`` samples of ``clip`` from ``start``, looped with equal-power cross-fades at the seams."""
    clip = clip.astype(np.float64)
    fade = min(fade, len(clip) // 4)
    if fade < 2:
        return np.resize(np.roll(clip, -start), n)
    theta = np.linspace(0.0, np.pi / 2, fade)
    period = len(clip) - fade  # each copy overlaps the next by ``fade`` samples
    body = clip[:period].copy()
    body[:fade] = clip[:fade] * np.sin(theta) + clip[period:] * np.cos(theta)
    reps = -(-(start % period + n) // period)
    return np.tile(body, reps)[start % period : start % period + n]
