"""What the neural engines share: speed from a voice, trimming with word times, the synthesis
cache, and the error for a missing optional package.

Word times of a neural engine come from the model's own durations (per token or per phoneme),
on the model's clock; ``place_words`` moves them to the output rate and the trimmed audio.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from ..audio import active_bounds, resample
from ..errors import SessionReject, UserError
from ..schema.plan import PlannedWord
from .tts import Rendered, Voice, WordTime

REFERENCE_WPM = 170
"""A voice's ``rate_wpm`` of 170 is the engine's natural speed (speed = rate_wpm / 170)."""


def speed_of(voice: Voice) -> float:
    return float(np.clip(voice.rate_wpm / REFERENCE_WPM, 0.5, 2.0))


def missing_extra(package: str, extra: str) -> ImportError:
    return ImportError(f"this TTS engine needs the package {package}: pip install 'duplexsynth[{extra}]'")


def ort_providers(device: str) -> list[str]:
    """onnxruntime providers for ``device``: CUDA first when asked for or, with ``auto``, when
    the installed onnxruntime has it (``onnxruntime-gpu``); the CPU always as the fallback."""
    import onnxruntime as ort

    have = ort.get_available_providers()
    if device == "cuda" and "CUDAExecutionProvider" not in have:
        raise UserError("tts.device: cuda, but this onnxruntime has no CUDAExecutionProvider (install onnxruntime-gpu)")
    if device != "cpu" and "CUDAExecutionProvider" in have:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def place_words(audio: np.ndarray, model_rate: int, sample_rate: int, spans: list[tuple[int, int]],
                words: list[PlannedWord], trim_rel_db: float, what: str) -> Rendered:
    """Resample, trim leading/trailing silence, and clamp each word's ``[on, off)`` into the
    trimmed audio. ``spans`` are in samples of ``audio`` at ``model_rate``."""
    out = resample(np.asarray(audio, np.float32), model_rate, sample_rate)
    bounds = active_bounds(out, sample_rate, trim_rel_db)
    if bounds is None or not np.isfinite(out).all():
        raise SessionReject("render", "tts_silent", what[:60])
    lo, hi = bounds
    scale = sample_rate / model_rate
    times, last = [], 0
    for w, (a, b) in zip(words, spans):
        on = min(max(int(round(a * scale)), lo), hi) - lo
        off = min(max(int(round(b * scale)), lo), hi) - lo
        on = max(on, last)  # monotonic even where trimming clamps two words together
        times.append(WordTime(w.text, w.lang, on, max(on, off)))
        last = on
    return Rendered(out[lo:hi], sample_rate, tuple(times))


class SynthCache:
    """Rendered events on disk, keyed by (engine, model digest, voice, words, params).

    A resumed or repeated run reads what it made before instead of synthesising again. Entries
    are written to a temporary name and renamed into place, so a killed worker never leaves a
    half-written entry and two workers writing the same key both leave a whole one.
    """

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)

    @staticmethod
    def key(engine: str, model_digest: str, voice: Voice, words: list[PlannedWord], params: dict) -> str:
        payload = {"engine": engine, "model": model_digest, "voice": voice.as_dict(),
                   "words": [[w.text, w.lang] for w in words], "params": params}
        return hashlib.blake2b(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode(),
                               digest_size=20).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.npz"

    def get(self, key: str) -> Rendered | None:
        path = self._path(key)
        try:
            with np.load(path, allow_pickle=False) as z:
                audio, sr, meta = z["audio"], int(z["sample_rate"]), json.loads(str(z["words"]))
        except (OSError, KeyError, ValueError):
            return None
        return Rendered(audio, sr, tuple(WordTime(*w) for w in meta))

    def put(self, key: str, r: Rendered) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        words = json.dumps([[w.word, w.lang, w.on, w.off] for w in r.words], ensure_ascii=False)
        np.savez(buf, audio=r.audio, sample_rate=np.int64(r.sample_rate), words=np.str_(words))
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(buf.getvalue())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def file_digest(path: str | os.PathLike) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
