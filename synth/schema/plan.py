"""Planned sessions: relational events with no absolute times.

An event says who speaks, what, and how it attaches to an earlier event. The clock
(``synth.stages.place``) turns attachments into sample times using the rendered audio.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .common import Addressee, FloorIntent, Language, Model, OmitUnset, Relation, Slug, Speaker, WordLang
from .phenomena import ALL as KNOWN_PHENOMENA

PauseKind = Literal["within_turn", "hesitation", "long"]
Sound = Literal["laughter", "breath", "sigh", "cough", "throat_clear", "media"]
"""Events rendered from a sound bank instead of TTS; their one word is a tag like ``[laughter]``."""


class PlannedWord(Model):
    """One written word. Its text is normalised on the way in (``speakable``), so what the
    transcript shows is what the voice says."""

    text: str
    lang: WordLang

    @field_validator("text")
    @classmethod
    def _speakable(cls, value: str) -> str:
        return speakable(value)

    @model_validator(mode="after")
    def _script_fits_language(self):
        """A word's letters are in a script of its language: the voice of that language reads them
        (an English voice does not read Arabic, a Mandarin one does not read Latin letters)."""
        if is_sound_tag(self.text):  # "[laughter]": a sound, not read by a voice
            return self
        for c in self.text:
            if c.isalpha() and not _SCRIPTS[self.lang](unicodedata.name(c, "")):
                raise ValueError(f"{self.text!r} is declared {self.lang} but {c!r} is {_script_of(c)} "
                                 f"(the {_READS[self.lang]})")
        return self


def talker(ev) -> str:
    """Who makes the sound of a planned or placed event: its person in a group session, else its
    speaker. Voices, room positions and the rule that nobody overlaps their own voice go by it."""
    return getattr(ev, "person", None) or ev.speaker


def people_of(events) -> list[str]:
    """The persons of a group session's placed events, in the order they are first heard; empty
    for a dyadic session."""
    return list(dict.fromkeys(e.person for e in sorted(events, key=lambda e: e.on_sample) if e.person))


def is_sound_tag(word: str) -> bool:
    """A word that stands for a sound (``[laughter]``, ``[cough]``), not for speech."""
    return len(word) > 2 and word.startswith("[") and word.endswith("]")


# letters by their Unicode name: Latin (accents and fullwidth forms included) and Greek (units, maths)
# for English; ideographs (Han) and CJK full-width forms for Mandarin
_SCRIPTS = {
    "en": lambda name: "LATIN" in name or name.startswith(("GREEK", "MODIFIER LETTER")) or name == "MICRO SIGN",
    "zh": lambda name: name.startswith(("CJK", "IDEOGRAPHIC", "FULLWIDTH", "HALFWIDTH")),
}
_READS = {"en": "English voice reads Latin letters", "zh": "Mandarin voice reads Han characters"}


def _script_of(c: str) -> str:
    name = unicodedata.name(c, "")
    return f"{name.split()[0].title()} script" if name else f"U+{ord(c):04X}"


# Control and format characters, private use, unassigned code points, symbols such as emoji, and
# the modifiers and selectors that style them: no TTS engine reads these the way they look.
_UNSPEAKABLE_CATEGORIES = {"Cc", "Cf", "Co", "Cs", "Cn", "So", "Sk"}


def strip_unspeakable(text: str) -> str:
    """``text`` in NFC without control characters, symbols or emoji, blanks collapsed to one space."""
    kept = "".join(" " if c.isspace() else c for c in unicodedata.normalize("NFC", text)
                   if c.isspace() or (unicodedata.category(c) not in _UNSPEAKABLE_CATEGORIES
                                      and not 0xFE00 <= ord(c) <= 0xFE0F))
    return " ".join(kept.split())


def speakable(text: str) -> str:
    """``text`` in NFC with everything a voice cannot say removed and blanks collapsed; a word
    left with nothing to say is an error::

        speakable("ok\x07 👍")  ->  "ok"
    """
    out = strip_unspeakable(text)
    if not out:
        raise ValueError(f"word {text!r} has nothing a voice can say (only control characters, symbols or emoji)")
    return out


class PlannedEvent(OmitUnset):
    """One utterance (or sound) of one speaker, attached to an earlier event.

    ``attach_word`` is the index of the word of the attached event at which an ``interrupts``
    or ``backchannels_on`` event is placed; ``pause_before`` chooses the pause law of a
    ``continues`` event; ``gap_kind`` selects the gap law of ``responds_to``: ``dispreferred``
    (long), ``early`` (a latched start in the last syllable of the attached turn) or ``silence``
    (the user lets a silence fall after a system question: user gap + the long-pause law).
    A ``sound`` event (laughter, breath, cough, TV speech ...) is rendered from the sound bank;
    ``during`` places it inside the attached event.

    In a group session (a seed with ``people``) every human event names its ``person`` (a
    person's id; the speaker is ``user`` for all of them) and every spoken event its
    ``addressee``: ``system``, ``group`` or a person's id. Both are left out of dyadic plans.
    """

    _omit_if_none = ("person", "addressee")

    id: Slug
    speaker: Speaker
    act: Slug
    floor_intent: FloorIntent
    relation: Relation | None = None
    attach_to: Slug | None = None
    attach_word: int | None = Field(default=None, ge=0)
    words: list[PlannedWord] = Field(min_length=1)
    pause_before: PauseKind | None = None
    gap_kind: Literal["normal", "dispreferred", "early", "silence"] = "normal"
    work_id: Slug | None = None
    phenomena: list[str] = Field(default_factory=list)
    sound: Sound | None = None
    prolong_ms: float | None = Field(default=None, gt=0, le=3000, description="stretch the last word")
    person: Slug | None = None
    addressee: Addressee | None = None

    @field_validator("phenomena")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        bad = [p for p in value if p not in KNOWN_PHENOMENA]
        if bad:
            raise ValueError(f"unknown phenomenon {bad[0]!r}")
        return value

    @property
    def text(self) -> str:
        return join_words(self.words)


class PlannedWork(Model):
    """A delegation planned by the planner: opened right after the event ``opened_by`` (the ack).

    ``outcome`` says whether the simulated backend succeeds (``result_text`` is then the result)
    or fails (``result_text`` is its error). ``cancelled_by`` is the user event that cancels or
    supersedes it (its result is then dropped, never delivered); ``progress_text`` is the note
    the backend returns when the system event ``progress_by`` answers a progress question.
    """

    work_id: Slug
    tool: Slug
    objective: str
    result_text: str
    opened_by: Slug
    outcome: Literal["success", "failure"] = "success"
    cancelled_by: Slug | None = None
    progress_text: str | None = None
    progress_by: Slug | None = None


class Plan(Model):
    session_id: Slug
    scenario_id: Slug
    language: Language
    planner: str
    events: list[PlannedEvent] = Field(min_length=1)
    work: list[PlannedWork] = Field(default_factory=list)
    planner_meta: dict[str, Any] = Field(
        default_factory=dict, description="how the planner made it: prompt version, mode, examples")

    @model_validator(mode="after")
    def _attachments_point_back(self):
        seen: set[str] = set()
        works = {w.work_id for w in self.work}
        for ev in self.events:
            if ev.id in seen:
                raise ValueError(f"event id {ev.id!r} is used twice")
            target = ev.attach_to
            if ev.relation == "delivers_result_of":
                if target not in works:
                    raise ValueError(f"event {ev.id!r} delivers unknown work item {target!r}")
            elif target is not None and target not in seen:
                raise ValueError(f"event {ev.id!r} attaches to {target!r}, which is not earlier")
            seen.add(ev.id)
        delivered = {ev.attach_to for ev in self.events if ev.relation == "delivers_result_of"}
        for w in self.work:
            if w.opened_by not in seen:
                raise ValueError(f"work item {w.work_id!r} is opened by unknown event {w.opened_by!r}")
            for name in ("cancelled_by", "progress_by"):
                ref = getattr(w, name)
                if ref is not None and ref not in seen:
                    raise ValueError(f"work item {w.work_id!r}: {name} names unknown event {ref!r}")
            if w.cancelled_by is not None and w.work_id in delivered:
                raise ValueError(f"work item {w.work_id!r} is cancelled but also delivered")
        _check_relations(self.events)
        return self


WORD_ANCHORED = ("interrupts", "backchannels_on")


def _check_relations(events: list[PlannedEvent]) -> None:
    """The relational rules the clock and the label rules rely on (LABELS.md R1, R4, R5).

    - ``attach_word`` indexes a word of the attached event, on ``interrupts`` and
      ``backchannels_on`` only;
    - a ``continues`` event has its target's speaker, and between the two no other speaker's
      floor event (take or hold) comes in the plan: a turn is not broken by someone else's;
    - ``interrupts`` and ``responds_to`` aim at the last event of a turn (nothing continues it);
    - an event is interrupted at most once, and not after something already answered it.
    """
    by_id = {e.id: (i, e) for i, e in enumerate(events)}
    continued_by = {e.attach_to: e.id for e in events if e.relation == "continues"}
    answered: dict[str, str] = {}
    interrupted: dict[str, str] = {}
    for i, ev in enumerate(events):
        found = by_id.get(ev.attach_to or "")
        if ev.attach_word is not None:
            if ev.relation not in WORD_ANCHORED:
                raise ValueError(f"event {ev.id!r}: attach_word is only for {' and '.join(WORD_ANCHORED)} "
                                 f"(relation is {ev.relation!r})")
            if found is not None and ev.attach_word >= len(found[1].words):
                raise ValueError(f"event {ev.id!r}: attach_word {ev.attach_word} is out of range for "
                                 f"{ev.attach_to!r}, which has {len(found[1].words)} words")
        if found is None:
            continue
        j, target = found
        if ev.relation == "continues":
            if talker(target) != talker(ev):
                raise ValueError(f"event {ev.id!r} ({talker(ev)}) continues {target.id!r} ({talker(target)})")
            between = [e.id for e in events[j + 1 : i] if e.speaker in ("user", "system")
                       and talker(e) != talker(ev) and e.floor_intent != "none"]
            if between:
                raise ValueError(f"event {ev.id!r} continues {target.id!r}, but {between[0]!r} of another "
                                 "speaker takes the floor in between")
        if ev.relation in ("interrupts", "responds_to") and target.id in continued_by:
            raise ValueError(f"event {ev.id!r} {ev.relation.replace('_', ' ')} {target.id!r}, which "
                             f"{continued_by[target.id]!r} continues: aim at the last event of the turn")
        if ev.relation == "interrupts":
            if target.id in interrupted:
                raise ValueError(f"event {ev.id!r} interrupts {target.id!r}, already interrupted by "
                                 f"{interrupted[target.id]!r}")
            if target.id in answered:
                raise ValueError(f"event {ev.id!r} interrupts {target.id!r} after {answered[target.id]!r} "
                                 "already responded to its end")
            interrupted[target.id] = ev.id
        elif ev.relation == "responds_to":
            answered.setdefault(target.id, ev.id)


def join_words(words) -> str:
    """Join words the way they are written: spaces around English, none between Chinese, none
    after full-width punctuation ("OK，我们走")."""
    out = ""
    prev_lang = None
    for w in words:
        text = w.text
        if (out and not (prev_lang == "zh" and w.lang == "zh") and not _is_closing_punct(text)
                and out[-1] not in "，。？！；：、…"):
            out += " "
        out += text
        prev_lang = w.lang
    return out


def _is_closing_punct(text: str) -> bool:
    return bool(text) and all(c in ",.?!;:，。？！；：、…" for c in text)
