"""The simulated backend on the shared clock (LABELS.md R6): when a delegated job opens, completes,
is injected, delivered, polled, cancelled or dropped.

A work item opens after its acknowledgement (or silently after the request) and completes a tool
latency later; its result is injected when the delivery gate opens (every audible channel silent
for a window that shrinks as the result waits: ``gate_window``, ``gate``, ``first_open``) and
spoken a system gap later, unless it is older than its time-to-live by then (``deliver``). A
cancel, a progress question or the talk the plan puts before a delivery condition the tool latency
(``condition``): what the plan says happened first did happen first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import SessionReject
from ..schema.plan import PlannedEvent
from ..schema.timeline import BackendMessage, StateTime
from .tape import conditioned

if TYPE_CHECKING:
    from .place import Clock, _Slot

AUDIBLE = ("user", "system", "third_party")


@dataclass
class Work:
    """A delegated job while the clock places it: sample times, filled in as they are known."""

    plan: object  # the PlannedWork
    open: int
    close: int
    complete: int
    backend: list = field(default_factory=list)
    latency_lo_ms: float = -math.inf
    inject: int | None = None
    deliver_event: str | None = None
    cancel: int | None = None
    drop: int | None = None


def open_work(c: Clock, w, ack: _Slot, rng) -> None:
    """Open the item after ``ack``; backend completion = open + tool latency (R6)."""
    L = c.laws
    open_ = ack.off
    if ack.ev.speaker != "system":  # opened silently after the user's request
        open_ += c.ms(c.tape.take(f"work-{w.work_id}", "ack_delay", lambda: L.ack_delay_ms.sample(
            c.rng_for(f"work-{w.work_id}-open"))))
    close = open_ + max(1, c.ms(L.delegate_span_ms))
    complete = open_ + c.ms(c.tape.take(f"work-{w.work_id}", "tool_latency", lambda: L.tool_latency_ms.sample(
        c.rng_for(f"work-{w.work_id}"))))
    c.work[w.work_id] = Work(w, open_, close, max(complete, close + 1))


def gate_window(c: Clock, t: int, complete: int) -> int:
    L = c.laws
    return c.ms(max(L.gate_min_ms, L.gate_base_ms - L.gate_slope * (t - complete) * 1000 / c.sr))


def gate(c: Clock, complete: int) -> int:
    """First time >= complete at which every audible channel was silent for the gate window.

    Tool latencies are conditioned so that the talk the plan puts before a delivery started
    before its result came (``condition``); the gate still never opens before that talk.
    """
    spans = [(s.on, s.off) for s in c.slots.values() if s.ev.speaker in AUDIBLE]
    t = max([complete] + [on for on, _ in spans])
    for _ in range(1000):
        window = gate_window(c, t, complete)
        busy = [off for on, off in spans if on < t and off > t - window]
        if not busy:
            return t
        t = max(t + 1, first_open(c, max(busy), complete))
    raise SessionReject("place", "delivery_gate_never_opened")


def first_open(c: Clock, off: int, complete: int) -> int:
    """Earliest t with ``t - off >= window(t)``; the window shrinks as the result waits."""
    L = c.laws
    linear = (off + c.ms(L.gate_base_ms) + L.gate_slope * complete) / (1 + L.gate_slope)
    return max(int(np.ceil(linear)), off + c.ms(L.gate_min_ms))


def deliver(c: Clock, ev: PlannedEvent, slot: _Slot, rng) -> int | None:
    """The result is injected when the gate opens and spoken a system gap later; a result
    older than its time-to-live at that moment is dropped (``stale_drop``), never spoken."""
    w = c.work[ev.attach_to]
    inject = gate(c, w.complete)
    if (inject - w.complete) > c.ms(c.laws.result_ttl_ms):
        w.drop = w.complete + c.ms(c.laws.result_ttl_ms)
        latest = max((s for s in c.slots.values() if s.ev.speaker in AUDIBLE), key=lambda s: s.off, default=None)
        c.drop(ev, f"result_expired {ev.attach_to}", latest.ev.id if latest else None)
        return None
    lo = w.complete - gate_window(c, w.complete, w.complete)
    if any(s.ev.speaker in ("user", "third_party") and s.on < inject and s.off > lo
           for s in c.slots.values()):
        slot.phenomena.append("result_deferred")  # ready while the user side was talking
    w.inject = inject
    w.deliver_event = ev.id
    kind = "error" if w.plan.outcome == "failure" else "result"
    w.backend.append(BackendMessage(kind=kind, sample=inject,
                                       text=f"<backend>{kind}: {w.plan.result_text}</backend>"))
    return c.draw("delivery_gap", ev, c.laws.system_gap_ms, inject, rng,
                      c.to_ms(c.free("system") - inject))


def cancel(c: Clock, work_id: str, by: _Slot) -> None:
    """The user's cancel (or superseding request) ends: the item is cancelled, its result dropped."""
    w = c.work.get(work_id)
    if w is None:
        raise SessionReject("place", "cancel_before_open", work_id)
    condition(c, work_id, by.on, "cancel")  # a result ready earlier would have been delivered
    w.cancel = by.off
    w.drop = max(by.off, w.complete)


def progress(c: Clock, w, question: _Slot) -> None:
    """The system polls the backend when the progress question ends; the work is still running."""
    item = c.work.get(w.work_id)
    if item is None:
        raise SessionReject("place", "progress_before_open", w.work_id)
    at = question.off
    condition(c, w.work_id, at + c.ms(500), "progress")
    if item.complete <= at:
        raise SessionReject("place", "progress_after_completion", w.work_id)
    item.backend.append(BackendMessage(kind="progress", sample=at,
                                          text=f"<backend>progress: {w.progress_text}</backend>"))


def condition(c: Clock, work_id: str, not_before: int, why: str) -> None:
    """Redraw the item's tool latency from its law conditioned on completing at or after
    ``not_before`` (what the plan says happened first). Past the law's upper bound the draw
    stays; the gate then waits (and a result older than its time-to-live is dropped)."""
    item = c.work[work_id]
    low_ms = (not_before - item.open) * 1000 / c.sr
    law = c.laws.tool_latency_ms
    if law.high is not None and low_ms > law.high:
        return
    # a first draw already late enough is kept: either way the latency follows law | >= low
    item.latency_lo_ms = max(item.latency_lo_ms, low_ms)
    if item.complete >= not_before:
        return
    x = c.tape.take(f"work-{work_id}", f"tool_latency_{why}",
                       lambda: conditioned(law, c.rng_for(f"work-{work_id}-{why}"), lo=low_ms))
    item.complete = item.open + max(c.ms(x), not_before - item.open)


def work_states(c: Clock, w: Work, deliver: _Slot | None) -> list[StateTime]:
    done = "FAILED" if w.plan.outcome == "failure" else "COMPLETED"
    states = [("QUEUED", w.open), ("RUNNING", w.close)]
    if w.cancel is not None:
        if w.complete <= w.cancel:
            states.append((done, w.complete))
        states += [("CANCELLING", w.cancel), ("CANCELLED", w.drop)]
    else:
        states.append((done, w.complete))
        if deliver is not None:
            states += [("DELIVERING", deliver.on), ("DELIVERED", deliver.off)]
    return [StateTime(state=k, sample=v) for k, v in states]
