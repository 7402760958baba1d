"""Clock placement and label invariants on synthetic rendered audio (unit tests of the clock)."""

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from synth.backends.tts import Rendered, WordTime
from synth.rng import stream
from synth.schema.config import TimingLaws
from synth.schema.plan import Plan, PlannedEvent, PlannedWork, PlannedWord
from synth.stages import qa
from synth.stages.label import frame_channels, turns_of
from synth.stages.place import place

SR = 16000


def tone(n_words: int) -> Rendered:
    """A synthetic utterance: 300 ms tone bursts per word with 60 ms gaps."""
    words, chunks, t = [], [], 0
    for i in range(n_words):
        burst = 0.1 * np.sin(np.arange(4800) * 2 * np.pi * 220 / SR).astype(np.float32)
        chunks += [burst, np.zeros(960, np.float32)]
        words.append(WordTime(f"w{i}", "en", t, t + 4800))
        t += 4800 + 960
    return Rendered(np.concatenate(chunks)[:-960], SR, tuple(words))


def ev(id, speaker, act, floor, relation=None, attach=None, n=4, **kw):
    return PlannedEvent(id=id, speaker=speaker, act=act, floor_intent=floor, relation=relation,
                        attach_to=attach, words=[PlannedWord(text=f"w{i}", lang="en") for i in range(n)], **kw)


def build(kinds: list[str], seed: int):
    events = [ev("u1", "user", "request", "take")]
    last, nu, ns = "u1", 1, 0
    for k in kinds:
        ns += 1
        s = ev(f"s{ns}", "system", "answer", "take", "responds_to", last, n=12)
        events.append(s)
        last = s.id
        if k in ("backchannel", "barge"):
            nu += 1
            events.append(ev(f"u{nu}", "user", "backchannel", "none", "backchannels_on", s.id, n=1, attach_word=3))
        if k == "barge":
            nu += 1
            events.append(ev(f"u{nu}", "user", "correction", "take", "interrupts", s.id, attach_word=8))
            last = f"u{nu}"
            continue
        nu += 1
        events.append(ev(f"u{nu}", "user", "followup", "take", "responds_to", last))
        if k == "pause":
            nu += 1
            events.append(ev(f"u{nu}", "user", "followup", "hold", "continues", f"u{nu - 1}", pause_before="long"))
        last = f"u{nu}"
    events.append(ev("s99", "system", "acknowledge", "take", "responds_to", last))
    events.append(ev("s100", "system", "deliver_result", "take", "delivers_result_of", "w1", work_id="w1"))
    plan = Plan(session_id="t", scenario_id="t", language="en", planner="test", events=events,
                work=[PlannedWork(work_id="w1", tool="x", objective="o", result_text="r", opened_by="s99")])
    rendered = {e.id: tone(len(e.words)) for e in events}
    return plan, place(plan, rendered, TimingLaws(), SR, lambda name: stream(seed, "t", name))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["smooth", "backchannel", "barge", "pause"]), min_size=1, max_size=6),
       st.integers(0, 10**6), st.sampled_from([20, 40, 80, 1000]))
