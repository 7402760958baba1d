"""Long group sessions (20-30 minutes): chapters of group scenes and references back to values
the group settled in the first minutes (seeds with ``long_form``; README "Long group sessions").

A long session is planned to a length, not to a number of exchanges: the seed's ``long_form``
draws a target in minutes, and chapters are added until the estimated speech time (words at
eSpeak NG's pace, plus a gap per event, ``estimate_s``) reaches it less the closing tail. Each
chapter is one group scene (of the seed's domain, then of ``more_domains``), played with the
skeleton of ``group_planner.GroupBuilder`` until it has asked as many requests as the scene has
(its first request first: the scene's opener), or none is left that it may ask; then the next
scene. A scene keeps its slot values for the whole session, so "the table at half past seven" of
the first chapter is still half past seven when it comes back. Once every scene was visited, they
come round again (their pools refill: a request is then asked a second time, in the least used of
its wordings, and answered so too; ``planner_meta.repeats`` counts them, ``planner_meta.requests``
names each one's scene), within the short skeleton's request order: a question whose answer the
assistant already gave in the session (``asks``) is not asked again, nor one about an option the
group dropped, nor an ``opens`` unit after a chapter's first request; and no request twice in one
chapter.

The first chapter settles values early: its group decision is asked after its second request
at the latest. In the tail, people talk, and then someone asks the assistant to recall what was
settled (a scene's ``recall`` unit: "what time did we book for Priya?"), and the assistant answers
the asker with the values said minutes before ("Saturday at half past seven, at the Greek
restaurant on Bridge Street"). A recall is drawn only when every value its answer uses was said
earlier (and, for a unit about the group's choice, after the scene's decision); the first
chapter's scene is recalled first, other scenes' at the ``long_range_reference`` rate.

``planner_meta.long_range`` records each reference: the asking and answering events, the scene,
the values with the event that first said each, and the estimated minutes of both, so a test
(and ``synth validate``, ``qa.check_long_range``) can check that the value really was said before.

Kept apart from ``group_planner`` on purpose: the short group skeleton is unchanged (its plans
byte-identical), and this module only adds chapters, the estimate and the tail around it.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..schema.plan import Plan, PlannedEvent
from ..schema.seed import ScenarioSeed
from .frames import fields
from .group_content import PLANNER_FIELDS, Recall, Scene, group_block
from .group_planner import GroupBuilder

PLANNER_NAME = "scripted-group-long-v1"

SECONDS_PER_UNIT = {"en": {"en": 0.32, "zh": 0.25}, "zh": {"en": 0.40, "zh": 0.25},
                    "en-zh": {"en": 0.40, "zh": 0.25}}
"""Seconds per English word and per Chinese character of eSpeak NG, by session language (the
Mandarin voice reads an English word slower), measured on rendered 30-minute long group sessions
(bench/long_session.py --pipeline pipelines/long-group.yaml; fillers and overlaps included)."""
GAP_S = 0.25
"""Mean silence an event adds beside its words, from the same renders."""
TAIL_S = 90.0
"""Estimated length kept for the tail (talk, recalls, closing): the body stops this much short."""
MAX_EVENTS = 1500
"""A long plan stops growing here whatever its estimate (bounds a session as ``MAX_EXCHANGES`` does)."""
MAX_RECALLS = 3


def estimate_s(ev: PlannedEvent, language: str = "en") -> float:
    """Estimated seconds an event adds to the session: its words at eSpeak's pace and a gap
    (a plan knows no audio; a neural voice's session comes out longer or shorter)."""
    rate = SECONDS_PER_UNIT[language]
    speech = sum(rate[w.lang] * (len(w.text) if w.lang == "zh" else 1) for w in ev.words)
    return speech + GAP_S


def check_long_seed(seed: ScenarioSeed, where: str = "") -> None:
    """A long seed's further domains have group content in its language, and a seed asking for
    references back has recall content in its own domain's scenes (one line naming what lacks)."""
    for i, d in enumerate(seed.long_form.more_domains):
        if d == seed.domain or d in seed.long_form.more_domains[:i]:
            raise UserError(f"{where}long_form.more_domains: {d!r} is the seed's own domain or given twice")
        try:
            group_block(d, seed.language)
        except UserError as e:
            raise UserError(f"{where}long_form.more_domains: {e}") from None
    known = {s.id for d in (seed.domain, *seed.long_form.more_domains) for s in group_block(d, seed.language).scenes}
    unknown = [s for s in seed.long_form.scenes if s not in known]
    if unknown:
        raise UserError(f"{where}long_form.scenes: no scene {unknown[0]!r} in the group content of its domains "
                        f"({seed.language}); there are: {', '.join(sorted(known))}")
    if not scenes_of(seed, seed.domain):
        raise UserError(f"{where}long_form.scenes: none of the seed's own domain {seed.domain!r}")
    if seed.rates.get("long_range_reference", 0) > 0:
        bare = [s.id for s in scenes_of(seed, seed.domain) if not s.recall]
        if bare:
            raise UserError(f"{where}phenomena.long_range_reference: scene {bare[0]!r} of domain {seed.domain!r} "
                            f"({seed.language}) has no recall content to refer back with")


def scenes_of(seed: ScenarioSeed, domain: str) -> list[Scene]:
    """The group scenes of ``domain`` a long seed plays (``long_form.scenes``; all when empty)."""
    allowed = set(seed.long_form.scenes)
    return [s for s in group_block(domain, seed.language).scenes if not allowed or s.id in allowed]


class _SceneState:
    """One scene of a long session: its values and its pools, kept across its chapters."""

    def __init__(self, scene: Scene, domain: str, values: dict[str, str]):
        self.scene, self.domain, self.values = scene, domain, values
        self.requests: list[int] = list(range(len(scene.requests)))
        self.chats: list[int] = list(range(len(scene.chats)))
        self.decided = False
        self.asked: set[int] = set()
        self.told: set[str] = set()  # its slots the assistant has said (request order, as in a short session)
        self.dropped: set[str] = set()  # its options the group did not choose

    @property
    def key(self) -> str:
        """The scene across domains (two domains may name a scene alike)."""
        return f"{self.domain}/{self.scene.id}"


class LongGroupBuilder(GroupBuilder):
    """A group session of chapters to a target length, with long-range references in its tail."""

    def __init__(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator):
        own = group_block(seed.domain, seed.language)
        super().__init__(seed, session_id, rng, own.model_copy(update={"scenes": scenes_of(seed, seed.domain)}))
        lf = seed.long_form
        self.target_s = float(lf.minutes.sample(rng)) * 60.0
        first = _SceneState(self.scene, seed.domain, self.values)
        others = [(s, seed.domain) for s in scenes_of(seed, seed.domain) if s.id != self.scene.id]
        for d in lf.more_domains:
            others += [(s, d) for s in scenes_of(seed, d)]
        order = [others[int(i)] for i in rng.permutation(len(others))]
        self.states = [first] + [_SceneState(s, d, {k: self.choose(v) for k, v in sorted(s.slots.items())})
                                 for s, d in order]
        self.state = first
        self.elapsed = 0.0
        self.at: dict[str, float] = {}  # event id -> estimated start (s)
        self.repeats = 0
        self.here: set[int] = set()  # the requests asked in the current chapter
        self.chats_here: set[int] = set()  # the chats said in the current chapter
        self.tailing = False  # the tail has begun: no more requests
        self.worded: dict[str, int] = {}  # a request line's wording -> times said in the session
        self.pending: dict[tuple[str, str], str] = {}  # (scene key, slot) -> value filled into the next event
        self.filled: dict[str, dict[tuple[str, str], str]] = {}  # event id -> the slots its line said
        self.log = {"scene": self.scene.id, "values": dict(self.values), "requests": [], "chapters": [],
                    "long_range": [], "target_min": round(self.target_s / 60, 2)}

    # -- bookkeeping -------------------------------------------------------------------------------
    def say(self, text: str, **names: str) -> str:
        """As the base builder's, remembering which of the scene's slots the line says."""
        self.pending.update({(self.state.key, f): self.values[f] for f in fields(text)
                             if f in self.values and f not in names})
        return super().say(text, **names)

    def add(self, *args, **kw) -> PlannedEvent:
        ev = super().add(*args, **kw)
        self.at[ev.id] = self.elapsed
        self.elapsed += estimate_s(ev, self.lang)
        self.filled[ev.id], self.pending = self.pending, {}
        return ev

    def use(self, st: _SceneState) -> None:
        """Make ``st`` the scene the skeleton draws from (the base builder reads these fields)."""
        self.state, self.scene, self.values = st, st.scene, st.values
        self.requests, self.chats, self.asked = st.requests, st.chats, st.asked
        self.told, self.dropped = st.told, st.dropped

    def enter(self, st: _SceneState) -> None:
        """A new chapter on ``st``."""
        self.use(st)
        self.asks_here, self.here, self.chats_here = 0, set(), set()  # the requests and chats of this chapter
        self.log["chapters"].append({"scene": st.scene.id, "domain": st.domain, "values": dict(st.values),
                                     "from_event": len(self.events), "at_min": round(self.elapsed / 60, 2)})

    def wording(self, texts: list[str]) -> str:
        """One of the least said of the paraphrases, so a request asked again, and its answer, come
        in another wording where the content has one."""
        least = min(self.worded.get(t, 0) for t in texts)
        text = self.choose([t for t in texts if self.worded.get(t, 0) == least])
        self.worded[text] = least + 1
        return text

    def request(self, *args, **kw) -> PlannedEvent:
        """As the base builder's, logging the request's scene beside its unit (``planner_meta.requests``)."""
        last = super().request(*args, **kw)
        self.log["requests"][-1]["scene"] = self.state.key
        return last

    def askable(self, i: int) -> bool:
        """As the base builder's, not asked already in this chapter, and the scene's first unit
        (its opener: "how far can we go on what's left in the tank?") only once in the session."""
        return i not in self.here and not (i == 0 and i in self.asked) and super().askable(i)

    def _fresh_chats(self) -> list[int]:
        """The scene's chats this group can say that were not said in this chapter."""
        return [i for i, c in enumerate(self.scene.chats) if i not in self.chats_here and self._cast(c.by) is not None]

    def chat(self, after: PlannedEvent | None) -> PlannedEvent | None:
        """As the base builder's; none where every chat this group can say was said in this
        chapter (a scene's chats come round again on its later visits, not twice in one)."""
        return super().chat(after) if self._fresh_chats() else after

    def _take_chat(self) -> int:
        """As the base builder's, among the chats not said in this chapter."""
        fresh = self._fresh_chats()
        self.chats[:] = [i for i in self.chats if i in fresh] or fresh
        i = self.chats.pop(int(self.rng.integers(len(self.chats))))
        self.chats_here.add(i)
        return i

    def can_ask(self) -> bool:
        """As the base builder's, over all the scene's requests: its pool fills again; none in the
        tail (its chats call the assistant by name for no new request, only the recalls ask)."""
        return not self.tailing and any(self.askable(i) for i in range(len(self.scene.requests)))

    def take_request(self) -> int:
        """As the base builder's; a scene's first request is its first unit (its opener: "why have
        we stopped?" comes before "how much time would the detour save?"), then, before the
        scene's decision, those it would make moot (``moot_after_decision``); once none of the
        pool may be asked, the scene's requests come round again (one already asked is counted
        in ``repeats``)."""
        if not any(self.askable(i) for i in self.requests):
            self.requests[:] = range(len(self.scene.requests))
        before = set(self.asked)
        fits = [i for i in self.requests if self.askable(i)]
        moot = [i for i in fits if self.moot_after_decision(i)]
        if not before and 0 in fits:
            i = 0
        else:  # those the coming decision would make moot first: asked before it, not lost
            i = self.choose(moot or fits)
        self.requests.remove(i)
        self.asked.add(i)
        self.asks_here += 1
        self.here.add(i)
        if i in before:
            self.repeats += 1
        return i

    # -- chapters ----------------------------------------------------------------------------------
    def chapter(self, last: PlannedEvent | None, opening: bool) -> PlannedEvent:
        """One scene until it has asked as many requests as the scene has (or none is left that it
        may ask, or the body's time is reached), so a first visit asks every one it may; the
        opening chapter asks its group decision right after its first request, so its choice is
        settled in the first minutes. A later chapter asks its decision only after one of its
        requests, so the assistant does not open a new topic with a choice out of nowhere, and
        once none of its pool is left that the decision would make moot (``take_request`` draws
        those first) or it has asked half the scene's requests: the questions about the option
        the group drops come before the choice, most of those about the chosen one after it, and
        fewer requests are lost to the request order, so fewer are asked twice."""
        st = self.state
        start = len(self.log["requests"])
        while len(self.log["requests"]) - start < len(st.scene.requests) and not self.body_done():
            if last is None:  # the session opens, maybe in the middle of the people's own talk
                if self.rate("human_exchange"):
                    last = self.chat(None)
                if last is None or last.speaker != "system":
                    last = self.request(self._first_addresser(), last, first=True)
                continue
            if (not st.decided and st.scene.decision is not None and self.here
                    and (opening or ((not self._moot_later() or 2 * len(self.here) >= len(st.scene.requests))
                                    and self.rate("group_decision_wait")))):
                last, st.decided = self.decision(last), True
                continue
            if self.rate("human_exchange"):
                last = self.chat(last)
                if last.speaker == "system":
                    continue
            if not self.can_ask():  # every request left was answered already
                break
            asker = (self.choose(self.others(self._first_asker(), addressing=True) or self.addressers)
                     if self.rate("request_by_other_person") else self._first_asker())
            last = self.request(asker, last, first=False)
        return last

    def moot_after_decision(self, i: int) -> bool:
        """Whether the scene's decision, not taken yet, would make request ``i`` moot: it names an
        option no ``decide`` line names (the one the group will drop), or it asks for a value a
        ``confirm`` line says."""
        d, unit = self.scene.decision, self.scene.requests[i]
        if d is None or self.state.decided:
            return False
        chosen = set().union(*(fields(t) for t in d.decide))
        confirmed = set().union(*(fields(t) for t in d.confirm))
        return bool(unit.named() & (self.scene.options() - chosen) or confirmed & set(unit.asks))

    def _moot_later(self) -> bool:
        """Whether the pool still holds a request that may be asked now and the decision would
        make moot."""
        return any(self.askable(i) and self.moot_after_decision(i) for i in self.requests)

    def _first_addresser(self) -> str:
        return self.people[0] if self.people[0] in self.addressers else self.addressers[0]

    def body_done(self) -> bool:
        return self.elapsed >= self.target_s - TAIL_S or len(self.events) >= MAX_EVENTS

    # -- the tail: references back -----------------------------------------------------------------
    def said(self, scene: str, slot: str) -> PlannedEvent | None:
        """The first event whose line said ``slot`` of ``scene`` (filled from it, not a look-alike
        word in another line)."""
        key = (scene, slot)
        return next((e for e in self.events if key in self.filled.get(e.id, {})), None)

    def usable(self, st: _SceneState, unit: Recall) -> dict[str, PlannedEvent] | None:
        """The events that first said each value a recall's answers use, or None when one was not
        said (or the unit is about a choice the group has not made)."""
        slots = sorted({f for t in unit.system for f in fields(t)} - PLANNER_FIELDS)
        if not slots or any(f not in st.values for f in slots):
            return None
        if any(f.startswith("option") for f in slots) and not st.decided:
            return None
        found = {f: self.said(st.key, f) for f in slots}
        return None if any(e is None for e in found.values()) else found

    def recall(self, st: _SceneState, unit: Recall, found: dict[str, PlannedEvent],
               after: PlannedEvent) -> PlannedEvent:
        """Someone asks the assistant for what was settled; it answers them with those values."""
        self.use(st)  # the lines' slots are this scene's
        asker = self.choose(self.addressers)
        u = self.add(asker, "followup", self.say(self.choose(unit.user)), "take", "responds_to", after,
                     "system", ["long_range_reference"])
        a = self.add(None, "answer", self._to(asker, self.choose(unit.system)), "take", "responds_to", u,
                     asker, ["smooth_exchange"])
        self.log["long_range"].append({
            "ask": u.id, "answer": a.id, "scene": st.scene.id,
            "values": {f: st.values[f] for f in sorted(found)},
            "said": {f: e.id for f, e in sorted(found.items())},
            "said_at_min": round(min(self.at[e.id] for e in found.values()) / 60, 2),
            "asked_at_min": round(self.at[u.id] / 60, 2)})
        return a

    def tail(self, last: PlannedEvent) -> PlannedEvent:
        """Talk, then the references back: the first chapter's scene first, then others at the rate."""
        self.tailing = True
        seen = [st for st in self.states if any(c["scene"] == st.scene.id for c in self.log["chapters"])]
        done = 0
        for j, st in enumerate(seen):  # a scene with no recall content is passed over
            if done >= MAX_RECALLS or (j > 0 and not self.rate("long_range_reference")):
                continue
            units = [(u, f) for u in st.scene.recall if (f := self.usable(st, u)) is not None]
            if j == 0:  # the first chapter's scene: what was said in that chapter, where there is such
                first = self.log["chapters"][1]["from_event"] if len(self.log["chapters"]) > 1 else len(self.events)
                early = [(u, f) for u, f in units if all(self.events.index(e) < first for e in f.values())]
                units = early or units
            if not units:
                continue
            unit, found = units[int(self.rng.integers(len(units)))]
            if self.rate("human_exchange"):
                last = self.chat(last)
            last = self.recall(st, unit, found, last)
            done += 1
        return last

    # -- the session -------------------------------------------------------------------------------
    def build(self) -> Plan:
        last, bye = None, self.states[0]
        for turn in range(MAX_EVENTS):  # chapters, the scenes coming round in turn
            self.enter(self.states[turn % len(self.states)])
            if self.state.domain == self.seed.domain and self.scene.closing is not None:
                bye = self.state
            last = self.chapter(last, opening=turn == 0)
            if self.body_done():
                break
        if last.speaker != "system" and self.can_ask():
            last = self.request(self._first_asker(), last, first=False)
        if self.seed.rates.get("long_range_reference", 0) > 0:
            last = self.tail(last)
        if self.rate("closing_sequence"):  # in the words of the last scene of the seed's own domain with a
            self.use(bye)                    # closing ("drive safely" after the fuel stop, not "that was a good
            self.close(last)                 # stop" 25 minutes after it; no "have a good trip" to friends at home)
        self.log.update(estimated_min=round(self.elapsed / 60, 2), repeats=self.repeats)
        return Plan(session_id=self.session_id, scenario_id=self.seed.id, language=self.lang,
                    planner=PLANNER_NAME, events=self.events, planner_meta=self.log)
