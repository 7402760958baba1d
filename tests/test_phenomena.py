"""Every phenomenon of LABELS.md §4: plan, render (eSpeak), place, label, and check the expected
system behaviour on the frame labels and markers (issue 4).

Each phenomenon gets one short session (two exchanges, no room, no noise) from a seed that asks
for it alone; sessions are made once and shared between the checks.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from synth.backends.espeak import EspeakTTS
from synth.backends.frames import common_content
from synth.backends.scripted_planner import ScriptedPlanner
from synth.text import tokenize
from synth.banks.bank import load_bank
from synth.banks.generate import build_bank
from synth.errors import UserError
from synth.io.config_files import load_seed
from synth.rng import stream
from synth.schema.config import ParalinguisticsConfig, PipelineConfig
from synth.schema.dist import Fixed
from synth.schema.labels import DELEGATE, HOLD, LISTEN, NOT_HOLD, RELEASE, TAKE
from synth.schema.phenomena import CODE_SWITCH, FAMILIES, REGISTRY, code_switch_hits, resolve_rates
from synth.schema.record import SessionRecord
from synth.session import SessionOutput, make_session
from synth.stages.label import turns_of
from synth.stages.paraling import PHENOMENON_OF, decorate

ROOT = Path(__file__).resolve().parents[1]

SR, P = 16000, 1280  # 80 ms frames
MS = SR // 1000
PARALING = set(PHENOMENON_OF.values())
SOUNDS = {"laughter", "breath_sigh", "cough", "background_media"}
# what each phenomenon needs beside itself, and the paralinguistic rates that make it certain
NEEDS = {
    "user_to_third_party": ["third_party_to_user", "readdress_after_side_talk"],
    "third_party_to_user": ["user_to_third_party", "readdress_after_side_talk"],
    "readdress_after_side_talk": ["user_to_third_party", "third_party_to_user"],
    "silence_after_system_question": ["system_question_back"],
    "continue_while_working": ["delegate_with_ack"], "result_at_silence_gap": ["delegate_with_ack"],
    "result_deferred": ["delegate_with_ack", "continue_while_working"],
    "stale_result_dropped": ["delegate_with_ack"], "progress_question": ["delegate_with_ack"],
    "system_backchannel": ["phrase_boundary_pause"],
}
BOOST = {
    "laughter": {"laughter_per_min": Fixed(value=8)}, "cough": {"cough_per_min": Fixed(value=20)},
    "breath_sigh": {"breath_per_turn": 1.0}, "background_media": {"media_per_session": 1.0},
    "thinking_sounds": {"thinking_sound_per_turn": 1.0, "false_start_per_turn": 0, "self_repair_per_turn": 0},
    "false_start": {"false_start_per_turn": 1.0}, "self_repair": {"self_repair_per_turn": 1.0,
                                                                   "false_start_per_turn": 0},
    "repetition_prolongation": {"repetition_per_turn": 1.0},
}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("bank") / "generated"
    build_bank(d)
    return {"bank": load_bank([d]), "tts": EspeakTTS({"en": "en-us", "zh": "cmn"})}


def seed_for(pid: str, lang: str = "en"):
    base = load_seed(ROOT / "scenario_seeds" / f"smart-home-{lang}.yaml")
    rates = {p: 0.0 for p in REGISTRY}
    rates.update({"smooth_exchange": 1.0, pid: 1.0, **{n: 1.0 for n in NEEDS.get(pid, [])}})
    if pid == "result_deferred":
        rates["user_to_third_party"] = 0.0
    return base.model_copy(update={"phenomena": rates, "exchanges": Fixed(value=2)})


def config_for(pid: str) -> PipelineConfig:
    cfg = PipelineConfig(name="ph", seeds=["x"])
    timing = {}
    if pid == "result_deferred":  # the result comes back while the user is still asking the follow-up
        timing = {"tool_latency_ms": Fixed(value=1200)}
    if pid == "result_at_silence_gap":
        timing = {"tool_latency_ms": Fixed(value=6000)}
    return cfg.model_copy(update={
        "acoustics": cfg.acoustics.model_copy(update={"room": False, "noise": False}),
        "paralinguistics": ParalinguisticsConfig(**BOOST.get(pid, {})),
        "timing": cfg.timing.model_copy(update=timing)})


def planned_tags(seed, cfg, sid: str) -> set[str]:
    plan = ScriptedPlanner().plan(seed, sid, stream(1, sid, "plan"))
    plan = decorate(plan, seed, cfg.paralinguistics, stream(1, sid, "paraling"))
    tags = {p for e in plan.events for p in e.phenomena}
    if any(e.gap_kind == "early" for e in plan.events):
        tags.add("latched_start")
    if plan.work:
        tags.add("result_deferred")  # decided by the clock
    return tags


@lru_cache(maxsize=None)
def _session(pid: str, lang: str, bank, tts) -> tuple[SessionRecord, list[str]]:
    seed, cfg = seed_for(pid, lang), config_for(pid)
    for k in range(60):
        sid = f"ph-{pid.replace('_', '-')}-{lang}-{k}"
        if pid not in planned_tags(seed, cfg, sid):
            continue
        out = make_session(cfg, seed, 1, sid, ScriptedPlanner(), tts, bank=bank)
        assert isinstance(out, SessionOutput), f"{sid} rejected: {out.reason} {out.detail}"
        hits = [h.event_id for h in out.record.phenomena if h.id == pid]
        if hits:
            return out.record, hits
    raise AssertionError(f"no session with {pid} in 60 tries")


def session(env, pid, lang="en"):
    return _session(pid, lang, env["bank"], env["tts"])


# -- helpers on a written record ----------------------------------------------------------------
class View:
    def __init__(self, rec: SessionRecord):
        self.rec = rec
        self.ev = {e.id: e for e in rec.events}
        tl = rec.timeline()
        self.sys_turns, self.usr_turns = turns_of(tl, "system"), turns_of(tl, "user")

    def frames(self, e) -> range:
        return range(e.on_sample // P, (e.off_sample - 1) // P + 1)

    def markers(self, type_: str, ref: str | None = None) -> list[int]:
        return [m.frame for m in self.rec.markers if m.type == type_ and (ref is None or m.ref == ref)]

    def sys_turn_of(self, eid: str):
        return next(t for t in self.sys_turns if any(e.id == eid for e in t.events))

    def usr_turn_of(self, eid: str):
        return next(t for t in self.usr_turns if any(e.id == eid for e in t.events))

    def sys_takes(self) -> list[int]:
        return [k for k, v in enumerate(self.rec.sys_floor) if v == TAKE]

    def next_sys_turn(self, after_sample: int):
        later = [t for t in self.sys_turns if t.on >= after_sample]
        return min(later, key=lambda t: t.on) if later else None

    def audible(self):
        return [e for e in self.rec.events if e.speaker in ("user", "system", "third_party")]


def keeps_listening(v: View, eid: str) -> None:
    """No system TAKE inside the user's turn (the last 3 frames may hold a latched start)."""
    turn = v.usr_turn_of(eid)
    first, last = turn.on // P, (turn.off - 1) // P
    assert v.rec.usr_floor[first] == TAKE and v.rec.usr_floor[last] == RELEASE
    assert not [k for k in v.sys_takes() if first < k < last - 3], "system took the floor inside the user turn"
    for a, b in zip(turn.events, turn.events[1:]):  # the user holds the floor across its pauses
        gap = range(a.off_sample // P + 1, b.on_sample // P)
        assert all(v.rec.usr_floor[k] == HOLD for k in gap)
    return turn


def pause_before_ms(turn, eid: str) -> float:
    i = next(i for i, e in enumerate(turn.events) if e.id == eid)
    return (turn.events[i].on_sample - turn.events[i - 1].off_sample) / MS


def yields_to(v: View, user_ev) -> None:
    """The system turn cut by ``user_ev`` yields within the stop latency; the next one waits."""
    target = v.ev[user_ev.attach_to]
    turn = v.sys_turn_of(target.id)
    assert target.completion == "interrupted" and target.text_after_cut
    assert v.markers("yield", turn.last_id) == [(turn.off - 1) // P]
    assert not v.markers("turn_eos", turn.last_id)
    latency_ms = (target.off_sample - user_ev.on_sample) / MS
    assert 0 < latency_ms <= 1200 + 1, latency_ms
    user_turn = v.usr_turn_of(user_ev.id)
    nxt = v.next_sys_turn(target.off_sample + 1)
    if nxt is not None:
        assert nxt.on >= user_turn.off or nxt.overlap_ok
    return nxt


def floor_unchanged(v: View, bc, system_turn) -> None:
    """A non-floor sound during a system turn: no yield, HOLD under it, the user never takes."""
    assert v.markers("turn_eos", system_turn.last_id) and not v.markers("yield", system_turn.last_id)
    inner = range(system_turn.on // P + 1, (system_turn.off - 1) // P)
    under = [k for k in v.frames(bc) if k in inner]
    assert all(v.rec.sys_floor[k] == HOLD for k in under)
    # the sound never starts a user floor: frames of it outside the user's own turns are NOT_HOLD
    user = {k for t in v.usr_turns for k in range(t.on // P, (t.off - 1) // P + 1)}
    assert all(v.rec.usr_floor[k] == NOT_HOLD for k in v.frames(bc) if k not in user)


# -- the checks, one per phenomenon ---------------------------------------------------------------
def check_smooth_exchange(v, e):
    u = v.ev[e.attach_to]
    assert u.speaker in ("user", "system")
    if not e.overlap_ok:
        assert e.on_sample > u.off_sample
    turn = v.sys_turn_of(e.id)
    assert v.rec.sys_floor[turn.on // P] == TAKE
    assert len(v.markers("turn_eos", turn.last_id)) + len(v.markers("yield", turn.last_id)) == 1


def check_latched_start(v, e):
    u = v.ev[e.attach_to]
    assert e.overlap_ok and u.speaker == "user"
    early_ms = (u.off_sample - e.on_sample) / MS
    assert 0 <= early_ms <= 200 + 1
    assert e.on_sample >= u.words[-1].on_sample  # inside the last word
    assert v.rec.sys_floor[e.on_sample // P] == TAKE


def check_dispreferred_answer(v, e):
    prefixes = {w.text for lang in ("en", "zh", "en-zh") for p in common_content()[lang]["dispreferred_prefix"]
                for w in tokenize(p)}
    assert e.words[0].word in prefixes
    assert e.on_sample > v.ev[e.attach_to].off_sample


def check_system_question_back(v, e):
    assert e.text[-1] in "?？" and v.markers("turn_eos", e.id)
    answer = next(x for x in v.rec.events if x.attach_to == e.id and x.speaker == "user")
    turn = v.usr_turn_of(answer.id)
    assert not [k for k in v.sys_takes() if (e.off_sample - 1) // P < k < turn.off // P]


def check_proactive_opening(v, e):
    assert v.rec.events[0].id == e.id and e.speaker == "system" and e.relation is None
    first_user = min(k for k, x in enumerate(v.rec.usr_floor) if x == TAKE)
    assert v.sys_takes()[0] < first_user and v.markers("turn_eos", e.id)


def check_closing_sequence(v, e):
    assert v.sys_turns[-1].last_id == e.id and v.markers("turn_eos", e.id)
    assert all(t.on < e.on_sample for t in v.usr_turns)


def check_pause(v, e, low_ms):
    turn = keeps_listening(v, e.id)
    assert len(turn.events) >= 2 and pause_before_ms(turn, e.id) >= low_ms - 1


def check_list_dictation(v, e):
    turn = keeps_listening(v, e.id)
    assert len(turn.events) >= 3


def check_silence_after_system_question(v, e):
    q = v.ev[e.attach_to]
    assert q.act == "question_back" and (e.on_sample - q.off_sample) / MS >= 800 - 1
    assert not [k for k in v.sys_takes() if (q.off_sample - 1) // P < k <= e.on_sample // P]
    assert v.markers("turn_eos", q.id)


def check_interrupt(v, e):
    nxt = yields_to(v, e)
    assert nxt is not None and nxt.events[0].attach_to == e.id


def check_stop_command(v, e):
    yields_to(v, e)
    replies = [x for x in v.rec.events if x.attach_to == e.id and x.speaker == "system"]
    assert not replies
    later_user = [t.on for t in v.usr_turns if t.on > e.off_sample]
    quiet_until = min(later_user) if later_user else v.rec.num_samples
    assert not [x for x in v.rec.events if x.speaker == "system" and e.off_sample < x.on_sample < quiet_until]


def check_repeat_request(v, e):
    target = v.ev[e.attach_to]
    nxt = yields_to(v, e)
    assert nxt.events[0].act == "repeat"
    said = nxt.events[0].text
    assert said.startswith(target.text.rstrip(",.，。")[:10]) and len(said) >= len(target.text)


def check_simultaneous_start(v, e):
    target = v.ev[e.attach_to]
    assert abs(e.on_sample - target.on_sample) / MS <= 200 + 50
    nxt = yields_to(v, e)
    assert nxt is not None


def check_backchannel(v, e):
    target = v.ev[e.attach_to]
    assert e.floor_intent == "none" and target.speaker == "system"
    floor_unchanged(v, e, v.sys_turn_of(target.id))
    assert any(v.rec.usr_vad[k] for k in v.frames(e))


def check_cooperative_completion(v, e):
    turn = v.sys_turn_of(e.attach_to)
    assert len(turn.events) == 2 and e.on_sample < turn.off  # the system keeps speaking past it
    floor_unchanged(v, e, turn)


def check_question_backchannel(v, e):
    assert v.rec.usr_floor[e.on_sample // P] == TAKE  # the one backchannel that takes a turn
    reply = next(x for x in v.rec.events if x.attach_to == e.id and x.speaker == "system")
    assert reply.act == "brief_reply" and len(reply.words) <= 8 and v.markers("turn_eos", reply.id)
    assert reply.on_sample > e.off_sample or reply.overlap_ok


def check_system_backchannel(v, e):
    turn = v.usr_turn_of(e.attach_to)
    assert e.speaker == "system" and turn.on <= e.on_sample and e.off_sample <= turn.off
    assert all(v.rec.sys_floor[k] == NOT_HOLD and v.rec.sys_action[k] == LISTEN for k in v.frames(e))
    assert any(v.rec.sys_vad[k] for k in v.frames(e))
    assert all(v.rec.usr_floor[k] != NOT_HOLD for k in v.frames(e))


def check_user_side(v, e):
    """Disfluencies and sounds in or before a user turn: the system keeps listening."""
    if e.floor_intent != "none":
        keeps_listening(v, e.id)
        return
    assert not [t for t in v.usr_turns + v.sys_turns if any(x.id == e.id for x in t.events)]
    for t in v.sys_turns:
        if t.on < e.on_sample < t.off:
            floor_unchanged(v, e, t)


def check_other_initiated_repair(v, e):
    assert v.markers("turn_eos", e.id)
    again = next(x for x in v.rec.events if x.attach_to == e.id and x.speaker == "user")
    assert again.act == "repair_repeat" and again.text == v.ev[e.attach_to].text
    nxt = v.next_sys_turn(e.off_sample + 1)
    assert nxt.on >= v.usr_turn_of(again.id).off or nxt.overlap_ok


def check_system_self_repair(v, e):
    turn = v.sys_turn_of(e.id)
    assert v.markers("turn_eos", turn.last_id) and not v.markers("yield", turn.last_id)
    assert any(t in e.text for t in ("sorry", "no wait", "不对", "哦不"))


def check_ignored(v, e):
    """Side talk, self-talk and media: no system TAKE while they last, no yield."""
    assert e.floor_intent == "none"
    frames = list(v.frames(e))
    takes = [k for k in v.sys_takes() if frames[0] < k <= frames[-1]]
    assert not takes
    assert not [f for f in v.markers("yield") if f in frames]
    for t in v.sys_turns:
        if t.on < e.on_sample < t.off:
            floor_unchanged(v, e, t)


def check_readdress(v, e):
    nxt = next(x for x in v.rec.events if x.attach_to == e.id and x.speaker == "system")
    assert nxt.on_sample > e.off_sample or nxt.overlap_ok


def work_of(v, e):
    return next(w for w in v.rec.delegations if w.opened_by == e.id or w.work_id == e.attach_to
                or w.work_id == v.ev[e.id].attach_to)


def check_delegate_with_ack(v, e):
    w = next(w for w in v.rec.delegations if w.opened_by == e.id)
    assert e.act == "acknowledge" and w.open_sample == e.off_sample
    assert v.markers("delegate_open", w.work_id) == [w.open_sample // P]
    assert v.rec.sys_action[w.open_sample // P] == DELEGATE
    ack_ms = (e.on_sample - v.ev[e.attach_to].off_sample) / MS
    assert -1 <= ack_ms <= 400 + 1  # delegation acknowledgement law U(0, 400)
    assert [s.state for s in w.states][:2] == ["QUEUED", "RUNNING"]


def check_continue_while_working(v, e):
    w = min(v.rec.delegations, key=lambda w: w.open_sample)  # the first item is running meanwhile
    end = w.deliver_sample if w.deliver_sample is not None else w.drop_sample
    assert e.off_sample > w.close_sample and e.on_sample < end


def silent_before(v, t: int, window_ms: float) -> bool:
    return not [x for x in v.audible() if x.on_sample < t and x.off_sample > t - window_ms * MS]


def check_delivery(v, e, deferred: bool):
    w = next(w for w in v.rec.delegations if w.work_id == e.attach_to)
    assert w.inject_sample >= w.complete_sample and e.on_sample > w.inject_sample
    wait_ms = (w.inject_sample - w.complete_sample) / MS
    assert silent_before(v, w.inject_sample, max(250, 800 - 0.05 * wait_ms) - 1)
    for t in range(w.complete_sample, w.inject_sample, 10 * MS):  # and not a moment earlier (R6)
        assert not silent_before(v, t, max(250, 800 - 0.05 * (t - w.complete_sample) / MS) + 1)
    assert v.markers("backend_inject", w.work_id) == [w.inject_sample // P]
    assert v.markers("deliver_start", w.work_id) == [e.on_sample // P]
    assert v.rec.sys_floor[e.on_sample // P] == TAKE
    assert [s.state for s in w.states][-2:] == ["DELIVERING", "DELIVERED"]
    msg = [m for m in w.backend if m.kind in ("result", "error")]
    assert msg[0].text == f"<backend>{msg[0].kind}: {w.result_text}</backend>" and msg[0].frame == w.inject_sample // P
    assert not [t for t in v.usr_turns if t.on < e.on_sample < t.off]
    if deferred:  # ready while the user side talked: held back until they stopped
        assert wait_ms > 0
        assert [x for x in v.rec.events if x.speaker in ("user", "third_party")
                and x.on_sample < w.inject_sample and x.off_sample > w.complete_sample - 800 * MS]


def check_stale(v, e):
    w = next(w for w in v.rec.delegations if w.cancel_sample is not None)
    assert w.stale and w.deliver_sample is None and w.delivered_sample is None
    assert not v.markers("deliver_start", w.work_id)
    assert v.markers("cancel", w.work_id) == [e.off_sample // P]
    assert v.markers("stale_drop", w.work_id) == [w.drop_sample // P]
    assert [s.state for s in w.states][-2:] == ["CANCELLING", "CANCELLED"]
    assert not [x for x in v.rec.events if x.relation == "delivers_result_of" and x.attach_to == w.work_id]


def check_progress_question(v, e):
    answer = next(x for x in v.rec.events if x.attach_to == e.id and x.speaker == "system")
    w = next(w for w in v.rec.delegations if any(m.kind == "progress" for m in w.backend))
    note = next(m for m in w.backend if m.kind == "progress")
    assert note.sample == e.off_sample < w.complete_sample  # still running when asked
    assert answer.on_sample > note.sample and note.text.startswith("<backend>progress: ")
    assert v.markers("backend_inject", f"{w.work_id}:progress") == [note.frame]


CHECKS = {
    "smooth_exchange": check_smooth_exchange, "latched_start": check_latched_start,
    "dispreferred_answer": check_dispreferred_answer, "system_question_back": check_system_question_back,
    "proactive_opening": check_proactive_opening, "closing_sequence": check_closing_sequence,
    "phrase_boundary_pause": lambda v, e: check_pause(v, e, 180),
    "long_thinking_pause": lambda v, e: check_pause(v, e, 800),
    "trailing_conjunction": lambda v, e: check_pause(v, e, 300),
    "list_dictation": check_list_dictation,
    "complete_sounding_pause": lambda v, e: check_pause(v, e, 800),
    "silence_after_system_question": check_silence_after_system_question,
    "barge_in_new_request": check_interrupt, "correction_negation": check_interrupt,
    "topic_switch": check_interrupt, "stop_command": check_stop_command, "repeat_request": check_repeat_request,
    "cooperative_completion": check_cooperative_completion, "simultaneous_start": check_simultaneous_start,
    "continuer": check_backchannel, "assessment": check_backchannel, "agreement": check_backchannel,
    "question_backchannel": check_question_backchannel, "system_backchannel": check_system_backchannel,
    "filled_pause": check_user_side, "self_repair": check_user_side, "false_start": check_user_side,
    "repetition_prolongation": check_user_side, "other_initiated_repair": check_other_initiated_repair,
    "system_self_repair": check_system_self_repair,
    "laughter": check_user_side, "breath_sigh": check_user_side, "cough": check_user_side,
    "thinking_sounds": check_user_side,
    "user_to_third_party": check_ignored, "third_party_to_user": check_ignored, "background_media": check_ignored,
    "user_self_talk": check_ignored, "readdress_after_side_talk": check_readdress,
    "delegate_with_ack": check_delegate_with_ack, "continue_while_working": check_continue_while_working,
    "result_at_silence_gap": lambda v, e: check_delivery(v, e, False),
    "result_deferred": lambda v, e: check_delivery(v, e, True),
    "stale_result_dropped": check_stale, "progress_question": check_progress_question,
}


DYADIC = sorted(p for p in REGISTRY if REGISTRY[p].family != "group")  # the group family: tests/test_group.py


def test_every_registry_item_has_a_check_and_a_family():
    assert set(CHECKS) == set(DYADIC) and len(DYADIC) == 45 and len(FAMILIES) == 9
    assert len(REGISTRY) == 52 and {REGISTRY[p].family for p in set(REGISTRY) - set(DYADIC)} == {"group"}
    assert all(p.relation and p.law and p.expected and p.definition for p in REGISTRY.values())


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("pid", DYADIC)
def test_phenomenon_expected_behaviour(env, pid, lang):
    rec, hits = session(env, pid, lang)
    v = View(rec)
    for eid in hits:
        CHECKS[pid](v, v.ev[eid])


# code-switched sessions: language never changes the labels
@pytest.mark.parametrize("pid", ["latched_start", "long_thinking_pause", "correction_negation", "continuer",
                                 "system_self_repair", "user_to_third_party", "result_deferred",
                                 "stale_result_dropped"])
def test_phenomenon_expected_behaviour_en_zh(env, pid):
    rec, hits = session(env, pid, "en-zh")
    v = View(rec)
    for eid in hits:
        CHECKS[pid](v, v.ev[eid])


# -- delegation lifecycle beyond single phenomena -------------------------------------------------
def test_concurrent_work_items_and_failures_over_plans(env):
    """Plans with two items in flight and failing backends place with legal state sequences."""
    seed = seed_for("continue_while_working")
    rates = {**seed.phenomena, "stale_result_dropped": 0.5, "progress_question": 0.5}
    seed = seed.model_copy(update={"phenomena": rates, "exchanges": Fixed(value=2)})
    cfg, seen = config_for("continue_while_working"), {"concurrent": 0, "failed": 0, "superseded": 0}
    for k in range(80):
        sid = f"cc-{k}"
        plan = ScriptedPlanner().plan(seed, sid, stream(1, sid, "plan"))
        n_live = sum(1 for w in plan.work if w.cancelled_by is None)
        fails = any(w.outcome == "failure" for w in plan.work)
        supersede = any(e.act == "supersede_request" for e in plan.events)
        if not ((n_live >= 2 and not seen["concurrent"]) or (fails and not seen["failed"])
                or (supersede and not seen["superseded"])):
            continue
        out = make_session(cfg, seed, 1, sid, ScriptedPlanner(), env["tts"], bank=env["bank"])
        assert isinstance(out, SessionOutput), out
        rec = out.record
        for w in rec.delegations:
            states = [s.state for s in w.states]
            assert states[0] == "QUEUED" and [s.sample for s in w.states] == sorted(s.sample for s in w.states)
            if w.outcome == "failure" and not w.stale:
                assert "FAILED" in states and "COMPLETED" not in states and states[-1] == "DELIVERED"
                assert w.backend[-1].kind == "error"
        live = [w for w in rec.delegations if not w.stale]
        if len(live) >= 2:
            a, b = sorted(live, key=lambda w: w.open_sample)[:2]
            assert b.open_sample < a.inject_sample  # both in flight at once
            # spoken in the order they complete
            assert (a.deliver_sample < b.deliver_sample) == (a.complete_sample <= b.complete_sample)
            seen["concurrent"] += 1
        seen["failed"] += any(w.outcome == "failure" and not w.stale for w in rec.delegations)
        seen["superseded"] += supersede
        if all(seen.values()):
            return
    raise AssertionError(f"not all cases met: {seen}")


def test_routine_requests_are_answered_without_delegation(env):
    seed = seed_for("smooth_exchange").model_copy(update={"exchanges": Fixed(value=5)})
    for k in range(30):
        plan = ScriptedPlanner().plan(seed, f"r-{k}", stream(1, f"r-{k}", "plan"))
        routine = [e for e in plan.events if "routine_request" in e.phenomena]
        if routine:
            ids = [e.id for e in plan.events]
            for r in routine:
                answer = plan.events[ids.index(r.id) + 1]
                assert answer.speaker == "system" and answer.attach_to == r.id
                assert not [w for w in plan.work if w.opened_by == answer.id]
            return
    raise AssertionError("no routine request in 30 plans")


# -- code-switching, seeds, registry --------------------------------------------------------------
def test_all_five_code_switching_forms_come_from_the_en_zh_seeds():
    found: dict[str, int] = {}
    planner = ScriptedPlanner()
    for path in sorted((ROOT / "scenario_seeds").glob("*-en-zh.yaml")):
        seed = load_seed(path)
        for k in range(20):
            plan = planner.plan(seed, f"cs-{k}", stream(2, f"cs-{k}", "plan"))
            for form, _ in code_switch_hits(plan.events):
                found[form] = found.get(form, 0) + 1
    assert set(found) == set(CODE_SWITCH), found
    for path in sorted((ROOT / "scenario_seeds").glob("*-en.yaml")):
        seed = load_seed(path)
        plan = planner.plan(seed, "cs-en", stream(2, "cs-en", "plan"))
        assert not code_switch_hits(plan.events)


def test_every_phenomenon_is_requested_by_an_english_and_a_mandarin_seed():
    asked: dict[str, set[str]] = {}
    groups = ROOT / "scenario_seeds" / "groups"
    for path in sorted([*(ROOT / "scenario_seeds").glob("*.yaml"), *groups.glob("*.yaml"), *groups.glob("long/*.yaml")]):
        seed = load_seed(path)
        ScriptedPlanner().check_seed(seed, str(path))
        for pid, rate in seed.rates.items():
            if rate > 0:
                asked.setdefault(pid, set()).add(seed.language)
    for pid in REGISTRY:
        assert {"en", "zh", "en-zh"} <= asked.get(pid, set()), pid


def test_family_rates_expand_and_ids_override():
    r = resolve_rates({"backchannels": 0.2, "continuer": 0.5})
    assert r["continuer"] == 0.5 and r["assessment"] == r["system_backchannel"] == 0.2
    base = load_seed(ROOT / "scenario_seeds" / "smart-home-en.yaml")
    with pytest.raises(ValueError, match="unknown phenomenon or family 'nope'"):
        base.model_validate({**base.model_dump(), "phenomena": {"nope": 0.1}})


def test_a_seed_asking_for_an_unrealised_phenomenon_is_refused(monkeypatch):
    from synth.backends import scripted_planner

    monkeypatch.setattr(scripted_planner, "SUPPORTED", set(REGISTRY) - {"topic_switch"})
    seed = seed_for("topic_switch")
    with pytest.raises(UserError, match="phenomena.topic_switch: not realised"):
        ScriptedPlanner().check_seed(seed, "s.yaml")


@pytest.mark.parametrize("pid", ["stale_result_dropped", "progress_question", "barge_in_new_request"])
def test_labels_at_other_frame_periods_pass_the_checks(env, pid):
    """The same timeline labelled at 20, 40 and 1000 ms passes §5 and keeps its markers' order."""
    from synth.schema.labels import FrameLabels
    from synth.stages import qa
    from synth.stages.label import frame_channels

    rec, _ = session(env, pid)
    t = rec.timeline()
    kinds80 = sorted(m.type for m in rec.markers)
    for period in (20, 40, 1000):
        ch = frame_channels(t, period)
        n = ch["num_frames"]
        labels = FrameLabels(frame_period_s=period / 1000, num_frames=n, sys_action=ch["sys_action"].tolist(),
                             sys_floor=ch["sys_floor"].tolist(), usr_floor=ch["usr_floor"].tolist(),
                             sys_vad=[0] * n, usr_vad=[0] * n, markers=ch["markers"])
        assert qa.check_labels(t, labels, period, 60000) == []
        assert sorted(m.type for m in labels.markers) == kinds80


def test_a_silent_delegation_opens_its_span_after_the_request(env):
    seed, cfg = seed_for("delegate_with_ack"), config_for("delegate_with_ack")
    for k in range(60):
        sid = f"silent-{k}"
        plan = ScriptedPlanner().plan(seed, sid, stream(1, sid, "plan"))
        users = {e.id for e in plan.events if e.speaker == "user"}
        if not any(w.opened_by in users for w in plan.work):
            continue
        out = make_session(cfg, seed, 1, sid, ScriptedPlanner(), env["tts"], bank=env["bank"])
        assert isinstance(out, SessionOutput), out
        v = View(out.record)
        w = next(w for w in out.record.delegations if w.opened_by in users)
        req = v.ev[w.opened_by]
        assert 0 <= (w.open_sample - req.off_sample) / MS <= 400 + 1
        assert v.markers("delegate_open", w.work_id) == [w.open_sample // P]
        assert v.rec.sys_action[w.open_sample // P] == DELEGATE
        assert not [e for e in out.record.events if e.speaker == "system"
                    and req.off_sample <= e.on_sample < w.open_sample]
        return
    raise AssertionError("no silent delegation in 60 plans")


def test_run_statistics_count_per_phenomenon_family_and_language(tmp_path, env):
    from synth.executor.run import merge
    from synth.executor.task import RunSpec, run_task

    cfg = config_for("continuer").model_copy(update={"sessions": 3, "seed": 4})
    cfg = cfg.model_copy(update={"output": cfg.output.model_copy(update={"sessions_per_shard": 3})})
    seeds = tuple(load_seed(ROOT / "scenario_seeds" / f"smart-home-{x}.yaml") for x in ("en", "zh", "en-zh"))
    spec = RunSpec(config=cfg, seeds=seeds, out_dir=str(tmp_path), bank=env["bank"])
    run_task(spec, 0)
    stats = merge(spec)
    assert stats["sessions"] + stats["rejects"] == 3
    by_lang = stats["phenomena_by_language"]
    assert sum(v for k, v in by_lang.items()) == sum(stats["phenomena"].values()) == sum(stats["families"].values())
    assert {k.split("/")[0] for k in by_lang} == set(stats["languages"])
    assert any(k.startswith("en-zh/cs_") for k in by_lang) and stats["families"]["turn_transitions"] > 0