def test_timeline_invariants(kinds, seed, period):
    plan, placed = build(kinds, seed)
    tl = placed.timeline
    by_id = {e.id: e for e in tl.events}
    # one speaker never overlaps itself
    for spk in ("user", "system"):
        spans = sorted((e.on_sample, e.off_sample) for e in tl.events if e.speaker == spk)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    for e in tl.events:
        assert e.off_sample <= tl.num_samples
        assert all(e.on_sample <= w.on_sample <= w.off_sample <= e.off_sample for w in e.words)
        if e.relation == "interrupts":
            target = by_id[e.attach_to]
            assert target.completion == "interrupted"
            latency_ms = (target.off_sample - e.on_sample) * 1000 / SR
            assert 0 < latency_ms <= 1200 + 1  # within the stop-latency bound
            assert target.text_after_cut  # the unspoken remainder is kept
        if e.relation == "backchannels_on":
            target = by_id[e.attach_to]
            assert target.on_sample + 0.7 * SR <= e.on_sample and e.off_sample <= target.off_sample
        if e.relation == "responds_to" and e.speaker == "system" and not e.overlap_ok:
            assert e.on_sample > by_id[e.attach_to].off_sample
    w = tl.work[0]
    ack = by_id["s99"]
    assert w.open_sample == ack.off_sample and w.close_sample > w.open_sample
    assert w.inject_sample >= w.complete_sample > w.close_sample
    assert w.deliver_sample > w.inject_sample
    ch = frame_channels(tl, period)
    from synth.schema.labels import FrameLabels

    labels = FrameLabels(frame_period_s=period / 1000, num_frames=ch["num_frames"],
                         sys_action=ch["sys_action"].tolist(), sys_floor=ch["sys_floor"].tolist(),
                         usr_floor=ch["usr_floor"].tolist(), sys_vad=[0] * ch["num_frames"],
                         usr_vad=[0] * ch["num_frames"], markers=ch["markers"])
    assert qa.check_labels(tl, labels, period, 60000) == []
    # every system turn ends with exactly one of turn_eos / yield
    ends = [m for m in ch["markers"] if m.type in ("turn_eos", "yield")]
    assert len(ends) == len(turns_of(tl, "system"))


def test_pause_keeps_one_user_turn_and_no_system_take_inside():
    plan, placed = build(["pause"], 3)
    tl = placed.timeline
    users = turns_of(tl, "user")
    assert [len(t.events) for t in users] == [1, 2]
    gap_ms = (users[1].events[1].on_sample - users[1].events[0].off_sample) * 1000 / SR
    assert 800 <= gap_ms <= 4000  # long mid-turn pause law
    ch = frame_channels(tl, 80)
    first, last = users[1].on // 1280, (users[1].off - 1) // 1280
    assert ch["usr_floor"][first] == 1 and ch["usr_floor"][last] == 3
    assert not any(ch["sys_floor"][first + 1 : last] == 1)


