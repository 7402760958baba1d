"""Content of group conversations: several people in a room talking about one thing, to each other
and to the assistant (README "Group conversations", CONTENT.md's coherence per relation).

One file per group scene kind, ``synth/data/groups/<name>.yaml``, with a block per language mode
(``en``, ``zh``, ``en-zh``), each holding ``scenes``. A scene is one shared topic (a drive, a food
order, a recipe cooked with children) with its slots, drawn once per session like a frame's:

- ``requests``: units asked of the assistant by whoever can address it; each ``user`` line,
  each ``system`` answer; ``ask_back`` (optional): the assistant asks back (``system``), someone
  else answers for the asker (``other``: one person answering or correcting for another), then the
  answer that uses it (``then``). The first unit opens the scene ("why have we stopped?"): a long
  session asks it first on the scene's first visit (where ``asks`` and ``opens`` allow it). Their
  order in a session is otherwise drawn, within three rules that keep a question from coming after
  its own answer (README "Group conversations", request order):
  ``asks`` (optional): the slots whose value answers the question ("how long do they bake for?"
  asks ``[minutes]``; one is enough where several answer it); once the assistant has said one of
  them in any line (the timer it set for ``{minutes}``, a decision's confirmation), the unit is
  not asked, so each of its answers says one. ``opens: true``: a unit that only opens the scene
  ("we're here to see Dr Patel"), asked as its first request or not at all (in a long session, as
  a chapter's first request, once); an ``opens`` unit is the scene's first unit. And, with no
  marking: after the group's decision, no unit whose lines name an option the group did not
  choose (the places to eat, once the group picked one); so a unit about one option names the one
  the decision lands on, and still reads right (and is still asked) once the group has chosen;
- ``chats``: exchanges between people about the scene (the assistant must not take them), each
  a list of 2-4 lines said in turn by different people; ``{a}`` / ``{b}`` / ``{c}`` are the names of
  the speakers of the first, second and third line, so a line may address the next speaker by name.
  A chat whose lines only fit a parent and a child ("are we nearly there?" / "not yet, another half
  hour") is written ``{by: [child, adult], lines: [...]}``: the first speaker is then a person of the
  seed with ``child: true`` and the second one without (``any`` for either); a group without such
  people never gets that chat. A chat opened to everyone ("did anyone pack the charger?", 谁要喝水？)
  is written ``{to: group, lines: [...]}``: its first line is addressed to the ``group`` (it names
  nobody, so no ``{b}``) and the next speaker answers for themselves; the assistant, in the room,
  does not take it;
- ``overlaps``: short lines one person says over another's chat line (``{a}`` the one talked over);
- ``decision``: the assistant asks the group (``ask``), the people discuss (``discuss``: chats
  whose ``{options}`` come from the scene), one of them says the choice to it (``decide``), and it
  confirms (``confirm``);
- ``wake``: lines that call the assistant by name (``{system}``) in the middle of a chat and go on
  with one of the scene's requests (``{request}``, lower-cased when it follows);
- ``closing`` (optional): how someone ends the session (``user``) and the assistant's goodbye
  (``system``) in this place ("good luck with the exam" in a study group, not "have a good
  trip"; a long session uses the one of its last chapter in the seed's own domain); without it
  the planner's generic goodbyes are used;
- ``recall`` (optional; long sessions, README "Long group sessions"): someone asks the assistant,
  minutes later, for values the group settled in this scene (``user``), and it answers with them
  (``system``); the slots the ``system`` lines use (the same in each) are the values it refers
  back to, so each must have been said before (the long planner checks that, and ``synth
  validate`` again); a unit whose answers use an ``option_*`` slot is about the group's choice
  and is drawn only after the scene's decision.

Text rules (checked by ``python -m synth.backends.group_content FILE``): every field used must be
a slot of the scene or one the planner fills (``{a} {b} {c} {system} {asker} {request}``); the
speech rules of frames (no digits, no markup, script of the language, sizes).
"""

from __future__ import annotations

import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from ..errors import UserError
from ..schema.common import Model
from .frame_checks import _line_problems
from .frames import LANGS, _texts, fields, fill

