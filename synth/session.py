"""One session end to end: seed -> plan -> paralinguistics -> voices, scene and render choices
(the render spec) -> render -> clock -> room -> mix -> labels -> QA -> record.

``make_session`` is a pure function of ``(config, seed, run_seed, session_id)`` and the engines
passed in; every random draw comes from ``synth.rng.stream`` under the session id, and every
draw lands in the record (``scene`` and ``render_spec``). ``render_session`` makes the audio,
labels and record from a render spec and a scene; ``rerender`` does it from a written record
alone, making no draw at all.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field

import numpy as np
import soundfile as sf

from .backends.room import room_irs
from .backends.tts import TTSEngine, Voice
from .audio import quantize
from .banks.bank import Bank
from .errors import SessionReject
from .executor.heap import return_big_blocks
from .persona import system_prompt, voice_prompt_text
from .rng import stream
from .schema.common import CHANNEL_ORDER
from .schema.config import PipelineConfig
from .schema.phenomena import code_switch_hits, family_of
from .schema.plan import Plan, talker
from .schema.record import (Engines, EventRender, PhenomenonHit, Reject, RenderParams, RenderSpec, SessionRecord,
                            VoicePrompt)
from .schema.scene import Scene
from .schema.seed import ScenarioSeed
from .stages.label import label_session, recorded_work
from .stages.mix import mix
from .stages.paraling import decorate
from .stages.place import place
from .stages.render import draw_event_specs, draw_voices, render_events
from .stages.scene import draw_scene
from .stages.tape import Tape
from .stages import asr, qa


@dataclass
class SessionOutput:
    record: SessionRecord
    user_flac: bytes
    system_flac: bytes
    voice_flac: bytes = b""  # the assistant's voice prompt (render_spec.voice_prompt), b"" if none


@dataclass
class Timer:
    """Wall and CPU seconds per stage. ``t = timer.start()`` then ``t = timer.add("tts", t)``: each
    ``add`` books the time since ``t`` and returns the new start. CPU time is this process's
    (a worker runs one task at a time), so it counts onnxruntime's or torch's own threads too."""

    stages: dict[str, float] = field(default_factory=dict)
    cpu_stages: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def start() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def add(self, name: str, t0: tuple[float, float]) -> tuple[float, float]:
        now = self.start()
        self.stages[name] = self.stages.get(name, 0.0) + now[0] - t0[0]
        self.cpu_stages[name] = self.cpu_stages.get(name, 0.0) + now[1] - t0[1]
        return now


def unit(pcm: np.ndarray) -> np.ndarray:
    """int16 samples as floats in [-1, 1): float32 holds ``pcm / 32768`` exactly, at half the
    memory of float64 (a 20-minute channel is 86 MB instead of 172 MB)."""
    x = pcm.astype(np.float32)
    x *= np.float32(1 / 32768)  # in place: one float copy at a time, not two
    return x


def flac_bytes(pcm: np.ndarray, sample_rate: int) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, pcm, sample_rate, format="FLAC", subtype="PCM_16")
    return buf.getvalue()


def _decorated(plan, seed: ScenarioSeed, config: PipelineConfig, rng):
    """The paralinguistic pass; a plan it leaves breaking a plan rule is a reject naming the rule."""
    from pydantic import ValidationError

    try:
        return decorate(plan, seed, config.paralinguistics, rng)
    except ValidationError as e:
        msg = e.errors()[0]["msg"].removeprefix("Value error, ")
        raise SessionReject("paraling", "plan_rule", msg) from None


def decorated_plan(config: PipelineConfig, seed: ScenarioSeed, run_seed: int, session_id: str, planner) -> Plan:
    """The plan as it will be rendered: the planner's, after the paralinguistic pass."""
    plan = planner.plan(seed, session_id, stream(run_seed, session_id, "plan"))
    return _decorated(plan, seed, config, stream(run_seed, session_id, "paraling"))


