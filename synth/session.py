"""One session end to end: seed -> plan -> paralinguistics -> voices and scene -> render -> clock
-> room -> mix -> labels -> QA.

``make_session`` is a pure function of ``(config, seed, run_seed, session_id)`` and the
engines passed in; every random draw comes from ``synth.rng.stream`` under the session id.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field

import numpy as np
import soundfile as sf

from .audio import fade_out, gain_to_level, prolong
from .backends.room import room_irs
from .backends.tts import Rendered, TTSEngine, Voice, WordTime
from .banks.bank import Bank, BankReadError, read_clip
from .errors import SessionReject
from .rng import stream
from .schema.common import CHANNEL_ORDER
from .schema.config import PipelineConfig
from .schema.phenomena import code_switch_hits, family_of
from .schema.record import PhenomenonHit, Reject, SessionRecord
from .schema.seed import ScenarioSeed
from .stages.label import label_session, with_backend_frames
from .stages.mix import mix
from .stages.paraling import decorate
from .stages.place import place
from .stages.scene import draw_scene
from .stages import qa


@dataclass
class SessionOutput:
    record: SessionRecord
    user_flac: bytes
    system_flac: bytes


@dataclass
class Timer:
    stages: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, t0: float) -> float:
        now = time.perf_counter()
        self.stages[name] = self.stages.get(name, 0.0) + now - t0
        return now


def draw_voices(config: PipelineConfig, speakers: list[str], rng: np.random.Generator) -> dict[str, Voice]:
    """Distinct engine variants per speaker, with rate and pitch drawn per speaker."""
    tts = config.tts
    if tts.engine == "routed":
        from .backends.routed import draw_routed_voices

        return draw_routed_voices(tts, speakers, rng)
    order = rng.permutation(len(tts.variants))
    voices = {}
    for i, spk in enumerate(speakers):
        voices[spk] = Voice(
            variant=tts.variants[int(order[i % len(order)])],
            rate_wpm=int(round(tts.rate_wpm.sample(rng))),
            pitch=int(round(tts.pitch.sample(rng))),
            pitch_range=int(round(tts.pitch_range.sample(rng))),
        )
    return voices


def quantize(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int16)


def flac_bytes(pcm: np.ndarray, sample_rate: int) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, pcm, sample_rate, format="FLAC", subtype="PCM_16")
    return buf.getvalue()


def _render(plan, voices, tts: TTSEngine, bank: Bank | None, config: PipelineConfig,
            rng_for) -> tuple[dict[str, Rendered], dict[str, dict]]:
    """Every event's audio at its speaker's level: TTS for words, the bank for sounds."""
    sr = config.audio.sample_rate
    out, sounds = {}, {}
    for ev in plan.events:
        if ev.sound is not None:
            r, sounds[ev.id] = _sound(ev, bank, config, rng_for(ev.id))
        else:
            r = tts.synthesize(list(ev.words), voices[ev.speaker], sr)
            if ev.prolong_ms and r.words:
                r = _prolonged(r, int(ev.prolong_ms * sr / 1000))
        level = config.audio.speaker_rms_dbfs + config.paralinguistics.levels_db.get(ev.sound or "", 0.0)
        gain = gain_to_level(r.audio, sr, level)
        out[ev.id] = Rendered((r.audio * gain).astype(np.float32), sr, r.words)
    return out, sounds


def _prolonged(r: Rendered, extra: int) -> Rendered:
    """Draw out the last word: insert sustained voice 30 ms before its end."""
    last = r.words[-1]
    at = max(last.on + 1, last.off - int(0.03 * r.sample_rate))
    audio = prolong(r.audio, at, extra, r.sample_rate)
    grown = len(audio) - len(r.audio)
    words = r.words[:-1] + (WordTime(last.word, last.lang, last.on, last.off + grown),)
    return Rendered(audio, r.sample_rate, words)


def _sound(ev, bank: Bank | None, config: PipelineConfig, rng) -> tuple[Rendered, dict]:
    """A clip from the bank: laughter near a drawn length, TV speech cut to a drawn length."""
    sr, para = config.audio.sample_rate, config.paralinguistics
    category = ev.sound
    target = para.laughter_ms.sample(rng) / 1000 if category == "laughter" else None
    f = bank.pick(category, rng, target) if bank is not None else None
    if f is None:
        raise SessionReject("render", f"no_bank_sound:{category}", ev.id)
    try:
        clip = read_clip(f, sr)
    except BankReadError as e:
        raise SessionReject("render", "bank_file_unreadable", str(e)) from None
    if category == "media":
        n = min(len(clip), int(para.media_s.sample(rng) * sr))
        start = int(rng.integers(0, len(clip) - n + 1))
        clip = fade_out(clip[start : start + n], int(0.05 * sr))
    elif target is not None and len(clip) > 1.2 * target * sr:  # a laugh can stop early
        clip = fade_out(clip[: int(target * sr)], int(0.04 * sr))
    word = ev.words[0]
    return Rendered(clip, sr, (WordTime(word.text, word.lang, 0, len(clip)),)), f.ref()


def _decorated(plan, seed: ScenarioSeed, config: PipelineConfig, rng):
    """The paralinguistic pass; a plan it leaves breaking a plan rule is a reject naming the rule."""
    from pydantic import ValidationError

    try:
        return decorate(plan, seed, config.paralinguistics, rng)
    except ValidationError as e:
        msg = e.errors()[0]["msg"].removeprefix("Value error, ")
        raise SessionReject("paraling", "plan_rule", msg) from None


def make_session(config: PipelineConfig, seed: ScenarioSeed, run_seed: int, session_id: str,
                 planner, tts: TTSEngine, timer: Timer | None = None,
                 bank: Bank | None = None) -> SessionOutput | Reject:
    timer = timer or Timer()
    t0 = time.perf_counter()
    try:
        plan = planner.plan(seed, session_id, stream(run_seed, session_id, "plan"))
        plan = _decorated(plan, seed, config, stream(run_seed, session_id, "paraling"))
        t0 = timer.add("plan", t0)
        speakers = sorted({e.speaker for e in plan.events if e.speaker in ("user", "system", "third_party")})
        voices = draw_voices(config, speakers, stream(run_seed, session_id, "voices"))
        scene = draw_scene(config, seed, plan, bank, lambda name: stream(run_seed, session_id, "scene", name))
        rendered, sounds = _render(plan, voices, tts, bank, config,
                                   lambda eid: stream(run_seed, session_id, "render", eid))
        t0 = timer.add("tts", t0)
        placed = place(plan, rendered, config.timing, config.audio.sample_rate,
                       lambda name: stream(run_seed, session_id, "place", name))
        tl = with_backend_frames(placed.timeline, config.labels.frame_period_ms)
        t0 = timer.add("clock", t0)
        irs = room_irs(scene.room, config.audio.sample_rate) if scene.room is not None else {}
        t0 = timer.add("room", t0)
        m = mix(tl, placed.audio, scene, irs, bank, config.audio.peak_limit)
        user_pcm, sys_pcm, stem_pcm = quantize(m.user_side), quantize(m.system), quantize(m.user_stem)
        t0 = timer.add("mix", t0)
        sr, period, lab = config.audio.sample_rate, config.labels.frame_period_ms, config.labels
        labels = label_session(tl, period, sys_pcm / 32768.0, stem_pcm / 32768.0,
                               lab.vad_threshold_dbfs, lab.vad_window_ms)
        t0 = timer.add("labels", t0)
        problems = qa.check_labels(tl, labels, period, config.timing.result_ttl_ms)
        problems += qa.check_vad(sys_pcm / 32768.0, labels.sys_vad, sr, period, "sys_vad")
        problems += qa.check_vad(stem_pcm / 32768.0, labels.usr_vad, sr, period, "usr_vad")
        problems += qa.check_vad_in_events(tl, labels.sys_vad, ("system",), period, "sys_vad")
        problems += qa.check_vad_in_events(tl, labels.usr_vad, ("user",), period, "usr_vad")
        problems += qa.check_peaks({"user_side": user_pcm / 32768.0, "system": sys_pcm / 32768.0})
        problems = qa.check_silent({"user_side": user_pcm / 32768.0, "system": sys_pcm / 32768.0}) + problems
        if problems:
            raise SessionReject("qa", problems[0].split(":")[0], "; ".join(problems[:5]))
        hits = [PhenomenonHit(id=p, family=family_of(p), event_id=e.id) for e in tl.events for p in e.phenomena]
        hits += [PhenomenonHit(id=p, family=family_of(p), event_id=eid)
                 for p, eid in code_switch_hits(sorted(tl.events, key=lambda e: (e.on_sample, e.id)))]
        record = SessionRecord(
            session_id=session_id, scenario_id=seed.id, language=seed.language, sample_rate=sr,
            num_samples=tl.num_samples, duration_s=round(tl.num_samples / sr, 6),
            channels=list(CHANNEL_ORDER), frame_rate_hz=1000 / period, frame_period_s=period / 1000,
            sys_action=labels.sys_action, sys_floor=labels.sys_floor, usr_floor=labels.usr_floor,
            sys_vad=labels.sys_vad, usr_vad=labels.usr_vad, markers=labels.markers,
            events=tl.events, delegations=tl.work, phenomena=hits,
            scene={**scene.model_dump(mode="json"), "tts_engine": tts.name, "word_timing": tts.word_timing,
                   "voices": {k: v.as_dict() for k, v in voices.items()}, "sounds": sounds,
                   "gains_db": m.gains_db, "channel_order": list(CHANNEL_ORDER)},
            seed=run_seed, planner=plan.planner, planner_meta=plan.planner_meta,
        )
        out = SessionOutput(record, flac_bytes(user_pcm, sr), flac_bytes(sys_pcm, sr))
        timer.add("encode", t0)
        return out
    except SessionReject as r:
        return Reject(session_id=session_id, scenario_id=seed.id, stage=r.stage, reason=r.reason, detail=r.detail)
