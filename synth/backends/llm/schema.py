"""The plan as the LLM writes it (mode ``plan``), and the rules a reply must pass to become a ``Plan``.

The LLM-facing model is simpler than ``Plan``: one ``text`` per event (words and their
languages come from our tokenizer, ``synth.text.tokenize``), the word an interruption or a
backchannel attaches at given as the words themselves (``attach_text``, resolved here against
our tokenisation, so a model never counts words), every field required (nullable where optional)
so strict JSON-schema modes accept it, and every string bounded by ``maxLength``.

``RULES`` holds every rule ``check_plan`` enforces, one line each in the prompt's language; each
error names its rule, so the prompt and the validator cannot drift apart unnoticed
(``tests/test_llm_planner.py`` checks both ways).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationError

from ...schema.common import FloorIntent, Model
from ...schema.phenomena import REGISTRY, resolve_rates
from ...schema.plan import PauseKind, Plan, PlannedEvent, PlannedWork, join_words
from ...schema.plan import talker as who  # an LLM event's person in a group plan, else its speaker
from ...schema.seed import ScenarioSeed
from ...text import CJK, tokenize

EventId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,11}$", max_length=12)]
Act = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z_]{0,31}$", max_length=32)]
PhenomenonId = Literal[tuple(REGISTRY)]  # type: ignore[valid-type]
LLMSpeaker = Literal["user", "system", "third_party"]
LLMRelation = Literal["responds_to", "continues", "interrupts", "backchannels_on", "addresses_other",
                      "delivers_result_of"]
"""``Plan``'s relations less ``during`` (sounds inside speech: added by the paralinguistic pass) and
``delegates_for`` (a delegation is a work item opened by its acknowledgement, not a relation)."""

USER_MAX, SYSTEM_MAX, BACKCHANNEL_MAX = 30, 60, 6
"""Most words of a user, system and backchannel text (Chinese: 3 characters count as 2 words)."""
ANCHOR_MIN_WORDS = 6
"""An interrupted or backchannelled event needs this many words: there must be speech to cut into."""


class LLMEvent(Model):
    id: EventId
    speaker: LLMSpeaker
    act: Act
    text: Annotated[str, StringConstraints(min_length=1, max_length=320)]
    floor_intent: FloorIntent
    relation: LLMRelation | None
    attach_to: EventId | None
    attach_text: Annotated[str, StringConstraints(min_length=1, max_length=60)] | None
    pause_before: PauseKind | None
    gap_kind: Literal["normal", "dispreferred", "silence"]
    phenomena: list[PhenomenonId] = Field(max_length=4)


class LLMWork(Model):
    work_id: EventId
    tool: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$", max_length=40)]
    objective: Annotated[str, StringConstraints(min_length=1, max_length=160)]
    result_text: Annotated[str, StringConstraints(min_length=1, max_length=240)]
    outcome: Literal["success", "failure"]
    opened_by: EventId
    cancelled_by: EventId | None
    progress_by: EventId | None
    progress_text: Annotated[str, StringConstraints(min_length=1, max_length=160)] | None


class LLMPlan(Model):
    events: list[LLMEvent] = Field(min_length=2, max_length=40)
    work: list[LLMWork] = Field(max_length=3)


class LLMOutline(Model):
    probability: float = Field(ge=0, le=1)
    outline: Annotated[str, StringConstraints(min_length=1, max_length=500)]


class LLMOutlines(Model):
    outlines: list[LLMOutline] = Field(min_length=1, max_length=8)


# every rule check_plan enforces: (English, Chinese); ``{max_events}`` is filled per request
RULES: dict[str, tuple[str, str]] = {
    "ids": ("ids are unique over events and work items: u1 u2 ... user, s1 s2 ... system, t1 ... third party, "
            "w1 w2 ... work items",
            "id 在事件和任务之间不能重复：用户 u1 u2 ……，系统 s1 s2 ……，第三方 t1 ……，任务 w1 w2 ……"),
    "first": ("the first event has relation and attach_to null; every later event has both set",
              "第一个事件的 relation 和 attach_to 都是 null；之后的每个事件两者都要填写"),
    "earlier": ("attach_to names an earlier event (for delivers_result_of: a work_id)",
                "attach_to 必须是前面已经出现的事件 id（delivers_result_of 则填 work_id）"),
    "responds": ("responds_to attaches to the latest earlier event that is not a backchannels_on event; "
                 "a system event responds only to a user event",
                 "responds_to 接在前面最近的一个事件上（backchannels_on 事件不算）；系统只回应用户的事件"),
    "continues": ("continues: the same speaker goes on after a pause; it attaches to that speaker's event right "
                  "before it (only backchannels_on events may come between), floor_intent hold, pause_before set "
                  "(within_turn, hesitation or long); pause_before is null on every other event",
                  "continues：同一说话人停顿后接着说；接在他紧挨着的上一个事件上（中间只能有 backchannels_on 事件），"
                  "floor_intent 为 hold，并填写 pause_before（within_turn、hesitation 或 long）；其他事件的 "
                  "pause_before 都是 null"),
    "floor": ("floor_intent: take for responds_to, interrupts, delivers_result_of and the first event; hold for "
              "continues; none for backchannels_on, addresses_other and every third_party event",
              "floor_intent：responds_to、interrupts、delivers_result_of 和第一个事件为 take；continues 为 hold；"
              "backchannels_on、addresses_other 和第三方的事件为 none"),
    "interrupts": (f"interrupts: a user event cutting into a system event of at least {ANCHOR_MIN_WORDS} words, "
                   "the last of its turn (nothing continues it), once, before anything responds to it; attach_text "
                   "is where the user starts (its first word counts), and at least 2 more words of the system event "
                   "follow that word (they are cut off)",
                   f"interrupts：用户打断系统的一个事件（至少 {ANCHOR_MIN_WORDS} 个词），它是该话轮的最后一个事件"
                   "（没有 continues 接着它），只能被打断一次，且在任何回应它的事件之前；attach_text 是用户开口的位置"
                   "（以它的第一个词为准），这个词后面至少还要有 2 个词（被打断、没说出来）"),
    "backchannels": (f"backchannels_on: a short event (at most {BACKCHANNEL_MAX} words) of another speaker during "
                     f"an event of at least {ANCHOR_MIN_WORDS} words; attach_text is the words right after which "
                     "it falls",
                     f"backchannels_on：另一方在对方说话时的简短回应（最多 {BACKCHANNEL_MAX} 个词），对方的事件至少 "
                     f"{ANCHOR_MIN_WORDS} 个词；attach_text 是回应紧跟在其后的那几个词"),
    "attach_text": ("attach_text is copied exactly from the attached event's text (a word or a short phrase; "
                    "its first occurrence counts); null for every other relation",
                    "attach_text 必须从被接的事件的 text 里原样复制（一个词或一个短语；以第一次出现为准）；"
                    "其他关系都填 null"),
    "deliver": ("delivers_result_of: a system event whose attach_to is a work_id opened earlier; each work "
                "item is delivered exactly once, unless it is cancelled (then never)",
                "delivers_result_of：系统事件，attach_to 是前面已开启的 work_id；每个任务恰好播报一次，"
                "被取消的任务不播报"),
    "work_open": ("opened_by is the system's acknowledge event (or, for a silent delegation, the user's request); "
                  "one work item per event",
                  "opened_by 是系统确认（acknowledge）的事件（静默委托时是用户的请求）；一个事件只能开启一个任务"),
    "tool": ("tool is one of the tools listed above", "tool 必须是上面列出的工具之一"),
    "cancel": ("cancelled_by: the later user event that cancels or replaces the request (tag it "
               "stale_result_dropped); that item is never delivered; null otherwise",
               "cancelled_by：之后取消或替换这个请求的用户事件（标注 stale_result_dropped）；该任务不再播报；"
               "否则为 null"),
    "progress": ("progress_by: the later system event, before the delivery, that answers the user's progress "
                 "question, and progress_text the tool's note it is based on; both null otherwise",
                 "progress_by：播报之前、回答用户进度询问的系统事件，progress_text 是它依据的工具进度说明；"
                 "否则两者都为 null"),
    "speakers": ("both user and system speak; third_party only where the scenario has one",
                 "用户和系统都要说话；只有场景里有第三方时才能用 third_party"),
    "phenomena": ("phenomena only names ids listed in this request, and every must-appear id is tagged on "
                  "at least one event",
                  "phenomena 只能用本请求列出的 id，每个必须出现的 id 至少标注在一个事件上"),
    "gap": ("gap_kind dispreferred (a late, reluctant answer) or silence (the user lets a silence fall "
            "after a system question) only on responds_to events; normal otherwise",
            "gap_kind 为 dispreferred（迟疑、不情愿的回答）或 silence（系统提问后用户沉默一会儿）只用于 "
            "responds_to 事件；否则为 normal"),
    "length": (f"at most {{max_events}} events; a text is at most {USER_MAX} words (user, third party), "
               f"{SYSTEM_MAX} (system), {BACKCHANNEL_MAX} (backchannels_on); in Chinese 3 characters count "
               "as 2 words",
               f"最多 {{max_events}} 个事件；每句最多 {USER_MAX} 个词（用户、第三方）、{SYSTEM_MAX} 个词（系统）、"
               f"{BACKCHANNEL_MAX} 个词（backchannels_on）；中文 3 个字算 2 个词"),
    "spoken": ("text is what is spoken: no brackets, stage directions, emoji or markup",
               "text 只写说出来的话：不要括号、动作说明、表情符号或标记"),
    "language": ("every text follows the language rule of the scenario", "每句话都遵守场景的语言要求"),
}

# the rules of group seeds (``people``), numbered after RULES and stated only in their prompts
GROUP_RULES: dict[str, tuple[str, str]] = {
    "person": ("every user event names its person (one of the people's ids listed above; every person's "
               "speaker is user); every system event has person null",
               "每个用户事件都写明 person（上面列出的某个人的 id；每个人的 speaker 都是 user）；系统事件的 person 为 null"),
    "addressee": ("every event names its addressee: system, group (everyone) or a person's id, never the speaker "
                  "themselves; a person who never speaks to the system never has addressee system",
                  "每个事件都写明 addressee：system、group（大家）或某个人的 id，不能是说话人自己；"
                  "不和系统说话的人，addressee 永远不是 system"),
    "human_talk": ("a person's line to another person or to the group has floor_intent none whatever its "
                   "relation (this overrides rule 6) and is one event (no continues): addresses_other or null "
                   "starts a talk between people, responds_to answers another person's line, interrupts is a "
                   "person talking over another person's line (like a backchannel, it is not the latest event "
                   "rule 4 means); addresses_other is only for such lines",
                   "某人对另一个人或大家说的话，不论什么关系 floor_intent 都是 none（优先于第 6 条），而且只有一个事件"
                   "（不用 continues）：addresses_other 或 null 开始人与人的交谈，responds_to 回应另一个人的话，"
                   "interrupts 是一个人在另一个人说话时插话（和 backchannels_on 一样，不算第 4 条说的最近的事件）；"
                   "addresses_other 只用于这种话"),
    "system_answers": ("the system takes the floor only on speech addressed to it: a system responds_to event "
                       "answers a user event whose addressee is system, and its addressee is that event's person, "
                       "group, or the person whose question another person answered (answer_for_other); every "
                       "system event is addressed to group or to a person who spoke to the system before it",
                       "系统只在有人对它说话时接话：系统的 responds_to 事件回应的必须是 addressee 为 system 的用户事件，"
                       "它的 addressee 是那个事件的 person、group，或者别人替其回答问题的那个人（answer_for_other）；"
                       "系统的每个事件的 addressee 是 group，或者是之前对系统说过话的某个人"),
}

_MARKUP = re.compile(r"[\[\]()（）<>{}*#_~`|\\]|[\U0001F300-\U0001FAFF\u2600-\u27BF]")
_LATIN = re.compile(r"[A-Za-z]")
_NORM = re.compile(r"[\s,.?!;:，。？！；：、…\-'\"“”‘’]+")


def rule_lines(lang: str, max_events: int, group: bool = False) -> str:
    """The numbered rules of a plan prompt; a group seed's prompt adds ``GROUP_RULES`` after them."""
    i = 0 if lang == "en" else 1
    rules = list(RULES.values()) + (list(GROUP_RULES.values()) if group else [])
    return "\n".join(f"{n}. {text[i].format(max_events=max_events)}" for n, text in enumerate(rules, 1))


