"""Engines from the ``tts`` config: one engine, or several routed per speaker and per language.

A routed voice carries one variant per engine, written ``name=variant`` and joined by ``;``
(``kokoro=pool-07;piper=default``), the speaker's primary engine first; it lands in the session
record as it is, so a session can be re-rendered from its record.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..schema.config import CoquiConfig, EspeakConfig, KokoroConfig, PiperConfig, RoutedTTSConfig
from ..schema.plan import PlannedWord
from .tts import Rendered, TTSEngine, Voice, join_runs, runs_by


def build_engine(cfg, trim_rel_db: float) -> TTSEngine:
    """The engine for one ``tts`` config (heavy imports happen in the engine, lazily)."""
    if isinstance(cfg, EspeakConfig):
        from .espeak import EspeakTTS

        return EspeakTTS(cfg.voices, trim_rel_db)
    cache = None
    if getattr(cfg, "cache_dir", None):
        from .neural import SynthCache

        cache = SynthCache(cfg.cache_dir)
    if isinstance(cfg, KokoroConfig):
        from .kokoro import KokoroTTS

        return KokoroTTS(cfg.model_path, cfg.voices_path, cfg.pool_size, cfg.pool_seed, cfg.pool_base,
                         cfg.threads, trim_rel_db, cache, cfg.device, cfg.code_switch, cfg.english_g2p,
                         cfg.precision, cfg.call_tokens)
    if isinstance(cfg, PiperConfig):
        from .piper import PiperTTS

        return PiperTTS(dict(cfg.models), cfg.threads, trim_rel_db, cache, cfg.device)
    if isinstance(cfg, CoquiConfig):
        from .coqui import CoquiTTS

        return CoquiTTS(cfg, trim_rel_db, cache)
    if isinstance(cfg, RoutedTTSConfig):
        return RoutedTTS(cfg, {n: build_engine(c, trim_rel_db) for n, c in sorted(cfg.engines.items())})
    raise TypeError(f"no TTS engine for {type(cfg).__name__}")


def check_engine(engine: TTSEngine, cfg) -> None:
    """Load the engine and its voices now: one clear error before the run starts."""
    if isinstance(engine, RoutedTTS):
        for name, sub in engine.engines.items():
            check_engine(sub, cfg.engines[name])
        return
    try:
        engine.check_voices(list(cfg.variants))
    except ImportError as e:
        raise UserError(f"tts.engine: {cfg.engine} cannot load: {e}") from None


def draw_routed_voices(cfg: RoutedTTSConfig, speakers: list[str], rng: np.random.Generator) -> dict[str, Voice]:
    """Per speaker: a distinct variant of every engine it may use; rate from its primary engine."""
    orders = {n: rng.permutation(len(c.variants)) for n, c in sorted(cfg.engines.items())}
    voices = {}
    for i, spk in enumerate(speakers):
        primary = cfg.speakers.get(spk, cfg.default)
        names = [primary] if spk in cfg.speakers else [primary, *sorted(set(cfg.languages.values()) - {primary})]
        parts = []
        for n in names:
            variants = cfg.engines[n].variants
            parts.append(f"{n}={variants[int(orders[n][i % len(variants)])]}")
        p = cfg.engines[primary]
        voices[spk] = Voice(variant=";".join(parts), rate_wpm=int(round(p.rate_wpm.sample(rng))),
                            pitch=int(round(p.pitch.sample(rng))), pitch_range=int(round(p.pitch_range.sample(rng))))
    return voices


def split_voice(voice: Voice) -> dict[str, Voice]:
    out = {}
    for part in voice.variant.split(";"):
        name, _, variant = part.partition("=")
        out[name] = Voice(variant, voice.rate_wpm, voice.pitch, voice.pitch_range)
    return out


class RoutedTTS:
    """Speaks each language run with the engine the config routes it to."""

    name = "routed"

    def __init__(self, cfg: RoutedTTSConfig, engines: dict[str, TTSEngine]):
        self.cfg, self.engines = cfg, engines
        self.name = "routed:" + ",".join(f"{n}={e.name}" for n, e in engines.items())

    @property
    def word_timing(self) -> str:
        return ",".join(f"{n}={e.word_timing}" for n, e in self.engines.items())

    def _engine_for(self, lang: str, voices: dict[str, Voice]) -> str:
        routed = self.cfg.languages.get(lang)
        return routed if routed in voices else next(iter(voices))

    def synthesize(self, words: list[PlannedWord], voice: Voice, sample_rate: int) -> Rendered:
        voices = split_voice(voice)
        parts = []
        for run in runs_by(words, lambda w: self._engine_for(w.lang, voices)):
            name = self._engine_for(run[0].lang, voices)
            parts.append(self.engines[name].synthesize(run, voices[name], sample_rate))
        return join_runs(parts, sample_rate)
