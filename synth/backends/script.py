"""The scripted planner's content: one frame of the seed's domain at a time, its slot values and the lines said.

A :class:`Script` holds the session's current frame (``synth/data/frames/<domain>.yaml``) with its
slot values drawn once for the session, the follow-ups and requests not yet said, and a log of the
frames, corrections and work it used; :class:`Task` is one delegation with its values. The lines
are the content's templates filled with those values (an article agrees with the value after it,
a line that starts with a value gets its capital, two pieces join with the space or none that
their languages want). Which events occur and how they attach is decided by the skeleton in
``scripted_planner``; this module only says what they say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..schema.seed import ScenarioSeed
from .compose import Composer
from .content import BUILTIN, Library
from .done import reports_done
from .frame_checks import content_keys
from .frames import _FIELD, Delegation, Frame, Unit, _texts, common_content, domain_content, fields, fill
from .values import draw_other, draw as generate

CONTENT_VERSION = "frames-v2"


def tasks_of(frames: list[Frame], seed: ScenarioSeed) -> list[tuple[Frame, Delegation]]:
    tools = {t.name for t in seed.tools}
    return [(f, d) for f in frames for d in f.delegations if d.tool in tools]


_REFERS = re.compile(r"\b(it|that|this|them|there|those|these)\b|这个|那个|这些|那些|它|那边|这边|那里|这里", re.I)
"""Words that point back at something said before: a request from another frame must not use them."""
_A_AN = re.compile(r"\b([Aa])(n?) ([A-Za-z][\w'-]*)")
_VOWEL_SOUND_EXCEPT = ("uni", "use", "usu", "uti", "eu", "one", "once", "ur")
_SILENT_H = ("hour", "honest", "honour", "honor", "heir", "herb")


def _article(m: re.Match) -> str:
    """'a' or 'an' as the next word is said, where a slot value follows the article."""
    a, word = m.group(1), m.group(3)
    low = word.lower()
    if word.isupper() and len(word) > 1:  # an SMS, an MRI, a UK number: letters as said; leave them
        return m.group(0)
    vowel = (low[0] in "aeiou" and not low.startswith(_VOWEL_SOUND_EXCEPT)) or low.startswith(_SILENT_H)
    return f"{a}{'n' if vowel else ''} {word}"


def mid_line(value: str) -> str:
    """A listed value as it is said inside a line: one written in sentence case for the start of a
    line ("Electric kettle", "Insurance company": a common English word, then lower case words)
    goes on in lower case ("好，electric kettle 的 stock check ..."); a name ("Middle Road", "Sushi
    Kaito", "Kopi") is left as written. A line that starts with a value gets its capital back."""
    from .compose import _common_words

    words = value.split()
    first = re.fullmatch(r"[A-Z][a-z']+", words[0]) if words else None
    if len(words) < 2 or not first or words[0].lower() not in _common_words():
        return value
    if any(re.search(r"[A-Z]", w) for w in words[1:]):
        return value
    return value[:1].lower() + value[1:]


def _line(text: str, values: dict[str, str], start: bool = True) -> str:
    """A template with the session's values: an article before a value agrees with it, and a line
    that starts with a value in lower case ("the Elm Street surgery has ...") gets its capital."""
    line = fill(text, values)
    if re.search(r"\b[Aa]n? \{", text):
        line = _A_AN.sub(_article, line)
    return line[:1].upper() + line[1:] if start and line[:1].islower() and text[:1] == "{" else line


def stands_alone(frame: Frame, d: Delegation, line: str) -> bool:
    """Whether a request line of ``d`` can open a task of ``frame`` while the talk is about
    something else: it points back at nothing ("it", 这个) and names its thing, a slot of the
    frame's topic or a word of the task's name or the topic ("Set a timer for {minutes}
    minutes" names "the {minutes} minute timer"; "{visit}可以去看看吗？" names nothing of "{visit}的
    centre visit": 礼拜四早上可以去看看吗？ after talk about another thing leaves 去看什么 open)."""
    if _REFERS.search(line):
        return False
    if fields(line) & fields(frame.topic):
        return True
    def keys(text: str) -> set[str]:
        return content_keys(_FIELD.sub(" ", text))

    return bool(keys(line) & (keys(d.task) | keys(frame.topic)))


def said_by(frame: Frame, d: Delegation, line: str) -> Delegation | None:
    """``d`` as the system can talk about it after the request ``line`` of another frame than the
    session's: its acknowledgements, progress answers, results, failures and task name only those
    that name no value of that frame or task which ``line`` does not say ("Set a five minute resting
    timer" is not answered with "rest for the T bone"); None where one of them has none left."""
    unsaid = (set(frame.slots) | set(d.slots)) - fields(line)
    if fields(frame.topic) & unsaid:
        unsaid.add("topic")

    def fits(text: str) -> bool:
        return not fields(text) & unsaid

    kept = {"ack": [t for t in d.ack if fits(t)], "result": [t for t in d.result if fits(t)],
            "failure": [t for t in d.failure if fits(t)], "progress": [p for p in d.progress if fits(p.system)]}
    if not fits(d.task) or not all(kept.values()):
        return None
    return d.model_copy(update=kept)


@dataclass
class Task:
    """A delegation of the session with its slot values (the frame's and its own)."""

    delegation: Delegation
    values: dict[str, str]
    frame_id: str = ""
    user: list[str] = field(default_factory=list)
    """The request lines that can be said here (all of them, in the task's own frame)."""
    origin: Delegation | None = None
    """The frame's delegation this task is (``delegation`` may keep only some of its lines)."""

    def __post_init__(self):
        self.user = self.user or list(self.delegation.user)
        self.origin = self.origin or self.delegation

    def say(self, text: str) -> str:
        return _line(text, self.values)

    def name(self) -> str:
        """The task's name as said inside a line ("cancel {task}"): no capital added."""
        return _line(self.delegation.task, self.values, start=False)


@dataclass
class Script:
    """The session's content: the current frame, its slot values, the units not yet said."""

    seed: ScenarioSeed
    rng: np.random.Generator
    content: Library = BUILTIN
    frame: Frame | None = None
    values: dict[str, str] = field(default_factory=dict)
    followups: list[Unit] = field(default_factory=list)
    new_requests: list[Unit] = field(default_factory=list)
    dictation: list = field(default_factory=list)
    used_frames: list[str] = field(default_factory=list)
    log: dict = field(default_factory=lambda: {"content": CONTENT_VERSION, "frames": [], "corrections": [],
                                               "supersedes": [], "work": {}, "switches": []})
    switched: str | None = None
    """The frame a follow-up just left for a new frame's request (the user's next line must mark the switch)."""
    returning: bool = False
    """The switch to be marked goes back to the session's topic after an aside (a task about something else)."""

    def __post_init__(self):
        self.said: dict[str, set[int]] = {}
        self.settled: set[tuple[str, int]] = set()
        """``(frame id, follow-up index)`` of the follow-ups a task asked for has answered."""
        self.answered: list[str] = []
        """What the system said since the current frame became the topic (a task it reported done
        is not asked for: :func:`.done.reports_done`)."""
        self.blk = self.content.block(self.seed.domain, self.seed.language)
        self.common = common_content()[self.seed.language]
        self.composer = Composer(self.rng, self.seed.language, self.seed.domain)
        self.enter(self.choose(self.blk.frames))

    def choose(self, items):
        return items[int(self.rng.integers(len(items)))]

    def draw(self, slots: dict) -> dict[str, str]:
        """One value per slot: a listed one, or a generated one (:mod:`.values`)."""
        return {k: mid_line(self.choose(v)) if isinstance(v, list) else generate(v, self.rng, self.seed.language)
                for k, v in slots.items()}

    def other_value(self, pool, old: str) -> str:
        """A value of ``pool`` other than ``old`` (a correction or a superseding request changes it)."""
        if isinstance(pool, list):
            return mid_line(self.choose([v for v in pool if mid_line(v) != old] or [old]))
        return draw_other(pool, self.rng, self.seed.language, old)

    def enter(self, frame: Frame) -> None:
        """Make ``frame`` the topic: draw its slots, shuffle its follow-ups."""
        self.frame, self.values = frame, self.draw(frame.slots)
        self.answered = []
        self.values["topic"] = fill(frame.topic, self.values)
        order = self.rng.permutation(len(frame.followups))
        self.followups = [frame.followups[int(i)] for i in order if (frame.id, int(i)) not in self.settled]
        self.new_requests = list(frame.new_requests)
        self.dictation = list(frame.dictation)
        self.used_frames.append(frame.id)
        self.log["frames"].append({"id": frame.id, "slots": dict(self.values)})

    def say(self, text: str, **extra: str) -> str:
        """The line with the session's values; a line that now starts with a value in lower case
        ("the Elm Street surgery has ...") starts with a capital."""
        return _line(text, {**self.values, **extra})

    def compose(self, text: str, unit: Unit, short: bool = False, ack: bool = True) -> str:
        """An answer of ``unit`` (filled) with an acknowledgement and a follow-on where they fit
        (:mod:`.compose`); ``ack=False``: the answer's own opening only (after a hesitation)."""
        return self.composer.compose(text, unit.user[0], short, say=self.say, ack=ack, keep=self.values.values())

    def say_on(self, text: str) -> str:
        """A piece that goes on from an earlier one (a split's tail, a list item): no capital added."""
        return _line(text, self.values, start=False)

    def once(self, key: str):
        """A line of the block's ``key`` list not yet said in this session (all said: any)."""
        items = getattr(self.blk, key)
        used = self.said.setdefault(key, set())
        rest = [i for i in range(len(items)) if i not in used] or list(range(len(items)))
        i = self.choose(rest)
        used.add(i)
        return items[i]

    def next_followup(self) -> Unit:
        """The next follow-up on the topic; when they run out, the next frame's request."""
        if not self.followups:
            rest = [f for f in self.blk.frames if f.id not in self.used_frames] or self.blk.frames
            self.switched, self.returning = self.frame.id, False
            self.enter(self.choose(rest))
            return self.frame.request
        return self.followups.pop()

    def settle(self, t: Task) -> None:
        """The task ``t`` was asked for: the follow-ups its request or result answers (``settles``)
        are not asked after it ("Are all the doors shut?" after the house check)."""
        self.settled |= {(t.frame_id, i) for i in t.delegation.settles}
        if self.frame is not None and t.frame_id == self.frame.id:
            done = [self.frame.followups[i] for i in t.delegation.settles]
            self.followups = [u for u in self.followups if not any(u is x for x in done)]

    def will_switch(self) -> bool:
        """Whether the next follow-up is another frame's request (this frame's follow-ups are said)."""
        return not self.followups

    def note_switch(self, event_id: str, src: str, to: str, how: str, marker: str = "") -> None:
        """Log a move from frame ``src`` to ``to``: by a barge-in, or by a user line opening with ``marker``."""
        self.log["switches"].append({"event": event_id, "from": src, "to": to, "how": how,
                                     **({"marker": marker} if marker else {})})
        self.switched, self.returning = None, False

    def other_frame(self) -> Frame | None:
        rest = [f for f in self.blk.frames if f.id not in self.used_frames]
        return self.choose(rest) if rest else None

    def task(self, exclude: list[Delegation] = ()) -> Task | None:
        """A delegation of the current frame, else one of another frame that brings its own slot
        values, said with a request line that stands alone (names its thing, no 'it' or 这个). A task
        of the current frame that the system already reported done ("约好了，周四早上八点。" before
        "帮我把四轮定位约上") is not asked for."""
        mine = [d for f, d in tasks_of([self.frame], self.seed) if d not in exclude
                and not any(reports_done(t, d) for t in self.answered)]
        if mine:
            d = self.choose(mine)
            return Task(d, {**self.values, **self.draw(d.slots)}, self.frame.id)
        others = [(f, d, ways) for f, d in tasks_of(self.blk.frames, self.seed) if d not in exclude
                  and f is not self.frame  # this frame's tasks with other values would be a second Daisy
                  for ways in [[(line, said) for line in d.user if stands_alone(f, d, line)
                                for said in [said_by(f, d, line)] if said is not None]] if ways]
        if not others:
            return None
        f, d, ways = self.choose(others)
        line, said = self.choose(ways)
        vals = self.draw(f.slots)
        return Task(said, {**vals, "topic": fill(f.topic, vals), **self.draw(d.slots)}, f.id, [line], origin=d)


_STARTERS = set("""what how when where why which who whose can could would will should shall is are was were do does
did have has please and also so okay ok sure yes yeah no actually sorry then that this these those it its the a an
my our your we you they let leave keep put try use add turn set go just maybe any anything if there here here's
there's it's that's we're we've we'll you're you'll you've they're they'll let's most only every all both each some
not nothing next start take give grab check oh by while anyway wait hang hmm um well ah""".split())


@lru_cache(maxsize=None)
def _lower_words(domain: str) -> frozenset[str]:
    """English words the domain's content writes in lower case somewhere: common words, not names."""
    d = domain_content(domain)
    text = " ".join(t for blk in (d.en, d.en_zh) for _, t in _texts(blk.model_dump()))
    return frozenset(w for w in re.findall(r"[A-Za-z']+", text) if w.islower())


def _lower_first(text: str, domain: str | None = None) -> str:
    """Lower-case a sentence's first word when it goes on after a comma; names stay as they are."""
    head = text.split(" ", 1)[0]
    word = head.rstrip(",.?!'")
    common = word.lower() in _STARTERS or (domain is not None and word.lower() in _lower_words(domain))
    mixed_case = word[1:] != word[1:].lower()  # PayNow, WhatsApp: a name however it is spelt elsewhere
    if common and not mixed_case and not head.isupper() and word not in ("I", "I'm", "I'd", "I've", "I'll"):
        return text[:1].lower() + text[1:]
    return text


def join_lines(head: str, tail: str, domain: str | None = None) -> str:
    """Two pieces of one line: a space where either side is English at the join; an English tail
    after a comma (or no punctuation) goes on in lower case."""
    sep = " " if head[-1:].isascii() or tail[:1].isascii() else ""
    if tail[:1].isascii() and head[-1:] not in ".?!。？！":
        tail = _lower_first(tail, domain)
    return head + sep + tail
