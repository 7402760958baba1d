"""Conversation content authored as coherent units: domains, frames, slots (CONTENT.md).

A domain file (``synth/data/frames/<domain>.yaml``) holds, per language mode, *frames*: one
scenario instance each (a recipe, an order, a trip), with slots whose values are drawn once per
session and used by every line of the session, and the units that talk about it: the request and
its answers, follow-ups with theirs, corrections that change a slot value already spoken,
related new requests, delegations whose acknowledgement, progress note, result and failure
report the same task. Domain-independent short forms (backchannels, stop, repeat ...) live in
``_common.yaml``. The format is documented in ``synth/data/frames/README.md``; check a file with
``python -m synth.backends.frames FILE...``.
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator

from ..errors import UserError
from ..schema.common import Model
from ..text import CJK, HAN, word_count
from .values import GenSpec, samples

LANGS = ("en", "zh", "en-zh")
_FIELD = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_MARKUP = re.compile(r"[\[\]<>*#_~`|\\]|[\U0001F300-\U0001FAFF\u2600-\u27BF]|\{(?![a-z_][a-z0-9_]*\})")
_LATIN = re.compile(r"[A-Za-z]")
_ALNUM_END, _ALNUM_START = re.compile(r"[A-Za-z0-9]$"), re.compile(r"[A-Za-z0-9]")
_HAN = HAN
USER_WORDS, SYSTEM_WORDS = (2, 28), (4, 60)
RESERVED = {"topic", "task", "old", "new", "user"}
"""Field names the planner fills itself; a slot may not be called that."""
SAMPLE_NAME = {"en": "Sam", "zh": "小林", "en-zh": "小林"}
"""What ``{user}`` becomes when a block's lines are checked."""
"""Sizes that fit speech (CONTENT.md), in words (jieba words for Chinese)."""


def fields(text: str) -> set[str]:
    return set(_FIELD.findall(text))


def fill(text: str, values: dict[str, str]) -> str:
    """``text`` with its ``{slot}`` fields replaced. In a line with Chinese, where no space is written
    between words, a value that would run into Latin letters ("{restaurant}book", "{restaurant}{day}"
    with English values) gets a space there. A missing value raises KeyError."""
    pieces: list[tuple[str, bool]] = []  # (text, is_value)
    pos = 0
    for m in _FIELD.finditer(text):
        pieces += [(text[pos : m.start()], False), (values[m.group(1)], True)]
        pos = m.end()
    pieces.append((text[pos:], False))
    out, han, last_was_value = "", bool(_HAN.search(text)), False
    for piece, is_value in pieces:
        if not piece:
            continue
        if (han and out and (is_value or last_was_value) and _ALNUM_END.search(out)
                and _ALNUM_START.match(piece)):
            out += " "
        out, last_was_value = out + piece, is_value
    return out


Texts = list[str]
def _slot(v):
    """A mapping is a generator spec (one error naming its field, not one per union member)."""
    if isinstance(v, dict):
        try:
            return GenSpec.model_validate(v)
        except ValidationError as e:
            err = e.errors()[0]
            msg = err["msg"].removeprefix("Value error, ")
            raise ValueError(f"{'.'.join(str(x) for x in err['loc']) + ': ' if err['loc'] else ''}{msg}") from None
    return v


Slot = Annotated[list[str] | GenSpec, BeforeValidator(_slot)]
"""A slot: listed values (a closed set), or a generator spec (``{generate: time, ...}``, :mod:`.values`)."""


def slot_pool(pool, lang: str, k: int = 24) -> list[str]:
    """The values of a slot as listed, or ``k`` sample values of a generated one (a spec or its dump)."""
    if isinstance(pool, list):
        return pool
    return samples(pool if isinstance(pool, GenSpec) else GenSpec.model_validate(pool), lang, k)


class Unit(Model):
    """One user line (paraphrases) and the system lines that answer it."""

    user: Texts = Field(min_length=1)
    split: list[list[str]] = Field(default_factory=list, description="the same line said in two pieces")
    system: Texts = Field(min_length=1)
    short: Texts = Field(default_factory=list, description="a brief direct answer")
    repair: Texts = Field(default_factory=list, description="an answer with a system self-repair")
    coop: list["Coop"] = Field(default_factory=list)
    ask_back: list["AskBack"] = Field(default_factory=list)

    @field_validator("split")
    @classmethod
    def _pairs(cls, v):
        if any(len(p) != 2 for p in v):
            raise ValueError("each split is [head, tail]")
        return v


