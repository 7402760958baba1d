"""Every LABELS.md §5 check and every reject reason of the clock and QA fires on a session that
breaks it (and stays quiet on one that does not)."""

import numpy as np
import pytest

from synth.backends.espeak import EspeakTTS
from synth.backends.tts import Voice
from synth.errors import SessionReject
from synth.rng import stream
from synth.schema.config import TimingLaws
from synth.schema.labels import HOLD, FrameLabels, Marker
from synth.schema.plan import Plan, PlannedWord, PlannedWork
from synth.schema.timeline import BackendMessage, StateTime
from synth.stages import qa
from synth.stages.label import frame_channels, frame_of, recorded_work
from synth.stages.place import place
from test_clock import build, ev, tone

SR = 16000
P = 80


def labels_of(tl, period=P) -> FrameLabels:
    ch = frame_channels(tl, period)
    n = ch["num_frames"]
    return FrameLabels(frame_period_s=period / 1000, num_frames=n, sys_action=ch["sys_action"].tolist(),
                       sys_floor=ch["sys_floor"].tolist(), usr_floor=ch["usr_floor"].tolist(),
                       sys_vad=[0] * n, usr_vad=[0] * n, markers=ch["markers"])


@pytest.fixture(scope="module")
def good():
    _, placed = build(["smooth", "barge"], 11)
    return placed.timeline


def with_work(tl, **update):
    return tl.model_copy(update={"work": [tl.work[0].model_copy(update=update)]})


def test_a_good_session_passes(good):
    assert qa.check_labels(good, labels_of(good), P, 60000) == []


def test_turn_without_take_and_release(good):
    lab = labels_of(good)
    floor = list(lab.sys_floor)
    first = floor.index(1)
    floor[first] = HOLD
    last = floor.index(3)
    floor[last] = HOLD
    bad = qa.check_labels(good, lab.model_copy(update={"sys_floor": floor}), P, 60000)
    assert any(b.startswith("turn_without_take:") for b in bad)
    assert any(b.startswith("turn_without_release:") for b in bad)
    assert "labels_differ_from_timeline:sys_floor" in bad


def test_turn_end_marker_yield_xor_eos(good):
    lab = labels_of(good)
    no_yield = [m for m in lab.markers if m.type != "yield"]
    bad = qa.check_labels(good, lab.model_copy(update={"markers": no_yield}), P, 60000)
    assert any(b.startswith("turn_end_marker:") for b in bad) and "markers_differ_from_timeline" in bad
    y = next(m for m in lab.markers if m.type == "yield")
    both = sorted(lab.markers + [Marker(frame=y.frame, type="turn_eos", ref=y.ref)],
                  key=lambda m: (m.frame, m.type, m.ref))
    assert f"turn_end_marker:{y.ref}" in qa.check_labels(good, lab.model_copy(update={"markers": both}), P, 60000)


def test_length_mismatch(good):
    lab = labels_of(good)
    assert "length_mismatch:sys_vad" in qa.check_labels(good, lab.model_copy(update={"sys_vad": [0]}), P, 60000)


