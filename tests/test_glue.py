"""The glue between a session's lines (issue 32), on planned sessions of every seed: a move to
another topic is a barge-in or marked, a return after side talk picks up what the third party
said, no user line gives a value nobody asked for, a backchannel fits the kind of line it follows.
The frame checker's rules for the first three are tested on broken copies of a domain file.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import yaml

from synth.backends.compose import is_negative
from synth.backends.frames import check_file, common_content, glue_problems, picks_up, volunteer_problems
from synth.backends.scripted_planner import ScriptedPlanner, line_kind
from synth.io.config_files import load_seed
from synth.rng import stream

ROOT = Path(__file__).resolve().parents[1]
FRAMES = ROOT / "synth" / "data" / "frames"
SEEDS = sorted((ROOT / "scenario_seeds").glob("*.yaml"))
N_PLANS = 360


@lru_cache(maxsize=None)
def plans() -> list:
    seeds = [s for s in (load_seed(p) for p in SEEDS) if not s.is_group]
    planner = ScriptedPlanner()
    return [planner.plan(seeds[i % len(seeds)], f"glue-{i:06d}", stream(20261206, f"glue-{i:06d}", "plan"))
            for i in range(N_PLANS)]


def turn_head(events: dict, ev):
    """The first piece of the user turn ``ev`` belongs to."""
    while ev.relation == "continues" and ev.attach_to in events:
        ev = events[ev.attach_to]
    return ev


# -- topic switches ------------------------------------------------------------------------------
def test_every_move_to_another_frame_is_a_barge_in_or_opens_with_a_marker():
    seen = {"barge_in": 0, "marked": 0, "task": 0}
    for plan in plans():
        events = {e.id: e for e in plan.events}
        markers = [m.lower() for k in ("topic_marker", "topic_return") for m in common_content()[plan.language][k]]
        switches = plan.planner_meta["switches"]
        for sw in switches:
            ev = events[sw["event"]]
            assert ev.speaker == "user", sw
            if sw["how"] == "barge_in":
                assert "topic_switch" in ev.phenomena and ev.relation == "interrupts", (sw, ev.text)
            else:
                assert sw["how"] == "marked" and sw["marker"].lower() in markers, sw
                head = ev.text.lower()[: len(sw["marker"]) + 12]  # after a filler at most ("um, oh, ...")
                assert sw["marker"].lower() in head, (sw, ev.text)
                seen["task"] += ev.act == "delegate_request"
            seen[sw["how"]] += 1
        entered = [f["id"] for f in plan.planner_meta["frames"][1:]]
        for fid in entered:  # every frame the session moved to was moved to by one of them
            assert any(sw["to"] == fid for sw in switches), (plan.session_id, fid, switches)
    assert all(n > 0 for n in seen.values()), seen


# -- side talk -----------------------------------------------------------------------------------
def test_a_return_after_side_talk_picks_up_what_the_third_party_said():
    seen = 0
    for plan in plans():
        events = {e.id: e for e in plan.events}
        for e in plan.events:
            if e.act != "readdress":
                continue
            reply = events[e.attach_to]
            assert reply.speaker == "third_party"
            assert picks_up(reply.text, e.text), (plan.language, reply.text, e.text)
            seen += 1
    assert seen >= 20


def test_the_checker_wants_a_readdress_to_pick_up_the_reply():
    block = {"side_talk": [
        {"user": "Did you see my keys?", "third_party": "They're in the car, on the back seat.",
         "readdress": "Sorry, go on about {topic}."},
        {"user": "Did you see my keys?", "third_party": "They're in the car, on the back seat.",
         "readdress": "Sorry, go on about {topic}.", "heard": ["Okay, the keys are in the car."]},
        {"user": "Did you see my keys?", "third_party": "They're in the car, on the back seat.",
         "readdress": "Sorry, go on.", "heard": ["Okay, sorry about that."]},
    ]}
    problems = glue_problems(block, "en")
    assert len(problems) == 2 and "side_talk[0]" in problems[0] and "side_talk[2].heard" in problems[1]
    zh = {"side_talk": [{"user": "钥匙呢？", "third_party": "在车里，后座上。", "readdress": "好，你接着说吧。",
                         "heard": ["哦，钥匙在车里。"]}]}
    assert glue_problems(zh, "zh") == []


# -- volunteered details -------------------------------------------------------------------------
def names(text: str, value: str) -> bool:
    """Whether ``text`` says ``value``: as whole words where it is English ("ten" is not in "often")."""
    if value.isascii():
        return re.search(rf"(?<![a-z]){re.escape(value)}(?![a-z])", text) is not None
    return value in text


ASKING = {"followup", "new_request", "readdress", "routine_request"}


def test_no_user_line_gives_a_value_nobody_asked_for():
    """A follow-up, new request, readdress or routine request names only slot values already said
    in the session; a request (the opening, a move to another topic) says its own."""
    checked = 0
    for plan in plans():
        events = {e.id: e for e in plan.events}
        switched = {sw["event"] for sw in plan.planner_meta["switches"]}
        values = {v for f in plan.planner_meta["frames"] for k, v in f["slots"].items() if k != "topic" and len(v) > 2}
        said = ""
        for e in plan.events:
            if e.speaker == "user" and e.act in ASKING and not {e.id, turn_head(events, e).id} & switched:
                new = [v for v in values if names(e.text.lower(), v.lower()) and not names(said, v.lower())]
                assert not new, (plan.language, new, e.text)
                checked += 1
            said += " " + e.text.lower()
    assert checked >= 300, checked


def test_the_checker_wants_a_follow_up_that_asks_without_a_new_value():
    raw = yaml.safe_load((FRAMES / "restaurant_booking.yaml").read_text("utf-8"))
    frame = next(f for f in raw["en"]["frames"] if f["id"] == "dog_friendly_lunch")
    assert volunteer_problems({"frames": [frame]}) == []
    unit = frame["followups"][1]
    unit["user"] = [u for u in unit["user"] if "{dog}" in u]  # only "Will {dog} be comfortable there?"
    frame["request"]["user"] = [u for u in frame["request"]["user"] if "{dog}" not in u]
    problems = volunteer_problems({"frames": [frame]})
    assert len(problems) == 1 and "{dog}" in problems[0] and "followups[1]" in problems[0], problems


def test_every_domain_file_passes_the_glue_rules():
    for path in sorted(FRAMES.glob("[!_]*.yaml")):
        assert [p for p in check_file(path) if "picks up" in p or "pick up" in p or "establish" in p] == [], path


# -- backchannels --------------------------------------------------------------------------------
def test_a_backchannel_fits_the_kind_of_line_it_follows():
    """Bad news gets sympathy or a continuer, never "great" or "exactly"; an instruction
    gets a receipt ("okay", 好的); news gets a news receipt ("oh, really", 哇，这样啊)."""
    common = common_content()
    seen = {"bad_news": 0, "instruction": 0, "news": 0, "yes": 0}
    for plan in plans():
        events = {e.id: e for e in plan.events}
        pools = common[plan.language]
        cheerful = set(pools["assessment_good"]) | set(pools["agreement_strong"])
        for e in plan.events:
            if e.act != "backchannel" or e.speaker != "user" or not set(e.phenomena) & {"assessment", "agreement",
                                                                                          "continuer"}:
                continue
            answer = events[e.attach_to]
            disp = "dispreferred_answer" in answer.phenomena
            kind = line_kind(answer.text, plan.language, disp)
            if disp or is_negative(answer.text, plan.language):
                assert e.text not in cheerful, (e.text, answer.text)
                assert e.text in set(pools["sympathy"]) | set(pools["continuer"]), (e.text, answer.text)
            if "assessment" in e.phenomena:
                want = {"bad_news": "sympathy", "instruction": "instruction_receipt", "news": "assessment",
                        "yes": "assessment_good"}[kind]
                assert e.text in pools[want], (kind, e.text, answer.text)
                seen[kind] += 1
    assert all(n > 0 for n in seen.values()), seen


def test_line_kinds():
    assert line_kind("Sorry, the Friday slot is fully booked.", "en") == "bad_news"
    assert line_kind("The museum is open until six, and entry is free.", "en") == "news"
    assert line_kind("Sure, brown two onions first, then add the garlic.", "en") == "instruction"
    assert line_kind("Yes, the parcel arrives on Monday.", "en") == "yes"
    assert line_kind("No problem, your card is unblocked now.", "en") == "news"
    assert line_kind("先把鸡蛋打散，然后倒进锅里。", "zh") == "instruction"
    assert line_kind("恐怕周五已经订满了。", "zh") == "bad_news"
    assert line_kind("明天有小雨，气温二十度左右。", "zh") == "news"
    assert line_kind("OK，先 restart router，然后再 check 一下。", "en-zh") == "instruction"


# -- determinism ---------------------------------------------------------------------------------
def test_same_seed_same_plan():
    seed = load_seed(SEEDS[0])
    a = ScriptedPlanner().plan(seed, "glue-det", stream(1, "glue-det", "plan"))
    b = ScriptedPlanner().plan(seed, "glue-det", stream(1, "glue-det", "plan"))
    assert a.model_dump_json() == b.model_dump_json()
