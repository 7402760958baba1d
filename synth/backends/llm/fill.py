"""Mode ``fill``: the offline planner builds the structure, the LLM writes the words.

``ScriptedPlanner().plan`` gives a complete ``Plan`` (events, relations, phenomena, work items
and offline text). One request per session shows the scenario, the personas and that structure,
one line per text to write with the offline text as a draft and a length range, and asks for a
JSON object ``{"01_u1": "...", "02_s1": "...", "09_w1_result": "...", ...}`` (numbered names keep
the conversation's order wherever keys get sorted, e.g. JSON written with ``sort_keys``). Every reply is checked
for the ids (count and order), the language rule (en: no Chinese characters; zh: no Latin
letters; en-zh: Mandarin with English in it) and each text's length; failing texts are asked
again with the complete failing reply and its errors, good ones are kept. A reply cut at
``max_tokens`` is salvaged pair by pair and the rest is asked again with shorter length ranges.

Word-anchored fields stay valid after the words change: each interrupted or backchannelled
event's draft marks the anchor with ``‖``; a text with as many ``‖`` as its draft keeps its
anchors there (the same phrase boundary), otherwise each anchor moves to the same relative
position (proportionally) in the new words. Sound events (``event.sound``) keep their text.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import numpy as np

from ...errors import SessionReject, short_error
from ...schema.phenomena import ALL
from ...schema.plan import Plan, PlannedEvent
from ...schema.seed import ScenarioSeed
from ...text import CJK, tokenize
from . import budget
from .client import Reply
from .converse import converse
from .prompt import LANG_RULE, _pick_examples, examples, schema_block, scenario_block, template
from .schema import BACKCHANNEL_MAX, SYSTEM_MAX, USER_MAX, LLMPlan, _MARKUP, _LATIN, to_plan, words_of

MARK = "‖"
_PAIR = re.compile(r'"([0-9a-z][a-z0-9_-]{0,40})"\s*:\s*"((?:[^"\\]|\\.)*)"')
ANCHORED = ("interrupts", "backchannels_on")


@dataclass
class Item:
    """One text to write: an event's words or a work item's field."""

    key: str  # an event id, or <work_id>_<field>
    name: str  # the key in the reply: "NN_<key>", so the order holds where a grammar sorts keys
    draft: str
    lo: int
    hi: int
    line: str
    lang: str  # the session's language: en, zh or en-zh
    spoken: bool = True

    @property
    def zh(self) -> bool:
        return self.lang != "en"

    @property
    def max_chars(self) -> int:
        """The schema's ``maxLength``: about 8 characters an English word, 1.5 a Chinese one, 4 mixed."""
        return {"en": self.hi * 8, "zh": math.ceil(self.hi * 1.5) + 6}.get(self.lang, self.hi * 4 + 6)


def _limits(draft: str, cap: int, floor: int = 1) -> tuple[int, int]:
    """A text's word range: half to 1.6 times its draft, within the cap (never below the draft + 2)."""
    w = max(1, words_of(draft))
    lo = max(1, min(math.floor(0.5 * w), cap))
    hi = max(lo, w + 2, min(cap, max(w + 4, math.ceil(1.6 * w))))
    return max(lo, min(floor, hi)), hi


def _anchors(plan: Plan) -> dict[str, list[tuple[int, str, str]]]:
    """Target event id -> ``(word index, anchored event id, relation)`` in text order."""
    out: dict[str, list[tuple[int, str, str]]] = {}
    for e in plan.events:
        if e.relation in ANCHORED and e.attach_to:
            out.setdefault(e.attach_to, []).append((e.attach_word or 0, e.id, e.relation))
    for v in out.values():
        v.sort()
    return out


def _marked_draft(ev: PlannedEvent, anchors: list[tuple[int, str, str]]) -> str:
    """The draft with ``‖`` before an interrupted word or after a backchannelled one."""
    words = [w for w in ev.words]
    n = len(words)
    marks_before: dict[int, int] = {}
    for k, _, rel in anchors:
        k = min(k, n - 1)
        pos = k if rel == "interrupts" else k + 1
        marks_before[pos] = marks_before.get(pos, 0) + 1
    out = ""
    for i, w in enumerate(words + [None]):
        if marks_before.get(i):
            out += (" " if out else "") + " ".join([MARK] * marks_before[i])
        if w is not None:
            sep = "" if (not out or (w.lang == "zh" and out[-1:] != " " and CJK.search(out[-1:] or ""))) else " "
            out += sep + w.text
    return out.strip()


