"""The embedded offline planner: a session skeleton filled from coherent content frames.

Structure and content are separate. The builder below decides which phenomena occur, in which
order, who speaks and how each event attaches (the skeleton), at the seed's rates per exchange (a
family name sets the rate of each of its items). Every line comes from a ``Script`` (the
content, ``synth/backends/script.py``): one frame of the seed's domain
(``synth/data/frames/<domain>.yaml``) with its slot values drawn once for the session, so an
answer answers its request with the same dish, order number or city, a correction changes a value
that was said and the next answer uses the new one, and a delegation's acknowledgement, progress
note and result report the same task (CONTENT.md). A variant whose content the frame does not
have (no question back for this follow-up) is not drawn.

Hesitations, non-verbal sounds and background media are added afterwards by the paralinguistic
pass (``stages.paraling``), for any planner; latched starts and deferred results are settled by
the clock. A seed asking for something the planner does not realise is refused at load time.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import UserError
from ..schema.phenomena import REGISTRY
from ..schema.plan import Plan, PlannedEvent, PlannedWork, PlannedWord, join_words
from ..schema.seed import ScenarioSeed
from ..schema.turns import turn_up_to
from ..text import tokenize
from .compose import _common_words, asks_user
from .content import BUILTIN, Library
from .frame_checks import picks_up
from .frames import Unit, fields, fill
from .group_content import group_block
from .group_planner import GroupBuilder
from .long_group import LongGroupBuilder, check_long_seed
from .line_kinds import BAD_NEWS, CONFIRMING, _opens_with, line_kind, without_thanks_head
from .script import Script, join_lines, tasks_of
from .scripted_work import Delegating

__all__ = ["ScriptedPlanner", "tokenize", "SUPPORTED", "line_kind", "BAD_NEWS", "CONFIRMING", "_opens_with"]

SUPPORTED = set(REGISTRY)
"""Every registry item: planned here, or added by the paralinguistic pass, or (latched start,
deferred result) decided by the clock from the plan's request and the drawn times."""

GROUP_SUPPORTED = {"human_exchange", "request_by_other_person", "answer_for_other", "people_overlap",
                   "name_in_human_exchange", "group_decision_wait", "smooth_exchange", "system_question_back",
                   "closing_sequence", "long_range_reference"} | {p for p, ph in REGISTRY.items() if ph.family in ("nonverbal",)}
"""What a group session realises (plus the paralinguistic pass's sounds; see ``group_planner``)."""

# answer variants: one of those whose rate fires (and whose content exists) is realised per answer
ANSWER_VARIANTS = (
    "barge_in_new_request", "correction_negation", "topic_switch", "stop_command", "repeat_request",
    "simultaneous_start", "cooperative_completion", "continuer", "assessment", "agreement",
    "question_backchannel", "system_question_back", "silence_after_system_question", "system_self_repair",
)
LONG_VARIANTS = {"barge_in_new_request", "correction_negation", "topic_switch", "stop_command", "repeat_request",
                 "simultaneous_start", "continuer", "assessment", "agreement"}
# user-turn shapes that split a turn around a pause
SPLIT_VARIANTS = ("long_thinking_pause", "trailing_conjunction", "list_dictation", "complete_sounding_pause",
                  "phrase_boundary_pause")
ROUTINE_P = 0.25  # share of later exchanges that are routine requests (negatives for delegation)
SHORT_P = 0.35  # share of plain answers given in their short form, where the unit has one
READDRESS_P = 0.5  # share of returns after side talk that say "sorry, where were we" after picking up the reply


