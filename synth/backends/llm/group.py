"""Group seeds (``people``) in mode ``plan``: the people in the prompt, ``person`` and ``addressee``
on every event of the reply, and the rules that check them (``schema.GROUP_RULES``).

A group prompt is a dyadic one with three additions, so dyadic requests stay byte for byte what
they were: the scenario lists the people (id, name, role, style, whether they speak to the
assistant) instead of one user; a section explains the two fields and how people talk to each
other; the rules go on with ``GROUP_RULES``. The reply's events carry ``person`` (the speaking
person's id, null for the system) and ``addressee`` (``system``, ``group`` or a person's id); an
id that is not one of the seed's people is an error naming the rule, sent back like any other,
and after ``max_attempts`` the session is a reject with that reason (never a crash).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from ...schema.plan import talker
from ...schema.seed import ScenarioSeed
from .schema import LLMEvent, LLMPlan, _err

PersonId = Annotated[str, StringConstraints(min_length=1, max_length=40)]


class LLMGroupEvent(LLMEvent):
    person: PersonId | None
    addressee: PersonId


class LLMGroupPlan(LLMPlan):
    events: list[LLMGroupEvent] = Field(min_length=2, max_length=40)


def narrow_group_schema(props: dict, seed: ScenarioSeed) -> None:
    """Enumerate the seed's people in the event schema (a grammar then cannot write anyone else)."""
    keys = [p.key for p in seed.people]
    props["speaker"]["enum"] = ["user", "system"]
    person = props["person"]
    branch = next(b for b in person["anyOf"] if b.get("type") == "string")
    branch["enum"] = keys
    props["addressee"]["enum"] = ["system", "group", *keys]


def group_errors(p: LLMPlan, seed: ScenarioSeed) -> list[str]:
    """``GROUP_RULES`` on a parsed group plan (the generic rules already looked at floors, relations
    and anchors by person)."""
    people = {q.key: q for q in seed.people}
    errs: list[str] = []
    by_id: dict[str, LLMGroupEvent] = {}
    asked: set[str] = set()
    for i, ev in enumerate(p.events):
        at = f"events[{i}] ({ev.id})"
        errs += _who_errors(at, ev, people)
        if ev.speaker == "user" and ev.person in people:
            errs += _human_errors(at, ev)
        elif ev.speaker == "system":
            errs += _system_errors(at, ev, by_id, asked, people)
        if ev.speaker == "user" and ev.addressee == "system" and ev.person:
            asked.add(ev.person)
        by_id.setdefault(ev.id, ev)
    return errs


def _who_errors(at: str, ev: LLMGroupEvent, people: dict) -> list[str]:
    errs = []
    if ev.speaker == "user" and ev.person not in people:
        errs.append(_err(at, "person", f"unknown person {ev.person!r}; the people are {sorted(people)}"))
    if ev.speaker == "system" and ev.person is not None:
        errs.append(_err(at, "person", f"a system event has person null (got {ev.person!r})"))
    if ev.addressee not in ("system", "group", *people):
        errs.append(_err(at, "addressee", f"unknown addressee {ev.addressee!r}; one of system, group, "
                                          f"{', '.join(sorted(people))}"))
    elif ev.addressee == ev.person or (ev.speaker == "system" and ev.addressee == "system"):
        errs.append(_err(at, "addressee", f"{talker(ev)} does not speak to themselves"))
    elif ev.addressee == "system" and ev.person in people and not people[ev.person].can_address_system:
        errs.append(_err(at, "addressee", f"{ev.person!r} never speaks to the system"))
    return errs


def _served(target: LLMGroupEvent, by_id: dict) -> set[str]:
    """Whom a system answer to ``target`` may address: its speaker, the group, and where ``target``
    answers a question the system put to someone (answer_for_other), that someone."""
    out = {target.person, "group"}
    asked = by_id.get(target.attach_to or "") if target.relation == "responds_to" else None
    if asked is not None and asked.speaker == "system" and asked.addressee not in (None, "group", "system"):
        out.add(asked.addressee)
    return out