def _describe(ev: PlannedEvent, lang: str, drafts: dict[str, str], names: dict[str, str]) -> str:
    en = lang == "en"
    rel, to = ev.relation, names.get(ev.attach_to or "", ev.attach_to)
    if rel is None:
        how = "starts the conversation" if en else "开场"
    elif rel == "responds_to":
        how = f"responds to {to}" if en else f"回应 {to}"
    elif rel == "continues":
        kind = {"long": "a long pause", "hesitation": "a hesitation"}.get(ev.pause_before or "", "a short pause")
        how = f"goes on from {to} after {kind}" if en else f"停顿后接着 {to} 说"
    elif rel == "interrupts":
        how = f"cuts into {to} at {MARK}" if en else f"在 {MARK} 处打断 {to}"
    elif rel == "backchannels_on":
        how = f"short reaction during {to} at {MARK}" if en else f"在 {to} 的 {MARK} 处简短回应"
    elif rel == "addresses_other":
        how = "said to someone in the room, not to the system" if en else "对房间里的人说，不是对系统"
    elif rel == "delivers_result_of":
        how = f"speaks the result of {to}" if en else f"播报 {to} 的结果"
    else:
        how = f"{rel} {to}"
    if ev.gap_kind == "dispreferred":
        how += ", a late reluctant answer" if en else "，迟疑的回答"
    elif ev.gap_kind == "silence":
        how += ", after a silence" if en else "，沉默一会儿之后"
    earlier = list(drafts)[: list(drafts).index(ev.id)]
    same = [k for k in earlier if drafts[k] == ev.text]
    if same:
        how += f", says again what {names[same[0]]} said" if en else f"，重复 {names[same[0]]} 说过的话"
    return how


def _phen(ev: PlannedEvent, lang: str) -> str:
    """The event's phenomena with what they mean (Chinese prompts: the Chinese tag lines)."""
    from .prompt import tag_lines

    tags = tag_lines()

    def say(p: str) -> str:
        return tags[p]["zh"] if lang == "zh" and p in tags else ALL[p].definition

    return "; ".join(f"{p} ({say(p)})" for p in ev.phenomena if p in ALL) or "-"


def build_items(plan: Plan, lang: str) -> tuple[list[Item], dict[str, list[tuple[int, str, str]]]]:
    """The texts to write for ``plan`` (events without sounds, then work fields), and its anchors."""
    anchors = _anchors(plan)
    drafts = {e.id: e.text for e in plan.events}
    keys = [e.id for e in plan.events if e.sound is None]
    for w in plan.work:
        keys += [f"{w.work_id}_objective", f"{w.work_id}_result"] + ([f"{w.work_id}_progress"] if w.progress_text else [])
    # numbered names keep the conversation's order wherever keys get sorted (JSON written with sort_keys)
    names = {k: f"{i:02d}_{k}" for i, k in enumerate(keys, 1)}
    items: list[Item] = []
    words_label = "words" if lang == "en" else "词"
    for ev in plan.events:
        if ev.sound is not None:
            continue
        cap = BACKCHANNEL_MAX if ev.relation == "backchannels_on" else SYSTEM_MAX if ev.speaker == "system" else USER_MAX
        marks = anchors.get(ev.id, [])
        lo, hi = _limits(ev.text, cap, floor=6 if marks and words_of(ev.text) >= 6 else 1)
        draft = _marked_draft(ev, marks) if marks else ev.text
        line = (f"{names[ev.id]} | {ev.speaker} | {ev.act} | {_describe(ev, lang, drafts, names)} | {_phen(ev, lang)} | "
                f"{lo}-{hi} {words_label} | draft: {json.dumps(draft, ensure_ascii=False)}")
        items.append(Item(ev.id, names[ev.id], draft, lo, hi, line, plan.language))
    for w in plan.work:
        what = "success" if w.outcome == "success" else "failure: the error"
        fields = [("objective", w.objective, 30, f"the task given to {w.tool}"),
                  ("result", w.result_text, SYSTEM_MAX, f"what {w.tool} returns ({what}), spoken by the delivery")]
        if w.progress_text:
            fields.append(("progress", w.progress_text, USER_MAX,
                           f"{w.tool}'s progress note, answered by {names.get(w.progress_by or '', w.progress_by)}"))
        for field, text, cap, desc in fields:
            lo, hi = _limits(text, cap)
            key = f"{w.work_id}_{field}"
            line = (f"{names[key]} | backend | {field} | {desc} | - | {lo}-{hi} {words_label} | "
                    f"draft: {json.dumps(text, ensure_ascii=False)}")
            items.append(Item(key, names[key], text, lo, hi, line, plan.language, spoken=False))
    return items, anchors