def given_plan(text: str, seed: ScenarioSeed, session_id: str) -> Plan:
    """A plan from a plans file, validated; a bad one is a reject naming the field."""
    from pydantic import ValidationError

    try:
        plan = Plan.model_validate_json(text)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "plan"
        raise SessionReject("plan", "plan_invalid", f"{where}: {err['msg'].removeprefix('Value error, ')}") from None
    if plan.session_id != session_id or plan.scenario_id != seed.id:
        raise SessionReject("plan", "plan_invalid", f"session_id/scenario_id: {plan.session_id}/{plan.scenario_id} "
                                                    f"!= {session_id}/{seed.id}")
    return plan


def render_params(config: PipelineConfig, bank: Bank | None) -> RenderParams:
    """The settings rendering reads, from the run's config: copied into every spec."""
    return RenderParams(
        sample_rate=config.audio.sample_rate, speaker_rms_dbfs=config.audio.speaker_rms_dbfs,
        peak_limit=config.audio.peak_limit, levels_db=dict(config.paralinguistics.levels_db),
        frame_period_ms=config.labels.frame_period_ms, vad_threshold_dbfs=config.labels.vad_threshold_dbfs,
        vad_window_ms=config.labels.vad_window_ms, timing=config.timing,
        engines=Engines(tts=config.tts.model_dump(mode="json"), trim_threshold_db=config.audio.trim_threshold_db,
                        bank_digest=bank.digest if bank is not None else None))


def draw_spec(config: PipelineConfig, seed: ScenarioSeed, run_seed: int, plan: Plan,
              bank: Bank | None) -> tuple[RenderSpec, Scene]:
    """Every render-stage choice of a decorated plan: voices, scene, per-event render choices.
    The clock's draws are added to the spec when the session is placed."""
    sid = plan.session_id
    speakers = sorted({talker(e) for e in plan.events if e.speaker in ("user", "system", "third_party")})
    pools = {p.key: p.voices for p in seed.people if p.voices}
    voices = draw_voices(config, speakers, stream(run_seed, sid, "voices"), pools)
    scene = draw_scene(config, seed, plan, bank, lambda name: stream(run_seed, sid, "scene", name))
    events = draw_event_specs(plan, voices, bank, config, lambda eid: stream(run_seed, sid, "render", eid))
    spec = RenderSpec(plan=plan, voices=voices,
                      events=events, clock={}, params=render_params(config, bank), system_prompt=system_prompt(seed),
                      voice_prompt=VoicePrompt(text=voice_prompt_text(seed), voice=voices["system"])
                      if "system" in voices else None)
    return spec, scene


def make_session(config: PipelineConfig, seed: ScenarioSeed, run_seed: int, session_id: str,
                 planner, tts: TTSEngine, timer: Timer | None = None,
                 bank: Bank | None = None, plan: Plan | str | None = None) -> SessionOutput | Reject:
    """Plan and decorate (or take ``plan``, decorated: a reviewed one, or its JSON), draw the
    spec, render."""
    timer = timer or Timer()
    t0 = timer.start()
    try:
        if plan is None:
            plan = decorated_plan(config, seed, run_seed, session_id, planner)
        elif isinstance(plan, str):
            plan = given_plan(plan, seed, session_id)
        spec, scene = draw_spec(config, seed, run_seed, plan, bank)
        timer.add("plan", t0)
        return render_session(spec, scene, run_seed, tts, bank, timer,
                              lambda name: stream(run_seed, session_id, "place", name), asr_config=config.qa.asr)
    except SessionReject as r:
        return Reject(session_id=session_id, scenario_id=seed.id, stage=r.stage, reason=r.reason, detail=r.detail)


def rerender(record: SessionRecord, tts: TTSEngine, bank: Bank | None,
             config: PipelineConfig | None = None) -> SessionOutput:
    """The session of ``record`` made again from the record alone (no generator is used). A
    version-1 spec holds no params: those come from ``config``, the run's."""
    spec = record.render_spec
    if spec is None:
        raise SessionReject("render", "no_render_spec", record.session_id)
    if spec.params is None and config is None:
        raise SessionReject("render", "no_render_params", f"{record.session_id}: a version-1 record renders with "
                                                          "its run's config (run.json)")
    params = spec.params or render_params(config, bank)
    return render_session(spec, record.drawn_scene(), record.seed, tts, bank, Timer(), None, heard=record.scene.get("asr"),
                          params=params)