def _human_errors(at: str, ev: LLMGroupEvent) -> list[str]:
    errs = []
    if ev.addressee != "system" and ev.relation == "continues":
        errs.append(_err(at, "human_talk", "a line to another person is one event: no continues"))
    if ev.relation == "addresses_other" and ev.addressee == "system":
        errs.append(_err(at, "human_talk", "addresses_other is for a line to another person or the group"))
    return errs


def _system_errors(at: str, ev: LLMGroupEvent, by_id: dict, asked: set[str], people: dict) -> list[str]:
    errs = []
    target = by_id.get(ev.attach_to or "")
    if ev.relation == "responds_to" and target is not None and target.speaker == "user":
        if target.addressee != "system":
            errs.append(_err(at, "system_answers", f"{target.id!r} is addressed to {target.addressee!r}, not "
                                                   "the system: the system does not take the floor on it"))
        elif ev.addressee not in (served := _served(target, by_id)):
            errs.append(_err(at, "system_answers", f"answers {target.id!r} by {target.person!r}, so its addressee "
                                                   f"is one of {sorted(served)} (got {ev.addressee!r})"))
    if ev.addressee in people and ev.addressee not in asked:
        errs.append(_err(at, "system_answers", f"addressed to {ev.addressee!r}, who has not spoken to the system "
                                               "before it"))
    return errs


# -- the prompt -------------------------------------------------------------------------------
_PEOPLE_HEAD = {"en": ("People on the user side (speaker user; person is the id before the colon)",
                       "speaks to the system", "never speaks to the system", "Goals of the group"),
                "zh": ("用户一方的几个人（speaker 都是 user；person 填冒号前的 id）", "会和系统说话", "从不和系统说话",
                       "这群人的目标")}


def people_lines(seed: ScenarioSeed, lang: str) -> list[str]:
    """The scenario block's lines for the people: one per person, id first."""
    head, yes, no, _ = _PEOPLE_HEAD[lang]
    sep = "; " if lang == "en" else "；"
    return [f"- {head}:"] + [
        f"  - {q.key}: {', '.join(s for s in (q.name, q.role, q.style) if s)}{sep}{yes if q.can_address_system else no}"
        for q in seed.people]


def goals_label(lang: str) -> str:
    return _PEOPLE_HEAD[lang][3]


PLAN_BLOCK = {
    "en": """# People and addressees
Several people share the room with the assistant, and most of what they say is for each other. Every
event has two more fields:
- person: the id of the person who speaks (user events); null for the system.
- addressee: whom the event is for: system, group (everyone) or a person's id.
People reply to each other coherently (a question gets its answer, a suggestion a yes or a no),
answer or correct for one another, talk over each other now and then, and turn to the assistant
(often by its name) when they want something from it. The system speaks only when someone speaks
to it, or to everyone when it asks them all something; it answers the person who asked, by name
where natural, and while the people decide among themselves it waits for one of them to tell it.
""",
    "zh": """# 人和说话对象
房间里有几个人和助手在一起，他们说的话大多是说给彼此听的。每个事件还有两个字段：
- person：说话的人的 id（用户事件）；系统事件为 null。
- addressee：这句话是对谁说的：system、group（大家）或某个人的 id。
人们连贯地互相回应（问题有回答，提议有同意或不同意），替别人回答或纠正别人，偶尔抢话，需要助手时
转向它（常常叫它的名字）。只有有人对系统说话时系统才开口，或者在它要问大家时对大家说；它回答提问的那个人，
自然时叫出他的名字；大家商量时它等着，直到有人把决定告诉它。
""",
}

OUTLINE_BLOCK = {
    "en": """# People
Say who speaks to whom: the people talk to each other most of the time and turn to the assistant
when they want something; the assistant answers only the person who asked (or asks everyone).
""",
    "zh": """# 人
写清楚谁对谁说话：大多数时候是人们互相交谈，需要时才转向助手；助手只回答提问的那个人（或者问大家）。
""",
}


def group_block(seed: ScenarioSeed, lang: str, outline: bool = False) -> str:
    """The template's ``$group_block``: empty for a dyadic seed (its prompt is unchanged)."""
    if not seed.is_group:
        return ""
    return (OUTLINE_BLOCK if outline else PLAN_BLOCK)[lang]