def _err(at: str, rule: str, msg: str) -> str:
    return f"{at}: {msg} (rule {(list(RULES) + list(GROUP_RULES)).index(rule) + 1}: {rule})"


def plan_schema(seed: ScenarioSeed | None = None, max_events: int | None = None, allowed: list[str] | None = None
                ) -> dict:
    """The JSON schema of one plan, sent as ``response_format`` and, in fallback modes, in the prompt.

    Narrowed where a grammar can enforce it: the request's phenomena, the seed's tools and speakers,
    and at most ``max_events`` events (a grammar-bound small model otherwise runs to ``max_tokens``).
    """
    group = seed is not None and seed.is_group
    if group:
        from .group import LLMGroupPlan

    schema = _strip_titles((LLMGroupPlan if group else LLMPlan).model_json_schema())
    defs = schema["$defs"]
    if max_events is not None:
        schema["properties"]["events"]["maxItems"] = max_events
    if allowed is not None:
        ph = defs["LLMGroupEvent" if group else "LLMEvent"]["properties"]["phenomena"]
        if allowed:
            ph["items"]["enum"] = sorted(allowed)
        else:
            ph["maxItems"] = 0
    if seed is not None:
        if group:
            from .group import narrow_group_schema

            narrow_group_schema(defs["LLMGroupEvent"]["properties"], seed)
        elif seed.personas.third_party is None:
            defs["LLMEvent"]["properties"]["speaker"]["enum"] = ["user", "system"]
        if seed.tools:
            defs["LLMWork"]["properties"]["tool"] = {"enum": [t.name for t in seed.tools], "type": "string"}
        else:
            schema["properties"]["work"]["maxItems"] = 0
    return schema