def render_session(spec: RenderSpec, scene: Scene, run_seed: int, tts: TTSEngine, bank: Bank | None,
                   timer: Timer, place_rng_for, heard: dict | None = None, asr_config=None,
                   params: RenderParams | None = None) -> SessionOutput:
    """Audio, labels and record of a render spec, reading no config: its settings are
    ``spec.params`` (or ``params`` for a version-1 spec). With ``place_rng_for`` None the clock
    replays ``spec.clock``; otherwise it draws and the draws are written into the record's spec.
    The ASR gate runs when ``asr_config`` (``qa.asr``) enables it and ``heard`` (a record's
    ``scene.asr``) is not given: a re-render from a record renders the voices the gate kept,
    which the spec holds."""
    t0 = timer.start()
    return_big_blocks()  # freed event audio and tracks go back to the kernel (synth/executor/heap.py)
    rp = params or spec.params
    plan = spec.plan
    sr, period = rp.sample_rate, rp.frame_period_ms
    rendered = render_events(plan, spec.events, tts, bank, rp)
    t0 = timer.add("tts", t0)
    if heard is None:
        rendered, heard, spec = _asr_gate(asr_config, rp, plan, spec, rendered, tts, bank)
        t0 = timer.add("asr", t0)
    tape = Tape(spec.clock if place_rng_for is None else None)
    placed = place(plan, rendered, rp.timing, sr, place_rng_for, tape)
    tl = placed.timeline
    t0 = timer.add("clock", t0)
    irs = room_irs(scene.room, sr) if scene.room is not None else {}
    t0 = timer.add("room", t0)
    audio, clock = placed.audio, placed.tape.values
    del placed, rendered  # the events' audio lives on in ``audio`` only, which the mix empties into tracks
    m = mix(tl, audio, scene, irs, bank, rp.peak_limit, consume=True)
    gains_db, person_pcm = m.gains_db, m.person_stems  # each person's stem as written (int16)
    floats = [m.user_side, m.system, m.user_stem]
    del m, audio  # each float track (twice its int16 channel) ends as soon as it is quantized
    user_pcm, sys_pcm, stem_pcm = (quantize(floats.pop(0)) for _ in range(3))
    t0 = timer.add("mix", t0)
    sys_x, stem_x = unit(sys_pcm), unit(stem_pcm)
    labels = label_session(tl, period, sys_x, stem_x, rp.vad_threshold_dbfs, rp.vad_window_ms, person_pcm)
    t0 = timer.add("labels", t0)
    _check(rp, tl, labels, unit(user_pcm), sys_x, stem_x, plan.planner_meta, person_pcm)
    del person_pcm
    del sys_x, stem_x
    hits = [PhenomenonHit(id=p, family=family_of(p), event_id=e.id) for e in tl.events for p in e.phenomena]
    hits += [PhenomenonHit(id=p, family=family_of(p), event_id=eid)
             for p, eid in code_switch_hits(sorted(tl.events, key=lambda e: (e.on_sample, e.id)))]
    sounds = {eid: {k: getattr(e.sound, k) for k in ("bank", "path", "category", "licence")}
              for eid, e in spec.events.items() if e.sound is not None}
    record = SessionRecord(
        session_id=plan.session_id, scenario_id=plan.scenario_id, language=plan.language, sample_rate=sr,
        num_samples=tl.num_samples, duration_s=round(tl.num_samples / sr, 6),
        channels=list(CHANNEL_ORDER), frame_rate_hz=1000 / period, frame_period_s=period / 1000,
        sys_action=labels.sys_action, sys_floor=labels.sys_floor, usr_floor=labels.usr_floor,
        sys_vad=labels.sys_vad, usr_vad=labels.usr_vad, markers=labels.markers,
        events=tl.events, delegations=recorded_work(tl, period), phenomena=hits,
        scene={**scene.model_dump(mode="json"), "tts_engine": tts.name, "word_timing": tts.word_timing,
               "voices": {k: v.as_dict() for k, v in spec.voices.items()}, "sounds": sounds, "gains_db": gains_db,
               "channel_order": list(CHANNEL_ORDER), **({"asr": heard} if heard else {})},
        seed=run_seed, planner=plan.planner, planner_meta=plan.planner_meta,
        render_spec=spec.model_copy(update={"clock": clock}), system_prompt=spec.system_prompt,
        addressed=labels.addressed, person_vad=labels.person_vad,
    )
    user_flac, sys_flac = flac_bytes(user_pcm, sr), flac_bytes(sys_pcm, sr)
    t0 = timer.add("encode", t0)
    voice_flac = _voice_prompt(spec, tts, rp)  # synthesis: counted as TTS, not as encoding
    timer.add("tts", t0)
    return SessionOutput(record, user_flac, sys_flac, voice_flac)


