"""The offline planner's group sessions: two to four people on the user side, talking to each other
and to the assistant (seeds with ``people``; README "Group conversations").

One scene of the seed's domain and language (``synth/data/groups/<domain>.yaml``) is drawn with its
slot values, as a frame is for a dyadic session. The skeleton, per exchange, at the seed's rates:

- a request to the assistant by someone who may address it (the first by the seed's first person;
  a later one by another person is ``request_by_other_person``), answered to the one who asked,
  by name where the answer opens with it. The request is drawn among those still ``askable``: not
  one whose answer the assistant has already said (its ``asks`` slots: no "how long do they bake
  for?" after "ten minutes on the cookie timer"), an ``opens`` unit only first, and after the
  group's decision none about an option it dropped;
- ``human_exchange``: a chat between people (its first line to the ``group`` for a chat written
  ``to: group``), which the assistant does not take; inside it
  ``people_overlap`` (someone talks over the line before) and ``name_in_human_exchange`` (someone
  calls the assistant by name and asks something: the assistant answers them after their turn);
- ``answer_for_other``: the assistant asks back and another person answers for the asker;
- ``group_decision_wait``: the assistant asks the group to choose, the people discuss (the
  assistant waits), one of them tells it the choice and it confirms.

Every human event names its ``person`` (the speaker is ``user`` for all) and every spoken event
its ``addressee``: ``system``, ``group`` or a person's id. Human lines to other people hold no floor
(``floor_intent: none``): the system's floor and turn labels then go on as for side talk.
"""

from __future__ import annotations

import numpy as np

from ..schema.plan import Plan, PlannedEvent
from ..schema.seed import ScenarioSeed
from ..text import tokenize
from .frames import fields, fill
from .group_content import GroupBlock, GroupRequest, Scene, group_block

PLANNER_NAME = "scripted-group-v1"
_SYSTEM_NAME = {"en": "assistant", "zh": "小助手", "en-zh": "小助手"}
_BYE = {
    "en": (["Thanks, that's everything for now.", "Great, thanks for the help."],
           ["You're welcome, have a good trip.", "Anytime, enjoy the rest of the day."]),
    "zh": (["好的，谢谢，先这样。", "行，谢谢你啊。"], ["不客气，一路顺利。", "不客气，有事再叫我。"]),
    "en-zh": (["好，thanks，先这样。", "OK 谢谢你啊。"], ["不客气，enjoy 你们的 day。", "No problem，有事再叫我。"]),
}