def outline_schema(k: int, max_chars: int) -> dict:
    schema = _strip_titles(LLMOutlines.model_json_schema())
    schema["properties"]["outlines"]["maxItems"] = k
    schema["$defs"]["LLMOutline"]["properties"]["outline"]["maxLength"] = max_chars
    return schema


def _strip_titles(node):
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def fmt_errors(prefix: str, err: ValidationError, limit: int = 8) -> list[str]:
    out = []
    for e in err.errors()[:limit]:
        loc = prefix
        for part in e["loc"]:
            loc += f"[{part}]" if isinstance(part, int) else f".{part}"
        got = e.get("input")
        shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
        out.append(f"{loc.lstrip('.')}: {e['msg'].removeprefix('Value error, ')} (got {shown[:60]})")
    return out


def plan_object(obj: Any) -> Any:
    """The plan in a reply: the object itself, or the first of a batch or list (older prompts, small models)."""
    if isinstance(obj, dict) and isinstance(obj.get("alternatives"), list) and obj["alternatives"]:
        obj = obj["alternatives"][0]
    if isinstance(obj, list) and obj:
        obj = obj[0]
    if isinstance(obj, dict) and "plan" in obj and "events" not in obj:
        obj = obj["plan"]
    return obj


def parse_plan(obj: Any, group: bool = False) -> tuple[LLMPlan | None, list[str]]:
    """The reply as an ``LLMPlan`` (``LLMGroupPlan`` for a group seed: every event has ``person`` and
    ``addressee``), or the validation errors."""
    if group:
        from .group import LLMGroupPlan as model
    else:
        model = LLMPlan
    try:
        return model.model_validate(plan_object(obj)), []
    except ValidationError as e:
        return None, fmt_errors("", e)


