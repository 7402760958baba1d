"""One session end to end: seed -> plan -> scene -> render -> clock -> mix -> labels -> QA.

``make_session`` is a pure function of ``(config, seed, run_seed, session_id)`` and the
engines passed in; every random draw comes from ``synth.rng.stream`` under the session id.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field

import numpy as np
import soundfile as sf

from .audio import active_rms_db
from .backends.tts import Rendered, TTSEngine, Voice
from .errors import SessionReject
from .rng import stream
from .schema.common import CHANNEL_ORDER
from .schema.config import PipelineConfig
from .schema.phenomena import REGISTRY
from .schema.record import PhenomenonHit, Reject, SessionRecord
from .schema.seed import ScenarioSeed
from .stages.label import label_session
from .stages.mix import mix
from .stages.place import place
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
    """Distinct eSpeak variants per speaker, with rate and pitch drawn per speaker."""
    tts = config.tts
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


def _render(plan, voices, tts: TTSEngine, config: PipelineConfig) -> dict[str, Rendered]:
    sr = config.audio.sample_rate
    out = {}
    for ev in plan.events:
        r = tts.synthesize(list(ev.words), voices[ev.speaker], sr)
        gain = 10 ** ((config.audio.speaker_rms_dbfs - active_rms_db(r.audio, sr)) / 20)
        out[ev.id] = Rendered((r.audio * gain).astype(np.float32), sr, r.words)
    return out


def make_session(config: PipelineConfig, seed: ScenarioSeed, run_seed: int, session_id: str,
                 planner, tts: TTSEngine, timer: Timer | None = None) -> SessionOutput | Reject:
    timer = timer or Timer()
    t0 = time.perf_counter()
    try:
        plan = planner.plan(seed, session_id, stream(run_seed, session_id, "plan"))
        t0 = timer.add("plan", t0)
        scene_rng = stream(run_seed, session_id, "scene")
        speakers = sorted({e.speaker for e in plan.events})
        voices = draw_voices(config, speakers, scene_rng)
        gains = {"third_party": float(seed.environment.third_party_gain_db.sample(scene_rng))}
        rendered = _render(plan, voices, tts, config)
        t0 = timer.add("tts", t0)
        placed = place(plan, rendered, config.timing, config.audio.sample_rate,
                       lambda name: stream(run_seed, session_id, "place", name))
        tl = placed.timeline
        t0 = timer.add("clock", t0)
        m = mix(tl, placed.audio, gains, config.audio.peak_limit)
        user_pcm, sys_pcm, stem_pcm = quantize(m.user_side), quantize(m.system), quantize(m.user_stem)
        t0 = timer.add("mix", t0)
        sr, period, lab = config.audio.sample_rate, config.labels.frame_period_ms, config.labels
        labels = label_session(tl, period, sys_pcm / 32768.0, stem_pcm / 32768.0,
                               lab.vad_threshold_dbfs, lab.vad_window_ms)
        t0 = timer.add("labels", t0)
        problems = qa.check_labels(tl, labels, period, config.timing.result_ttl_ms)
        problems += qa.check_vad(sys_pcm / 32768.0, labels.sys_vad, sr, period, lab.vad_threshold_dbfs, "sys_vad")
        problems += qa.check_vad_in_events(tl, labels.sys_vad, ("system",), period, "sys_vad")
        problems += qa.check_vad_in_events(tl, labels.usr_vad, ("user",), period, "usr_vad")
        problems += qa.check_peaks({"user_side": m.user_side, "system": m.system})
        if problems:
            raise SessionReject("qa", problems[0].split(":")[0], "; ".join(problems[:5]))
        hits = [PhenomenonHit(id=p, family=REGISTRY[p].family, event_id=e.id)
                for e in tl.events for p in e.phenomena]
        record = SessionRecord(
            session_id=session_id, scenario_id=seed.id, language=seed.language, sample_rate=sr,
            num_samples=tl.num_samples, duration_s=round(tl.num_samples / sr, 6),
            channels=list(CHANNEL_ORDER), frame_rate_hz=1000 / period, frame_period_s=period / 1000,
            sys_action=labels.sys_action, sys_floor=labels.sys_floor, usr_floor=labels.usr_floor,
            sys_vad=labels.sys_vad, usr_vad=labels.usr_vad, markers=labels.markers,
            events=tl.events, delegations=tl.work, phenomena=hits,
            scene={"tts_engine": tts.name, "voices": {k: v.as_dict() for k, v in voices.items()},
                   "gains_db": {k: round(float(v), 3) for k, v in m.gains_db.items()},
                   "environment": seed.environment.kind, "channel_order": list(CHANNEL_ORDER)},
            seed=run_seed, planner=plan.planner, planner_meta=plan.planner_meta,
        )
        out = SessionOutput(record, flac_bytes(user_pcm, sr), flac_bytes(sys_pcm, sr))
        timer.add("encode", t0)
        return out
    except SessionReject as r:
        return Reject(session_id=session_id, scenario_id=seed.id, stage=r.stage, reason=r.reason, detail=r.detail)