class Coop(Model):
    """The system starts an answer, the user completes it, the system confirms and goes on."""

    head: str
    completion: str
    tail: str


class AskBack(Model):
    """The system asks a question back, the user answers it, the system answers the request."""

    system: str
    user: str
    then: str


class Correction(Model):
    """The user changes a slot value already spoken (``{old}`` -> ``{new}``); ``system`` uses it."""

    slot: str
    user: Texts = Field(min_length=1)
    system: Texts = Field(min_length=1)


class Progress(Model):
    note: str = Field(description="what the backend reports, as text for the trainer")
    system: str = Field(description="the spoken answer to 'how is it going?'")


class Supersede(Model):
    """A replacement request: the same task with a slot changed; its result is the new one."""

    slot: str
    user: Texts = Field(min_length=1)


class Delegation(Model):
    tool: str
    slots: dict[str, Slot] = Field(default_factory=dict)
    task: str = Field(description="a noun phrase naming the running task ('the recipe search')")
    objective: str
    user: Texts = Field(min_length=1)
    ack: Texts = Field(min_length=1)
    progress: list[Progress] = Field(min_length=1)
    result: Texts = Field(min_length=1)
    failure: Texts = Field(min_length=1)
    supersede: list[Supersede] = Field(default_factory=list)
    settles: list[int] = Field(default_factory=list, description="the frame's follow-ups (by index) that this "
                               "task's request or result answers: not asked once it was asked for")


class SideTalk(Model):
    """The user to someone in the room, that person's reply, and the user back to the system.

    ``heard``: what the user says back about the reply ("Okay, so it's in the car."), said before
    the readdress; needed where the readdress itself does not pick up the reply (``glue_problems``)."""

    user: str
    third_party: str
    readdress: str
    heard: list[str] = Field(default_factory=list)


class Dictation(Model):
    """A list the user dictates in pieces; ``system`` reads it back or confirms it."""

    chunks: list[str] = Field(min_length=3)
    system: Texts = Field(min_length=1)


_SECOND_PERSON = re.compile(r"\byour\b|你的|您的", re.I)


class Frame(Model):
    id: str
    topic: str = Field(description="noun phrase naming what the frame is about ('the {dish}')")
    slots: dict[str, Slot] = Field(default_factory=dict)
    request: Unit
    followups: list[Unit] = Field(min_length=3)
    new_requests: list[Unit] = Field(min_length=1)
    corrections: list[Correction] = Field(min_length=1)
    delegations: list[Delegation] = Field(default_factory=list)
    dictation: list[Dictation] = Field(default_factory=list)
    openings: Texts = Field(default_factory=list, description="proactive openings that lead into this request")

    @model_validator(mode="after")
    def _slots_resolve(self):
        reserved = set(self.slots) & RESERVED | {k for d in self.delegations for k in d.slots} & RESERVED
        if reserved:
            raise ValueError(f"slot name {sorted(reserved)[0]!r} is reserved (it is filled by the planner)")
        known = set(self.slots) | {"topic"}
        for name in [self.topic] + [d.task for d in self.delegations]:
            if _SECOND_PERSON.search(name):  # both sides say it: "go on about your order" from the user
                raise ValueError(f"topic/task {name!r}: the user and the system both say it; no 'your'/你的/您的")
        for d in self.delegations:
            dk = known | set(d.slots)
            for where, text in _texts(d.model_dump(exclude={"slots", "supersede"})):
                _need_known(text, dk, f"delegations[{d.tool}].{where}")
            for s in d.supersede:
                if s.slot not in dk:
                    raise ValueError(f"delegations[{d.tool}].supersede: unknown slot {s.slot!r}")
                for t in s.user:
                    _need_known(t, dk | {"old", "new"}, f"delegations[{d.tool}].supersede")
                    if "new" not in fields(t):
                        raise ValueError(f"delegations[{d.tool}].supersede: {t!r} does not say {{new}}")
                if not all(s.slot in fields(t) for t in d.user):
                    raise ValueError(f"delegations[{d.tool}].supersede: slot {s.slot!r} is not in every request")
            for t in d.result + d.ack:
                if not fields(t):
                    raise ValueError(f"delegations[{d.tool}]: {t!r} names none of the task's slots")
            bad = [i for i in d.settles if not 0 <= i < len(self.followups)]
            if bad:
                raise ValueError(f"delegations[{d.tool}].settles: no follow-up {bad[0]} (the frame has "
                                 f"{len(self.followups)})")
        body = self.model_dump(include={"request", "followups", "new_requests", "dictation", "topic"})
        for where, text in _texts(body):
            _need_known(text, known, where)
        for text in self.openings:
            _need_known(text, known | {"user"}, "openings")
        for c in self.corrections:
            if c.slot not in self.slots or (isinstance(self.slots[c.slot], list) and len(self.slots[c.slot]) < 2):
                raise ValueError(f"corrections: slot {c.slot!r} needs at least two values")
            said = self.request.user + [h + " " + t for h, t in self.request.split]
            if not all(c.slot in fields(t) for t in said):
                raise ValueError(f"corrections: slot {c.slot!r} is not said in every request line (and split)")
            for t in c.user:
                _need_known(t, known | {"old", "new"}, "corrections.user")
                if not {"old", "new"} <= fields(t):
                    raise ValueError(f"corrections.user: {t!r} must say both {{old}} and {{new}}")
            for t in c.system:
                _need_known(t, known | {"new"}, "corrections.system")
                if not ({c.slot, "new"} & fields(t)):
                    raise ValueError(f"corrections.system: {t!r} does not use the corrected {c.slot!r}")
        return self