def fill_schema(items: list[Item]) -> dict:
    props = {it.name: {"type": "string", "minLength": 1, "maxLength": it.max_chars} for it in items}
    return {"type": "object", "properties": props, "required": [it.name for it in items],
            "additionalProperties": False}


def check_item(it: Item, text, language: str) -> list[str]:
    """A text's errors: empty, length, language (spoken lines only: work fields are backend text), markup."""
    if not isinstance(text, str) or not text.replace(MARK, "").strip():
        return [f"{it.name}: empty or not a string"]
    clean = text.replace(MARK, " ")
    errs = []
    n = words_of(clean)
    if not it.lo <= n <= it.hi:
        errs.append(f"{it.name}: {n:.0f} words; write {it.lo}-{it.hi}")
    if not it.spoken:
        language = "en-zh"  # tool names and ids are Latin in any language
    if language == "en" and CJK.search(clean):
        errs.append(f"{it.name}: English only, but it has Chinese characters")
    if language == "zh" and _LATIN.search(clean):
        errs.append(f"{it.name}: Mandarin only, but it has Latin letters")
    if _MARKUP.search(clean):
        errs.append(f"{it.name}: only what is spoken: no brackets, markup or emoji")
    return errs


def session_language_errors(texts: dict[str, str], plan: Plan) -> list[str]:
    if plan.language != "en-zh":
        return []
    spoken = [texts[e.id] for e in plan.events if e.id in texts]
    errs = []
    if not any(CJK.search(t) and _LATIN.search(t) for t in spoken):
        errs.append("language: code-switched, so at least one line mixes Chinese and English")
    zh = sum(len(m) for t in spoken for m in CJK.findall(t)) * 2 / 3
    if zh < 0.5 * sum(words_of(t) for t in spoken):
        errs.append("language: code-switched, with Mandarin the main language (most words)")
    return errs


def parse_reply(content: str, items: list[Item], cut: bool) -> tuple[dict[str, str], list[str]]:
    """Texts by key from a reply: an object by reply names (or bare keys), a list in order, or, when
    cut, its complete ``"name": "text"`` pairs."""
    from .planner import extract_json

    names = {it.name: it.key for it in items}
    names.update({it.key: it.key for it in items})  # a model that drops the numbers is understood
    obj, err = (None, "cut at max_tokens") if cut else extract_json(content)
    if obj is None:
        pairs = {names[k]: json.loads(f'"{v}"') for k, v in _PAIR.findall(content or "") if k in names}
        return pairs, [] if pairs else [f"reply: {err}"]
    if isinstance(obj, dict) and isinstance(obj.get("texts"), (dict, list)) and not set(obj) & set(names):
        obj = obj["texts"]
    if isinstance(obj, list):
        if len(obj) != len(items):
            return {}, [f"reply: a list of {len(obj)} texts; expected an object with {len(items)} ids"]
        obj = {it.name: (v.get("text") if isinstance(v, dict) else v) for it, v in zip(items, obj)}
    if not isinstance(obj, dict):
        return {}, ["reply: expected a JSON object mapping ids to texts"]
    got = {names[k]: v for k, v in obj.items() if k in names}
    errs = []
    extra = [k for k in obj if k not in names]
    missing = [it.name for it in items if it.key not in got]
    if extra:
        errs.append(f"reply: unknown ids {extra[:8]}")
    if missing:
        errs.append(f"reply: missing ids {missing[:12]}")
    return got, errs


def _remap(ev: PlannedEvent, target_old_n: int, target_text: str, anchors: list[tuple[int, str, str]],
           stats: dict[str, int]) -> dict[str, int]:
    """New attach_word of each event anchored on one target, from its new text (with or without marks)."""
    parts = target_text.split(MARK)
    out: dict[str, int] = {}
    new_n = len(tokenize(target_text.replace(MARK, " ")))
    if len(parts) - 1 == len(anchors):
        for j, (_, eid, rel) in enumerate(anchors):
            before = len(tokenize(MARK.join(parts[: j + 1]).replace(MARK, " ")))
            out[eid] = before if rel == "interrupts" else before - 1
        stats["marked"] += len(anchors)
    else:
        for k, eid, _ in anchors:
            out[eid] = round(k / max(1, target_old_n - 1) * max(0, new_n - 1))
        stats["proportional"] += len(anchors)
    for (_, eid, rel) in anchors:  # an interruption leaves something unsaid; indices stay in range
        hi = max(0, new_n - 2) if rel == "interrupts" else new_n - 1
        out[eid] = int(min(max(out[eid], 0), hi))
    return out


