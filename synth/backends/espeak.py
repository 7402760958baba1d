"""eSpeak NG through the libespeak-ng 1.52 that ``espeakng-loader`` bundles (ctypes).

Word times come from the library's own word events (character position + ms). Code-switched
text is spoken one language run at a time, each with its own voice, so English words get
English phonemes and Chinese words Mandarin ones. A Mandarin word gets the time of the first
event that falls on one of its characters.
"""

from __future__ import annotations

import _ctypes
import atexit
import ctypes
import os
import shutil
import tempfile
import threading
from collections import OrderedDict

import numpy as np

from ..audio import active_bounds, resample
from ..errors import SessionReject, UserError
from ..schema.plan import PlannedWord
from .tts import Rendered, Voice, WordTime, join_runs, runs_by

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_EVENT_LIST_TERMINATED, _EVENT_WORD = 0, 1
_RATE, _PITCH, _RANGE = 1, 3, 4
_LIBC = ctypes.CDLL(None)  # libc: srand() before each synthesis


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int), ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p), ("id", ctypes.c_char * 8),
    ]


_Callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.POINTER(_Event))


_COPY: dict[str, str] = {}
_SPOKEN: OrderedDict = OrderedDict()  # (text, voice name, Voice) -> speak()'s result, most recent last
_SPOKEN_MAX = 512  # lines; a few seconds of int16 each, ~40 MB at most


def _private_copy(path: str) -> str:
    """This process's own copy of libespeak-ng, loaded by nobody else.

    ``dlclose`` unloads a library only when nothing else holds it, and phonemizer (Kokoro's
    English G2P) keeps the original file mapped after it looks up its path: a fresh mapping of
    that file would then be the same, stateful one.
    """
    if path not in _COPY:
        folder = tempfile.mkdtemp(prefix="synth-espeak-")
        atexit.register(shutil.rmtree, folder, True)
        target = os.path.join(folder, os.path.basename(path))
        shutil.copy(path, target)
        _COPY[path] = target
    return _COPY[path]


def known_variants() -> set[str]:
    """Variant names of the packaged eSpeak NG data (files of ``voices/!v``)."""
    import espeakng_loader

    folder = os.path.join(espeakng_loader.get_data_path(), "voices", "!v")
    return {name for name in os.listdir(folder) if os.path.isfile(os.path.join(folder, name))}