class Closing(Model):
    """The user's goodbye and the system's; ``frames``: the only frames it fits (what it says,
    "your account is secure", is about them), drawn only when the session ends on one of them."""

    user: str
    system: str
    frames: list[str] = Field(default_factory=list)


class LanguageBlock(Model):
    openings: Texts = Field(min_length=3)
    closings: list[Closing] = Field(min_length=3)
    self_talk: Texts = Field(min_length=3)
    side_talk: list[SideTalk] = Field(min_length=4)
    frames: list[Frame] = Field(min_length=4)

    @model_validator(mode="after")
    def _closing_frames(self):
        ids = {f.id for f in self.frames}
        for i, c in enumerate(self.closings):
            bad = [f for f in c.frames if f not in ids]
            if bad:
                raise ValueError(f"closings[{i}].frames: no frame {bad[0]!r} in this block")
        if all(c.frames for c in self.closings):
            raise ValueError("closings: want at least one that fits any frame (without frames)")
        return self


class DomainFile(Model):
    domain: str
    en: LanguageBlock
    zh: LanguageBlock
    en_zh: LanguageBlock = Field(alias="en-zh")


class AddedBlock(Model):
    """Frames added to one language block of a built-in domain (its openings, closings, self and
    side talk stay the built-in block's)."""

    frames: list[Frame] = Field(min_length=1)


class AddedFile(Model):
    """A content folder's ``<domain>.yaml`` (``synth frames draft``, pipeline ``content:``): the
    domain file format with only ``frames`` in each block and only the languages it adds to.

        domain: pharmacy
        en:
          frames: [{id: travel_kit, topic: ..., ...}]
    """

    domain: str
    en: AddedBlock | None = None
    zh: AddedBlock | None = None
    en_zh: AddedBlock | None = Field(default=None, alias="en-zh")

    @model_validator(mode="after")
    def _some_language(self):
        if not self.blocks():
            raise ValueError("no language block (en, zh or en-zh) with frames")
        return self

    def blocks(self) -> dict[str, AddedBlock]:
        return {lang: b for lang, b in zip(LANGS, (self.en, self.zh, self.en_zh)) if b is not None}