def assemble(plan: Plan, texts: dict[str, str], anchors, name: str, meta: dict) -> Plan:
    """The structure with the new words; anchors remapped; ``Plan``'s validators run again."""
    stats = {"marked": 0, "proportional": 0}
    new_k: dict[str, int] = {}
    by_id = {e.id: e for e in plan.events}
    for tid, anc in anchors.items():
        if tid in texts:
            new_k.update(_remap(by_id[tid], len(by_id[tid].words), texts[tid], anc, stats))
    events = []
    for e in plan.events:
        d = e.model_dump()
        if e.id in texts:
            words = tokenize(" ".join(texts[e.id].replace(MARK, " ").split()))
            d["words"] = [w.model_dump() for w in words]
        if e.id in new_k:
            d["attach_word"] = new_k[e.id]
        events.append(d)
    work = []
    for w in plan.work:
        d = w.model_dump()
        for name_, field in (("objective", "objective"), ("result", "result_text"), ("progress", "progress_text")):
            key = f"{w.work_id}_{name_}"
            if key in texts:
                d[field] = " ".join(texts[key].replace(MARK, " ").split())
        work.append(d)
    out = plan.model_dump()
    out.update(events=events, work=work, planner=name, planner_meta={**meta, "anchors": stats})
    return Plan.model_validate(out)


def _example_block(ids: list[str], lang: str) -> str:
    if not ids:
        return ""
    pool = examples()
    head = ("# Example of another conversation: its lines and the reply (the format and the coherence "
            "to follow; do not copy)" if lang == "en" else "# 另一段对话的示例：各行和回复（照着它的格式和连贯性写，不要照抄）")
    parts = []
    for i in ids:
        ex = pool[i]
        seed = ScenarioSeed.model_validate(ex["seed"])
        plan = to_plan(LLMPlan.model_validate(ex["plan"]), seed, "example", "example", {})
        items, _ = build_items(plan, lang)
        lines = [it.line.rsplit(" | draft: ", 1)[0] for it in items]
        reply = {it.name: it.draft for it in items}
        parts.append(f"## {i} ({ex['language']}, {ex['domain']})\n" + "\n".join(lines) + "\n"
                     + json.dumps(reply, ensure_ascii=False, separators=(",", ":")))
    return "\n" + head + "\n" + "\n\n".join(parts) + "\n"


def fill_messages(seed: ScenarioSeed, ex_ids: list[str], lang: str, items: list[Item], schema: dict | None
                  ) -> list[dict]:
    sys = template("fill-v1", lang).substitute(
        scenario=scenario_block(seed, None, lang, length=False), structure="\n".join(it.line for it in items),
        language_rule=LANG_RULE[lang][seed.language], first_id=items[0].name,
        schema_block=schema_block(schema, lang), examples_block=_example_block(ex_ids, lang))
    user = ("请写出每个 id 的台词。只回复 JSON。" if lang == "zh"
            else "Write the text of every id. Reply with JSON only.")
    return [{"role": "system", "content": sys}, {"role": "user", "content": user}]


def fill_plan(planner, seed: ScenarioSeed, session_id: str, rng: np.random.Generator) -> Plan:
    """One session in mode fill (see the module docstring); raises ``SessionReject`` when it cannot."""
    from ..scripted_planner import ScriptedPlanner

    cfg = planner.cfg
    structure = ScriptedPlanner(planner.content).plan(seed, session_id, rng)  # the structure, then this mode's own draws
    ex_ids = _pick_examples(seed, cfg.examples, rng)
    request_seed = int(rng.integers(0, 2**31 - 1))
    lang = cfg.prompt_language if cfg.prompt_language != "auto" else ("zh" if seed.language == "zh" else "en")
    asking = _FillRequest(planner.client, seed, structure, ex_ids, lang, request_seed)
    done = converse(asking, cfg.max_attempts)
    if done.result is None:
        raise SessionReject("plan", "llm_invalid_fill",
                            f"{cfg.max_attempts} attempts; last: " + "; ".join(done.errors[:4])[:600])
    meta = {"mode": "fill", "prompt_version": cfg.prompt, "model": cfg.model,
            "response_format": done.reply.mode, "examples": ex_ids, "attempts": done.attempts,
            "cut_replies": done.cuts, "structure_planner": structure.planner,
            "structure_meta": structure.planner_meta}
    try:
        return assemble(structure, done.result, asking.anchors, planner.name, meta)
    except ValueError as e:
        raise SessionReject("plan", "llm_fill_invalid", short_error(e)[:300]) from None