class _Library:
    """One load of libespeak-ng, used for exactly one synthesis and then unloaded.

    libespeak-ng keeps static state between calls (even across ``espeak_Terminate``), so the
    same text spoken twice in one process comes out with different samples and lengths. A
    session must not depend on what the worker spoke before, so every synthesis gets a freshly
    mapped library (``dlclose`` + ``dlopen``, ~10 ms). Calls are serialised by a lock.
    """

    lock = threading.Lock()

    def __init__(self) -> None:
        try:
            import espeakng_loader
        except ImportError as e:  # pragma: no cover - a base dependency
            raise ImportError("eSpeak NG needs the package espeakng-loader (pip install espeakng-loader)") from e
        self.lib = ctypes.CDLL(_private_copy(espeakng_loader.get_library_path()))
        self.lib.espeak_Initialize.restype = ctypes.c_int
        self.lib.espeak_Synth.argtypes = [
            ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
            ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
        ]
        data = espeakng_loader.get_data_path().encode()
        self.sample_rate = self.lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data, _INITIALIZE_DONT_EXIT)
        if self.sample_rate <= 0:
            raise RuntimeError(f"libespeak-ng failed to initialise (data path {data.decode()})")
        self._chunks: list[np.ndarray] = []
        self._events: list[tuple[int, int]] = []
        self._cb = _Callback(self._collect)  # keep a reference: ctypes does not
        self.lib.espeak_SetSynthCallback(self._cb)

    def close(self) -> None:
        self.lib.espeak_Terminate()
        handle = self.lib._handle
        del self.lib
        _ctypes.dlclose(handle)

    def _collect(self, wav, n, events) -> int:
        if n > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
        i = 0
        while events[i].type != _EVENT_LIST_TERMINATED:
            e = events[i]
            if e.type == _EVENT_WORD:
                self._events.append((e.text_position - 1, e.audio_position))
            i += 1
        return 0

    def _speak(self, text: str, voice_name: str, voice: Voice) -> tuple[np.ndarray, list[tuple[int, int]]]:
        if self.lib.espeak_SetVoiceByName(voice_name.encode()) != 0:
            raise UserError(f"tts.voices: eSpeak NG has no voice {voice_name!r}")
        self.lib.espeak_SetParameter(_RATE, int(voice.rate_wpm), 0)
        self.lib.espeak_SetParameter(_PITCH, int(voice.pitch), 0)
        self.lib.espeak_SetParameter(_RANGE, int(voice.pitch_range), 0)
        raw = text.encode("utf-8")
        _LIBC.srand(1)  # the library draws noise from libc rand(): make it independent of history
        rc = self.lib.espeak_Synth(raw, len(raw) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
        self.lib.espeak_Synchronize()
        if rc != 0:
            raise SessionReject("render", "tts_failed", f"espeak_Synth returned {rc} for {text[:40]!r}")
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
        return audio, list(self._events)

    @classmethod
    def speak(cls, text: str, voice_name: str, voice: Voice) -> tuple[np.ndarray, int, list[tuple[int, int]]]:
        """int16 audio, its sample rate, and word events ``(char_index, ms)``.

        A fresh library per call makes the result a function of the arguments alone, so the
        same line in the same voice (backchannels, fillers, stock replies) is spoken once per
        process and then read back (read-only) from a small cache.
        """
        key = (text, voice_name, voice)
        with cls.lock:
            if key in _SPOKEN:
                _SPOKEN.move_to_end(key)
                return _SPOKEN[key]
            result = cls._speak_fresh(text, voice_name, voice)
            _SPOKEN[key] = result
            while len(_SPOKEN) > _SPOKEN_MAX:
                _SPOKEN.popitem(last=False)
            return result

    @classmethod
    def _speak_fresh(cls, text: str, voice_name: str, voice: Voice):
        lib = cls()
        try:
            audio, events = lib._speak(text, voice_name, voice)
            audio.flags.writeable = False
            return audio, lib.sample_rate, tuple(events)
        finally:
            lib.close()


def _run_text(words: list[PlannedWord]) -> tuple[str, list[tuple[int, int]]]:
    """The text of one language run and each word's character span in it."""
    text, spans = "", []
    for w in words:
        if text and w.lang == "en":
            text += " "
        spans.append((len(text), len(text) + len(w.text)))
        text += w.text
    return text, spans


def _word_starts_ms(spans: list[tuple[int, int]], events: list[tuple[int, int]], total_ms: float) -> list[float]:
    starts: list[float | None] = []
    for lo, hi in spans:
        hits = [ms for pos, ms in events if lo <= pos < hi]
        starts.append(float(min(hits)) if hits else None)
    # words that got no event (merged by the engine) are spread between their neighbours
    known = [i for i, s in enumerate(starts) if s is not None]
    if not known:
        return [total_ms * i / len(spans) for i in range(len(spans))]
    xs = np.interp(range(len(spans)), known, [starts[i] for i in known])
    return [float(x) for x in np.maximum.accumulate(xs)]


class EspeakTTS:
    """eSpeak NG engine: ``voices`` maps a word language to a base voice (``en-us``, ``cmn``)."""

    name = "espeak-ng"
    word_timing = "espeak-word-events"  # where word times come from (in each session record)

    def __init__(self, voices: dict[str, str], trim_rel_db: float = -40.0):
        self.voices = dict(voices)
        self.trim_rel_db = trim_rel_db

    def check_voices(self, variants: list[str]) -> None:
        known = known_variants()
        bad = [v for v in variants if v not in known]
        if bad:  # eSpeak NG silently speaks the base voice for an unknown variant
            shown = ", ".join(sorted(known, key=str.lower)[:60])
            raise UserError(f"tts.variants: eSpeak NG has no variant {bad[0]!r} (known: {shown})")
        probe = Voice(variant="", rate_wpm=170, pitch=50, pitch_range=50)
        for lang, base in self.voices.items():
            for v in [""] + list(variants):
                name = f"{base}+{v}" if v else base
                _Library.speak("a", name, probe)

    def synthesize(self, words: list[PlannedWord], voice: Voice, sample_rate: int) -> Rendered:
        parts = []
        for run in runs_by(words, lambda w: w.lang):
            audio, word_times = self._speak_run(run, voice, sample_rate)
            if audio is not None:
                parts.append(Rendered(audio, sample_rate, tuple(word_times)))
        if not parts:
            raise SessionReject("render", "tts_silent", " ".join(w.text for w in words)[:60])
        return join_runs(parts, sample_rate)

    def _speak_run(self, run: list[PlannedWord], voice: Voice, sample_rate: int):
        base = self.voices.get(run[0].lang)
        if base is None:
            raise UserError(f"tts.voices: no eSpeak NG voice for language {run[0].lang!r}")
        name = f"{base}+{voice.variant}" if voice.variant else base
        text, spans = _run_text(run)
        pcm, src_rate, events = _Library.speak(text, name, voice)
        total_ms = 1000 * len(pcm) / src_rate
        starts_ms = _word_starts_ms(spans, events, total_ms)
        audio = resample(pcm.astype(np.float32) / 32768.0, src_rate, sample_rate)
        bounds = active_bounds(audio, sample_rate, self.trim_rel_db)
        if bounds is None:
            return None, []
        lo, hi = bounds
        to_samples = [int(round(ms * sample_rate / 1000)) for ms in starts_ms] + [len(audio)]
        word_times = []
        for i, w in enumerate(run):
            on = min(max(to_samples[i], lo), hi) - lo
            off = min(max(to_samples[i + 1], lo), hi) - lo
            word_times.append(WordTime(w.text, w.lang, on, max(on, off)))
        return audio[lo:hi], word_times
