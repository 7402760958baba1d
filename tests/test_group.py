"""Group conversations: seeds with people, plans with addressees, one voice and room position per
person, the ``addressed`` channel and per-person voice activity, the QA rule that the assistant never
takes speech meant for others, and every reader downstream (issue 33)."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from synth.backends.group_content import check_file
from synth.backends.scripted_planner import ScriptedPlanner
from synth.inspection.runfolder import RunFolder
from synth.schema.seed import ScenarioSeed

from helpers import ROOT, synth
from test_render import wds_members

GROUP_SEEDS = sorted((ROOT / "scenario_seeds" / "groups").glob("*.yaml"))
SEED = ROOT / "scenario_seeds" / "groups" / "family-drive-en.yaml"


def seed_dict() -> dict:
    return yaml.safe_load(SEED.read_text())


def plan(seed: ScenarioSeed, i: int):
    return ScriptedPlanner().plan(seed, f"g-{i:06d}", np.random.default_rng(i))


def test_every_group_content_file_passes_its_checker():
    files = sorted((ROOT / "synth" / "data" / "groups").glob("*.yaml"))
    assert files
    for f in files:
        assert check_file(f) == [], f


def test_a_content_file_with_an_unknown_field_or_digits_is_refused(tmp_path):
    raw = yaml.safe_load((ROOT / "synth" / "data" / "groups" / "navigation.yaml").read_text())
    raw["en"]["scenes"][0]["chats"][0]["lines"][0] = "{b}, shall we stop at {nowhere}?"
    raw["en"]["scenes"][0]["chats"][2][0] = "{b}, we stop in 5 minutes."
    bad = tmp_path / "navigation.yaml"
    bad.write_text(yaml.safe_dump(raw, allow_unicode=True))
    problems = "\n".join(check_file(bad))
    assert "unknown field 'nowhere'" in problems and "digits" in problems


@pytest.mark.parametrize("change, message", [
    (lambda d: d["people"].__setitem__(slice(1, None), []), "a group has 2 to 4 people"),
    (lambda d: d["people"][2].__setitem__("name", "Dana"), "two people have the id 'dana'"),
    (lambda d: d["people"][1].__setitem__("id", "system"), "'system' is reserved"),
    (lambda d: [p.__setitem__("can_address_system", False) for p in d["people"]], "nobody can address"),
    (lambda d: d["personas"].__setitem__("user", {"name": "Al"}), "names its humans in people only"),
    (lambda d: d["people"][0].__setitem__("distance_m", 40), "distance_m"),
])
def test_bad_group_seeds_name_what_is_wrong(change, message):
    d = seed_dict()
    change(d)
    with pytest.raises(ValidationError, match=message):
        ScenarioSeed.model_validate(d)


def test_group_phenomena_need_a_group():
    d = yaml.safe_load((ROOT / "scenario_seeds" / "banking-en.yaml").read_text())
    d["phenomena"]["human_exchange"] = 0.5
    with pytest.raises(ValidationError, match="'human_exchange' needs a group"):
        ScenarioSeed.model_validate(d)


def test_group_plans_say_who_speaks_to_whom_and_the_assistant_answers_only_what_was_for_it():
    seeds = [ScenarioSeed.model_validate(yaml.safe_load(f.read_text())) for f in GROUP_SEEDS]
    seen, n = set(), 0
    for seed in seeds:
        people = {p.key for p in seed.people}
        silent = {p.key for p in seed.people if not p.can_address_system}
        for i in range(40):
            p = plan(seed, i)
            by_id = {e.id: e for e in p.events}
            for e in p.events:
                seen.update(e.phenomena)
                if e.speaker == "user":
                    assert e.person in people, e
                    if e.sound is None:
                        assert e.addressee in people | {"system", "group"} and e.addressee != e.person, e
                    if e.addressee == "group":  # a chat opened to everyone: people answer it, not the assistant
                        assert e.act == "human_talk" and e.floor_intent == "none", e
                    if e.addressee == "system":
                        assert e.person not in silent, e  # a child who never speaks to it does not
                if e.speaker == "system" and e.relation == "responds_to":
                    target = by_id[e.attach_to]
                    assert target.speaker == "system" or target.addressee == "system", (e, target)
                    n += 1
            assert p == plan(seed, i)  # same generator, same plan
    assert n > 100
    assert {"human_exchange", "request_by_other_person", "answer_for_other", "people_overlap",
            "name_in_human_exchange", "group_decision_wait"} <= seen


def test_a_group_decision_names_the_option_the_group_chose():
    """The choice a person tells the assistant is the one the discussion reached, and the
    assistant confirms that one (read in plans: an option the discussion dropped is never confirmed)."""
    seed = ScenarioSeed.model_validate(seed_dict())
    checked = 0
    for i in range(60):
        p = plan(seed, i)
        for j, e in enumerate(p.events):
            if e.act == "decide":
                confirm = next(x for x in p.events[j:] if x.act == "confirm")
                values = p.planner_meta["values"]
                chosen = [v for k, v in values.items() if k.startswith("option") and v.lower() in e.text.lower()]
                assert chosen and chosen[0].lower() in confirm.text.lower(), (e.text, confirm.text)
                checked += 1
    assert checked > 10


def test_parent_and_child_chats_go_to_a_child_and_a_parent_and_no_request_is_asked_twice():
    """A chat written ``by: [child, adult]`` opens with a child and is answered by an adult; a
    group with no child never gets one; a request unit is asked once per session; a person
    ``called: ""`` is never named by the assistant."""
    from synth.backends.group_content import GroupBlock
    from synth.backends.group_planner import GroupBuilder

    d = seed_dict()
    for person in d["people"]:
        person["child"] = person["name"] in ("Maya", "Sam")
        person["called"] = "" if person["name"] == "Dana" else None
    d["exchanges"] = {"dist": "fixed", "value": 12}
    d["phenomena"] = {"human_exchange": 1.0, "request_by_other_person": 0.5}
    scene = {"id": "s", "topic": "the trip", "slots": {"town": ["Ashford", "Harlow"]},
             "requests": [{"user": [f"question {k} about {{town}}?", f"another question {k}?"],
                           "system": [f"answer {k} for {{town}}.", f"other answer {k}."]} for k in "xyz"],
             "chats": [{"by": ["child", "adult"], "lines": ["Are we nearly there?", "Not yet, {a}.", "Okay."]},
                       ["Did you pack the charger?", "It's in my bag, {a}."],
                       ["Look at the horses!", "They have a foal."]]}
    block = GroupBlock.model_validate({"scenes": [scene]})
    adults_only = ScenarioSeed.model_validate({**d, "people": [{**q, "child": False} for q in d["people"]]})
    for seed, has_child in ((ScenarioSeed.model_validate(d), True), (adults_only, False)):
        kids = {q.key for q in seed.people if q.child}
        opened = 0
        for i in range(30):
            p = GroupBuilder(seed, f"g{i}", np.random.default_rng(i), block).build()
            asks = [e.text for e in p.events if e.addressee == "system" and e.act in ("request", "followup")]
            units = [r["unit"] for r in p.planner_meta["requests"]]
            assert len(units) == len(set(units)) <= 3, asks
            for j, e in enumerate(p.events):
                if e.text.startswith("Are we nearly there"):
                    opened += 1
                    reply = next(x for x in p.events[j + 1:] if x.attach_to == e.id and x.act == "human_talk")
                    assert e.person in kids and reply.person not in kids, (e, reply)
                if e.speaker == "system":
                    assert not e.text.startswith("Dana"), e.text
        assert (opened > 0) == has_child, opened


def test_people_talk_to_the_whole_group_in_every_language_and_the_assistant_never_takes_it():
    """Chats written ``to: group`` open with a line to everyone ("Did anyone pack the charger?",
    谁要喝水？); a person answers it (or turns to the assistant by name), the assistant never takes
    the floor on it: the QA rule (``qa.addressee_faults``) holds on the plans."""
    from collections import Counter

    from synth.stages.qa import addressee_faults

    to_group, answered = Counter(), 0
    for f in GROUP_SEEDS:
        seed = ScenarioSeed.model_validate(yaml.safe_load(f.read_text()))
        for i in range(20):
            p = plan(seed, i)
            assert addressee_faults(p.events) == [], (seed.id, i)
            for e in p.events:
                if e.speaker == "user" and e.addressee == "group":
                    to_group[seed.language] += 1
                    after = [x for x in p.events if x.attach_to == e.id]
                    assert all(x.speaker == "user" for x in after), (e, after)
                    answered += any(x.act == "human_talk" and x.addressee == e.person for x in after)
    assert min(to_group[lang] for lang in ("en", "zh", "en-zh")) >= 20, to_group
    assert answered >= 0.8 * sum(to_group.values())


# Three seeds whose first sessions in this run have lines to the whole group (en, zh, en-zh)
RENDERED = [ROOT / "scenario_seeds" / "groups" / f"{s}.yaml"
            for s in ("friends-dinner-en", "meeting-notes-zh", "family-drive-en-zh")]


@pytest.fixture(scope="module")
def group_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("group")
    cfg = yaml.safe_load((ROOT / "pipelines" / "group.yaml").read_text())
    cfg.update(seeds=[str(f) for f in RENDERED], executor={"kind": "local", "workers": 1})
    cfg["acoustics"]["banks"] = [{"path": str(ROOT / "noise_banks" / "generated"), "generate": True}]
    pipe = tmp / "group.yaml"
    pipe.write_text(yaml.safe_dump(cfg))
    out = tmp / "out"
    synth("run", pipe, "--sessions", "3", "--out", out)
    return tmp, out


@pytest.mark.slow
def test_a_rendered_group_session_has_a_place_a_voice_and_a_vad_per_person(group_run):
    _, out = group_run
    r = synth("validate", out)
    assert "3 sessions pass" in r.stdout + r.stderr
    recs = RunFolder(out).records
    for rec in recs:
        people = sorted({e.person for e in rec.events if e.person})
        scene = rec.scene
        assert set(people) <= set(scene["room"]["sources_m"]) and set(people) <= set(scene["levels_db"])
        assert len({scene["voices"][p]["variant"] for p in people}) == len(people)
        by_distance = sorted(people, key=lambda q: scene["room"]["distances_m"][q])
        levels = [scene["levels_db"][p] for p in by_distance]
        assert levels == sorted(levels, reverse=True)  # the farther, the softer (inverse distance)
        assert sorted(rec.person_vad) == people and len(rec.addressed) == len(rec.sys_action)
        period = round(rec.frame_period_s * rec.sample_rate)
        for p in people:  # each person's VAD lies in their own events
            mine = np.zeros(len(rec.sys_action), bool)
            for e in rec.events:
                if e.person == p and e.off_sample > e.on_sample:
                    mine[e.on_sample // period: -(-e.off_sample // period) + 1] = True
            assert not (np.asarray(rec.person_vad[p], bool) & ~mine).any(), p
        to_system = [e for e in rec.events if e.addressee == "system" and e.speaker == "user"]
        assert to_system and all(rec.addressed[e.on_sample // period + 1] for e in to_system
                                 if e.off_sample - e.on_sample > 3 * period)
        others = [e for e in rec.events if e.speaker == "user" and e.addressee not in (None, "system")
                  and e.off_sample - e.on_sample > 3 * period]
        overlapped = {k for e in to_system for k in range(e.on_sample // period, e.off_sample // period + 1)}
        assert others and all(not rec.addressed[k] for e in others
                              for k in range(e.on_sample // period + 1, e.off_sample // period - 1) if k not in overlapped)
    to_group = [e for rec in recs for e in rec.events if e.speaker == "user" and e.addressee == "group"]
    assert to_group, "no line to the whole group was rendered: pick RENDERED seeds whose sessions have one"


@pytest.mark.slow
def test_a_group_session_renders_again_from_its_record_byte_for_byte(group_run, tmp_path):
    _, out = group_run
    rec = RunFolder(out).records[1]
    r = synth("render", out, "--session", rec.session_id, "-o", tmp_path)
    assert "differs" not in r.stderr
    members = wds_members(out)
    for ext in ("user.flac", "system.flac", "json"):
        assert (tmp_path / f"{rec.session_id}.{ext}").read_bytes() == members[f"{rec.session_id}.{ext}"], ext


@pytest.mark.slow
def test_qa_refuses_a_person_vad_that_misses_the_persons_speech(group_run, tmp_path, monkeypatch):
    """LABELS §5 for each person: a ``person_vad`` channel silent where WebRTC hears that person's
    stem is a reject (the labeller is made to drop one person's VAD; the stems are the real ones)."""
    import synth.session as session_mod
    from synth.errors import UserError
    from synth.rerender import rerender_from_run

    _, out = group_run
    rec = RunFolder(out).records[0]
    victim = sorted(rec.person_vad)[0]
    real = session_mod.label_session

    def drop_one(*a, **kw):
        labels = real(*a, **kw)
        return labels.model_copy(update={"person_vad": {**labels.person_vad, victim: [0] * labels.num_frames}})

    monkeypatch.setattr(session_mod, "label_session", drop_one)
    with pytest.raises(UserError, match=f"person_vad.{victim}_misses_speech"):
        rerender_from_run(out, rec.session_id, tmp_path)


@pytest.mark.slow
def test_group_exports_label_each_person(group_run, tmp_path):
    from lhotse import CutSet
    from praatio import textgrid

    _, out = group_run
    rec = RunFolder(out).records[0]
    people = {e.person for e in rec.events if e.person}
    synth("export", out, "--format", "lhotse", "-o", tmp_path / "lh")
    cut = next(c for c in CutSet.from_file(tmp_path / "lh" / "cuts.jsonl.gz") if c.id.startswith(rec.session_id))
    speakers = {s.speaker for s in cut.supervisions}
    assert "User" in speakers and "Assistant" in speakers and speakers - {"User", "Assistant", "background"} <= people
    synth("export", out, "--format", "textgrid", "-o", tmp_path / "tg")
    tg = textgrid.openTextgrid(str(next((tmp_path / "tg").glob(f"{rec.session_id}*.TextGrid"))), False)
    assert {f"{p} words" for p in people} <= set(tg.tierNames) and "addressed" in tg.tierNames
    synth("export", out, "--format", "rttm", "-o", tmp_path / "rt")
    rttm = (tmp_path / "rt" / f"{rec.session_id}.rttm").read_text()
    assert {line.split()[7] for line in rttm.splitlines()} == people | {"system"} | (
        {"background"} if any(e.speaker == "background" for e in rec.events) else set())


def test_qa_refuses_a_system_turn_on_speech_meant_for_someone_else():
    from synth.schema.labels import FrameLabels
    from synth.schema.timeline import PlacedEvent, Timeline
    from synth.stages.qa import check_group

    def ev(i, speaker, on, off, **kw):
        return PlacedEvent(id=i, speaker=speaker, act="x", floor_intent="take" if speaker == "system" else "none",
                           text="hi", lang="en", on_sample=on, off_sample=off, **kw)

    tl = Timeline(sample_rate=16000, num_samples=64000, events=[
        ev("u1", "user", 0, 16000, person="maya", addressee="leo"),
        ev("s1", "system", 20000, 30000, relation="responds_to", attach_to="u1", addressee="maya")])
    labels = FrameLabels(frame_period_s=0.08, num_frames=50, sys_action=[0] * 50, sys_floor=[0] * 50,
                         usr_floor=[0] * 50, sys_vad=[0] * 50, usr_vad=[0] * 50, markers=[], addressed=[0] * 50)
    bad = check_group(tl, labels, 80)
    assert "system_takes_speech_for_others:s1" in bad and "system_answers_who_did_not_ask:s1" in bad
    fine = tl.model_copy(update={"events": [tl.events[0].model_copy(update={"addressee": "system"}), tl.events[1]]})
    addressed = [1 if k <= 12 else 0 for k in range(50)]
    assert check_group(fine, labels.model_copy(update={"addressed": addressed}), 80) == []


def test_dyadic_records_do_not_carry_the_group_fields():
    from synth.schema.plan import PlannedEvent

    e = PlannedEvent(id="u1", speaker="user", act="request", floor_intent="take", words=[{"text": "hi", "lang": "en"}])
    assert "person" not in e.model_dump(mode="json") and "addressee" not in json.loads(e.model_dump_json())
    g = e.model_copy(update={"person": "maya", "addressee": "system"})
    assert PlannedEvent.model_validate(g.model_dump(mode="json")) == g


def test_a_person_voice_pool_never_gives_the_assistant_that_persons_voice():
    """With pools, a person takes a variant out of the engine's order; the assistant (no pool)
    then takes the next free one instead of the same voice."""
    from synth.io.config_files import load_pipeline
    from synth.stages.render import draw_voices

    cfg = load_pipeline(ROOT / "pipelines" / "group.yaml")
    pools = {"margaret": ["f1", "f4"], "peter": ["m2", "m6"]}
    for i in range(200):
        voices = draw_voices(cfg, ["margaret", "peter", "system"], np.random.default_rng(i), pools)
        variants = [v.variant for v in voices.values()]
        assert len(set(variants)) == 3, (i, voices)
        assert voices["margaret"].variant in pools["margaret"] and voices["peter"].variant in pools["peter"]