class _FillRequest:
    """Mode fill's request for the texts of a structure (``converse``): the pairs a reply gets
    right are kept; a cut reply asks for the rest in fewer words, a failing one is sent back with
    its errors and asked for the rest. A complete set whose languages do not fit the session is
    asked for again whole."""

    def __init__(self, client, seed: ScenarioSeed, structure: Plan, ex_ids: list[str], lang: str, request_seed: int):
        self.client, self.seed, self.structure, self.ex_ids, self.lang = client, seed, structure, ex_ids, lang
        self.request_seed = request_seed
        self.items, self.anchors = build_items(structure, lang)
        self.event_ids = {e.id for e in structure.events}
        self.max_tokens = budget.fill_reply_tokens([(it.max_chars, it.lang) for it in self.items])
        self.texts: dict[str, str] = {}
        self.todo, self.missing, self.follow_up = list(self.items), list(self.items), []

    def ask(self) -> Reply:
        schema, follow_up = fill_schema(self.todo), self.follow_up

        def messages_for(mode: str) -> list[dict]:
            return fill_messages(self.seed, self.ex_ids, self.lang, self.items,
                                 None if mode == "json_schema" else schema) + follow_up

        return self.client.complete(messages_for, schema, self.request_seed, self.max_tokens, "fill")

    def judge(self, reply: Reply):
        got, errors = parse_reply(reply.content, self.todo, reply.finish_reason == "length")
        for it in self.todo:
            if it.key in got:
                bad = check_item(it, got[it.key], self.seed.language)
                errors += bad
                if not bad:
                    self.texts[it.key] = " ".join(got[it.key].split())
        self.missing = [it for it in self.items if it.key not in self.texts]
        if self.missing:
            return None, errors
        errors = session_language_errors(self.texts, self.structure)
        if not errors:
            return self.texts, []
        self.texts = {k: v for k, v in self.texts.items() if k not in self.event_ids}  # every line again
        self.missing = [it for it in self.items if it.key not in self.texts]
        return None, errors

    def shorter(self, reply: Reply) -> None:
        """The complete pairs are kept, the rest is asked for shorter."""
        self.todo = [_shorter(it) for it in self.missing]
        self.follow_up = [{"role": "user", "content": _continue(self.texts, self.todo, self.lang)}] if self.texts else []
        if self.follow_up:
            written = {it.name: self.texts[it.key] for it in self.items if it.key in self.texts}
            self.follow_up = [{"role": "assistant", "content": json.dumps(written, ensure_ascii=False)}] + self.follow_up

    def repair(self, reply: Reply, errors: list[str]) -> None:
        self.todo = self.missing
        self.follow_up = [{"role": "assistant", "content": reply.content},
                          {"role": "user", "content": _repair(errors, self.todo, self.lang)}]


def _shorter(it: Item) -> Item:
    """The same text asked for in three quarters of the words."""
    hi = max(it.lo, math.floor(0.75 * it.hi))
    return Item(it.key, it.name, it.draft, it.lo, hi, it.line, it.lang, it.spoken)


def _repair(errors: list[str], todo: list[Item], lang: str) -> str:
    """The whole failing reply was sent back; these are its errors and the ids to write again."""
    listed = "\n".join(f"- {e}" for e in errors[:20])
    keys = ", ".join(f"{it.name} ({it.lo}-{it.hi})" for it in todo)
    if lang == "zh":
        return f"你上一次的回复不能用：\n{listed}\n请改正，只回复一个 JSON 对象，只包含这些 id（词数范围）：{keys}。"
    return (f"Your previous reply could not be used:\n{listed}\nFix these and reply with one JSON object holding "
            f"only these ids (words): {keys}.")


def _continue(texts: dict[str, str], todo: list[Item], lang: str) -> str:
    keys = ", ".join(f"{it.name} ({it.lo}-{it.hi})" for it in todo)
    if lang == "zh":
        return f"回复太长，被截断了。上面是已经写好的部分。请只写剩下的这些 id，写短一些（词数范围）：{keys}。只回复 JSON。"
    return (f"The reply was too long and was cut. Above are the texts already written. Write only the remaining "
            f"ids, shorter (words): {keys}. Reply with JSON only.")
