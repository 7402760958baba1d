"""The shared clock: place planned events in samples using their measured rendered audio.

Events are resolved in plan order; each one depends only on events placed before it. Gaps,
pauses, stop latencies and tool latencies are drawn from the per-relation laws of LABELS.md §3
(``TimingLaws``), each event from its own generator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..audio import active_bounds, fade_out
from ..errors import SessionReject
from ..schema.config import TimingLaws
from ..schema.plan import Plan, PlannedEvent, PlannedWord, join_words
from ..schema.timeline import BackendMessage, PlacedEvent, PlacedWord, StateTime, Timeline, WorkItem
from ..backends.tts import Rendered

AUDIBLE = ("user", "system", "third_party")
MIN_SELF_GAP_MS = 50  # one speaker never overlaps their own previous sound


@dataclass
class _Slot:
    ev: PlannedEvent
    on: int
    audio: np.ndarray
    words: list[list]  # [word, lang, on, off] relative to on
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


class Clock:
    def __init__(self, plan: Plan, rendered: dict[str, Rendered], laws: TimingLaws, sample_rate: int,
                 rng_for: Callable[[str], np.random.Generator]):
        self.plan, self.rendered, self.laws, self.sr, self.rng_for = plan, rendered, laws, sample_rate, rng_for
        self.slots: dict[str, _Slot] = {}
        self.order: list[str] = []
        self.work: dict[str, dict] = {}
        self.last_off: dict[str, int] = {}

    def ms(self, x: float) -> int:
        return int(round(x * self.sr / 1000))

    def place(self) -> Placed:
        planned_work = {w.opened_by: w for w in self.plan.work}
        self.cancels = {w.cancelled_by: w.work_id for w in self.plan.work if w.cancelled_by}
        self.progress = {w.progress_by: w for w in self.plan.work if w.progress_by}
        self.continued = {e.attach_to for e in self.plan.events if e.relation == "continues"}
        self.run_end: dict[str, str] = {}
        for ev in self._placement_order():
            rng = self.rng_for(ev.id)
            r = self.rendered[ev.id]
            slot = _Slot(ev, 0, r.audio, [[w.word, w.lang, w.on, w.off] for w in r.words],
                         phenomena=list(ev.phenomena))
            slot.on = self._onset(ev, slot, rng)
            prev = self.last_off.get(ev.speaker)
            if prev is not None:
                slot.on = max(slot.on, prev + self.ms(MIN_SELF_GAP_MS))
            self.slots[ev.id] = slot
            self.order.append(ev.id)
            self.last_off[ev.speaker] = slot.off
            if ev.id in planned_work:
                self._open_work(planned_work[ev.id], slot, rng)
            if ev.id in self.cancels:
                self._cancel(self.cancels[ev.id], slot)
        return self._finish()

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
                    self._condition(e.attach_to, latest, "deliver")
            block.sort(key=lambda e: (self.work[e.attach_to]["complete"], e.id) if e.attach_to in self.work
                       else (0, e.id))
            for e in block:  # what follows the run follows the delivery spoken last
                self.run_end[e.id] = block[-1].id
            yield from block
            i = j

    # -- onsets per relation -------------------------------------------------------------
    def _onset(self, ev: PlannedEvent, slot: _Slot, rng) -> int:
        L = self.laws
        if ev.relation is None or ev.attach_to is None:
            if not self.order:
                return self.ms(L.lead_in_ms.sample(rng))
            return max(s.off for s in self.slots.values()) + self.ms(max(50.0, L.user_gap_ms.sample(rng)))
        if ev.relation == "delivers_result_of":
            return self._deliver(ev, slot, rng)
        target = self.slots[ev.attach_to]
        if ev.relation == "responds_to" and ev.attach_to in self.run_end:
            target = self.slots[self.run_end[ev.attach_to]]
        if ev.relation == "continues":
            law = {"long": L.long_pause_ms, "hesitation": L.hesitation_pause_ms}.get(
                ev.pause_before or "", L.within_turn_pause_ms)
            return target.off + self.ms(law.sample(rng))
        if ev.relation == "interrupts":
            return self._interrupt(ev, target, rng)
        if ev.relation == "backchannels_on":
            return self._backchannel(ev, slot, target, rng)
        if ev.id in self.progress:
            self._progress(self.progress[ev.id], target)
        if ev.relation == "during":  # media, or a sound inside someone's speech
            return target.on + int(rng.uniform(0.05, 0.6) * len(target.audio))
        return target.off + self._gap(ev, slot, target, rng)

    def _gap(self, ev: PlannedEvent, slot: _Slot, target: _Slot, rng) -> int:
        L = self.laws
        zh = self.ms(L.zh_gap_offset_ms) if self.plan.language != "en" else 0
        if ev.speaker == "system":
            if ev.act == "acknowledge":
                return self.ms(L.ack_delay_ms.sample(rng)) + zh
            early = ev.gap_kind == "early" or (ev.act == "answer" and ev.gap_kind == "normal"
                                                and rng.random() < L.system_early_start_prob)
            if target.ev.speaker == "user" and early:
                slot.overlap_ok = True
                if "latched_start" not in slot.phenomena:
                    slot.phenomena.append("latched_start")
                last_word = target.off - target.on - (target.words[-1][2] if target.words else 0)
                early = min(self.ms(L.system_early_start_ms.sample(rng)), len(target.audio) // 2, last_word)
                return -early
            gap = L.system_gap_ms.sample(rng)
            if ev.gap_kind == "dispreferred":
                gap += L.dispreferred_extra_ms.sample(rng)
            return self.ms(gap) + zh
        gap = self.ms(L.user_gap_ms.sample(rng)) + zh
        if ev.gap_kind == "silence":  # the user lets a silence fall: no overlap, a long-pause law on top
            return max(gap, 0) + self.ms(L.long_pause_ms.sample(rng))
        if target.ev.speaker != "system":
            gap = max(gap, self.ms(100))  # overlaps between user-side talkers are not authored here
        return max(gap, -len(target.audio) // 2)

    def _interrupt(self, ev: PlannedEvent, target: _Slot, rng) -> int:
        L = self.laws
        k = min(ev.attach_word or 0, len(target.words) - 1)
        latency = self.ms(L.stop_latency_ms.sample(rng))
        on = target.on + target.words[k][2] + self.ms(L.interrupt_onset_ms.sample(rng))
        user_free = self.last_off.get(ev.speaker, 0) + self.ms(MIN_SELF_GAP_MS)
        on = max(on, user_free, target.on + 1)
        # the cut lands before the last word starts, so something is left unsaid (text_after_cut)
        on = min(on, target.off - latency - self.ms(100), target.on + target.words[-1][2] - latency - 1)
        if on < max(user_free, target.on + 1):
            raise SessionReject("place", "interrupt_unplaceable", f"{ev.id} on {target.ev.id}")
        self._cut(target, on + latency - target.on, rng)
        return on

    def _cut(self, slot: _Slot, at: int, rng) -> None:
        """Truncate ``slot`` at ``at`` samples from its start with a short fade (R4)."""
        fade = self.ms(self.laws.cut_fade_ms.sample(rng))
        audio = fade_out(slot.audio[:at], fade)
        bounds = active_bounds(audio, self.sr)
        end = bounds[1] if bounds else at
        slot.audio = audio[:end]
        kept = [w for w in slot.words if w[2] < end]
        cut = [w for w in slot.words if w[2] >= end]
        for w in kept:
            w[3] = min(w[3], end)
        slot.words = kept
        slot.completion = "interrupted"
        slot.text_after_cut = join_words([PlannedWord(text=w[0], lang=w[1]) for w in cut])

    def _backchannel(self, ev: PlannedEvent, slot: _Slot, target: _Slot, rng) -> int:
        L = self.laws
        k = min(ev.attach_word or 0, len(target.words) - 1)
        on = target.on + target.words[k][3] + self.ms(L.backchannel_onset_ms.sample(rng))
        lo = target.on + self.ms(L.backchannel_min_speech_ms)
        hi = target.off - len(slot.audio)
        if ev.sound is not None:  # a laugh may run past the end of what it laughs at
            hi = max(hi, target.off - len(slot.audio) // 2)
        if hi < lo and target.ev.id in self.continued:
            # too short to hold it: the backchannel goes into the speaker's pause that follows
            return target.off + max(0, self.ms(L.backchannel_onset_ms.sample(rng)))
        if hi < lo:
            raise SessionReject("place", "backchannel_unplaceable", f"{ev.id} on {target.ev.id}")
        return int(min(max(on, lo), hi))

    # -- delegation ----------------------------------------------------------------------
    def _open_work(self, w, ack: _Slot, rng) -> None:
        L = self.laws
        open_ = ack.off
        if ack.ev.speaker != "system":  # opened silently after the user's request
            open_ += self.ms(L.ack_delay_ms.sample(self.rng_for(f"work-{w.work_id}-open")))
        close = open_ + max(1, self.ms(L.delegate_span_ms))
        complete = close + self.ms(L.tool_latency_ms.sample(self.rng_for(f"work-{w.work_id}")))
        self.work[w.work_id] = {"plan": w, "open": open_, "close": close, "complete": complete, "backend": []}

    def _window(self, t: int, complete: int) -> int:
        L = self.laws
        return self.ms(max(L.gate_min_ms, L.gate_base_ms - L.gate_slope * (t - complete) * 1000 / self.sr))

    def _gate(self, complete: int) -> int:
        """First time >= complete at which every audible channel was silent for the gate window.

        Tool latencies are conditioned so that the talk the plan puts before a delivery started
        before its result came (``_condition``); the gate still never opens before that talk.
        """
        spans = [(s.on, s.off) for s in self.slots.values() if s.ev.speaker in AUDIBLE]
        t = max([complete] + [on for on, _ in spans])
        for _ in range(1000):
            window = self._window(t, complete)
            busy = [off for on, off in spans if on < t and off > t - window]
            if not busy:
                return t
            t = max(t + 1, self._first_open(max(busy), complete))
        raise SessionReject("place", "delivery_gate_never_opened")

    def _first_open(self, off: int, complete: int) -> int:
        """Earliest t with ``t - off >= window(t)``; the window shrinks as the result waits."""
        L = self.laws
        linear = (off + self.ms(L.gate_base_ms) + L.gate_slope * complete) / (1 + L.gate_slope)
        return max(int(np.ceil(linear)), off + self.ms(L.gate_min_ms))

    def _deliver(self, ev: PlannedEvent, slot: _Slot, rng) -> int:
        w = self.work[ev.attach_to]
        inject = self._gate(w["complete"])
        if (inject - w["complete"]) > self.ms(self.laws.result_ttl_ms):
            raise SessionReject("place", "result_stale", ev.attach_to)
        lo = w["complete"] - self._window(w["complete"], w["complete"])
        if any(s.ev.speaker in ("user", "third_party") and s.on < inject and s.off > lo
               for s in self.slots.values()):
            slot.phenomena.append("result_deferred")  # ready while the user side was talking
        w["inject"] = inject
        w["deliver_event"] = ev.id
        kind = "error" if w["plan"].outcome == "failure" else "result"
        w["backend"].append(BackendMessage(kind=kind, sample=inject,
                                           text=f"<backend>{kind}: {w['plan'].result_text}</backend>"))
        return inject + self.ms(self.laws.system_gap_ms.sample(rng))

    def _cancel(self, work_id: str, by: _Slot) -> None:
        """The user's cancel (or superseding request) ends: the item is cancelled, its result dropped."""
        w = self.work.get(work_id)
        if w is None:
            raise SessionReject("place", "cancel_before_open", work_id)
        self._condition(work_id, by.on, "cancel")  # a result ready earlier would have been delivered
        w["cancel"] = by.off
        w["drop"] = max(by.off, w["complete"])

    def _progress(self, w, question: _Slot) -> None:
        """The system polls the backend when the progress question ends; the work is still running."""
        item = self.work.get(w.work_id)
        if item is None:
            raise SessionReject("place", "progress_before_open", w.work_id)
        at = question.off
        self._condition(w.work_id, at + self.ms(500), "progress")
        if item["complete"] <= at:
            raise SessionReject("place", "progress_after_completion", w.work_id)
        item["backend"].append(BackendMessage(kind="progress", sample=at,
                                              text=f"<backend>progress: {w.progress_text}</backend>"))

    def _condition(self, work_id: str, not_before: int, why: str) -> None:
        """Redraw the item's tool latency from its law conditioned on completing at or after
        ``not_before`` (what the plan says happened first). Past the law's upper bound the draw
        stays; the gate then waits."""
        item = self.work[work_id]
        if item["complete"] >= not_before:
            return
        low_ms = (not_before - item["close"]) * 1000 / self.sr
        law = self.laws.tool_latency_ms
        if law.high is not None and low_ms > law.high:
            return
        law = law.model_copy(update={"low": max(law.low or 0.0, low_ms)})
        item["complete"] = item["close"] + max(self.ms(law.sample(self.rng_for(f"work-{work_id}-{why}"))),
                                               not_before - item["close"])

    def _states(self, w: dict, deliver: _Slot | None) -> list[StateTime]:
        done = "FAILED" if w["plan"].outcome == "failure" else "COMPLETED"
        states = [("QUEUED", w["open"]), ("RUNNING", w["close"])]
        if "cancel" in w:
            if w["complete"] <= w["cancel"]:
                states.append((done, w["complete"]))
            states += [("CANCELLING", w["cancel"]), ("CANCELLED", w["drop"])]
        else:
            states.append((done, w["complete"]))
            if deliver is not None:
                states += [("DELIVERING", deliver.on), ("DELIVERED", deliver.off)]
        return [StateTime(state=k, sample=v) for k, v in states]

    # -- output --------------------------------------------------------------------------
    def _finish(self) -> Placed:
        end = max(s.off for s in self.slots.values())
        tail = self.ms(self.laws.tail_ms.sample(self.rng_for("tail")))
        events, audio = [], {}
        for eid in self.order:
            s = self.slots[eid]
            langs = sorted({w[1] for w in s.words} or {s.ev.words[0].lang})
            events.append(PlacedEvent(
                id=eid, speaker=s.ev.speaker, act=s.ev.act, floor_intent=s.ev.floor_intent,
                relation=s.ev.relation, attach_to=s.ev.attach_to,
                text=join_words([PlannedWord(text=w[0], lang=w[1]) for w in s.words]) or s.ev.text,
                text_after_cut=s.text_after_cut, lang="en-zh" if len(langs) > 1 else langs[0],
                on_sample=s.on, off_sample=s.off, completion=s.completion, overlap_ok=s.overlap_ok,
                words=[PlacedWord(word=w[0], lang=w[1], on_sample=s.on + w[2], off_sample=s.on + w[3])
                       for w in s.words],
                phenomena=s.phenomena,
            ))
            audio[eid] = s.audio
        work = []
        for wid, w in self.work.items():
            deliver = self.slots.get(w.get("deliver_event", ""))
            p = w["plan"]
            work.append(WorkItem(
                work_id=wid, tool=p.tool, objective=p.objective, result_text=p.result_text,
                opened_by=p.opened_by, open_sample=w["open"], close_sample=w["close"],
                complete_sample=w["complete"], inject_sample=w.get("inject"),
                deliver_sample=deliver.on if deliver else None,
                delivered_sample=deliver.off if deliver else None, stale=deliver is None,
                states=self._states(w, deliver), outcome=p.outcome, cancel_sample=w.get("cancel"),
                drop_sample=w.get("drop", w["complete"]) if deliver is None else None,
                backend=sorted(w["backend"], key=lambda m: m.sample),
            ))
            end = max(end, w["complete"], w.get("drop", 0))
        tl = Timeline(sample_rate=self.sr, num_samples=end + tail, events=events, work=work)
        return Placed(tl, audio)


def place(plan: Plan, rendered: dict[str, Rendered], laws: TimingLaws, sample_rate: int,
          rng_for: Callable[[str], np.random.Generator]) -> Placed:
    """Place every event of ``plan`` on one clock; see the module docstring."""
    return Clock(plan, rendered, laws, sample_rate, rng_for).place()