class GroupBuilder:
    def __init__(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator,
                 block: GroupBlock | None = None):
        self.seed, self.session_id, self.rng = seed, session_id, rng
        self.rates = seed.rates
        self.lang = seed.language
        blk = block or group_block(seed.domain, seed.language)
        self.scene: Scene = self.choose(blk.scenes)
        self.values = {k: self.choose(v) for k, v in sorted(self.scene.slots.items())}
        own = seed.personas.system.name
        self.system_name = own if own.lower() not in ("assistant", "") else _SYSTEM_NAME[self.lang]
        self.people = [p.key for p in seed.people]
        self.names = {p.key: p.name for p in seed.people}
        self.called = {p.key: p.name if p.called is None else p.called for p in seed.people}
        self.children = {p.key for p in seed.people if p.child}
        self.addressers = [p.key for p in seed.people if p.can_address_system]
        self.events: list[PlannedEvent] = []
        self.counts: dict[str, int] = {}
        self.requests = list(range(len(self.scene.requests)))
        self.chats: list[int] = []  # filled by _take_chat with the chats this group can say
        self.asked: set[int] = set()
        self.asks_here = 0  # requests asked in this scene (a long session's chapter)
        self.told: set[str] = set()  # the scene's slots the assistant has said
        self.dropped: set[str] = set()  # the options the group did not choose
        self.saying: set[str] = set()  # the slots the line being made says
        self.log: dict = {"scene": self.scene.id, "values": dict(self.values), "requests": []}

    # -- drawing -----------------------------------------------------------------------------
    def rate(self, pid: str) -> bool:
        return bool(self.rng.random() < self.rates.get(pid, 0.0))

    def choose(self, items):
        return items[int(self.rng.integers(len(items)))]

    def askable(self, i: int) -> bool:
        """Whether request ``i`` of the scene may be asked now: its answer was not said already
        (``asks``), an ``opens`` unit only as the scene's first request, and none of its lines
        names an option the group dropped."""
        unit = self.scene.requests[i]
        if unit.opens and (self.asks_here or i in self.asked):
            return False
        return not (self.told & set(unit.asks)) and not (self.dropped & unit.named())

    def can_ask(self) -> bool:
        return any(self.askable(i) for i in self.requests)

    def take_request(self) -> int:
        """A request of the pool (those not asked yet in this session) that may be asked now."""
        fits = [i for i in self.requests if self.askable(i)]
        if not fits:
            raise RuntimeError(f"{self.session_id}: no request of scene {self.scene.id!r} left to ask")
        i = fits[int(self.rng.integers(len(fits)))]
        self.requests.remove(i)
        self.asked.add(i)
        self.asks_here += 1
        return i

    def wording(self, texts: list[str]) -> str:
        """One of the paraphrases of a request's line (the long builder prefers one not said yet)."""
        return self.choose(texts)

    def say(self, text: str, **names: str) -> str:
        """A line with the scene's values filled in (``add`` notes the slots the assistant says)."""
        self.saying |= {f for f in fields(text) if f in self.values and f not in names}
        return fill(text, {**self.values, "system": self.system_name, "asker": "", "request": "", **names})

    def add(self, person: str | None, act: str, text: str, floor: str, relation=None, attach=None,
            addressee: str | None = None, phenomena=(), **kw) -> PlannedEvent:
        speaker = "system" if person is None else "user"
        if text[:1].isascii() and text[:1].isalpha():  # a line that opens with a slot value
            text = text[0].upper() + text[1:]
        prefix = "s" if person is None else "u"
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        ev = PlannedEvent(id=f"{prefix}{self.counts[prefix]}", speaker=speaker, act=act, floor_intent=floor,
                          relation=relation, attach_to=attach.id if isinstance(attach, PlannedEvent) else attach,
                          words=tokenize(text), phenomena=list(phenomena), person=person, addressee=addressee, **kw)
        self.events.append(ev)
        if person is None:
            self.told |= self.saying
        self.saying = set()
        return ev

    def others(self, *not_these: str, addressing: bool = False) -> list[str]:
        pool = self.addressers if addressing else self.people
        return [p for p in pool if p not in not_these]

    # -- pieces --------------------------------------------------------------------------------
    def request(self, asker: str, after: PlannedEvent | None, first: bool, via_name: bool = False
                ) -> PlannedEvent:
        """``asker`` asks the assistant one of the scene's requests; the answer (or an ask-back
        answered by someone else) follows. Returns the last event."""
        i = self.take_request()  # no request twice: build() stops when none is left to ask
        unit: GroupRequest = self.scene.requests[i]
        line = self.say(self.wording(unit.user))
        tags = []
        if via_name:
            line = self.say(self.choose(self.scene.wake) if self.scene.wake else "{system}, {request}",
                            request=_lower_first(line) if self.lang == "en" else line)  # "Hey Nova，East Coast ..."
            tags.append("name_in_human_exchange")
        elif not first and self.rng.random() < 0.4:  # people in a room call the assistant by name
            line = f"{self.system_name}, {_lower_first(line)}" if self.lang == "en" else f"{self.system_name}，{line}"
        if not first and asker != self._first_asker():
            tags.append("request_by_other_person")
        relation = "responds_to" if after is not None else None
        u = self.add(asker, "request" if first else "followup", line, "take", relation, after, "system", tags)
        self.log["requests"].append({"event": u.id, "by": asker, "unit": i})
        helpers = self.others(asker, addressing=True)
        if unit.ask_back is not None and helpers and self.rate("answer_for_other"):
            q = self.add(None, "question_back", self.say(self.wording(unit.ask_back.system)), "take",
                         "responds_to", u, asker, ["system_question_back"])
            helper = self.choose(helpers)
            a = self.add(helper, "answer_for_other", self.say(self.wording(unit.ask_back.other), asker=self.names[asker]),
                         "take", "responds_to", q, "system", ["answer_for_other"])
            return self.add(None, "answer", self._to(asker, self.wording(unit.ask_back.then)), "take",
                            "responds_to", a, asker, ["smooth_exchange"])
        return self.add(None, "answer", self._to(asker, self.wording(unit.system)), "take", "responds_to", u,
                        asker, ["smooth_exchange"])

    def _first_asker(self) -> str:
        return self.log["requests"][0]["by"] if self.log["requests"] else self.people[0]

    def _to(self, person: str, text: str) -> str:
        """An answer to ``person``, by name now and then (in a group, naming whom you answer is natural)."""
        line = self.say(text)
        if self.rng.random() < 0.35 and self.called[person]:
            name = self.called[person]
            return f"{name}, {_lower_first(line)}" if self.lang == "en" else f"{name}，{line}"
        return line

    def chat(self, after: PlannedEvent | None) -> PlannedEvent:
        """People talk to each other (2-4 lines); maybe someone talks over a line, maybe someone
        turns to the assistant by name in the middle (then the assistant answers them)."""
        i = self._take_chat()
        chat = self.scene.chats[i]
        lines = chat.lines
        speakers = self._turn_takers(len(lines), chat.by)
        names = self._vocatives(speakers)
        wake_at = (int(self.rng.integers(1, len(lines))) if self.scene.wake and len(self.addressers) and
                   self.rate("name_in_human_exchange") and self.can_ask() else -1)
        while 0 < wake_at <= len(lines) - 1 and _asks(lines[wake_at - 1]):
            wake_at += 1  # a question between people is answered before anyone turns to the assistant
        ev, talked_over = after, False
        for j, (line, who) in enumerate(zip(lines, speakers)):
            if j == wake_at:
                caller = self.choose(self.others(speakers[j - 1], addressing=True) or self.addressers)
                return self.request(caller, ev, first=False, via_name=True)
            to = speakers[j + 1] if j + 1 < len(speakers) else speakers[j - 1]
            if j == 0:
                rel = "addresses_other"
                to = "group" if chat.to == "group" else to
            elif (self.scene.overlaps and not talked_over and self.rate("people_overlap")
                  and len(ev.words) >= 4):  # one per chat: the same "wait, hang on" twice read as a loop,
                # and an overlap right after one's own could not be placed (interrupt_unplaceable)
                talked_over = True
                # someone else talks over the line before, then this line goes on after it
                over = self.choose(self.others(who, ev.person) or self.others(ev.person))
                self.add(over, "overlap", self.say(self.wording(self.scene.overlaps), a=self.names[ev.person]),
                         "none", "interrupts", ev, ev.person, ["people_overlap"],
                         attach_word=int(self.rng.integers(len(ev.words) // 2, len(ev.words) - 1)))
                rel = "responds_to"
            else:
                rel = "responds_to"
            ev = self.add(who, "human_talk", self.say(line, **names), "none", rel, ev, to,
                          ["human_exchange"] if j == 0 else [])
        if wake_at == len(lines):  # after the whole chat
            caller = self.choose(self.others(speakers[-1], addressing=True) or self.addressers)
            return self.request(caller, ev, first=False, via_name=True)
        return ev

    def _take_chat(self) -> int:
        """A chat the seed's people can say, not used yet in this session (all again once every
        one was used)."""
        fits = [i for i, c in enumerate(self.scene.chats) if self._cast(c.by) is not None]
        self.chats[:] = [i for i in self.chats if i in fits] or fits  # a pool made elsewhere may hold any chat
        return self.chats.pop(int(self.rng.integers(len(self.chats))))

    def _cast(self, by) -> tuple[list[str], list[str]] | None:
        """Who may say the first and the second speaker's lines of a chat written ``by`` these
        roles; None when this group has no such pair."""
        def fit(role: str, p: str) -> bool:
            return role == "any" or (p in self.children) == (role == "child")

        second = [p for p in self.people if fit(by[1], p)]
        first = [p for p in self.people if fit(by[0], p) and any(q != p for q in second)]
        return (first, second) if first else None

    def _vocatives(self, speakers: list[str]) -> dict[str, str]:
        """``{a}``, ``{b}``, ``{c}`` of a chat: what the speakers call each other. Two adults use
        the name a person is ``called`` by (the parents of family-drive-en are Dana and Leo to each
        other and Mum and Dad to the children); with a child in the chat, the name."""
        adults = not any(p in self.children for p in speakers)
        return {k: (self.called[p] or self.names[p]) if adults else self.names[p] for k, p in zip("abc", speakers)}

    def _turn_takers(self, n: int, by=("any", "any")) -> list[str]:
        """Speakers of a chat of ``n`` lines: two people taking turns, as the lines are written
        (line three answers line two, so it is the first speaker's again), of the roles the chat
        is written for."""
        first, second = self._cast(by)
        a = self.choose(first)
        b = self.choose([q for q in second if q != a])
        return [(a, b)[k % 2] for k in range(n)]

    def decision(self, after: PlannedEvent) -> PlannedEvent:
        """The assistant asks the group to choose; they discuss; one says the choice; it confirms."""
        d = self.scene.decision
        rel = "continues" if after.speaker == "system" else "responds_to"  # goes on from its own answer
        ask = self.add(None, "group_question", self.say(self.choose(d.ask)), "hold" if rel == "continues" else "take",
                       rel, after, "group", ["group_decision_wait"], **({"pause_before": "within_turn"}
                                                                         if rel == "continues" else {}))
        chat = self.choose([c for c in d.discuss if self._cast(c.by) is not None] or d.discuss[:1])
        lines = chat.lines
        speakers = self._turn_takers(len(lines), chat.by if self._cast(chat.by) is not None else ("any", "any"))
        names = self._vocatives(speakers)
        ev = ask
        for j, (line, who) in enumerate(zip(lines, speakers)):
            to = speakers[j + 1] if j + 1 < len(speakers) else speakers[j - 1]
            ev = self.add(who, "human_talk", self.say(line, **names), "none", "responds_to", ev, to,
                          ["human_exchange"] if j == 0 else [])
        teller = self.choose(self.addressers)
        choice = self.choose(d.decide)
        self.dropped |= self.scene.options() - fields(choice)  # in place: a long session's scene keeps it
        told = self.add(teller, "decide", self.say(choice), "take", "responds_to", ev, "system")
        return self.add(None, "confirm", self.say(self.choose(d.confirm)), "take", "responds_to", told, "group",
                        ["smooth_exchange"])

    def close(self, last: PlannedEvent) -> PlannedEvent:
        """Someone ends the session and the assistant says goodbye to the group, in the scene's
        words where it has a ``closing`` ("good luck with the exam"), else the generic ones."""
        c = self.scene.closing
        bye_u, bye_s = (c.user, c.system) if c is not None else _BYE[self.lang]
        who = self.choose(self.addressers)
        u = self.add(who, "closing", self.say(self.choose(bye_u)), "take", "responds_to", last, "system")
        return self.add(None, "closing", self.say(self.choose(bye_s)), "take", "responds_to", u, "group",
                        ["closing_sequence"])

    # -- the session ---------------------------------------------------------------------------
    def build(self) -> Plan:
        n = max(2, int(self.seed.exchanges.sample(self.rng)))
        first_asker = self.people[0] if self.people[0] in self.addressers else self.addressers[0]
        last = None
        if self.rate("human_exchange"):
            last = self.chat(None)  # the session opens in the middle of the family's own talk
        if last is None or last.speaker != "system":
            last = self.request(first_asker, last, first=True)
        decided = False
        for _ in range(1, n):
            if not decided and self.scene.decision is not None and self.rate("group_decision_wait"):
                last, decided = self.decision(last), True
                continue
            if self.rate("human_exchange"):
                last = self.chat(last)
                if last.speaker == "system":
                    continue
            if not self.can_ask():  # every request was asked, or its answer was given: no question twice
                break
            asker = (self.choose(self.others(first_asker, addressing=True) or self.addressers)
                     if self.rate("request_by_other_person") else first_asker)
            last = self.request(asker, last, first=False)
        if self.rate("closing_sequence"):
            self.close(last)
        return Plan(session_id=self.session_id, scenario_id=self.seed.id, language=self.lang,
                    planner=PLANNER_NAME, events=self.events, planner_meta=self.log)


def _asks(line: str) -> bool:
    """A chat line that asks the next speaker something (they answer it, not the assistant)."""
    return line.rstrip().endswith(("?", "？"))


def _lower_first(text: str) -> str:
    """"How far is it" -> "how far is it" after a name; Chinese and names (capitalised second
    letter, "I ...") are left alone."""
    if not text or not text[0].isascii() or text.startswith(("I ", "I'")):
        return text
    return text[0].lower() + text[1:]