def test_labels_flag_a_system_take_inside_a_user_turn():
    plan, placed = build(["smooth"], 5)
    tl = placed.timeline
    s1 = next(e for e in tl.events if e.id == "s1")
    u1 = next(e for e in tl.events if e.id == "u1")
    bad = s1.model_copy(update={"on_sample": (u1.on_sample + u1.off_sample) // 2, "overlap_ok": False})
    tl2 = tl.model_copy(update={"events": [bad if e.id == "s1" else e for e in tl.events]})
    ch = frame_channels(tl2, 80)
    from synth.schema.labels import FrameLabels

    labels = FrameLabels(frame_period_s=0.08, num_frames=ch["num_frames"], sys_action=ch["sys_action"].tolist(),
                         sys_floor=ch["sys_floor"].tolist(), usr_floor=ch["usr_floor"].tolist(),
                         sys_vad=[0] * ch["num_frames"], usr_vad=[0] * ch["num_frames"], markers=ch["markers"])
    assert "system_take_inside_user_floor:s1" in qa.check_labels(tl2, labels, 80, 60000)


def _plan(events, work=()):
    return Plan(session_id="t", scenario_id="t", language="en", planner="test", events=events, work=list(work))


def _place(plan, seed=1):
    rendered = {e.id: tone(len(e.words)) for e in plan.events}
    return place(plan, rendered, TimingLaws(), SR, lambda name: stream(seed, "t", name))


def test_reply_after_a_barge_in_follows_the_interrupting_turn():
    """The cut system event's spoken end is the system's last sound, not its planned end."""
    for seed in range(20):
        plan = _plan([ev("u1", "user", "request", "take"),
                      ev("s1", "system", "answer", "take", "responds_to", "u1", n=40),
                      ev("u2", "user", "correction", "take", "interrupts", "s1", n=3, attach_word=5),
                      ev("s2", "system", "answer", "take", "responds_to", "u2")])
        placed = _place(plan, seed)
        by = {e.id: e for e in placed.timeline.events}
        assert by["s1"].completion == "interrupted"
        gap_ms = (by["s2"].on_sample - by["u2"].off_sample) * 1000 / SR
        assert by["s2"].on_sample >= by["s1"].off_sample + SR // 20
        assert -200 <= gap_ms < 1500  # the planned end of s1 is ~10 s later
        d = next(d for d in placed.draws if d.event_id == "s2")
        assert d.anchor == by["u2"].off_sample and d.quantity == "system_gap"


def test_cut_acknowledgement_moves_its_delegation():
    plan = _plan([ev("u1", "user", "request", "take"),
                  ev("s1", "system", "acknowledge", "take", "responds_to", "u1", n=20),
                  ev("u2", "user", "followup", "take", "interrupts", "s1", n=3, attach_word=4),
                  ev("s2", "system", "deliver_result", "take", "delivers_result_of", "w1", work_id="w1")],
                 [PlannedWork(work_id="w1", tool="x", objective="o", result_text="r", opened_by="s1")])
    tl = _place(plan).timeline
    s1 = next(e for e in tl.events if e.id == "s1")
    w = tl.work[0]
    assert s1.completion == "interrupted" and w.open_sample == s1.off_sample
    assert w.complete_sample - w.open_sample >= 500 * SR // 1000  # completion = open + tool latency (R6)


def test_result_older_than_its_ttl_is_dropped_not_delivered():
    """R6: more than a minute of talk between the result and its delivery: stale_drop, no reject."""
    events = [ev("u1", "user", "request", "take"), ev("s1", "system", "acknowledge", "take", "responds_to", "u1")]
    last = "s1"
    for i in range(10):  # ~90 s of talk, past the tool-latency law's 60 s bound
        events += [ev(f"uu{i}", "user", "followup", "take", "responds_to", last, n=12),
                   ev(f"ss{i}", "system", "answer", "take", "responds_to", f"uu{i}", n=12)]
        last = f"ss{i}"
    events += [ev("s9", "system", "deliver_result", "take", "delivers_result_of", "w1", work_id="w1"),
               ev("u9", "user", "thanks", "take", "responds_to", "s9")]
    plan = _plan(events, [PlannedWork(work_id="w1", tool="x", objective="o", result_text="r", opened_by="s1")])
    placed = _place(plan)
    tl = placed.timeline
    w = tl.work[0]
    assert w.stale and w.deliver_sample is None and w.inject_sample is None
    assert w.drop_sample == w.complete_sample + 60 * SR
    assert [s.state for s in w.states] == ["QUEUED", "RUNNING", "COMPLETED"]
    assert "s9" in placed.dropped and "s9" not in {e.id for e in tl.events}
    u9 = next(e for e in tl.events if e.id == "u9")  # what answered the delivery follows the talk before it
    assert u9.on_sample > max(e.off_sample for e in tl.events if e.id != "u9") - SR
    ch = frame_channels(tl, 80)
    assert ("stale_drop", "w1") in {(m.type, m.ref) for m in ch["markers"]}
    assert not any(m.type in ("deliver_start", "backend_inject") for m in ch["markers"])
    assert qa.check_labels(tl, _labels(ch, 80), 80, 60000) == []


def _labels(ch, period):
    from synth.schema.labels import FrameLabels

    n = ch["num_frames"]
    return FrameLabels(frame_period_s=period / 1000, num_frames=n, sys_action=ch["sys_action"].tolist(),
                       sys_floor=ch["sys_floor"].tolist(), usr_floor=ch["usr_floor"].tolist(),
                       sys_vad=[0] * n, usr_vad=[0] * n, markers=ch["markers"])


def test_backchannel_on_a_short_answer_is_moved_or_dropped_not_rejected():
    """make demo's case: an answer too short for its planned backchannel."""
    for n_words, seed in [(2, 0), (3, 1), (4, 2), (6, 3)]:
        plan = _plan([ev("u1", "user", "request", "take"),
                      ev("s1", "system", "answer", "take", "responds_to", "u1", n=n_words),
                      ev("u2", "user", "backchannel", "none", "backchannels_on", "s1", n=1, attach_word=1),
                      ev("u3", "user", "followup", "take", "responds_to", "s1")])
        placed = _place(plan, seed)
        by = {e.id: e for e in placed.timeline.events}
        if "u2" in placed.dropped:
            assert "u2" not in by and n_words <= 3
        else:
            assert by["u2"].on_sample >= by["s1"].on_sample + 7 * SR // 10
            assert by["u2"].off_sample <= by["s1"].off_sample


def test_backchannels_keep_800_ms_apart():
    plan = _plan([ev("u1", "user", "request", "take"),
                  ev("s1", "system", "answer", "take", "responds_to", "u1", n=12),
                  ev("u2", "user", "backchannel", "none", "backchannels_on", "s1", n=1, attach_word=3),
                  ev("u3", "user", "backchannel", "none", "backchannels_on", "s1", n=1, attach_word=3)])
    by = {e.id: e for e in _place(plan).timeline.events}
    assert by["u3"].on_sample - by["u2"].off_sample >= 8 * SR // 10


@pytest.mark.parametrize("events, needle", [
    ([ev("u1", "user", "request", "take"), ev("s1", "system", "answer", "take", "responds_to", "u1"),
      ev("u2", "user", "backchannel", "none", "backchannels_on", "s1", n=1, attach_word=4)],
     "event 'u2': attach_word 4 is out of range for 's1', which has 4 words"),
    ([ev("u1", "user", "request", "take"),
      ev("s1", "system", "answer", "take", "responds_to", "u1", attach_word=0)], "event 's1': attach_word is only"),
    ([ev("u1", "user", "request", "take"), ev("s1", "system", "answer", "take", "responds_to", "u1"),
      ev("s2", "system", "answer", "hold", "continues", "s1"),
      ev("u2", "user", "stop", "take", "interrupts", "s1", attach_word=1)],
     "event 'u2' interrupts 's1', which 's2' continues"),
    ([ev("u1", "user", "request", "take"), ev("s1", "system", "opening", "take"),
      ev("u2", "user", "more", "hold", "continues", "u1")],
     "event 'u2' continues 'u1', but 's1' of another speaker takes the floor in between"),
    ([ev("u1", "user", "request", "take"), ev("s1", "system", "answer", "hold", "continues", "u1")],
     "event 's1' (system) continues 'u1' (user)"),
    ([ev("u1", "user", "request", "take"), ev("s1", "system", "answer", "take", "responds_to", "u1"),
      ev("u2", "user", "stop", "take", "interrupts", "s1", attach_word=1),
      ev("u3", "user", "stop", "take", "interrupts", "s1", attach_word=2)],
     "event 'u3' interrupts 's1', already interrupted by 'u2'"),
    ([ev("u1", "user", "request", "take"), ev("s1", "system", "answer", "take", "responds_to", "u1"),
      ev("u2", "user", "thanks", "take", "responds_to", "s1"),
      ev("u3", "user", "stop", "take", "interrupts", "s1", attach_word=2)],
     "event 'u3' interrupts 's1' after 'u2' already responded to its end"),
])
def test_plan_rules_refuse_with_the_event_id(events, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        _plan(events)


def test_system_never_takes_the_floor_inside_a_user_turn():
    """R5 for a plan the rules accept: the user speaks again (u1) before the system answers u0."""
    for seed in range(10):
        plan = _plan([ev("u0", "user", "request", "take", n=2), ev("u1", "user", "more", "take", n=12),
                      ev("s1", "system", "answer", "take", "responds_to", "u0")])
        tl = _place(plan, seed).timeline
        by = {e.id: e for e in tl.events}
        s1, u1 = by["s1"], by["u1"]
        assert not (u1.on_sample < s1.on_sample < u1.off_sample) or s1.overlap_ok
        assert qa.check_labels(tl, _labels(frame_channels(tl, 80), 80), 80, 60000) == []