def words_of(text: str) -> int:
    """Length in the prompt's words: English words plus 2/3 of the Chinese characters (rounded up)."""
    cjk = sum(len(m) for m in CJK.findall(text))
    latin = len([w for w in CJK.sub(" ", text).split() if any(c.isalnum() for c in w)])
    return latin + -(-cjk * 2 // 3)


def anchor_word(target_text: str, phrase: str, relation: str) -> int | None:
    """The word index in ``tokenize(target_text)`` that ``phrase`` names, or ``None``.

    Case, spaces and punctuation are ignored; the first occurrence that starts at a word boundary
    counts. ``interrupts`` gets the first word of the phrase (the user starts there),
    ``backchannels_on`` the last (the backchannel falls right after it).
    """
    words = tokenize(target_text)
    norm, owner, bounds = "", [], {0}
    for i, w in enumerate(words):
        piece = _NORM.sub("", w.text).lower()
        norm += piece
        owner += [i] * len(piece)
        bounds.add(len(norm))
    want = _NORM.sub("", phrase).lower()
    if not want:
        return None

    def whole(at: int) -> bool:  # English words match whole; Chinese may split where jieba does not
        return ((at in bounds or not want[0].isascii()) and
                (at + len(want) in bounds or not want[-1].isascii()))

    at = norm.find(want)
    while at >= 0 and not whole(at):
        at = norm.find(want, at + 1)
    if at < 0:
        return None
    return owner[at] if relation == "interrupts" else owner[at + len(want) - 1]


def allowed_phenomena(seed: ScenarioSeed) -> set[str]:
    return {k for k, v in resolve_rates(seed.phenomena).items() if v > 0}


def check_plan(p: LLMPlan, seed: ScenarioSeed, required: list[str], max_events: int,
               allowed: set[str] | None = None) -> list[str]:
    """The plan's rules and the seed's (``RULES``): an empty list means the plan is usable."""
    allowed = allowed_phenomena(seed) if allowed is None else allowed
    errs: list[str] = []
    by_id: dict[str, LLMEvent] = {}
    works = {w.work_id: w for w in p.work}
    for i, ev in enumerate(p.events):
        at = f"events[{i}] ({ev.id})"
        if ev.id in by_id or ev.id in works:
            errs.append(_err(at, "ids", f"id {ev.id!r} is used twice"))
        errs += _event_rules(at, i, ev, p.events[:i], by_id, works, seed, allowed)
        by_id.setdefault(ev.id, ev)
    errs += _work_rules(p, by_id, seed)
    if len(p.events) > max_events:
        errs.append(_err("events", "length", f"{len(p.events)} events; at most {max_events}"))
    speakers = {e.speaker for e in p.events}
    if not {"user", "system"} <= speakers:
        errs.append(_err("events", "speakers", "both user and system must speak"))
    tagged = {ph for e in p.events for ph in e.phenomena}
    missing = [ph for ph in required if ph not in tagged]
    if missing:
        errs.append(_err("events", "phenomena", f"must-appear phenomena not tagged on any event: {missing}"))
    errs += language_errors([(f"events[{i}] ({e.id})", e.text) for i, e in enumerate(p.events)], seed.language)
    if seed.is_group:
        from .group import group_errors

        errs += group_errors(p, seed)
    return errs


def _event_rules(at: str, i: int, ev: LLMEvent, before: list[LLMEvent], by_id: dict, works: dict,
                 seed: ScenarioSeed, allowed: set[str]) -> list[str]:
    errs: list[str] = []
    if i == 0 and (ev.relation is not None or ev.attach_to is not None):
        errs.append(_err(at, "first", "the first event attaches to nothing: relation and attach_to null"))
    if i > 0 and (ev.relation is None or ev.attach_to is None):
        errs.append(_err(at, "first", "relation and attach_to must both be set"))
    if ev.speaker == "third_party" and seed.personas.third_party is None:
        errs.append(_err(at, "speakers", "this scenario has no third_party"))
    for ph in ev.phenomena:
        if ph not in allowed:
            errs.append(_err(at, "phenomena", f"phenomenon {ph!r} is not listed in this request"))
    want_floor = ("none" if seed.is_group and ev.speaker == "user" and getattr(ev, "addressee", "system") != "system"
                  else "hold" if ev.relation == "continues" else
                  "none" if ev.relation in ("backchannels_on", "addresses_other") or ev.speaker == "third_party"
                  else "take")
    if ev.floor_intent != want_floor:
        errs.append(_err(at, "floor", f"floor_intent must be {want_floor} here (got {ev.floor_intent})"))
    if (ev.pause_before is not None) != (ev.relation == "continues"):
        errs.append(_err(at, "continues", "continues needs pause_before; other relations have it null"))
    if ev.gap_kind != "normal" and ev.relation != "responds_to":
        errs.append(_err(at, "gap", f"gap_kind {ev.gap_kind} is only for responds_to"))
    if (ev.attach_text is not None) != (ev.relation in ("interrupts", "backchannels_on")):
        errs.append(_err(at, "attach_text", f"attach_text is {'needed' if ev.attach_text is None else 'null'} "
                                            f"for {ev.relation}"))
    if _MARKUP.search(ev.text):
        errs.append(_err(at, "spoken", f"text {ev.text!r} has brackets, markup or emoji"))
    limit = (BACKCHANNEL_MAX if ev.relation == "backchannels_on" else SYSTEM_MAX if ev.speaker == "system"
             else USER_MAX)
    if words_of(ev.text) > limit:
        errs.append(_err(at, "length", f"text has {words_of(ev.text):.0f} words; at most {limit}"))
    if ev.relation == "delivers_result_of":
        if ev.speaker != "system":
            errs.append(_err(at, "deliver", "only the system delivers results"))
        if ev.attach_to not in works:
            errs.append(_err(at, "deliver", f"attach_to must be a work_id of 'work' (got {ev.attach_to!r})"))
        elif works[ev.attach_to].opened_by not in by_id:
            errs.append(_err(at, "deliver", f"delivers {ev.attach_to!r} before its opening event "
                                            f"{works[ev.attach_to].opened_by!r}"))
        return errs
    if ev.attach_to is None or ev.relation is None:
        return errs
    target = by_id.get(ev.attach_to)
    if target is None:
        errs.append(_err(at, "earlier", f"attach_to {ev.attach_to!r} is not an earlier event id"))
        return errs
    return errs + _relation_rules(at, ev, target, before, seed.is_group)


def _aside(e: LLMEvent, group: bool) -> bool:
    """An event that ``responds_to`` looks past: a backchannel, and in a group one person talking
    over another's line (the talk goes on from the overlapped line)."""
    return e.relation == "backchannels_on" or (group and e.relation == "interrupts" and e.floor_intent == "none")


def _relation_rules(at: str, ev: LLMEvent, target: LLMEvent, before: list[LLMEvent], group: bool = False
                    ) -> list[str]:
    errs: list[str] = []
    rel = ev.relation
    if rel == "responds_to":
        latest = next((e for e in reversed(before) if not _aside(e, group)), None)
        if latest is not None and latest.id != target.id:
            errs.append(_err(at, "responds", f"responds_to {target.id!r}, but the latest event before it is "
                                             f"{latest.id!r}"))
        if ev.speaker == "system" and target.speaker != "user":
            errs.append(_err(at, "responds", f"the system responds only to the user (got {target.speaker})"))
    elif rel == "continues":
        between = before[[e.id for e in before].index(target.id) + 1:]
        if who(target) != who(ev):
            errs.append(_err(at, "continues", f"continues must attach to the same speaker (got {who(target)})"))
        elif any(e.relation != "backchannels_on" for e in between):
            errs.append(_err(at, "continues", f"only backchannels may come between {target.id!r} and its "
                                              f"continuation (got {[e.id for e in between]})"))
    elif rel in ("interrupts", "backchannels_on"):
        errs += _anchor_rules(at, ev, target, group)
        if rel == "interrupts":
            after = before[[e.id for e in before].index(target.id) + 1:]
            earlier = [e.id for e in after if e.attach_to == target.id
                       and e.relation in ("interrupts", "responds_to", "continues")]
            if earlier:
                errs.append(_err(at, "interrupts", f"{target.id!r} is already continued, answered or interrupted "
                                                   f"by {earlier[0]!r}"))
    return errs


def _anchor_rules(at: str, ev: LLMEvent, target: LLMEvent, group: bool = False) -> list[str]:
    rel, errs = ev.relation, []
    over_person = group and target.speaker == "user" and who(target) != who(ev)  # people talking over each other
    if rel == "interrupts" and not (ev.speaker == "user" and (target.speaker == "system" or over_person)):
        errs.append(_err(at, "interrupts", "only a user event interrupts, and only a system event"
                                           + (" or another person's line" if group else "")))
    if rel == "backchannels_on" and who(target) == who(ev):
        errs.append(_err(at, "backchannels", "backchannels_on must attach to another speaker's event"))
    n = len(tokenize(target.text))
    if n < ANCHOR_MIN_WORDS:
        errs.append(_err(at, "interrupts" if rel == "interrupts" else "backchannels",
                         f"{target.id!r} has {n} words; {rel} needs at least {ANCHOR_MIN_WORDS}"))
    if ev.attach_text is None:
        return errs
    k = anchor_word(target.text, ev.attach_text, rel)
    if k is None:
        errs.append(_err(at, "attach_text", f"attach_text {ev.attach_text!r} does not occur in the text of "
                                            f"{target.id!r}: {target.text!r}"))
    elif rel == "interrupts" and k > n - 3:
        errs.append(_err(at, "interrupts", f"attach_text {ev.attach_text!r} is too near the end of "
                                           f"{target.id!r}: leave at least 2 words after it"))
    return errs


def _work_rules(p: LLMPlan, by_id: dict[str, LLMEvent], seed: ScenarioSeed) -> list[str]:
    errs: list[str] = []
    order = {e.id: i for i, e in enumerate(p.events)}
    delivered: dict[str, int] = {}
    for e in p.events:
        if e.relation == "delivers_result_of" and e.attach_to:
            delivered[e.attach_to] = delivered.get(e.attach_to, 0) + 1
    tools = {t.name for t in seed.tools}
    openers: set[str] = set()
    for j, w in enumerate(p.work):
        at = f"work[{j}] ({w.work_id})"
        if w.opened_by in openers:
            errs.append(_err(at, "work_open", f"event {w.opened_by!r} already opens a work item"))
        openers.add(w.opened_by)
        opener = by_id.get(w.opened_by)
        if opener is None:
            errs.append(_err(at, "work_open", f"opened_by must be an event id (got {w.opened_by!r})"))
        if w.tool not in tools:
            errs.append(_err(at, "tool", f"tool {w.tool!r} is not in the catalogue {sorted(tools)}"))
        n = delivered.get(w.work_id, 0)
        if w.cancelled_by is not None:
            c = by_id.get(w.cancelled_by)
            if c is None or c.speaker != "user" or order[c.id] <= order.get(w.opened_by, -1):
                errs.append(_err(at, "cancel", f"cancelled_by must be a user event after {w.opened_by!r} "
                                               f"(got {w.cancelled_by!r})"))
            elif "stale_result_dropped" not in c.phenomena:
                errs.append(_err(at, "cancel", f"tag the cancelling event {c.id!r} stale_result_dropped"))
            if n:
                errs.append(_err(at, "cancel", "a cancelled item is never delivered"))
        elif n != 1:
            errs.append(_err(at, "deliver", f"delivered {n} times; exactly once unless cancelled"))
        if (w.progress_by is None) != (w.progress_text is None):
            errs.append(_err(at, "progress", "progress_by and progress_text are both set or both null"))
        elif w.progress_by is not None:
            pe = by_id.get(w.progress_by)
            deliveries = [order[e.id] for e in p.events if e.relation == "delivers_result_of"
                          and e.attach_to == w.work_id]
            if (pe is None or pe.speaker != "system" or order[pe.id] <= order.get(w.opened_by, -1)
                    or any(order[pe.id] > d for d in deliveries)):
                errs.append(_err(at, "progress", f"progress_by must be a system event between {w.opened_by!r} "
                                                 f"and the delivery (got {w.progress_by!r})"))
    return errs


def language_errors(texts: list[tuple[str, str]], language: str) -> list[str]:
    """The language rule: en no Chinese characters, zh no Latin letters, en-zh Chinese with English in it."""
    errs: list[str] = []
    if language == "en":
        errs = [_err(at, "language", f"English only, but {t!r} has Chinese characters") for at, t in texts
                if CJK.search(t)]
    elif language == "zh":
        errs = [_err(at, "language", f"Mandarin only, but {t!r} has Latin letters") for at, t in texts
                if _LATIN.search(t)]
    else:
        zh = sum(len(m) for _, t in texts for m in CJK.findall(t))
        mixed = [at for at, t in texts if CJK.search(t) and _LATIN.search(t)]
        if not mixed:
            errs.append(_err("events", "language", "code-switched: at least one line mixes Chinese and English"))
        if zh * 2 / 3 < 0.5 * sum(words_of(t) for _, t in texts):
            errs.append(_err("events", "language", "code-switched: Mandarin is the main language (most words)"))
    return errs[:6]


def to_plan(p: LLMPlan, seed: ScenarioSeed, session_id: str, planner: str, meta: dict) -> Plan:
    """Convert a checked LLM plan (raises ``ValueError`` from ``Plan``'s own validator)."""
    by_id = {e.id: e for e in p.events}
    cancels = {w.cancelled_by: w.work_id for w in p.work if w.cancelled_by}
    progress = {w.progress_by: w.work_id for w in p.work if w.progress_by}
    events = []
    for ev in p.events:
        words = tokenize(ev.text)
        if not words:
            raise ValueError(f"event {ev.id!r}: text {ev.text!r} has no words")
        k = None
        if ev.attach_text is not None and ev.attach_to in by_id:
            k = anchor_word(by_id[ev.attach_to].text, ev.attach_text, ev.relation or "")
        work_id = ev.attach_to if ev.relation == "delivers_result_of" else cancels.get(ev.id) or progress.get(ev.id)
        events.append(PlannedEvent(
            id=ev.id, speaker=ev.speaker, act=ev.act, floor_intent=ev.floor_intent, relation=ev.relation,
            attach_to=ev.attach_to, attach_word=k, words=words, pause_before=ev.pause_before,
            gap_kind=ev.gap_kind, phenomena=list(ev.phenomena), work_id=work_id,
            person=getattr(ev, "person", None), addressee=getattr(ev, "addressee", None),
        ))
    work = [PlannedWork(work_id=w.work_id, tool=w.tool, objective=w.objective, result_text=w.result_text,
                        opened_by=w.opened_by, outcome=w.outcome, cancelled_by=w.cancelled_by,
                        progress_text=w.progress_text, progress_by=w.progress_by) for w in p.work]
    return Plan(session_id=session_id, scenario_id=seed.id, language=seed.language, planner=planner,
                events=events, work=work, planner_meta=meta)


def from_plan(plan: Plan) -> LLMPlan:
    """A ``Plan`` (e.g. an offline one) in the LLM-facing form; anchors become their word's text.
    A group plan (events with an addressee) gives an ``LLMGroupPlan``."""
    from .group import LLMGroupEvent, LLMGroupPlan

    group = any(e.addressee for e in plan.events)
    by_id = {e.id: e for e in plan.events}
    events = []
    for e in plan.events:
        anchor = None
        if e.relation in ("interrupts", "backchannels_on") and e.attach_to in by_id:
            anchor = _anchor_text(by_id[e.attach_to], e.attach_word or 0, e.relation)
        fields = dict(id=e.id, speaker=e.speaker, act=e.act, text=e.text, floor_intent=e.floor_intent,
                      relation=e.relation, attach_to=e.attach_to, attach_text=anchor, pause_before=e.pause_before,
                      gap_kind=e.gap_kind if e.gap_kind != "early" else "normal",
                      phenomena=[x for x in e.phenomena if x in REGISTRY])
        events.append(LLMGroupEvent(**fields, person=e.person, addressee=e.addressee or "group") if group
                      else LLMEvent(**fields))
    work = [LLMWork(work_id=w.work_id, tool=w.tool, objective=w.objective, result_text=w.result_text,
                    outcome=w.outcome, opened_by=w.opened_by, cancelled_by=w.cancelled_by,
                    progress_by=w.progress_by, progress_text=w.progress_text) for w in plan.work]
    return (LLMGroupPlan if group else LLMPlan)(events=events, work=work)


def _anchor_text(target: PlannedEvent, k: int, relation: str) -> str:
    """The shortest phrase of ``target`` that ``anchor_word`` resolves back to word ``k``."""
    words = target.words
    k = min(k, len(words) - 1)
    for n in range(1, 6):
        span = range(k, min(len(words), k + n)) if relation == "interrupts" else range(max(0, k - n + 1), k + 1)
        phrase = join_words([words[i] for i in span]).strip(",.?!;:，。？！；：、… ")
        if phrase and anchor_word(target.text, phrase, relation) == k:
            return phrase
    return words[k].text.strip(",.?!;:，。？！；：、…") or words[k].text
