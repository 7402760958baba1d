"""Request order in group sessions (README "Group conversations", request order; issue 33): no
question after the assistant already said its answer, an opening request only first, nothing
about an option the group dropped. Read back from planned sessions of every group seed, with the
content files as the key (no audio)."""

import pytest
import yaml

from synth.backends.frames import fields, fill
from synth.backends.group_content import PLANNER_FIELDS, Scene, group_block
from synth.backends.group_planner import GroupBuilder
from synth.schema.seed import ScenarioSeed

from test_group import GROUP_SEEDS, plan

SEEDS = [ScenarioSeed.model_validate(yaml.safe_load(f.read_text())) for f in GROUP_SEEDS]


def plans(per_seed: int = 40):
    """``per_seed`` planned sessions of each group seed, with the content scene each plays."""
    for seed in SEEDS:
        scenes = {s.id: s for s in group_block(seed.domain, seed.language).scenes}
        for i in range(per_seed):
            p = plan(seed, i)
            yield seed, scenes[p.planner_meta["scene"]], p


def system_lines(scene: Scene, values: dict) -> list[tuple[str, set[str]]]:
    """Every line the assistant may say in the scene, filled with the session's values, and the
    slots each says."""
    d = scene.decision
    texts = [t for r in scene.requests for t in r.answers() + (r.ask_back.system if r.ask_back else [])]
    texts += (d.ask + d.confirm) if d else []
    blank = dict.fromkeys(PLANNER_FIELDS, "")
    return [(fill(t, {**values, **blank}).lower(), fields(t) - PLANNER_FIELDS) for t in texts]


def order_faults(scene: Scene, p) -> list[str]:
    """The requests of a plan ``p`` asked out of order, each as ``rule:event:text``. What the assistant
    said is read back from its lines (a line ends with a filled content line; it may open with
    the asker's name), not from the planner's own bookkeeping."""
    values = p.planner_meta["values"]
    known = system_lines(scene, values)
    at = {e.id: k for k, e in enumerate(p.events)}
    decide = next((k for k, e in enumerate(p.events) if e.act == "decide"), None)
    dropped = set()
    if decide is not None:
        said = p.events[decide].text.lower()
        dropped = {o for o in scene.options() if values[o].lower() not in said}
    bad = []
    for n, r in enumerate(p.planner_meta["requests"]):
        unit, k = scene.requests[r["unit"]], at[r["event"]]
        told = set().union(*(slots for e in p.events[:k] if e.speaker == "system"
                             for line, slots in known if e.text.lower().endswith(line)))
        text = p.events[k].text
        if told & set(unit.asks):
            bad.append(f"answered_before:{r['event']}:{text}")
        if unit.opens and n > 0:
            bad.append(f"opens_late:{r['event']}:{text}")
        if decide is not None and k > decide and unit.named() & dropped:
            bad.append(f"dropped_option:{r['event']}:{text}")
    return bad


def test_no_group_request_comes_after_its_answer_or_the_choice_that_made_it_moot():
    checked, faults = 0, []
    for seed, scene, p in plans():
        faults += [f"{seed.id} {p.session_id}: {f}" for f in order_faults(scene, p)]
        checked += len(p.planner_meta["requests"])
    assert checked > 2000 and not faults, "\n".join(faults[:20])


def test_the_order_check_finds_the_bad_orders_when_every_request_may_be_asked(monkeypatch):
    """The check bites: with the order rules off, the same plans ask "how long do they bake
    for?" after the timer, the places to eat after the group chose one, the check-in late."""
    monkeypatch.setattr(GroupBuilder, "askable", lambda self, i: True)
    kinds = {f.split(":")[0] for seed, scene, p in plans(15) for f in order_faults(scene, p)}
    assert kinds == {"answered_before", "opens_late", "dropped_option"}


@pytest.mark.parametrize("answer, asks, message", [
    ("About {minutes} minutes.", ["minutes"], None),
    ("About ten minutes.", ["minutes"], "says none of them"),
    ("About {nowhere} minutes.", ["nowhere"], "'nowhere' is not a slot"),
])
def test_a_request_asks_for_a_slot_of_its_scene_that_each_answer_says(answer, asks, message):
    other = {"user": ["q one?", "q two?"], "system": ["answer one.", "answer two."]}
    unit = {"user": ["how long do they bake for?", "how long do they stay in?"],
            "system": [answer, answer], "asks": asks}
    scene = {"id": "s", "topic": "the cookies", "slots": {"minutes": ["ten", "twelve"]},
             "requests": [unit, other, other], "chats": [["a?", "b."], ["c?", "d."], ["e?", "f."]]}
    if message is None:
        assert Scene.model_validate(scene).requests[0].asks == ["minutes"]
    else:
        with pytest.raises(ValueError, match=message):
            Scene.model_validate(scene)
