"""Coqui TTS (``coqui-tts``): VITS models (one or many speakers) and XTTS-v2 (reference clips).

Loading is Coqui's own: ``Synthesizer`` reads ``config.json`` and the checkpoint of a local
model folder, or of a named model that Coqui's ``ModelManager`` downloads (where the network
allows it). Inference calls the model itself, not ``Synthesizer.tts``, so the engine can read
what the model knows about timing:

- **VITS**: each planned word is tokenised on its own with the model's tokenizer (its cleaner,
  phonemizer, blanks and BOS/EOS as its config says) and the words are joined by the space
  token; the model's duration predictor gives frames per token (``outputs["durations"]``, in
  hops of ``audio.hop_length``), so every word spans the frames of its tokens.
  ``word_timing = "model-durations"``. Speakers: ``variants`` are names of the model's speaker
  table; a multilingual model gets the language id of each language run.
- **XTTS-v2**: autoregressive, so it has no durations; each language run is spoken with its
  language code (``zh-cn`` / ``en``) and the words are placed by the project's aligner
  (``aligner.py``: DTW against an eSpeak NG rendering). ``word_timing = "aligner:dtw-espeak"``.
  Speakers: ``variants`` name reference clips in ``speaker_wavs`` (read with soundfile, the
  conditioning computed once at load) or built-in speakers of the model's ``speakers_xtts.pth``.

Randomness (VITS noise, XTTS sampling) comes from torch's generator, which those models use
directly: it is seeded from the request (voice, words, params, via ``rng.int_seed``) inside
``torch.random.fork_rng``, so the same request gives the same samples in any process on the
same device, whatever was spoken before, and nothing outside the call sees the seed.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import numpy as np

from ..errors import SessionReject, UserError
from ..rng import int_seed
from ..schema.plan import PlannedWord, join_words
from . import aligner
from .neural import SynthCache, file_digest, missing_extra, place_words, speed_of
from .tts import Rendered, Voice, join_runs, runs_by

CHECKPOINTS = ("model.pth", "best_model.pth", "model_file.pth", "checkpoint.pth")
XTTS_REF_SR = 22050


class CoquiTTS:
    """A Coqui model behind the TTS interface (see the module docstring)."""

    name = "coqui"

    def __init__(self, cfg, trim_rel_db: float = -40.0, cache: SynthCache | None = None):
        self.cfg, self.trim_rel_db, self.cache = cfg, trim_rel_db, cache
        self.model = None
        self.lock = threading.Lock()
        self.word_timing = "unknown"

    # -- loading ---------------------------------------------------------------------------

    def _folder(self) -> tuple[Path, Path]:
        """(checkpoint file or XTTS folder, config.json) of the configured model."""
        if self.cfg.model_name:
            try:
                from TTS.utils.manage import ModelManager

                path, config_path, _ = ModelManager(progress_bar=False).download_model(self.cfg.model_name)
            except Exception as e:  # network, unknown name: Coqui raises many kinds
                raise UserError(f"tts.model_name: cannot get Coqui model {self.cfg.model_name!r} ({type(e).__name__}: {e})") from None
            folder = Path(path)
            config = Path(config_path) if config_path else folder / "config.json"
        else:
            folder = Path(self.cfg.model_path)
            config = folder / "config.json"
        if not config.is_file():
            raise UserError(f"tts.model_path: no config.json in {folder}")
        return folder, config

    def load(self) -> "CoquiTTS":
        if self.model is not None:
            return self
        try:
            import torch
            from TTS.utils.synthesizer import Synthesizer
        except ImportError as e:
            raise missing_extra(getattr(e, "name", None) or "coqui-tts", "coqui") from None
        folder, config_path = self._folder()
        try:
            kind = json.loads(config_path.read_text(encoding="utf-8")).get("model")
        except (OSError, ValueError, AttributeError) as e:
            raise UserError(f"tts.model_path: cannot read {config_path} ({e})") from None
        if kind not in ("vits", "xtts"):
            raise UserError(f"tts.model_path: Coqui model type {kind!r} in {config_path}: this engine speaks vits and xtts")
        if kind == "xtts":
            checkpoint = folder if folder.is_dir() else folder.parent
            digest_file = next((checkpoint / n for n in CHECKPOINTS if (checkpoint / n).is_file()), None)
        else:
            checkpoint = folder if folder.is_file() else next((folder / n for n in CHECKPOINTS if (folder / n).is_file()), None)
            digest_file = checkpoint
        if digest_file is None:
            raise UserError(f"tts.model_path: no checkpoint ({', '.join(CHECKPOINTS)}) in {folder}")
        device = self.cfg.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        elif device == "cuda" and not torch.cuda.is_available():
            raise UserError("tts.device: cuda, but torch sees no GPU")
        torch.set_num_threads(self.cfg.threads)
        # the tokenizer logs every character it drops; a word left without tokens is a reject
        logging.getLogger("TTS.tts.utils.text.tokenizer").setLevel(logging.ERROR)
        try:
            synth = Synthesizer(tts_checkpoint=str(checkpoint), tts_config_path=str(config_path), use_cuda=device == "cuda")
        except Exception as e:
            raise UserError(f"tts.model_path: Coqui cannot load {checkpoint} ({type(e).__name__}: {e})") from None
        self.torch, self.device, self.kind = torch, device, kind
        self.model = synth.tts_model  # loaded with eval=True
        self.sample_rate = int(self.model.args.output_sample_rate if kind == "xtts" else self.model.config.audio.sample_rate)
        self.digest = file_digest(digest_file) + file_digest(config_path)[:8]
        self._clip_digests = {v: [file_digest(c) if Path(c).is_file() else "missing" for c in clips]
                              for v, clips in self.cfg.speaker_wavs.items()}
        self.word_timing = f"aligner:{aligner.NAME}" if kind == "xtts" else "model-durations"
        self.speakers = self._speaker_names()
        self.languages = self._model_languages()
        self._conditioning: dict[str, tuple] = {}
        return self

    def _speaker_names(self) -> list[str]:
        sm = getattr(self.model, "speaker_manager", None)
        if self.kind == "xtts":
            return sorted(self.cfg.speaker_wavs) + (sorted(sm.speakers) if sm is not None else [])
        return list(sm.name_to_id) if sm is not None and sm.name_to_id else []

    def _speaker_index(self, variant: str) -> int | None:
        """A VITS speaker by name, or by its id in the speaker table (``"0"``, ``"1"`` ...)."""
        if self.kind != "vits" or not self.speakers:
            return None
        table = self.model.speaker_manager.name_to_id
        if variant in table:
            return int(table[variant])
        if variant.isdigit() and int(variant) < len(table):
            return int(variant)
        return None

    def _model_languages(self) -> list[str]:
        if self.kind == "xtts":
            return list(self.model.config.languages)
        lm = getattr(self.model, "language_manager", None)
        if not self.model.args.use_language_embedding or lm is None:
            return []  # one language: whatever its characters or phonemizer cover
        return list(lm.name_to_id)

    def check_voices(self, variants: list[str]) -> None:
        self.load()
        for v in variants:
            if v == "default" and self.kind == "vits" and not self.speakers:
                continue
            if v not in self.speakers and self._speaker_index(v) is None:
                have = ", ".join(self.speakers[:6]) + (" ..." if len(self.speakers) > 6 else "") or "none"
                raise UserError(f"tts.variants: the Coqui model has no speaker {v!r} (speakers: {have})")
        for lang, code in self.cfg.languages.items():
            if self.languages and code not in self.languages:
                raise UserError(f"tts.languages.{lang}: the Coqui model has no language {code!r} ({', '.join(self.languages)})")
        if self.kind == "xtts":
            for v in variants:
                self._xtts_conditioning(v)

    # -- synthesis -------------------------------------------------------------------------

    def synthesize(self, words: list[PlannedWord], voice: Voice, sample_rate: int) -> Rendered:
        self.load()
        params = {"sr": sample_rate, "trim": self.trim_rel_db, "langs": self.cfg.languages,
                  "temperature": self.cfg.temperature, "clips": self._clip_digests.get(voice.variant), "v": 1}
        key = SynthCache.key(self.name, self.digest, voice, words, params)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            return hit
        one_call = self.kind == "vits" and len(self.languages) <= 1
        parts = []
        for i, run in enumerate([words] if one_call else runs_by(words, lambda w: w.lang)):
            audio, spans = self._speak(run, voice, int_seed(0, self.name, key, str(i)))
            parts.append(place_words(audio, self.sample_rate, sample_rate, spans, run, self.trim_rel_db, join_words(run)))
        r = join_runs(parts, sample_rate)
        if self.cache is not None:
            self.cache.put(key, r)
        return r

    def _speak(self, run: list[PlannedWord], voice: Voice, seed: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
        torch = self.torch
        devices = [torch.cuda.current_device()] if self.device == "cuda" else []
        try:
            with self.lock, torch.random.fork_rng(devices=devices), torch.inference_mode():
                torch.manual_seed(seed)
                if self.kind == "vits":
                    return self._vits(run, voice)
                return self._xtts(run, voice)
        except (SessionReject, UserError):
            raise
        except Exception as e:  # torch and the tokenizers raise many kinds
            raise SessionReject("render", "tts_failed", f"coqui: {type(e).__name__}: {e}"[:200]) from None

    def _word_ids(self, text: str, lang: str) -> list[int]:
        tok, code = self.model.tokenizer, self.cfg.languages.get(lang)
        if tok.text_cleaner is not None:
            from TTS.tts.utils.languages import normalize_language

            text = tok.text_cleaner(text, lang=normalize_language(code))
        if tok.phonemizer is not None:
            text = tok.phonemizer.phonemize(text, separator="", language=code)
        return tok.encode(text.strip())

    def _vits(self, run: list[PlannedWord], voice: Voice) -> tuple[np.ndarray, list[tuple[int, int]]]:
        torch, model, tok = self.torch, self.model, self.model.tokenizer
        space = tok.encode(" ")
        punctuation = set(tok.encode(tok.characters.punctuations))
        ids, ranges = [], []
        for w in run:
            if ids:
                ids.extend(space)
            word = self._word_ids(w.text, w.lang)
            spoken = len(word)  # a trailing comma's pause belongs to the gap after the word
            while spoken and word[spoken - 1] in punctuation:
                spoken -= 1
            ranges.append((len(ids), len(ids) + spoken))
            ids.extend(word)
        if all(a == b for a, b in ranges):
            raise SessionReject("render", "tts_unsupported_text", join_words(run)[:60])
        if tok.add_blank:  # blank before every token: token i moves to 2i + 1
            ids = tok.intersperse_blank_char(ids)
            ranges = [(2 * a + 1, 2 * b) if b > a else (2 * a + 1, 2 * a + 1) for a, b in ranges]
        if tok.use_eos_bos:
            ids = tok.pad_with_bos_eos(ids)
            ranges = [(a + 1, b + 1) for a, b in ranges]
        aux = {"x_lengths": torch.tensor([len(ids)], device=self.device), "d_vectors": None, "durations": None,
               "speaker_ids": None, "language_ids": None}
        if self.speakers:
            aux["speaker_ids"] = torch.tensor([self._speaker_index(voice.variant)], device=self.device)
        if self.languages:
            code = self.cfg.languages.get(run[0].lang)
            if code not in self.languages:
                raise SessionReject("render", "tts_unsupported_language", f"coqui model has no {run[0].lang}")
            aux["language_ids"] = torch.tensor([model.language_manager.name_to_id[code]], device=self.device)
        model.length_scale = 1.0 / speed_of(voice)
        out = model.inference(torch.tensor([ids], device=self.device), aux_input=aux)
        audio = out["model_outputs"].squeeze().float().cpu().numpy()
        frames = out["durations"].squeeze().float().cpu().numpy().reshape(-1)
        hop = len(audio) / max(1.0, frames.sum())  # hop_length, exact unless the decoder cut at max_inference_len
        edges = np.concatenate([[0.0], np.cumsum(frames)]) * hop
        return audio, [(int(edges[a]), int(edges[b])) for a, b in ranges]

    def _xtts_conditioning(self, variant: str) -> tuple:
        if variant in self._conditioning:
            return self._conditioning[variant]
        torch, model = self.torch, self.model
        clips = self.cfg.speaker_wavs.get(variant)
        if clips is None:  # a built-in speaker
            entry = model.speaker_manager.speakers[variant]
            cond = (entry["gpt_cond_latent"], entry["speaker_embedding"])
        else:
            import soundfile as sf

            from ..audio import resample

            audios, embeddings = [], []
            for path in clips:
                try:
                    x, sr = sf.read(path, dtype="float32", always_2d=True)
                except (OSError, RuntimeError) as e:
                    raise UserError(f"tts.speaker_wavs.{variant}: cannot read {path} ({e})") from None
                x = resample(x.mean(axis=1), sr, XTTS_REF_SR)[: XTTS_REF_SR * int(model.config.max_ref_len)]
                audio = torch.from_numpy(np.ascontiguousarray(x))[None].to(self.device)
                with torch.inference_mode():
                    embeddings.append(model.get_speaker_embedding(audio, XTTS_REF_SR))
                audios.append(audio)
            with torch.inference_mode():
                latent = model.get_gpt_cond_latents(torch.cat(audios, dim=-1), XTTS_REF_SR,
                                                    length=model.config.gpt_cond_len,
                                                    chunk_length=model.config.gpt_cond_chunk_len)
                embedding = torch.stack(embeddings).mean(dim=0)
            cond = (latent, embedding)
        self._conditioning[variant] = cond
        return cond

    def _xtts(self, run: list[PlannedWord], voice: Voice) -> tuple[np.ndarray, list[tuple[int, int]]]:
        code = self.cfg.languages.get(run[0].lang)
        if code not in self.languages:
            raise SessionReject("render", "tts_unsupported_language", f"coqui model has no {run[0].lang}")
        latent, embedding = self._xtts_conditioning(voice.variant)
        out = self.model.inference(join_words(run), code, latent, embedding, temperature=self.cfg.temperature,
                                   speed=speed_of(voice))
        audio = np.asarray(out["wav"].cpu().numpy() if hasattr(out["wav"], "cpu") else out["wav"], np.float32).ravel()
        if len(audio) == 0 or not np.isfinite(audio).all() or np.abs(audio).max() == 0:
            raise SessionReject("render", "tts_silent", join_words(run)[:60])
        return audio, aligner.align_words(audio, self.sample_rate, run, trim_rel_db=self.trim_rel_db)