def test_system_take_inside_user_floor(good):
    u = next(e for e in good.events if e.id == "u1")
    s = next(e for e in good.events if e.id == "s1")
    moved = s.model_copy(update={"on_sample": (u.on_sample + u.off_sample) // 2, "overlap_ok": False})
    tl = good.model_copy(update={"events": [moved if e.id == "s1" else e for e in good.events]})
    assert "system_take_inside_user_floor:s1" in qa.check_labels(tl, labels_of(tl), P, 60000)
    ok = tl.model_copy(update={"events": [moved.model_copy(update={"overlap_ok": True}) if e.id == "s1" else e
                                          for e in good.events]})
    assert "system_take_inside_user_floor:s1" not in qa.check_labels(ok, labels_of(ok), P, 60000)


def test_two_delegate_spans_in_one_turn(good):
    w = good.work[0]
    tl = good.model_copy(update={"work": [w, w.model_copy(update={"work_id": "w2"})]})
    assert "several_delegate_spans_in_one_turn" in qa.check_labels(tl, labels_of(tl), P, 60000)


def test_deliver_without_inject_and_after_ttl(good):
    tl = with_work(good, inject_sample=None, backend=[])
    assert "deliver_without_inject:w1" in qa.check_labels(tl, labels_of(tl), P, 60000)
    w = good.work[0]
    late = with_work(good, complete_sample=w.inject_sample - 61 * SR)
    assert "inject_after_ttl:w1" in qa.check_labels(late, labels_of(late), P, 60000)


def test_work_item_rules(good):
    w = good.work[0]
    tl = with_work(good, states=list(reversed(w.states)))
    assert "work_states:w1" in qa.check_work(tl)
    assert "stale_delivered:w1" in qa.check_work(with_work(good, stale=True))
    assert "cancelled_not_dropped:w1" in qa.check_work(with_work(good, cancel_sample=w.open_sample))
    cancelled = [StateTime(state="QUEUED", sample=1), StateTime(state="CANCELLING", sample=2),
                 StateTime(state="CANCELLED", sample=3)]
    assert qa.check_work(with_work(good, states=cancelled)) == []


@pytest.mark.parametrize("period", [20, 80, 1000])
def test_backend_frames_are_computed_from_samples(good, period):
    """The timeline holds no frames; the record's frame of a backend message and its
    ``backend_inject`` marker are both ``frame_of`` its sample at the period labelled."""
    w = good.work[0]
    note = BackendMessage(kind="progress", sample=w.open_sample + 5 * SR // 4, text="<backend>progress: x</backend>")
    tl = with_work(good, backend=[note, BackendMessage(kind="result", sample=w.inject_sample, text="y")])
    assert "frame" not in BackendMessage.model_fields
    rec = recorded_work(tl, period)[0]
    want = [frame_of(m.sample, SR, period) for m in tl.work[0].backend]
    assert [m.frame for m in rec.backend] == want == [m.sample // (SR * period // 1000) for m in tl.work[0].backend]
    assert want[0] != want[1] and rec.on_timeline() == tl.work[0]
    marks = {m.ref: m.frame for m in labels_of(tl, period).markers if m.type == "backend_inject"}
    assert marks == {"w1:progress": want[0], "w1": want[1]}


def test_vad_outside_events(good):
    n = labels_of(good).num_frames
    vad = [0] * n
    vad[-1] = 1  # the tail after the last event
    assert qa.check_vad_in_events(good, vad, ("system",), P, "sys_vad") == ["sys_vad_outside_events"]


@pytest.fixture(scope="module")
def speech():
    """Real speech (eSpeak NG) with silence around it, and its energy VAD."""
    tts = EspeakTTS({"en": "en-us", "zh": "cmn"})
    r = tts.synthesize([PlannedWord(text=w, lang="en") for w in "can you book a table for two tonight".split()],
                       Voice(variant="m3", rate_wpm=170, pitch=50, pitch_range=60), SR)
    x = np.zeros(len(r.audio) + 2 * SR, np.float32)
    x[SR : SR + len(r.audio)] = 0.3 * r.audio / np.abs(r.audio).max()
    from synth.stages.label import vad_frames

    return x, vad_frames(x, SR, P).tolist()


def test_vad_agrees_with_an_independent_detector(speech):
    x, vad = speech
    voiced, silent = qa.speech_frames(x, SR, P)
    assert voiced.sum() >= 10 and silent.sum() >= 20
    assert qa.check_vad(x, vad, SR, P, "sys_vad") == []


def test_vad_that_misses_speech_or_fires_on_silence_fails(speech):
    x, vad = speech
    assert qa.check_vad(x, [0] * len(vad), SR, P, "sys_vad") == ["sys_vad_misses_speech"]
    shifted = [0] * 8 + vad[:-8]  # labels 640 ms late: speech missed at the start, silence marked at the end
    assert set(qa.check_vad(x, shifted, SR, P, "sys_vad")) == {"sys_vad_misses_speech", "sys_vad_on_silence"}
    on_silence = list(vad)
    on_silence[0] = 1
    assert qa.check_vad(x, on_silence, SR, P, "sys_vad") == ["sys_vad_on_silence"]


def test_vad_check_at_24_khz(speech):
    from scipy.signal import resample_poly

    x, _ = speech
    y = resample_poly(x, 3, 2).astype(np.float32)
    from synth.stages.label import vad_frames

    assert qa.check_vad(y, vad_frames(y, 24000, P).tolist(), 24000, P, "sys_vad") == []


def test_clipped_channel():
    x = np.zeros(100, np.float32)
    assert qa.check_peaks({"system": x}) == []
    x[3] = -1.0
    assert qa.check_peaks({"system": x}) == ["clipped:system"]


# -- reject reasons of the clock ----------------------------------------------------------------
def plan_of(events, work=()):
    return Plan(session_id="t", scenario_id="t", language="en", planner="test", events=events, work=list(work))


def placed(plan, rendered=None):
    rendered = rendered or {e.id: tone(len(e.words)) for e in plan.events}
    return place(plan, rendered, TimingLaws(), SR, lambda name: stream(3, "t", name))


def reason(plan, rendered=None) -> str:
    with pytest.raises(SessionReject) as e:
        placed(plan, rendered)
    return e.value.reason


def test_interrupt_unplaceable():
    plan = plan_of([ev("u1", "user", "request", "take"), ev("s1", "system", "answer", "take", "responds_to", "u1", n=1),
                    ev("u2", "user", "stop", "take", "interrupts", "s1", attach_word=0)])
    assert reason(plan) == "interrupt_unplaceable"


def test_attach_word_out_of_range_in_the_rendering():
    plan = plan_of([ev("u1", "user", "request", "take"), ev("s1", "system", "answer", "take", "responds_to", "u1"),
                    ev("u2", "user", "stop", "take", "interrupts", "s1", attach_word=3)])
    rendered = {e.id: tone(len(e.words)) for e in plan.events}
    rendered["s1"] = tone(2)  # an engine that returned fewer words than it was given
    assert reason(plan, rendered) == "attach_word_out_of_range"


def work(**kw):
    return PlannedWork(work_id="w1", tool="x", objective="o", result_text="r", opened_by="s1", **kw)


def test_cancel_and_progress_before_the_work_opens():
    events = [ev("u1", "user", "request", "take"), ev("u2", "user", "cancel", "hold", "continues", "u1"),
              ev("s1", "system", "acknowledge", "take", "responds_to", "u2")]
    assert reason(plan_of(events, [work(cancelled_by="u2")])) == "cancel_before_open"
    events = [ev("u1", "user", "request", "take"), ev("s0", "system", "progress_answer", "take", "responds_to", "u1"),
              ev("u2", "user", "request", "take", "responds_to", "s0"),
              ev("s1", "system", "acknowledge", "take", "responds_to", "u2")]
    assert reason(plan_of(events, [work(progress_by="s0", progress_text="p")])) == "progress_before_open"


def test_progress_after_completion():
    """A progress question asked more than the law's 60 s after the request: the work is done."""
    events = [ev("u1", "user", "request", "take"), ev("s1", "system", "acknowledge", "take", "responds_to", "u1")]
    last = "s1"
    for i in range(10):
        events += [ev(f"uu{i}", "user", "followup", "take", "responds_to", last, n=12),
                   ev(f"ss{i}", "system", "answer", "take", "responds_to", f"uu{i}", n=12)]
        last = f"ss{i}"
    events += [ev("u9", "user", "progress_question", "take", "responds_to", last),
               ev("s9", "system", "progress_answer", "take", "responds_to", "u9")]
    assert reason(plan_of(events, [work(progress_by="s9", progress_text="p")])) == "progress_after_completion"


def test_paraling_breaking_a_plan_rule_is_a_reject(monkeypatch):
    from synth import session
    from synth.schema.config import PipelineConfig

    def broken(plan, *a):
        events = list(plan.events) + [ev("bc", "system", "backchannel", "none", "backchannels_on", "u1", n=1,
                                         attach_word=99)]
        return Plan.model_validate({**dict(plan), "events": events})

    monkeypatch.setattr(session, "decorate", broken)
    plan = plan_of([ev("u1", "user", "request", "take")])
    with pytest.raises(SessionReject) as e:
        session._decorated(plan, None, PipelineConfig(name="x", seeds=["x"]), None)
    assert e.value.reason == "plan_rule" and "'bc'" in e.value.detail


def test_missing_bank_sound_is_a_reject():
    from synth.stages import render
    from synth.schema.config import PipelineConfig

    laugh = ev("l1", "user", "laughter", "none", n=1, sound="laughter")
    with pytest.raises(SessionReject) as e:
        render._draw_sound(laugh, None, PipelineConfig(name="x", seeds=["x"]), stream(0, "x"))
    assert e.value.reason == "no_bank_sound:laughter"


def test_frame_peaks_reads_long_stems_block_by_block_as_the_padded_copy_did():
    """``frame_peaks`` (no abs or float64 copy of the stem) gives the peak |x| of every frame, the
    short last one included, exactly as a zero-padded copy would."""
    from synth.stages.qa import frame_peaks

    rng = np.random.default_rng(5)
    for length in (0, 1, 1279, 1280, 1281, 1280 * 900 + 7):
        x = (rng.standard_normal(length) * 0.1).astype(np.float32)
        if length > 2000:
            x[1280 * 3 + 5] = -0.9  # a negative peak
        n = -(-length // 1280)
        padded = np.zeros(n * 1280)
        padded[:length] = np.abs(x)
        want = padded.reshape(n, 1280).max(axis=1)
        got = frame_peaks(x, 1280, n, block=1280 * 64)
        assert np.array_equal(got, want), length
        if length > 2000:
            assert got[3] == np.float32(0.9)