PLANNER_FIELDS = {"a", "b", "c", "system", "asker", "request"}
"""Fields the group planner fills: speakers' names, the assistant's name, the one who asked."""
SAMPLE = {"a": "Maya", "b": "Leo", "c": "Ana", "system": "Nova", "asker": "Maya", "request": "how far is it"}
SAMPLE_ZH = {"a": "小美", "b": "阿杰", "c": "安安", "system": "小悠", "asker": "小美", "request": "还有多远"}


Role = Literal["adult", "child", "any"]


class Chat(Model):
    """A chat between two people taking turns; ``by``: who may say the first and the second
    speaker's lines (a person with ``child: true`` is a child); ``to``: whom the first line is
    addressed to, the next speaker or the whole ``group``."""

    by: tuple[Role, Role] = ("any", "any")
    to: Literal["person", "group"] = "person"
    lines: list[str]

    @model_validator(mode="before")
    @classmethod
    def _plain_list(cls, v):
        return {"lines": v} if isinstance(v, list) else v

    @model_validator(mode="after")
    def _group_names_nobody(self):
        if self.to == "group" and self.lines and fields(self.lines[0]) & {"b", "c"}:
            raise ValueError(f"a chat to the group names nobody in its first line (got {self.lines[0]!r})")
        return self


def _two_to_four(chats: list, what: str) -> list:
    """Chats said in turn by two people: 2-4 lines each."""
    for chat in chats:
        n = len(chat.lines if isinstance(chat, Chat) else chat)
        if not 2 <= n <= 4:
            raise ValueError(f"{what} has 2-4 lines (got {n})")
    return chats


class AskBack(Model):
    system: list[str] = Field(min_length=1)
    other: list[str] = Field(min_length=1)
    then: list[str] = Field(min_length=1)


class GroupRequest(Model):
    """A unit asked of the assistant; ``asks``: the slots whose value answers it (not asked once
    the assistant has said one); ``opens``: asked only as the scene's first request."""

    user: list[str] = Field(min_length=2)
    system: list[str] = Field(min_length=2)
    ask_back: AskBack | None = None
    asks: list[str] = Field(default_factory=list)
    opens: bool = False

    def answers(self) -> list[str]:
        """The lines that answer it: each ``system`` line, and the ``then`` lines after an ask-back."""
        return self.system + (self.ask_back.then if self.ask_back else [])

    def named(self) -> set[str]:
        """Every field its lines use (the user's, the answers, the ask-back's)."""
        back = self.ask_back
        texts = self.user + self.answers() + (back.system + back.other if back else [])
        return set().union(*(fields(t) for t in texts))

    @model_validator(mode="after")
    def _answers_say_it(self):
        """Each answer says one of the values the unit asks for (it is the answer to skip on)."""
        for t in self.answers() if self.asks else []:
            if not fields(t) & set(self.asks):
                raise ValueError(f"an answer of a request with asks {self.asks} says none of them: {t!r}")
        return self


class Recall(Model):
    """A late question about values settled earlier in the scene, and answers that give them."""

    user: list[str] = Field(min_length=2)
    system: list[str] = Field(min_length=2)

    @field_validator("system")
    @classmethod
    def _same_values(cls, v):
        """Every answer gives the same values (the ones the planner checks were said before)."""
        named = {frozenset(fields(t) - PLANNER_FIELDS) for t in v}
        if len(named) != 1 or not next(iter(named)):
            raise ValueError(f"a recall's system lines name the same slots, at least one (got {sorted(map(sorted, named))})")
        return v


class Decision(Model):
    ask: list[str] = Field(min_length=1)
    discuss: list[Chat] = Field(min_length=1)
    decide: list[str] = Field(min_length=1)
    confirm: list[str] = Field(min_length=1)

    @field_validator("discuss")
    @classmethod
    def _turns(cls, v):
        return _two_to_four(v, "a discussion")


class Closing(Model):
    user: list[str] = Field(min_length=1)
    system: list[str] = Field(min_length=1)


