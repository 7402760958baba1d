"""Render: voices, the per-event render choices, and the audio of every event.

Two steps, as in Scaper's ``generate_from_jams``: ``draw_event_specs`` makes every random choice
of the render stage (the bank clip picked for a sound, a laugh's drawn length, a media excerpt's
start and length, the fade; the voice each event is spoken with) and ``render_events`` makes the
audio from those choices alone, with no generator in sight.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..audio import fade_out, gain_to_level, prolong
from ..backends.tts import Rendered, TTSEngine, Voice, WordTime
from ..banks.bank import Bank, BankReadError, read_clip
from ..errors import SessionReject
from ..schema.config import PipelineConfig
from ..schema.plan import Plan, PlannedEvent, talker
from ..schema.record import EventRender, RenderParams, SoundClip


def draw_voices(config: PipelineConfig, speakers: list[str], rng: np.random.Generator,
                pools: dict[str, list[str]] | None = None) -> dict[str, Voice]:
    """Distinct engine variants per speaker (a talker: in a group, each person), with rate and
    pitch drawn per speaker. ``pools``: a person's own voice names (the seed's ``voices``), from
    which their variant is drawn instead, one not taken yet where the pool allows; names the
    engine does not have are passed over (a seed written for Kokoro still runs on eSpeak)."""
    tts = config.tts
    if tts.engine == "routed":
        from ..backends.routed import draw_routed_voices

        return draw_routed_voices(tts, speakers, rng)
    order = rng.permutation(len(tts.variants))
    voices = {}
    taken: set[str] = set()
    for i, spk in enumerate(speakers):
        variant = tts.variants[int(order[i % len(order)])]
        known = [v for v in (pools or {}).get(spk, ()) if v in tts.variants]  # names of this engine only
        if known:
            own = [v for v in known if v not in taken] or known
            variant = own[int(rng.integers(len(own)))]
        elif variant in taken:  # a person's pool took it: the next free one in this order
            variant = next((tts.variants[int(k)] for k in order if tts.variants[int(k)] not in taken), variant)
        taken.add(variant)
        voices[spk] = Voice(
            variant=variant,
            rate_wpm=int(round(tts.rate_wpm.sample(rng))),
            pitch=int(round(tts.pitch.sample(rng))),
            pitch_range=int(round(tts.pitch_range.sample(rng))),
        )
    return voices


def draw_event_specs(plan: Plan, voices: dict[str, Voice], bank: Bank | None, config: PipelineConfig,
                     rng_for: Callable[[str], np.random.Generator]) -> dict[str, EventRender]:
    """Every render choice of every event, each sound from its own generator."""
    sr = config.audio.sample_rate
    out = {}
    for ev in plan.events:
        if ev.sound is not None:
            out[ev.id] = EventRender(sound=_draw_sound(ev, bank, config, rng_for(ev.id)))
        else:
            out[ev.id] = EventRender(voice=voices[talker(ev)],
                                     prolong_samples=int(ev.prolong_ms * sr / 1000) if ev.prolong_ms else 0)
    return out


def _draw_sound(ev: PlannedEvent, bank: Bank | None, config: PipelineConfig, rng) -> SoundClip:
    """A clip from the bank: laughter near a drawn length, TV speech cut to a drawn length."""
    sr, para = config.audio.sample_rate, config.paralinguistics
    category = ev.sound
    target = para.laughter_ms.sample(rng) / 1000 if category == "laughter" else None
    f = bank.pick(category, rng, target) if bank is not None else None
    if f is None:
        raise SessionReject("render", f"no_bank_sound:{category}", ev.id)
    n_clip = len(_read(bank, f.bank, f.entry.path, sr))
    start, n, fade = 0, n_clip, 0
    if category == "media":
        n = min(n_clip, int(para.media_s.sample(rng) * sr))
        start = int(rng.integers(0, n_clip - n + 1))
        fade = int(0.05 * sr)
    elif target is not None and n_clip > 1.2 * target * sr:  # a laugh can stop early
        n, fade = int(target * sr), int(0.04 * sr)
    return SoundClip(**f.ref(), target_s=target, start_sample=start, num_samples=n, fade_samples=fade)


def _read(bank: Bank | None, bank_name: str, path: str, sr: int) -> np.ndarray:
    f = bank.find(bank_name, path) if bank is not None else None
    if f is None:
        raise SessionReject("render", "bank_file_missing", f"{bank_name}/{path}")
    try:
        return read_clip(f, sr)
    except BankReadError as e:
        raise SessionReject("render", "bank_file_unreadable", str(e)) from None


def render_events(plan: Plan, specs: dict[str, EventRender], tts: TTSEngine, bank: Bank | None,
                  params: RenderParams) -> dict[str, Rendered]:
    """Every event's audio at its speaker's level: TTS for words, the bank for sounds. No draws."""
    sr = params.sample_rate
    out = {}
    for ev in plan.events:
        spec = specs.get(ev.id)
        if spec is None:
            raise SessionReject("render", "spec_missing_event", ev.id)
        if spec.sound is not None:
            r = _sound(ev, spec.sound, bank, sr)
        else:
            r = tts.synthesize(list(ev.words), spec.voice, sr)
            if spec.prolong_samples and r.words:
                r = _prolonged(r, spec.prolong_samples)
        level = params.speaker_rms_dbfs + params.levels_db.get(ev.sound or "", 0.0)
        gain = gain_to_level(r.audio, sr, level)
        out[ev.id] = Rendered((r.audio * gain).astype(np.float32), sr, r.words)
    return out


def _sound(ev: PlannedEvent, clip: SoundClip, bank: Bank | None, sr: int) -> Rendered:
    audio = _read(bank, clip.bank, clip.path, sr)[clip.start_sample: clip.start_sample + clip.num_samples]
    if clip.fade_samples:
        audio = fade_out(audio, clip.fade_samples)
    word = ev.words[0]
    return Rendered(audio, sr, (WordTime(word.text, word.lang, 0, len(audio)),))


def _prolonged(r: Rendered, extra: int) -> Rendered:
    """Draw out the last word: insert sustained voice 30 ms before its end."""
    last = r.words[-1]
    at = max(last.on + 1, last.off - int(0.03 * r.sample_rate))
    audio = prolong(r.audio, at, extra, r.sample_rate)
    grown = len(audio) - len(r.audio)
    words = r.words[:-1] + (WordTime(last.word, last.lang, last.on, last.off + grown),)
    return Rendered(audio, r.sample_rate, words)