def _texts(obj, where: str = ""):
    """Every string in a dumped structure, with where it is."""
    if isinstance(obj, str):
        yield where, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _texts(v, f"{where}.{k}" if where else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _texts(v, f"{where}[{i}]")


def _need_known(text: str, known: set[str], where: str) -> None:
    bad = fields(text) - known
    if bad:
        raise ValueError(f"{where}: {text!r} uses unknown slot {sorted(bad)[0]!r}")


# -- speech checks (language rule, markup, sizes) -------------------------------------------------
SYSTEM_KEYS = {"system", "short", "repair", "then", "ack", "result", "failure", "openings", "head", "tail"}


def speech_problems(block: dict, lang: str) -> list[str]:
    """Problems with the spoken lines of one language block, slots filled with their first value."""
    problems, english_lines, lines = [], 0, 0
    for frame in block.get("frames", []):
        pools = {k: _pool(v, lang) for k, v in frame.get("slots", {}).items()}
        for d in frame.get("delegations", []):
            pools.update({k: _pool(v, lang) for k, v in d.get("slots", {}).items()})
        values = {k: v[0] for k, v in pools.items()}
        first = next(iter(values.values()), "x")
        values.update(topic=fill(frame.get("topic", ""), values), old=first, new=first, user=SAMPLE_NAME[lang])
        values["task"] = fill(next((d.get("task", "") for d in frame.get("delegations", [])), ""), values)
        for name, pool in pools.items():
            for v in pool:  # every value is spoken somewhere: the same rules, without the size
                problems += [p for p in _line_problems(str(v), lang, f"frames[{frame.get('id')}].slots.{name}", "value")
                             if " words, want " not in p and "no Chinese" not in p]
        for where, text in _texts(frame, f"frames[{frame.get('id')}]"):
            key = re.sub(r"\[\d+\]", "", where).split(".")[-1]
            if key in ("id", "tool", "objective", "note", "slot", "task", "topic") or ".slots" in where:
                continue
            try:
                spoken = fill(text, values)
            except (KeyError, IndexError, ValueError):
                continue  # reported by the model check
            problems += _line_problems(spoken, lang, where, key)
            lines += 1
            english_lines += bool(_LATIN.search(spoken))
    frames = block.get("frames") or [{}]
    sample = {k: _pool(v, lang)[0] for k, v in frames[0].get("slots", {}).items()}
    sample = {"user": SAMPLE_NAME[lang], "topic": fill(frames[0].get("topic", ""), sample) or "x"}
    for key in ("openings", "self_talk", "side_talk", "closings"):
        for where, text in _texts(block.get(key, []), key):
            if re.search(r"\.frames\[\d+\]$", where):  # a closing's frame ids, not speech
                continue
            try:
                spoken = fill(text, sample)
            except (KeyError, IndexError, ValueError):
                problems.append(f"{where}: {text!r} uses a field other than {{user}} and {{topic}}")
                continue
            problems += _line_problems(spoken, lang, where, where.split(".")[-1] if "." in where else key)
    if lang == "en-zh" and lines and english_lines / lines < 0.4:
        problems.append(f"en-zh: only {english_lines} of {lines} frame lines switch to English (want >= 40 %)")
    return problems


def _pool(pool, lang: str) -> list[str]:
    """A slot's values to check: listed, or samples of a generator (a bad spec: none, the model check says why)."""
    try:
        return slot_pool(pool, lang) or ["x"]
    except (ValidationError, ValueError, TypeError):
        return ["x"]


def _line_problems(text: str, lang: str, where: str, key: str) -> list[str]:
    out = []
    if _MARKUP.search(text):
        out.append(f"{where}: markup or emoji in speech: {text!r}")
    if lang == "en" and CJK.search(text):
        out.append(f"{where}: Chinese in an en line: {text!r}")
    if lang == "zh" and _LATIN.search(text):
        out.append(f"{where}: Latin letters in a zh line (spell numbers and names in Chinese): {text!r}")
    if lang in ("zh", "en-zh") and not _HAN.search(text) and key not in ("completion", "chunks"):
        out.append(f"{where}: no Chinese in a {lang} line: {text!r}")
    if re.search(r"\d", text):
        out.append(f"{where}: digits in speech (write numbers as they are said): {text!r}")
    n = word_count(text)
    lo, hi = SYSTEM_WORDS if key in SYSTEM_KEYS else USER_WORDS
    if key in ("completion",):
        lo = 1
    if key in ("chunks",):
        lo = 1
    if not lo <= n <= hi:
        out.append(f"{where}: {n} words, want {lo}-{hi}: {text!r}")
    return out


# -- loading ------------------------------------------------------------------------------------
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

@lru_cache(maxsize=None)
def domain_content(domain: str) -> DomainFile:
    try:
        text = resources.files("synth.data.frames").joinpath(f"{domain}.yaml").read_text("utf-8")
    except FileNotFoundError:
        raise UserError(f"domain: no content for domain {domain!r} (synth/data/frames/{domain}.yaml)") from None
    return DomainFile.model_validate(yaml.load(text, Loader=_LOADER))


@lru_cache(maxsize=None)
def common_content() -> dict:
    return yaml.load(resources.files("synth.data.frames").joinpath("_common.yaml").read_text("utf-8"), Loader=_LOADER)


def domains() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("synth.data.frames").iterdir()
                  if p.name.endswith(".yaml") and not p.name.startswith("_"))


