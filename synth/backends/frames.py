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
from typing import Annotated

import yaml
from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator

from ..errors import UserError
from ..schema.common import Model
from ..text import HAN
from .values import GenSpec, samples

LANGS = ("en", "zh", "en-zh")
_FIELD = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_ALNUM_END, _ALNUM_START = re.compile(r"[A-Za-z0-9]$"), re.compile(r"[A-Za-z0-9]")
_HAN = HAN
RESERVED = {"topic", "task", "old", "new", "user"}
"""Field names the planner fills itself; a slot may not be called that."""
SAMPLE_NAME = {"en": "Sam", "zh": "小林", "en-zh": "小林"}
"""What ``{user}`` becomes when a block's lines are checked."""


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


@lru_cache(maxsize=None)
def domain_tools(domain: str) -> frozenset[str]:
    """The tools the built-in frames of ``domain`` hand tasks to (those its seeds list)."""
    d = domain_content(domain)
    return frozenset(t.tool for blk in (d.en, d.zh, d.en_zh) for f in blk.frames for t in f.delegations)


def main(argv: list[str]) -> int:
    """``python -m synth.backends.frames FILE...``: every problem of each file (:mod:`.frame_checks`)."""
    from .frame_checks import main as check

    return check(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
