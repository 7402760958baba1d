"""The shared clock: place planned events in samples using their measured rendered audio.

Events are resolved in plan order; each one depends only on events placed before it. Gaps,
pauses, stop latencies and tool latencies are drawn from the per-relation laws of LABELS.md §3
(``TimingLaws``), each event from its own generator.

Where a hard rule limits a time (a speaker never overlaps their own previous sound, a
backchannel needs 700 ms of speech before it and 800 ms since the listener's last one, an
early start stays inside the last word, a user never overlaps more than half of the system
turn they answer), the draw is taken from the law *conditioned* on the allowed interval
(rejection sampling), never clamped to its edge. Every draw is logged (``Placed.draws``) with
its anchor and interval, so the timing tests can compare each quantity with its law as
conditioned. The conditioning, per relation:

- ``responds_to`` (system): system gap (answers: with the early-start share), conditioned on
  starting after the system's own last sound (this is what binds after a barge-in: the gap is
  measured from the end of the interrupting user turn, and the cut system event's *spoken* end
  is the system's last sound), and on an early start staying inside the user's last word and
  half their turn.
- ``responds_to`` (user, to the system): user gap, conditioned on overlapping at most half of
  the system event and on starting after the user's own last sound (a backchannel, a breath).
- ``continues``: the pause law of ``pause_before``, conditioned on the speaker's last sound.
- ``backchannels_on``: onset law from the end of the attached word, conditioned on the listener
  rules; a word whose window is empty moves the backchannel to the nearest word that has one
  (or into the pause that follows a continued event); with no room at all it is dropped
  (``Placed.dropped``), never a reject.
- tool latency (from ``delegate_open``, R6): conditioned on completing after the talk the plan
  puts before its delivery, cancel or progress question.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ..audio import active_bounds, fade_out
from ..errors import SessionReject
from ..schema.config import TimingLaws
from ..schema.plan import Plan, PlannedEvent, PlannedWord, join_words, talker
from ..schema.turns import chain_turns, turn_up_to
from ..schema.timeline import PlacedEvent, PlacedWord, Timeline, WorkItem
from ..backends.tts import Rendered, WordTime
from . import delegation, onsets
from .delegation import AUDIBLE, Work
from .tape import Draw, Tape, conditioned, rng_source

MIN_SELF_GAP_MS = 50  # one speaker never overlaps their own previous sound


@dataclass
class _Slot:
    ev: PlannedEvent
    on: int
    audio: np.ndarray
    words: list[WordTime]  # samples relative to ``on``
    completion: str = "complete"
    text_after_cut: str = ""
    overlap_ok: bool = False
    phenomena: list[str] = field(default_factory=list)

    @property
    def off(self) -> int:
        return self.on + len(self.audio)


@dataclass
class Placed:
    timeline: Timeline
    audio: dict[str, np.ndarray]  # event id -> audio as placed (truncated if cut)
    draws: list[Draw] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)  # planned event id -> why it is not in the timeline
    tape: Tape = field(default_factory=Tape)  # every value drawn, to replay the placement from a record


class Clock:
    def __init__(self, plan: Plan, rendered: dict[str, Rendered], laws: TimingLaws, sample_rate: int,
                 rng_for: Callable[[str], np.random.Generator] | None, tape: Tape):
        self.plan, self.rendered, self.laws, self.sr, self.tape = plan, rendered, laws, sample_rate, tape
        self.rng_for = rng_source(tape, rng_for)
        self.slots: dict[str, _Slot] = {}
        self.order: list[str] = []
        self.work: dict[str, Work] = {}
        self.draws: list[Draw] = []
        self.dropped: dict[str, str] = {}
        self.floor_guard = 0  # while redrawing a system onset: the end of the user turn it fell into
        self.stand_in: dict[str, str | None] = {}  # dropped event -> the placed event that anchors its dependents
        self.cancels = {w.cancelled_by: w.work_id for w in plan.work if w.cancelled_by}
        self.progress = {w.progress_by: w for w in plan.work if w.progress_by}
        self.continued = {e.attach_to for e in plan.events if e.relation == "continues"}
        self.run_end: dict[str, str] = {}  # a delivery of a run -> the delivery of it spoken last

    def ms(self, x: float) -> int:
        return int(round(x * self.sr / 1000))

    def to_ms(self, samples: int) -> float:
        return samples * 1000.0 / self.sr

    def place(self) -> Placed:
        planned_work = {w.opened_by: w for w in self.plan.work}
        for planned in self._placement_order():
            ev = self._reanchored(planned)
            if ev is None:
                continue
            rng = self.rng_for(ev.id)
            r = self.rendered[ev.id]
            slot = _Slot(ev, 0, r.audio, list(r.words),
                         phenomena=list(ev.phenomena))
            on = self._onset(ev, slot, rng)
            if on is None:
                continue
            on = self._outside_user_floor(ev, slot, on, rng)
            slot.on = max(on, self.free(talker(ev)))
            self.slots[ev.id] = slot
            self.order.append(ev.id)
            if ev.id in planned_work:
                delegation.open_work(self, planned_work[ev.id], slot, rng)
            if ev.id in self.cancels:
                delegation.cancel(self, self.cancels[ev.id], slot)
        return self._finish()

    def free(self, speaker: str) -> int:
        """Earliest onset for ``speaker`` (a talker: a person of a group, else a speaker): their last sound as placed (cut events as cut) + 50 ms;
        for the system also the end of a user turn it must not start inside (``_outside_user_floor``)."""
        offs = [s.off for s in self.slots.values() if talker(s.ev) == speaker]
        free = max(offs) + self.ms(MIN_SELF_GAP_MS) if offs else 0
        return max(free, self.floor_guard) if speaker == "system" else free

    def _outside_user_floor(self, ev: PlannedEvent, slot: _Slot, on: int, rng) -> int:
        """R5: a system turn never starts inside a user turn (outside the authored overlaps). A
        gap drawn into one is drawn again, conditioned on starting after that turn."""
        if ev.speaker != "system" or ev.floor_intent == "none" or ev.relation == "continues":
            return on
        redraw = ev.relation in (None, "responds_to", "addresses_other") and ev.id not in self.progress
        inside: list[int] = []
        try:
            for _ in range(8):
                if slot.overlap_ok:
                    return on
                inside = [off for start, off in self._user_turns() if start < on < off]
                if not inside:
                    return on
                self.floor_guard = max(inside)  # free("system") is at least this while redrawing
                if not redraw:
                    break
                if self.draws and self.draws[-1].event_id == ev.id:
                    self.draws.pop()
                on = self._onset(ev, slot, rng)
        finally:
            self.floor_guard = 0
        return max(on, max(inside)) if inside else on

    def _user_turns(self) -> list[tuple[int, int]]:
        """``(on, off)`` of every placed user turn (``schema.turns``), in placement order."""
        turns = chain_turns([self.slots[eid].ev for eid in self.order], "user")
        return [(min(self.slots[e.id].on for e in t), max(self.slots[e.id].off for e in t)) for t in turns]

    def drop(self, ev: PlannedEvent, why: str, stand_in: str | None) -> None:
        self.dropped[ev.id] = why
        self.stand_in[ev.id] = stand_in

    def _reanchored(self, ev: PlannedEvent) -> PlannedEvent | None:
        """``ev`` with an attachment to a dropped event moved to that event's stand-in; the
        continuation of a dropped event is dropped with it."""
        target = ev.attach_to
        if target not in self.dropped:
            return ev
        if ev.relation == "continues":
            self.drop(ev, f"continues dropped {target}", self.stand_in[target])
            return None
        while target in self.dropped:
            target = self.stand_in[target]
        update = {"attach_to": target, "attach_word": None}
        if target is None:
            update["relation"] = None
        return ev.model_copy(update=update)

    def _placement_order(self):
        """Plan order, except that a run of adjacent deliveries is spoken in completion order.

        Completion times are known once the acknowledgements are placed, so the order is
        resolved lazily: the generator is consumed while placing.
        """
        events = list(self.plan.events)
        i = 0
        while i < len(events):
            if events[i].relation != "delivers_result_of":
                yield events[i]
                i += 1
                continue
            j = i
            while j < len(events) and events[j].relation == "delivers_result_of":
                j += 1
            block = events[i:j]
            latest = max((sl.on for sl in self.slots.values() if sl.ev.speaker in AUDIBLE), default=0)
            for e in block:  # the talk the plan puts before the results happened before they came
                if e.attach_to in self.work:
                    delegation.condition(self, e.attach_to, latest, "deliver")
            block.sort(key=lambda e: (self.work[e.attach_to].complete, e.id) if e.attach_to in self.work
                       else (0, e.id))
            for e in block:  # what follows the run follows the delivery spoken last
                self.run_end[e.id] = block[-1].id
            yield from block
            i = j

    # -- onsets per relation -------------------------------------------------------------
    def _onset(self, ev: PlannedEvent, slot: _Slot, rng) -> int | None:
        L = self.laws
        if ev.relation is None or ev.attach_to is None:
            if not self.order:
                return self.ms(self.tape.take(ev.id, "lead_in", lambda: L.lead_in_ms.sample(rng)))
            anchor = max(s.off for s in self.slots.values())
            lo = max(50.0, self.to_ms(self.free(talker(ev)) - anchor))
            return self.draw("opening_gap", ev, L.user_gap_ms, anchor, rng, lo)
        if ev.relation == "delivers_result_of":
            return delegation.deliver(self, ev, slot, rng)
        target = self.slots[ev.attach_to]
        if ev.relation == "responds_to" and self.run_end.get(ev.attach_to) in self.slots:
            target = self.slots[self.run_end[ev.attach_to]]
        if ev.relation == "continues":
            kind = ev.pause_before or "within_turn"
            law = {"long": L.long_pause_ms, "hesitation": L.hesitation_pause_ms}.get(kind, L.within_turn_pause_ms)
            lo = self.to_ms(self.free(talker(ev)) - target.off)
            return self.draw(f"{kind}_pause", ev, law, target.off, rng, lo)
        if ev.relation == "interrupts":
            return onsets.interrupt(self, ev, target, rng)
        if ev.relation == "backchannels_on":
            return onsets.backchannel(self, ev, slot, target, rng)
        if ev.id in self.progress:
            delegation.progress(self, self.progress[ev.id], target)
        if ev.relation == "during":  # media, or a sound inside someone's speech
            return target.on + int(self.tape.take(ev.id, "during_at", lambda: rng.uniform(0.05, 0.6)) * len(target.audio))
        return onsets.gap(self, ev, slot, target, rng)

    def draw(self, quantity: str, ev: PlannedEvent, sample, anchor: int, rng,
             lo: float = -math.inf, hi: float = math.inf, shift: float = 0.0) -> int:
        """Onset ``anchor + x`` with ``x`` (ms) = ``shift`` + a draw of ``sample`` (a law, or a
        function of the generator), ``x`` conditioned on ``[lo, hi]``."""
        x = shift + self.tape.take(ev.id, quantity, lambda: conditioned(sample, rng, lo - shift, hi - shift))
        self.draws.append(Draw(quantity, ev.id, anchor, x, lo, hi))
        return anchor + self.ms(x)

    def word(self, ev: PlannedEvent, target: _Slot) -> int:
        """The attached word; the plan rules keep it in range, a rendering with fewer words is a reject."""
        k = ev.attach_word or 0
        if k >= len(target.words):
            raise SessionReject("place", "attach_word_out_of_range",
                                f"{ev.id}: word {k} of {target.ev.id}, which has {len(target.words)}")
        return k

    def cut(self, slot: _Slot, at: int, fade_ms: float) -> None:
        """Truncate ``slot`` at ``at`` samples from its start with a short fade (R4).

        What was anchored on the event's end moves with it: a delegation opened right after it
        opens at the spoken end (its latency kept); the speaker's next sound is measured from
        the spoken end (``free`` reads the slots as cut).
        """
        old_off = slot.off
        fade = self.ms(fade_ms)
        audio = fade_out(slot.audio[:at], fade)
        bounds = active_bounds(audio, self.sr)
        end = bounds[1] if bounds else at
        slot.audio = audio[:end]
        kept = [replace(w, off=min(w.off, end)) for w in slot.words if w.on < end]
        cut = [w for w in slot.words if w.on >= end]
        slot.words = kept
        slot.completion = "interrupted"
        slot.text_after_cut = join_words([PlannedWord(text=w.word, lang=w.lang) for w in cut])
        shift = slot.off - old_off
        for item in self.work.values():
            if item.plan.opened_by == slot.ev.id:
                item.open, item.close, item.complete = item.open + shift, item.close + shift, item.complete + shift

    def speech_point(self, target: _Slot, need: int) -> int:
        """First sample of ``target`` by which its turn (the chain of ``continues`` before it
        included) has ``need`` samples of speech."""
        placed = {eid: s.ev for eid, s in self.slots.items()}
        before = sum(len(self.slots[e.id].audio) for e in turn_up_to(target.ev, placed)[:-1])
        return target.on + max(0, need - before)


    # -- output --------------------------------------------------------------------------
    def _finish(self) -> Placed:
        end = max(s.off for s in self.slots.values())
        tail = self.ms(self.tape.take("tail", "tail", lambda: self.laws.tail_ms.sample(self.rng_for("tail"))))
        events, audio = [], {}
        for eid in self.order:
            s = self.slots[eid]
            langs = sorted({w.lang for w in s.words} or {s.ev.words[0].lang})
            events.append(PlacedEvent(
                id=eid, speaker=s.ev.speaker, act=s.ev.act, floor_intent=s.ev.floor_intent,
                relation=s.ev.relation, attach_to=s.ev.attach_to,
                text=join_words([PlannedWord(text=w.word, lang=w.lang) for w in s.words]) or s.ev.text,
                text_after_cut=s.text_after_cut, lang="en-zh" if len(langs) > 1 else langs[0],
                on_sample=s.on, off_sample=s.off, completion=s.completion, overlap_ok=s.overlap_ok,
                words=[PlacedWord(word=w.word, lang=w.lang, on_sample=s.on + w.on, off_sample=s.on + w.off)
                       for w in s.words],
                phenomena=s.phenomena, person=s.ev.person, addressee=s.ev.addressee,
            ))
            audio[eid] = s.audio
        work = []
        for wid, w in self.work.items():
            deliver = self.slots.get(w.deliver_event or "")
            p = w.plan
            work.append(WorkItem(
                work_id=wid, tool=p.tool, objective=p.objective, result_text=p.result_text,
                opened_by=p.opened_by, open_sample=w.open, close_sample=w.close,
                complete_sample=w.complete, inject_sample=w.inject,
                deliver_sample=deliver.on if deliver else None,
                delivered_sample=deliver.off if deliver else None, stale=deliver is None,
                states=delegation.work_states(self, w, deliver), outcome=p.outcome, cancel_sample=w.cancel,
                drop_sample=(w.drop if w.drop is not None else w.complete) if deliver is None else None,
                backend=sorted(w.backend, key=lambda m: m.sample),
            ))
            end = max(end, w.complete, w.drop or 0)
            self.draws.append(Draw("tool_latency", wid, w.open, self.to_ms(w.complete - w.open),
                                   w.latency_lo_ms))
        tl = Timeline(sample_rate=self.sr, num_samples=end + tail, events=events, work=work)
        return Placed(tl, audio, list(self.draws), dict(self.dropped), self.tape)


def place(plan: Plan, rendered: dict[str, Rendered], laws: TimingLaws, sample_rate: int,
          rng_for: Callable[[str], np.random.Generator] | None, tape: Tape | None = None) -> Placed:
    """Place every event of ``plan`` on one clock; see the module docstring.

    Every value drawn lands in ``tape`` (``Placed.tape``); a recorded tape replays them and no
    generator is used (``rng_for`` may then be None).
    """
    return Clock(plan, rendered, laws, sample_rate, rng_for, tape or Tape()).place()