_ANSWERS_IT = {"answer", "repair_repeat", "closing", "question_backchannel"}
"""User acts that answer the system line they follow (a closing answers a follow-on itself)."""
_REPLY_HEAD = {"offer": "decline_offer", "defer": "defer"}
_ASKING_ACTS = {"answer", "brief_reply", "deliver_result", "repeat", "system_self_repair"}
"""System acts whose question the user's next line answers (an opening's by the request, a
question back's and a clarification's by their own answer)."""
_YES_NO = re.compile(r"\b(?:shall|should|can|could|may) (?:i|we)\b|\b(?:want|like) (?:me|to|it|them)\b|"
                     r"\bis that (?:okay|ok|alright)|\bor not\b|要不要|要.{0,12}吗[？?]|好吗|行吗|可以吗|OK吗|ok 吗|好不好|"
                     r"\bokay\?|\bok\?", re.I)
"""A question the user can answer with a yes or a no."""


def _ends_yes_no(text: str) -> bool:
    """Whether the last clause of ``text`` is a yes/no question (:data:`_YES_NO`)."""
    return bool(_YES_NO.search(re.split(r"[,，]\s*", text)[-1]))


_INVITES = re.compile(r"\b(?:if|whenever|any ?time)\b|随时|的话|有什么|有任何", re.I)
"""An invitation to ask or say more, which the user's next line, whatever it is, takes up."""

# Common forms long enough that hearing one twice in a session sounds canned (backchannels and
# fillers do repeat in real talk).
_FRESH = frozenset({"question_backchannel", "clarify", "complete_sounding", "continuation", "dispreferred_prefix",
                    "progress_question", "repeat", "stop", "cancel", "cancel_ack"})


class ScriptedPlanner:
    """Plans from ``content``: the built-in frames, plus a pipeline's content folders."""

    name = "scripted-v3"

    def __init__(self, content: Library = BUILTIN):
        self.content = content

    def check_seed(self, seed: ScenarioSeed, source: str = "") -> None:
        where = f"{source}: " if source else ""
        if seed.is_group:
            return _check_group_seed(seed, where)
        for pid, rate in seed.rates.items():
            if rate > 0 and pid not in SUPPORTED:
                raise UserError(f"{where}phenomena.{pid}: not realised by the scripted planner (got rate {rate})")
        try:
            blk = self.content.block(seed.domain, seed.language)
        except UserError as e:
            raise UserError(f"{where}{e}") from None
        if seed.rates.get("delegate_with_ack", 0) > 0 and not tasks_of(blk.frames, seed):
            tools = [t.name for t in seed.tools]
            raise UserError(f"{where}tools: no tool of the catalogue has delegations in the content of domain "
                            f"{seed.domain!r} (got {tools})")

    def plan(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator) -> Plan:
        if seed.is_group:
            builder = GroupBuilder if seed.long_form is None else LongGroupBuilder
            return builder(seed, session_id, rng).build()
        return _Builder(seed, session_id, rng, self.content).build()


def _check_group_seed(seed: ScenarioSeed, where: str) -> None:
    """A group seed: its domain has group content in its language, and it asks only for what a
    group session realises."""
    try:
        group_block(seed.domain, seed.language)
    except UserError as e:
        raise UserError(f"{where}{e}") from None
    for pid, rate in seed.rates.items():
        if rate > 0 and pid not in GROUP_SUPPORTED:
            raise UserError(f"{where}phenomena.{pid}: not realised in group sessions by the scripted planner "
                            f"(got rate {rate}); realised: {', '.join(sorted(GROUP_SUPPORTED))}")
    if seed.long_form is not None:
        check_long_seed(seed, where)



def _turn_words(events: list[PlannedEvent], last: PlannedEvent) -> list[PlannedWord]:
    """All words of the user turn that ends with ``last`` (its pieces linked by ``continues``)."""
    return [w for p in turn_up_to(last, {e.id: e for e in events}) for w in p.words]