class Scene(Model):
    id: str
    topic: str
    slots: dict[str, list[str]] = Field(default_factory=dict)
    requests: list[GroupRequest] = Field(min_length=3)
    chats: list[Chat] = Field(min_length=3)
    overlaps: list[str] = Field(default_factory=list)
    decision: Decision | None = None
    wake: list[str] = Field(default_factory=list)
    closing: Closing | None = None
    recall: list[Recall] = Field(default_factory=list)

    @field_validator("chats")
    @classmethod
    def _turns(cls, v):
        return _two_to_four(v, "a chat")

    @model_validator(mode="after")
    def _asks_are_slots(self):
        for k, r in enumerate(self.requests):
            bad = [a for a in r.asks if a not in self.slots]
            if bad:
                raise ValueError(f"requests[{k}].asks: {bad[0]!r} is not a slot of scene {self.id!r}")
        return self

    def options(self) -> set[str]:
        """The slots a group decision chooses between (``option_a``, ``option_b``, ...)."""
        return {s for s in self.slots if s.startswith("option")}

    @field_validator("slots")
    @classmethod
    def _values(cls, v):
        for name, pool in v.items():
            if name in PLANNER_FIELDS or name == "topic":
                raise ValueError(f"slot {name!r} is a name the planner fills itself")
            if len(pool) < 2:
                raise ValueError(f"slot {name!r} needs at least 2 values")
        return v


class GroupBlock(Model):
    scenes: list[Scene] = Field(min_length=1)


class GroupFile(Model):
    domain: str
    en: GroupBlock | None = None
    zh: GroupBlock | None = None
    en_zh: GroupBlock | None = Field(default=None, alias="en-zh")

    def block(self, language: str) -> GroupBlock | None:
        return {"en": self.en, "zh": self.zh, "en-zh": self.en_zh}[language]


def _unknown_fields(scene: dict) -> list[str]:
    known = set(scene.get("slots", {})) | PLANNER_FIELDS | {"topic", "options"}
    out = []
    for where, text in _texts({k: v for k, v in scene.items() if k not in ("id", "slots")}, f"scenes[{scene.get('id')}]"):
        bad = fields(text) - known
        if bad:
            out.append(f"{where}: {text!r} uses unknown field {sorted(bad)[0]!r}")
    return out


def speech_problems(block: dict, lang: str) -> list[str]:
    """The frames' speech rules on every line of a block, fields filled with sample values."""
    problems = []
    names = SAMPLE if lang == "en" else SAMPLE_ZH
    for scene in block.get("scenes", []):
        problems += _unknown_fields(scene)
        values = {**names, **{k: v[0] for k, v in scene.get("slots", {}).items()}}
        values["topic"] = fill(scene.get("topic", ""), values) if not fields(scene.get("topic", "")) - set(values) else ""
        values.setdefault("options", "x")
        for where, text in _texts({k: v for k, v in scene.items() if k not in ("id", "slots", "topic")},
                                  f"scenes[{scene.get('id')}]"):
            key = where.split(".")[-1].split("[")[0]
            if key in ("by", "to", "asks"):  # speaker roles, an addressee, slot names: not speech
                continue
            try:
                spoken = fill(text, values)
            except (KeyError, IndexError, ValueError):
                continue
            kind = "system" if key in ("system", "then", "ask", "confirm") else "user"
            problems += _line_problems(spoken, lang, where, kind)
    return problems


def check_file(path: Path) -> list[str]:
    try:
        raw = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, yaml.YAMLError) as e:
        return [f"{path}: {e}"]
    try:
        GroupFile.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        return [f"{path}: {'.'.join(str(x) for x in err['loc'])}: {err['msg']}"]
    out = []
    for lang in LANGS:
        if raw.get(lang):
            out += [f"{path}: {lang}.{p}" for p in speech_problems(raw[lang], lang)]
    return out


@lru_cache(maxsize=None)
def group_files() -> dict[str, GroupFile]:
    """Built-in group content by domain."""
    out = {}
    for f in sorted(resources.files("synth.data.groups").iterdir(), key=lambda f: f.name):
        if f.name.endswith(".yaml"):
            gf = GroupFile.model_validate(yaml.safe_load(f.read_text("utf-8")))
            out[gf.domain] = gf
    return out


def group_block(domain: str, language: str) -> GroupBlock:
    gf = group_files().get(domain)
    blk = gf.block(language) if gf is not None else None
    if blk is None:
        have = sorted(f"{d} ({', '.join(lg for lg in LANGS if g.block(lg))})" for d, g in group_files().items())
        raise UserError(f"no group content for domain {domain!r} in {language!r}; group content exists for: "
                        f"{', '.join(have)}")
    return blk


def main(argv: list[str]) -> int:
    problems = [p for a in argv for p in check_file(Path(a))]
    print("\n".join(problems) or f"ok: {len(argv)} file(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