def block(domain: str, language: str) -> LanguageBlock:
    d = domain_content(domain)
    return {"en": d.en, "zh": d.zh, "en-zh": d.en_zh}[language]


def is_added_file(raw) -> bool:
    """Whether parsed YAML is a content folder's file (``AddedFile``): every language block it has
    holds ``frames`` only. A built-in domain file has all three blocks with openings, closings ..."""
    return (isinstance(raw, dict) and any(lang in raw for lang in LANGS)
            and all(isinstance(raw[lang], dict) and set(raw[lang]) == {"frames"} for lang in LANGS if lang in raw))


SLUG_ID = re.compile(r"^[a-z][a-z0-9_]*$")


def added_problems(added: AddedFile, where: str = "") -> list[str]:
    """What a content folder's file may not do beyond the model's rules: name a domain without
    built-in content, use a frame id that is not a slug or that the built-in block (or the file
    itself) already has, or hand a task to a tool the domain has none of."""
    if added.domain not in domains():
        return [f"{where}domain: no built-in domain {added.domain!r} to add frames to (known: {', '.join(domains())})"]
    tools = domain_tools(added.domain)
    out = []
    for lang, blk in added.blocks().items():
        seen = {f.id for f in block(added.domain, lang).frames}
        for i, f in enumerate(blk.frames):
            at = f"{where}{lang}.frames[{i}]"
            if not SLUG_ID.match(f.id):
                out.append(f"{at}: id {f.id!r} is not a slug (lower-case letters, digits, _)")
            if f.id in seen:
                out.append(f"{at}: frame id {f.id!r} is already a frame of {added.domain} ({lang})")
            seen.add(f.id)
            out += [f"{at}: delegations: tool {d.tool!r} is not a tool of {added.domain} (known: "
                    f"{', '.join(sorted(tools))})" for d in f.delegations if d.tool not in tools]
        out += [f"{where}{lang}.{p}" for p in speech_problems(blk.model_dump(), lang)]
        out += [f"{where}{lang}.{p}" for p in volunteer_problems(blk.model_dump())]
    return out


@lru_cache(maxsize=None)
def domain_tools(domain: str) -> frozenset[str]:
    """The tools the built-in frames of ``domain`` hand tasks to (those its seeds list)."""
    d = domain_content(domain)
    return frozenset(t.tool for blk in (d.en, d.zh, d.en_zh) for f in blk.frames for t in f.delegations)


