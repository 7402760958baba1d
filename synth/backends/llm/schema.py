"""The plan as the LLM writes it, and the rules a reply must pass before it becomes a ``Plan``.

The LLM-facing model is simpler than ``Plan``: one ``text`` per event (words and their
languages come from our tokenizer, not the model), every field required (nullable where
optional) so strict JSON-schema modes accept it, and every string bounded by ``maxLength`` so
a grammar-constrained small model cannot run to ``max_tokens`` inside one string.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationError

from ...schema.common import FloorIntent, Model, Relation
from ...schema.phenomena import REGISTRY, resolve_rates
from ...schema.plan import PauseKind, Plan, PlannedEvent, PlannedWork
from ...schema.seed import ScenarioSeed

EventId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,11}$", max_length=12)]
Act = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z_]{0,31}$", max_length=32)]
PhenomenonId = Literal[tuple(REGISTRY)]  # type: ignore[valid-type]
LLMSpeaker = Literal["user", "system", "third_party"]


class LLMEvent(Model):
    id: EventId
    speaker: LLMSpeaker
    act: Act
    text: Annotated[str, StringConstraints(min_length=1, max_length=240)]
    floor_intent: FloorIntent
    relation: Relation | None
    attach_to: EventId | None
    attach_word: int | None = Field(ge=0, le=80)
    pause_before: PauseKind | None
    gap_kind: Literal["normal", "dispreferred"]
    phenomena: list[PhenomenonId] = Field(max_length=4)


class LLMWork(Model):
    work_id: EventId
    tool: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$", max_length=40)]
    objective: Annotated[str, StringConstraints(min_length=1, max_length=160)]
    result_text: Annotated[str, StringConstraints(min_length=1, max_length=240)]
    opened_by: EventId


class LLMPlan(Model):
    events: list[LLMEvent] = Field(min_length=2, max_length=40)
    work: list[LLMWork] = Field(max_length=3)


class LLMAlternative(Model):
    probability: float = Field(ge=0, le=1)
    plan: LLMPlan


class LLMBatch(Model):
    alternatives: list[LLMAlternative] = Field(min_length=1, max_length=8)


def batch_schema(seed: ScenarioSeed | None = None, alternatives: int = 8, exchanges: int | None = None) -> dict:
    """The JSON schema sent to the server (``response_format``) and, in fallback modes, the prompt.

    Narrowed to the seed where a grammar can enforce it: its phenomena, tools and speakers, and
    to at most ``max_events(exchanges)`` events (a grammar-bound small model otherwise goes on to
    ``max_tokens``).
    """
    schema = _strip_titles(LLMBatch.model_json_schema())
    defs = schema["$defs"]
    schema["properties"]["alternatives"]["maxItems"] = alternatives
    if exchanges is not None:
        defs["LLMPlan"]["properties"]["events"]["maxItems"] = max_events(exchanges)
    if seed is not None:
        allowed = sorted(k for k, v in resolve_rates(seed.phenomena).items() if v > 0)
        ph = defs["LLMEvent"]["properties"]["phenomena"]
        if allowed:
            ph["items"]["enum"] = allowed
        else:
            ph["maxItems"] = 0
        if seed.personas.third_party is None:
            defs["LLMEvent"]["properties"]["speaker"]["enum"] = ["user", "system"]
        if seed.tools:
            defs["LLMWork"]["properties"]["tool"] = {"enum": [t.name for t in seed.tools], "type": "string"}
        else:
            defs["LLMPlan"]["properties"]["work"]["maxItems"] = 0
    return schema


def max_events(exchanges: int) -> int:
    """Events allowed for a session of ``exchanges`` exchanges: pauses, backchannels, side talk fit."""
    return min(40, 4 * exchanges + 6)


def _strip_titles(node):
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def _fmt_errors(prefix: str, err: ValidationError, limit: int = 6) -> list[str]:
    out = []
    for e in err.errors()[:limit]:
        loc = prefix
        for part in e["loc"]:
            loc += f"[{part}]" if isinstance(part, int) else f".{part}"
        got = e.get("input")
        shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
        out.append(f"{loc.lstrip('.')}: {e['msg'].removeprefix('Value error, ')} (got {shown[:60]})")
    return out


def alternatives_of(obj: Any) -> list[Any]:
    """Accept the batch, a bare plan or a list of either: small models drop the wrapper."""
    if isinstance(obj, dict) and "alternatives" in obj and isinstance(obj["alternatives"], list):
        return obj["alternatives"]
    if isinstance(obj, dict) and "events" in obj:
        return [{"probability": 1.0, "plan": obj}]
    if isinstance(obj, list):
        return [a if isinstance(a, dict) and "plan" in a else {"probability": 1.0, "plan": a} for a in obj]
    return []


def parse_alternative(raw: Any, index: int) -> tuple[LLMAlternative | None, list[str]]:
    try:
        return LLMAlternative.model_validate(raw), []
    except ValidationError as e:
        return None, _fmt_errors(f"alternatives[{index}]", e)


def check_plan(p: LLMPlan, seed: ScenarioSeed, required: list[str], exchanges: int | None = None) -> list[str]:
    """The plan's own rules and the seed's: an empty list means the plan is usable."""
    errs: list[str] = []
    by_id: dict[str, LLMEvent] = {}
    works = {w.work_id: w for w in p.work}
    order = {e.id: i for i, e in enumerate(p.events)}
    delivered: set[str] = set()
    allowed = {k for k, v in resolve_rates(seed.phenomena).items() if v > 0}
    tools = {t.name for t in seed.tools}
    for i, ev in enumerate(p.events):
        at = f"events[{i}] ({ev.id})"
        if ev.id in by_id or ev.id in works:
            errs.append(f"{at}: id {ev.id!r} is used twice")
        if (ev.relation is None) != (ev.attach_to is None):
            errs.append(f"{at}: relation and attach_to must both be set or both be null")
        if ev.speaker == "third_party" and seed.personas.third_party is None:
            errs.append(f"{at}: this scenario has no third_party")
        for ph in ev.phenomena:
            if ph not in allowed:
                errs.append(f"{at}: phenomenon {ph!r} is not one of this scenario's {sorted(allowed)}")
        if ev.relation == "delivers_result_of":
            w = works.get(ev.attach_to or "")
            if w is None:
                errs.append(f"{at}: delivers_result_of must attach_to a work_id of 'work' (got {ev.attach_to!r})")
            elif order.get(w.opened_by, len(p.events)) >= i:
                errs.append(f"{at}: delivers {w.work_id!r} before its opening event {w.opened_by!r}")
            elif w.work_id in delivered:
                errs.append(f"{at}: work item {w.work_id!r} is delivered twice")
            else:
                delivered.add(w.work_id)
            if ev.speaker != "system":
                errs.append(f"{at}: only the system delivers results")
        elif ev.attach_to is not None:
            target = by_id.get(ev.attach_to)
            if target is None:
                errs.append(f"{at}: attach_to {ev.attach_to!r} is not an earlier event id")
            else:
                errs += _relation_rules(at, ev, target)
        by_id.setdefault(ev.id, ev)
    openers: set[str] = set()
    for j, w in enumerate(p.work):
        if w.opened_by in openers:
            errs.append(f"work[{j}] ({w.work_id}): event {w.opened_by!r} already opens a work item")
        openers.add(w.opened_by)
        opener = by_id.get(w.opened_by)
        if opener is None or opener.speaker != "system":
            errs.append(f"work[{j}] ({w.work_id}): opened_by must be a system event id (got {w.opened_by!r})")
        if w.tool not in tools:
            errs.append(f"work[{j}] ({w.work_id}): tool {w.tool!r} is not in the catalogue {sorted(tools)}")
    if exchanges is not None and len(p.events) > max_events(exchanges):
        errs.append(f"events: {len(p.events)} events; at most {max_events(exchanges)} for {exchanges} exchanges")
    speakers = {e.speaker for e in p.events}
    if not {"user", "system"} <= speakers:
        errs.append("events: both user and system must speak")
    tagged = {ph for e in p.events for ph in e.phenomena}
    missing = [ph for ph in required if ph not in tagged]
    if missing:
        errs.append(f"events: requested phenomena not tagged on any event: {missing}")
    errs += _language_rules(p, seed.language)
    return errs


def _relation_rules(at: str, ev: LLMEvent, target: LLMEvent) -> list[str]:
    errs = []
    if ev.relation == "continues" and target.speaker != ev.speaker:
        errs.append(f"{at}: continues must attach to the same speaker's event (got {target.speaker})")
    if ev.relation in ("interrupts", "backchannels_on"):
        if target.speaker == ev.speaker:
            errs.append(f"{at}: {ev.relation} must attach to another speaker's event")
        if ev.attach_word is None:
            errs.append(f"{at}: {ev.relation} needs attach_word (index of the word in {target.id!r})")
    if ev.relation == "interrupts" and not (ev.speaker == "user" and target.speaker == "system"):
        errs.append(f"{at}: only a user event interrupts, and only a system event")
    if ev.relation not in ("interrupts", "backchannels_on") and ev.attach_word is not None:
        errs.append(f"{at}: attach_word is only for interrupts and backchannels_on")
    return errs


def _language_rules(p: LLMPlan, language: str) -> list[str]:
    from ..scripted_planner import tokenize

    langs = [w.lang for e in p.events for w in tokenize(e.text)]
    n_zh = langs.count("zh")
    if not langs:
        return ["events: no words"]
    if language == "en" and n_zh:
        return [f"language: the scenario is English only, but {n_zh} words are Chinese"]
    if language == "zh" and n_zh < 0.8 * len(langs):
        return [f"language: the scenario is Mandarin, but only {n_zh} of {len(langs)} words are Chinese"]
    if language == "en-zh" and not (n_zh and n_zh < len(langs)):
        return ["language: the scenario is code-switched, so both English and Chinese words are needed"]
    return []


def to_plan(p: LLMPlan, seed: ScenarioSeed, session_id: str, planner: str, meta: dict) -> Plan:
    """Convert a checked LLM plan (raises ``ValueError`` from ``Plan``'s own validator)."""
    from ..scripted_planner import tokenize

    events = []
    for ev in p.events:
        words = tokenize(ev.text)
        if not words:
            raise ValueError(f"event {ev.id!r}: text {ev.text!r} has no words")
        events.append(PlannedEvent(
            id=ev.id, speaker=ev.speaker, act=ev.act, floor_intent=ev.floor_intent, relation=ev.relation,
            attach_to=ev.attach_to, attach_word=ev.attach_word, words=words, pause_before=ev.pause_before,
            gap_kind=ev.gap_kind, phenomena=list(ev.phenomena),
            work_id=ev.attach_to if ev.relation == "delivers_result_of" else None,
        ))
    work = [PlannedWork(work_id=w.work_id, tool=w.tool, objective=w.objective, result_text=w.result_text,
                        opened_by=w.opened_by) for w in p.work]
    return Plan(session_id=session_id, scenario_id=seed.id, language=seed.language, planner=planner,
                events=events, work=work, planner_meta=meta)


def from_plan(plan: Plan) -> LLMPlan:
    """A ``Plan`` (e.g. a scripted one) in the LLM-facing form: how the prompt's examples are made."""
    events = [LLMEvent(id=e.id, speaker=e.speaker, act=e.act, text=e.text, floor_intent=e.floor_intent,
                       relation=e.relation, attach_to=e.attach_to, attach_word=e.attach_word,
                       pause_before=e.pause_before, gap_kind=e.gap_kind, phenomena=list(e.phenomena))
              for e in plan.events]
    work = [LLMWork(work_id=w.work_id, tool=w.tool, objective=w.objective, result_text=w.result_text,
                    opened_by=w.opened_by) for w in plan.work]
    return LLMPlan(events=events, work=work)
