"""Small helpers shared by the exporters: audio writing, word lists, JSON files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..io.files import write_atomic_with, write_text_atomic
from ..schema.plan import is_sound_tag  # noqa: F401  (re-exported for the exporters)


def write_wav(path: Path, audio: np.ndarray, sample_rate: int) -> None:
    """16-bit PCM WAV (mono ``(n,)`` or multichannel ``(n, c)``), written atomically."""
    import soundfile as sf

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic_with(path, lambda p: sf.write(p, audio, sample_rate, subtype="PCM_16", format="WAV"))


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=1))


def resample(x: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    """Polyphase resampling (scipy) along the first axis; identity when the rates agree."""
    if sr_in == sr_out:
        return x
    from math import gcd

    from scipy.signal import resample_poly

    g = gcd(sr_in, sr_out)
    y = resample_poly(x, sr_out // g, sr_in // g, axis=0)
    return np.clip(y, -1.0, 1.0).astype(np.float32)


def words_of(rec, speakers: tuple[str, ...]) -> list[tuple[str, int, int, str, str, str]]:
    """``(word, on_sample, off_sample, speaker, event_id, lang)`` of the spoken words, by onset."""
    out = []
    for ev in rec.events:
        if ev.speaker in speakers:  # a group's people by their ids
            out += [(w.word, w.on_sample, w.off_sample, ev.person or ev.speaker, ev.id, w.lang) for w in ev.words]
    return sorted(out, key=lambda w: (w[1], w[2]))


def seconds(samples: int, sr: int) -> float:
    return round(samples / sr, 4)


def kept_word(w, sound_tags: str = "keep") -> bool:
    """A placed word an export writes: one with a length, and no sound tag unless ``sound_tags`` is ``keep``."""
    return w.off_sample > w.on_sample and (sound_tags == "keep" or not is_sound_tag(w.word))


def join_spoken(words) -> str:
    """Placed words joined as they are written (spaces around English, none between Chinese)."""
    from ..schema.plan import PlannedWord, join_words

    return join_words([PlannedWord(text=w.word, lang=w.lang) for w in words])