def check_file(path: Path) -> list[str]:
    """Every problem of one domain file, or of a content folder's file (``AddedFile``), one line
    each (empty when it is good)."""
    try:
        raw = yaml.load(path.read_text("utf-8"), Loader=_LOADER)
    except yaml.YAMLError as e:
        return [f"{path}: not YAML: {e}"]
    if path.name.startswith("_parts"):  # the pools answers are composed from (compose.py)
        from .compose import check_parts

        return check_parts(raw, str(path))
    if is_added_file(raw):
        try:
            added = AddedFile.model_validate(raw)
        except ValidationError as e:
            return [f"{path}: {'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors()]
        return added_problems(added, f"{path}: ")
    try:
        DomainFile.model_validate(raw)
    except ValidationError as e:
        return [f"{path}: {'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors()]
    out = []
    for lang in LANGS:
        out += [f"{path}: {lang}.{p}" for p in speech_problems(raw[lang], lang)]
        out += [f"{path}: {lang}.{p}" for p in glue_problems(raw[lang], lang)]
        out += [f"{path}: {lang}.{p}" for p in volunteer_problems(raw[lang])]
        out += [f"{path}: {lang}.{p}" for p in answer_shaped_problems(raw[lang])]
    return out


# -- glue: what the user says back after side talk (issue 32) --------------------------------------
_EN_STOP = frozenset("""the and that this with have what there they their them then than about back where were
from your you'll you're i'll i'm it's that's okay sorry just going into over some will would could should been
being yeah yes sure thanks thank right well where's what's here's here there's can't don't didn't isn't wasn't
good great fine let's let carry keep again saying said anyway""".split())
_ZH_STOP = frozenset("不好 好意 意思 我们 你们 一下 已经 可以 什么 这个 那个 没有 知道 现在 接着 继续 刚才 说到 "
                     "回来 咱们 哪儿 回到 好的 好吧 刚刚 讲到 那就".split())


def content_keys(text: str) -> set[str]:
    """What a line is about, to see whether another line picks it up: English content words
    (their first five letters, so "asleep"/"sleeping" do not count but "drawer"/"drawers" do)
    and Chinese character pairs, without the glue words every readdress has ("sorry", 接着, 刚才)."""
    en = {w[:5] for w in re.findall(r"[a-z']+", text.lower()) if len(w) >= 3 and w not in _EN_STOP}
    zh = {h[i:i + 2] for h in re.findall(r"[\u4e00-\u9fff]+", text) for i in range(len(h) - 1)}
    return en | (zh - _ZH_STOP)


def picks_up(reply: str, back: str) -> bool:
    """Whether ``back`` (the user's line after side talk) refers to ``reply`` (what was said to them)."""
    return bool(content_keys(reply) & content_keys(back))


def established(frame: dict) -> set[str]:
    """The slots a frame's opening establishes: said by every request line, or by every answer
    to it (its long and short forms), whichever way the session opens."""
    req = frame.get("request") or {}

    def every(lines) -> set[str]:
        sets = [fields(t) for t in lines or [] if isinstance(t, str)]
        return set.intersection(*sets) if sets else set()
    return every(req.get("user")) | every(list(req.get("system") or []) + list(req.get("short") or []))


def volunteer_problems(block: dict) -> list[str]:
    """No volunteered details (issue 32): each follow-up and new request has a user line that
    names only slots the opening established, so the planner can ask it without the user giving a
    value nobody asked for ("Will Rex be comfortable there?" before the dog was named)."""
    out = []
    for frame in block.get("frames") or []:
        if not isinstance(frame, dict):
            continue
        known = established(frame) | {"topic"}
        for key in ("followups", "new_requests"):
            for i, unit in enumerate(frame.get(key) or []):
                lines = [t for t in (unit or {}).get("user") or [] if isinstance(t, str)]
                if lines and all(fields(t) - known for t in lines):
                    slot = sorted(fields(lines[0]) - known)[0]
                    out.append(f"frames[{frame.get('id')}].{key}[{i}].user: every line names {{{slot}}}, which "
                               f"the request does not establish (add a line that asks without it)")
    return out


_ANSWER_SHAPED = re.compile(r"(?:^|[，,。.!?？] ?|[说讲])(?:是|it's|it is)\s*(?:因为)?(?:for )?(?:a |an |the )?\{(?!old\}|new\})"
                            r"|\b(?:tell|say)\b[^.?!]*\bit's (?:for )?(?:a |an |the )?\{", re.I)
"""A request clause shaped as an answer ("..., it's for {reason}", 跟学校说是{reason}): it answers a
question nobody asked ("what's the reason?"); the request says the detail as part of what it asks."""


def answer_shaped_problems(block: dict) -> list[str]:
    """No delegation request answers a question nobody asked (issue 32): "Please send it, it's for
    a music exam" after talk about the pickup volunteers the reason; "Can you send the office a
    note that Noah is leaving early for a music exam?" asks for the task with it."""
    out = []
    for frame in block.get("frames") or []:
        for d in (frame or {}).get("delegations") or []:
            for t in (d or {}).get("user") or []:
                if isinstance(t, str) and _ANSWER_SHAPED.search(t):
                    out.append(f"frames[{frame.get('id')}].delegations[{d.get('tool')}].user: {t!r} answers a "
                               f"question nobody asked (say the detail as part of the request)")
    return out


def glue_problems(block: dict, lang: str) -> list[str]:
    """A readdress after side talk picks up what the third party said (its ``heard`` line, or the
    readdress itself); a ``heard`` line that does not is no acknowledgement either."""
    out = []
    for i, st in enumerate(block.get("side_talk") or []):
        if not isinstance(st, dict) or not isinstance(st.get("third_party"), str):
            continue
        reply, heard = st["third_party"], st.get("heard") or []
        for h in heard:
            if isinstance(h, str) and not picks_up(reply, h):
                out.append(f"side_talk[{i}].heard: {h!r} does not pick up the reply {reply!r}")
        if not heard and not picks_up(reply, str(st.get("readdress", ""))):
            out.append(f"side_talk[{i}]: the readdress {st.get('readdress')!r} ignores the reply {reply!r} "
                       f"(add heard: what the user says back about it)")
    return out


def main(argv: list[str]) -> int:
    bad = 0
    for arg in argv:
        problems = check_file(Path(arg))
        for p in problems:
            print(p)
        bad += len(problems)
        if not problems:
            print(f"{arg}: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