class _Builder(Delegating):
    """One session's skeleton and lines: the exchanges, their answers and interruptions, the
    delegations (:class:`Delegating`) and the closing."""

    def __init__(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator, content: Library = BUILTIN):
        self.seed, self.session_id, self.rng = seed, session_id, rng
        self.rates = seed.rates
        self.script = Script(seed, rng, content)
        self.common = self.script.common
        self.events: list[PlannedEvent] = []
        self.work: list[PlannedWork] = []
        self.counts: dict[str, int] = {}
        self.tp = seed.personas.third_party is not None
        self.said_common: dict[str, set[int]] = {}
        self.open_q: str | None = None
        """What the system's last line left open for the user's next one (:meth:`left_open`)."""

    def rate(self, pid: str) -> bool:
        return bool(self.rng.random() < self.rates.get(pid, 0.0))

    def choose(self, items):
        return items[int(self.rng.integers(len(items)))]

    def pickc(self, key: str):
        """A domain-independent form; the longer ones are not said twice in a session until all were."""
        items = self.common[key]
        if key not in _FRESH:
            return self.choose(items)
        used = self.said_common.setdefault(key, set())
        rest = [i for i in range(len(items)) if i not in used] or list(range(len(items)))
        i = self.choose(rest)
        used.add(i)
        return items[i]

    def add(self, speaker: str, act: str, text_or_words, floor: str, relation=None, attach=None,
            phenomena=(), **kw) -> PlannedEvent:
        prefix = {"user": "u", "system": "s", "third_party": "t"}[speaker]
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        words = tokenize(text_or_words) if isinstance(text_or_words, str) else list(text_or_words)
        if speaker == "user" and floor == "take":
            if relation == "responds_to" and self.open_q and act not in _ANSWERS_IT \
                    and not self.takes_up(join_words(words)):
                words = tokenize(join_lines(self.pickc(_REPLY_HEAD[self.open_q]), join_words(words),
                                            self.seed.domain))
            self.open_q = None
        elif speaker == "system" and floor == "take":
            self.open_q = self.left_open(act, join_words(words))
        ev = PlannedEvent(id=f"{prefix}{self.counts[prefix]}", speaker=speaker, act=act, floor_intent=floor,
                          relation=relation, attach_to=attach.id if isinstance(attach, PlannedEvent) else attach,
                          words=words, phenomena=list(phenomena), **kw)
        self.events.append(ev)
        if speaker == "system":
            self.script.answered.append(ev.text)
        return ev

    def left_open(self, act: str, text: str) -> str | None:
        """What a system line asks the user's next line to answer first (issue 32: no question
        ignored): ``offer`` (a yes/no offer, "Shall I note that down?", 要不要我帮您约？: answered
        "No thanks, ..."), ``defer`` (a question only content answers, "which one do you need?":
        "Hold on, before that, ..."), or None (nothing, or "Anything else?", which the next
        request answers itself). An opening's question is answered by the request."""
        if act not in _ASKING_ACTS:
            return None
        kind = self.script.composer.open_question(text)
        last = [p for p in re.split(r"(?<=[.!?。！？])\s*", text.rstrip()) if p][-1]
        if kind == "content" and last[-1:] not in "?？" and _INVITES.search(last):
            return None  # "Tell me if you want to change anything.", 想改什么随时告诉我。
        if kind == "content":
            return "offer" if _ends_yes_no(last) else "defer"
        return "offer" if kind == "offer" else None

    def takes_up(self, line: str) -> bool:
        """Whether the user's ``line`` takes up the question the system's last line asked ("Want it
        in your library?" -> "Add it to my library."): it says a content word of that question."""
        last = next(e for e in reversed(self.events) if e.speaker == "system")
        asked = re.split(r"(?<=[.!。！，,])\s*", last.text.rstrip())[-1]
        return picks_up(asked, line)

    def marker(self) -> str:
        """The words that open a user line moving to another topic without cutting in ("Oh, another
        thing,", 对了，还有一件事), or "" when the line stays on the topic (issue 32: never an
        unmarked jump to another frame)."""
        if not self.script.switched:
            return ""
        return self.pickc("topic_return" if self.script.returning else "topic_marker")

    def marked(self, marker: str, text: str) -> str:
        """``text`` after ``marker``: an English sentence goes on in lower case ("By the way, look
        for ..."), a name keeps its capital."""
        if not marker:
            return text
        word = re.match(r"[A-Za-z']*", text).group(0)
        if word and marker[-1:] not in ".?!。？！" and word[1:].islower() and word.lower() in _common_words() and word not in ("I", "I'm", "I'd", "I've", "I'll"):
            text = text[:1].lower() + text[1:]
        return join_lines(marker, text, self.seed.domain)

    def note(self, ev: PlannedEvent, marker: str) -> None:
        """Log the switch that ``ev`` (a line opening with ``marker``) makes, if it makes one."""
        s = self.script
        if marker and s.switched:
            s.note_switch(ev.id, s.switched, s.frame.id, "marked", marker)

    def filler(self) -> list[PlannedWord]:
        return tokenize(self.pickc("filler") + self.comma())

    def comma(self) -> str:
        """The comma after a piece of the session's language: en-zh writes "，" after English words
        too ("Hmm，well，", "OK，"), as its content does."""
        return "," if self.seed.language == "en" else "，"

    # -- user turns ------------------------------------------------------------------------
    def _shapes(self, unit: Unit, first: bool) -> list[str]:
        """The split shapes this user line can take."""
        out = ["phrase_boundary_pause", "long_thinking_pause", "trailing_conjunction"] if self._split(unit) else []
        if not first:  # a list or an afterthought goes on from something already asked
            out += ["list_dictation"] * bool(self.script.dictation) + ["complete_sounding_pause"]
        return out

    def _unsaid(self, text: str) -> set[str]:
        """The slots ``text`` names whose values nobody has said in this session yet."""
        said = " ".join(e.text for e in self.events).lower()
        vals = self.script.values
        return {k for k in fields(text) if k in vals and k != "topic" and vals[k].lower() not in said}

    def _asked(self, unit: Unit, lines: list):
        """The paraphrases of ``unit`` that volunteer no detail (issue 32): a request (the session's
        or a new topic's) says its own values; any other line names only values already said, so
        "Will Rex be comfortable there?" waits until the dog's name was said, and "Is there space for
        the dog?" is said instead."""
        if unit is self.script.frame.request:
            return lines
        return [x for x in lines if not any(self._unsaid(t) for t in ([x] if isinstance(x, str) else x))]

    def user_line(self, unit: Unit) -> str:
        """One paraphrase of the unit's user line, filled (one that volunteers nothing where there is one)."""
        return self.script.say(self.choose(self._asked(unit, unit.user) or unit.user))

    def _split(self, unit: Unit) -> tuple[str, str] | None:
        pairs = self._asked(unit, unit.split)
        if pairs:
            head, tail = self.choose(pairs)
            return self.script.say(head), self.script.say_on(tail)
        return None

    def user_turn(self, act: str, unit: Unit, after: PlannedEvent | None, first: bool = False
                  ) -> tuple[PlannedEvent, list[str] | None]:
        """A user turn saying ``unit``, possibly in pieces with pauses; returns its last event and
        the answers the shape asks for (a dictated list wants its read-back, not the unit's answer)."""
        rel = "responds_to" if after else None
        silence = (after is not None and after.act == "question_back"
                   and self.rate("silence_after_system_question"))
        gap = {"gap_kind": "silence"} if silence else {}
        first_tags = ["silence_after_system_question"] if silence else []
        filler = self.rate("filled_pause")
        fired = [v for v in SPLIT_VARIANTS if self.rate(v)]
        shape = next((v for v in fired if v in self._shapes(unit, first)), None)
        m = self.marker()
        if shape is None:
            text = self.marked(m, self.user_line(unit))
            tags = list(first_tags)
            if filler:
                f = self.pickc("filler")
                text, tags = join_lines(f + self.comma(), text, self.seed.domain), tags + ["filled_pause"]
            words = tokenize(text)
            ev = self.add("user", act, words, "take", rel, after, tags, **gap)
            self.note(ev, m)
            return ev, None
        if shape == "list_dictation":
            d = self.script.dictation.pop(int(self.rng.integers(len(self.script.dictation))))
            chunks = [self.marked(m, self.script.say(d.chunks[0]))] + [self.script.say_on(c) for c in d.chunks[1:]]
            ev = self.add("user", act, chunks[0], "take", rel, after, first_tags, **gap)
            self.note(ev, m)
            self.system_backchannel(ev)
            for i, chunk in enumerate(chunks[1:]):
                last = i == len(chunks) - 2
                ev = self.add("user", act, chunk, "hold", "continues", ev, ["list_dictation"] if last else [],
                              pause_before="within_turn")
            return ev, [self.script.say(t) for t in d.system]
        if shape == "complete_sounding_pause":  # the afterthought's bridge is the switch's marker, if any
            bridge, line = m or self.pickc("continuation"), self.user_line(unit)
            head, tail = self.pickc("complete_sounding"), join_lines(bridge, line, self.seed.domain)
        else:
            head, tail = self._split(unit)
            head = self.marked(m, head)
        head_words = tokenize(head)
        kind = {"long_thinking_pause": "long", "complete_sounding_pause": "long",
                "trailing_conjunction": "hesitation"}.get(shape, "within_turn")
        if shape == "trailing_conjunction":
            head_words = tokenize(join_lines(head.rstrip(",，、"), self.pickc("conjunction")))
        tags = [shape]
        if filler and shape != "trailing_conjunction":
            head_words = head_words + self.filler()
            tags.append("filled_pause")
            kind = "hesitation" if kind == "within_turn" else kind
        first_ev = self.add("user", act, head_words, "take", rel, after, first_tags, **gap)
        self.system_backchannel(first_ev)
        last = self.add("user", act, tail, "hold", "continues", first_ev, tags, pause_before=kind)
        self.note(last if shape == "complete_sounding_pause" else first_ev, m)
        return last, None

    def system_backchannel(self, user_ev: PlannedEvent) -> None:
        """mm-hm from the system inside (or right after) the first piece of a long user turn."""
        if self.rate("system_backchannel"):
            k = max(0, len(user_ev.words) // 2)
            self.add("system", "backchannel", self.pickc("system_backchannel"), "none", "backchannels_on", user_ev,
                     ["system_backchannel"], attach_word=k)

    def side_talk(self, after: PlannedEvent, unit: Unit | None = None, tags=()) -> PlannedEvent:
        """User to the third party, the reply to that, and (with ``unit``) the user back to the
        system with the next question on the topic, picking up what was said to them first where
        the readdress alone does not ("Okay, so it's in the car." then the question, with or
        without "sorry, where were we")."""
        st = self.script.once("side_talk")
        side = self.add("user", "side_talk", st.user, "none", "addresses_other", after,
                        ["user_to_third_party", *tags])
        reply = self.add("third_party", "third_party_reply", st.third_party, "none", "responds_to", side,
                         ["third_party_to_user"])
        if unit is None:
            return reply
        back = self.script.say(st.readdress)
        if st.heard:
            heard = self.script.say(self.choose(st.heard))
            back = join_lines(heard, back, self.seed.domain) if self.rng.random() < READDRESS_P else heard
        line = self.user_line(unit)
        text = join_lines(back, line, self.seed.domain)
        return self.add("user", "readdress", text, "take", "responds_to", reply, ["readdress_after_side_talk"])

    def exchange(self, after: PlannedEvent | None, first: bool = False) -> PlannedEvent:
        """One user turn (of some shape) and the system's answer (of some variant)."""
        s = self.script
        if self.seed.tools and not first and self.rng.random() < ROUTINE_P:
            unit = s.next_followup()
            m = self.marker()
            u = self.add("user", "routine_request", self.marked(m, self.user_line(unit)), "take",
                         "responds_to", after, ["routine_request"])
            self.note(u, m)
            return self.add("system", "answer", self.answer_text(unit), "take", "responds_to", u,
                            ["smooth_exchange"])
        answers = None
        unit = s.frame.request if first else s.next_followup()
        # side talk returns to the topic: not where the next line moves to another one
        # nor after a question: the user's next line answers it
        if not first and after.speaker == "system" and self.tp and not s.switched and not self.open_q \
                and self.rate("user_to_third_party"):
            user = self.side_talk(after, unit)
        else:
            if after is not None and not self.open_q and self.rate("user_self_talk"):
                after = self.add("user", "self_talk", s.say(s.once("self_talk")), "none",
                                 "addresses_other", after, ["user_self_talk"])
            act = "request" if first else "followup"
            user, answers = self.user_turn(act, unit, after, first)
        if self.rate("other_initiated_repair"):
            clarify = self.add("system", "clarify", s.composer.clarify(s.say), "take", "responds_to", user,
                               ["other_initiated_repair"])
            user = self.add("user", "repair_repeat", _turn_words(self.events, user), "take", "responds_to", clarify)
        return self.system_answer(user, unit, answers)

    # -- system answers --------------------------------------------------------------------
    def answer_text(self, unit: Unit, long: bool = False, dispreferred: bool = False) -> str:
        short = bool(unit.short) and not long and self.rng.random() < SHORT_P
        pool = unit.short if short else unit.system
        lang = self.seed.language  # a line that wants content back ("tell me the number") only where all do
        pool = [x for x in pool if not asks_user(x, lang) or _ends_yes_no(x)] or pool
        text = self.script.say(self.choose(pool))
        return self.script.compose(text, unit, short, ack=not dispreferred)  # ack + content + follow-on

    def _applicable(self, variant: str, unit: Unit, answers) -> bool:
        s = self.script
        if answers is not None and variant in ("system_question_back", "silence_after_system_question",
                                               "cooperative_completion", "system_self_repair"):
            return False
        return {
            "system_question_back": bool(unit.ask_back), "silence_after_system_question": bool(unit.ask_back),
            "cooperative_completion": bool(unit.coop), "system_self_repair": bool(unit.repair),
            "barge_in_new_request": bool(s.new_requests), "correction_negation": bool(self._corrections()),
            "topic_switch": s.other_frame() is not None,
        }.get(variant, True)

    def _corrections(self):
        """Corrections whose slot the user has said in this session."""
        said = " ".join(e.text for e in self.events if e.speaker == "user")
        done = {c["slot"] for c in self.script.log["corrections"]}
        return [c for c in self.script.frame.corrections
                if c.slot not in done and self.script.values.get(c.slot, "\0") in said]

    def system_answer(self, user_ev: PlannedEvent, unit: Unit, answers: list[str] | None = None) -> PlannedEvent:
        fired = [v for v in ANSWER_VARIANTS if self.rate(v)]
        fired = [v for v in fired if self._applicable(v, unit, answers)]
        variant = self.choose(fired) if fired else None
        kw: dict = {}
        if self.rate("dispreferred_answer"):
            kw = {"gap_kind": "dispreferred"}
        elif self.rate("latched_start"):
            kw = {"gap_kind": "early"}
        s = self.script
        if variant in ("system_question_back", "silence_after_system_question"):
            ab = self.choose(unit.ask_back)
            qb = self.add("system", "question_back", s.say(ab.system), "take", "responds_to", user_ev,
                          ["system_question_back"], **kw)
            silence = variant == "silence_after_system_question"
            ua = self.add("user", "answer", s.say(ab.user), "take", "responds_to", qb,
                          ["silence_after_system_question"] if silence else [],
                          gap_kind="silence" if silence else "normal")
            return self.add("system", "answer", s.say(ab.then), "take", "responds_to", ua, ["smooth_exchange"])
        if variant == "cooperative_completion":
            c = self.choose(unit.coop)
            a = self.add("system", "answer", s.say(c.head), "take", "responds_to", user_ev, ["smooth_exchange"], **kw)
            self.add("user", "cooperative_completion", s.say(c.completion), "none", "backchannels_on", a,
                     ["cooperative_completion"], attach_word=len(a.words) - 1)
            return self.add("system", "answer", s.say(c.tail), "hold", "continues", a, pause_before="within_turn")
        if answers is not None:
            text = self.choose(answers)
        elif variant == "system_self_repair":
            text = s.say(self.choose(unit.repair))
        else:
            text = self.answer_text(unit, long=variant in LONG_VARIANTS, dispreferred=kw.get("gap_kind") == "dispreferred")
        words = tokenize(text)
        tags = ["smooth_exchange"]
        act = "answer"
        if variant == "system_self_repair":
            act, tags = "system_self_repair", tags + [variant]
        if kw.get("gap_kind") == "dispreferred":
            words = tokenize(join_lines(self.pickc("dispreferred_prefix"), text, self.seed.domain))
            tags = tags + ["dispreferred_answer"]
        ans = self.add("system", act, words, "take", "responds_to", user_ev, tags, **kw)
        n = len(ans.words)
        if variant in ("continuer", "assessment", "agreement") and n >= 6:
            k = self._boundary_word(ans, 2, max(3, n // 2))
            variant, form = self.backchannel_for(variant, text, kw.get("gap_kind") == "dispreferred")
            self.add("user", "backchannel", form, "none", "backchannels_on", ans, [variant], attach_word=k)
        elif variant == "question_backchannel":
            qb = self.pickc("question_backchannel")
            q = self.add("user", "question_backchannel", qb["user"], "take", "responds_to", ans,
                         ["question_backchannel"])
            reply = qb["system"] if isinstance(qb["system"], str) else self.choose(qb["system"])
            return self.add("system", "brief_reply", reply, "take", "responds_to", q)
        elif variant in LONG_VARIANTS and n >= 6:
            return self._interrupted(ans, variant)
        return ans

    def backchannel_for(self, variant: str, answer: str, bad_news: bool) -> tuple[str, str]:
        """``(phenomenon, form)`` of the listener's backchannel on ``answer``, fitting the kind of
        line it follows (:func:`line_kind`, CONTENT.md): after bad news sympathy ("oh no", 啊，这样啊)
        or a continuer, never agreement or delight; strong agreement ("exactly") and delight ("oh
        nice") only with an answer that says yes; an instruction is received ("okay", 好的), news
        is assessed ("oh, really", 哇，这样啊); mild agreement ("right, right") with any but bad news."""
        kind = line_kind(answer, self.seed.language, bad_news)
        if kind == "bad_news":
            return ("assessment", self.pickc("sympathy")) if variant == "assessment" else \
                ("continuer", self.pickc("continuer"))
        key = {("agreement", "yes"): "agreement_strong", ("assessment", "yes"): "assessment_good",
               ("assessment", "instruction"): "instruction_receipt"}.get((variant, kind))
        return variant, self.pickc(key or variant)

    def _interrupted(self, ans: PlannedEvent, variant: str) -> PlannedEvent:
        """The user cuts into ``ans``; what the system says next depends on why."""
        s = self.script
        n = len(ans.words)
        k = 0 if variant == "simultaneous_start" else int(self.rng.integers(max(n // 2, 3), n - 1))
        if variant == "barge_in_new_request":
            unit = s.new_requests.pop(int(self.rng.integers(len(s.new_requests))))
            cut = self.add("user", "new_request", self.user_line(unit), "take", "interrupts", ans,
                           [variant], attach_word=k)
            reply = self.answer_text(unit)
        elif variant == "correction_negation":
            c = self.choose(self._corrections())
            old = s.values[c.slot]
            new = s.other_value(s.frame.slots[c.slot], old)
            line = s.say(self.choose(c.user), old=old, new=new)
            s.values[c.slot] = new
            s.values["topic"] = fill(s.frame.topic, s.values)
            cut = self.add("user", "correction", line, "take", "interrupts", ans, [variant], attach_word=k)
            reply = s.say(self.choose(c.system), new=new)
            s.log["corrections"].append({"event": cut.id, "slot": c.slot, "old": old, "new": new})
        elif variant == "topic_switch":
            src = s.frame.id
            s.enter(s.other_frame())
            unit = s.frame.request
            cut = self.add("user", "topic_switch", self.user_line(unit), "take", "interrupts", ans,
                           [variant], attach_word=k)
            s.note_switch(cut.id, src, s.frame.id, "barge_in")
            reply = self.answer_text(unit)
        elif variant == "stop_command":
            # the system yields and stays silent: nothing answers the stop
            return self.add("user", "stop", self.pickc("stop"), "take", "interrupts", ans, [variant], attach_word=k)
        elif variant == "repeat_request":
            cut = self.add("user", "repeat_request", self.pickc("repeat"), "take", "interrupts", ans, [variant],
                           attach_word=k)
            return self.add("system", "repeat", ans.words, "take", "responds_to", cut)
        else:  # simultaneous start: both begin at once, the system yields and answers the user
            unit = s.next_followup()
            m = self.marker()
            cut = self.add("user", "followup", self.marked(m, self.user_line(unit)), "take", "interrupts",
                           ans, [variant], attach_word=0)
            self.note(cut, m)
            reply = self.answer_text(unit)
        return self.add("system", "answer", reply, "take", "responds_to", cut, ["smooth_exchange"])

    def _boundary_word(self, ev: PlannedEvent, lo: int, hi: int) -> int:
        ends = [i for i in range(lo, hi) if ev.words[i].text[-1] in ",，、"]
        if ends and (self.seed.language == "en" or self.rng.random() < 0.5):
            return int(ends[int(self.rng.integers(len(ends)))])
        return int(self.rng.integers(lo, hi))

    def closing(self, last: PlannedEvent) -> None:
        """The user's goodbye and the system's, drawn from those that fit the frame the session is
        on; after a follow-on question ("Shall I note that down?") the goodbye answers it first ("No
        thanks, ..."), and after a line that asks for something only content answers ("tell me the
        new number") there is none: a goodbye would leave it unanswered."""
        s = self.script
        open_q = s.composer.open_question(last.text) if last.speaker == "system" else None
        if open_q == "content":
            return
        c = self.choose([c for c in s.blk.closings if not c.frames or s.frame.id in c.frames])
        line = s.say(c.user)
        if open_q is not None:
            line = join_lines(self.pickc("decline_offer" if open_q == "offer" else "decline_more"),
                              without_thanks_head(line), self.seed.domain)
        bye = self.add("user", "closing", line, "take", "responds_to", last)
        self.add("system", "closing", s.composer.closing(s.say(c.system), s.values.values()), "take", "responds_to", bye,
                 ["closing_sequence"])

    def build(self) -> Plan:
        s = self.script
        n = max(2, int(self.seed.exchanges.sample(self.rng)))
        delegate_at = int(self.rng.integers(1, n)) if self.rate("delegate_with_ack") and tasks_of(s.blk.frames, self.seed) else -1
        opening = None
        if self.rate("proactive_opening"):
            name = self.seed.user.name
            pool = s.frame.openings or s.blk.openings  # one that leads into this frame's request, else a general one
            opening = self.add("system", "opening", fill(self.choose(pool), {**s.values, "user": name}),
                               "take", phenomena=["proactive_opening"])
        last = self.exchange(opening, first=True)
        for i in range(1, n):
            last = self.delegation(last) if i == delegate_at else self.exchange(last)
        if self.rate("closing_sequence"):
            self.closing(last)
        return Plan(session_id=self.session_id, scenario_id=self.seed.id, language=self.seed.language,
                    planner=ScriptedPlanner.name, events=self.events, work=self.work,
                    planner_meta=s.log)