def _voice_prompt(spec: RenderSpec, tts: TTSEngine, params: RenderParams) -> bytes:
    """The voice prompt's FLAC: its text in the system voice at the speaker level, apart from the
    session's clock and channels (no draws)."""
    from .audio import gain_to_level
    from .text import tokenize

    vp = spec.voice_prompt
    if vp is None:
        return b""
    sr = params.sample_rate
    r = tts.synthesize(tokenize(vp.text), vp.voice, sr)
    gain = gain_to_level(r.audio, sr, params.speaker_rms_dbfs)
    return flac_bytes(quantize((r.audio * gain).astype(np.float32)), sr)


def _asr_gate(asr_config, params: RenderParams, plan: Plan, spec: RenderSpec, rendered: dict, tts: TTSEngine,
              bank: Bank | None) -> tuple[dict, dict, RenderSpec]:
    """The optional ASR round trip (``stages.asr``, ``asr_config`` = ``qa.asr``); an event it
    re-rendered keeps its new voice in the spec, so ``synth render`` makes the kept audio."""
    if asr_config is None or not asr_config.enabled:
        return rendered, {}, spec
    voices = spec.voices
    made: dict[int, tuple[str, Voice]] = {}

    def render_one(ev, voice: Voice):
        one = EventRender(voice=voice, prolong_samples=spec.events[ev.id].prolong_samples)
        r = render_events(plan.model_copy(update={"events": [ev]}), {ev.id: one},
                          tts, bank, params)[ev.id]
        made[id(r)] = (ev.id, voice)
        return r

    out, heard = asr.gate(asr_config, plan, rendered, voices, render_one)
    events = dict(spec.events)
    for r in out.values():
        if id(r) in made:
            eid, voice = made[id(r)]
            events[eid] = events[eid].model_copy(update={"voice": voice})
    return out, heard, spec.model_copy(update={"events": events})


def _check(params: RenderParams, tl, labels, user_x, sys_x, stem_x, planner_meta: dict | None = None,
           person_pcm: dict | None = None) -> None:
    """QA: label rules and audio/label agreement (on the written channels, as ``unit`` floats;
    a group's ``person_vad`` on each person's stem as written, one at a time); the first problem
    is the reject reason."""
    sr, period = params.sample_rate, params.frame_period_ms
    problems = qa.check_labels(tl, labels, period, params.timing.result_ttl_ms)
    problems += qa.check_group(tl, labels, period)
    problems += qa.check_long_range(tl, planner_meta or {})
    problems += qa.check_vad(sys_x, labels.sys_vad, sr, period, "sys_vad")
    problems += qa.check_vad(stem_x, labels.usr_vad, sr, period, "usr_vad")
    for p, x in sorted((person_pcm or {}).items()):
        problems += qa.check_vad(unit(x), labels.person_vad[p], sr, period, f"person_vad.{p}")
    problems += qa.check_vad_in_events(tl, labels.sys_vad, ("system",), period, "sys_vad")
    problems += qa.check_vad_in_events(tl, labels.usr_vad, ("user",), period, "usr_vad")
    problems += qa.check_peaks({"user_side": user_x, "system": sys_x})
    problems = qa.check_silent({"user_side": user_x, "system": sys_x}) + problems
    if problems:
        raise SessionReject("qa", problems[0].split(":")[0], "; ".join(problems[:5]))
