"""The onset of an event per relation, one law at a time (LABELS.md §3).

Each function is one relation's law on the shared clock (``synth.stages.place.Clock``), drawn on
the clock's tape and conditioned on the interval the hard rules leave (``Clock.draw``):

- ``gap``: an answer (``responds_to``) after the event it answers: the system's gap (with its
  early-start share, ``early_or_gap``), acknowledgement delay, dispreferred extra, the user's gap
  (overlapping at most half the system event), a silence the user lets fall, side talk;
- ``interrupt``: an interruption's onset from its attached word and the stop latency of the
  interrupted speaker, whose event is cut there;
- ``backchannel``: a backchannel's onset from its attached word, inside the target, with the
  listener rules (speech before it, spacing since the last one), or dropped when nothing fits.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..errors import SessionReject
from ..schema.plan import PlannedEvent, talker
from .tape import Draw

if TYPE_CHECKING:
    from .place import Clock, _Slot

BACKCHANNEL_SPACING_MS = 800  # LABELS §3: >= 800 ms since the listener's last backchannel


def gap(c: Clock, ev: PlannedEvent, slot: _Slot, target: _Slot, rng) -> int:
    L = c.laws
    zh = L.zh_gap_offset_ms if c.plan.language != "en" else 0.0
    anchor = target.off
    lo = c.to_ms(c.free(talker(ev)) - anchor)
    if ev.speaker == "system":
        if ev.act == "acknowledge":
            return c.draw("ack_delay", ev, L.ack_delay_ms, anchor, rng, lo, shift=zh)
        if target.ev.speaker == "user" and (ev.gap_kind == "early" or
                                            (ev.act == "answer" and ev.gap_kind == "normal")):
            return early_or_gap(c, ev, slot, target, rng, lo, zh)
        if ev.gap_kind == "dispreferred":
            return c.draw("system_gap_dispreferred", ev, lambda r: L.system_gap_ms.sample(r)
                              + L.dispreferred_extra_ms.sample(r), anchor, rng, lo, shift=zh)
        return c.draw("system_gap", ev, L.system_gap_ms, anchor, rng, lo, shift=zh)
    if ev.gap_kind == "silence":  # the user lets a silence fall: no overlap, a long-pause law on top
        return c.draw("user_gap_silence", ev, lambda r: max(L.user_gap_ms.sample(r) + zh, 0.0)
                          + L.long_pause_ms.sample(r), anchor, rng, lo)
    if target.ev.speaker != "system":  # overlaps between user-side talkers are not authored here
        return c.draw("side_gap", ev, L.user_gap_ms, anchor, rng, max(lo, 100.0), shift=zh)
    return c.draw("user_gap", ev, L.user_gap_ms, anchor, rng,
                      max(lo, -c.to_ms(len(target.audio)) / 2), shift=zh)


def early_or_gap(c: Clock, ev: PlannedEvent, slot: _Slot, target: _Slot, rng, lo: float, zh: float) -> int:
    """A system answer: the gap law with its early-start share (all early for ``gap_kind: early``),
    an early start staying inside the user's last word and half the user's event."""
    L = c.laws
    p = 1.0 if ev.gap_kind == "early" else L.system_early_start_prob
    last_word = target.off - target.on - (target.words[-1].on if target.words else 0)
    deepest = c.to_ms(min(len(target.audio) // 2, last_word))

    def sample(r):
        return -L.system_early_start_ms.sample(r) if r.random() < p else L.system_gap_ms.sample(r) + zh

    hi = 0.0 if ev.gap_kind == "early" else math.inf
    on = c.draw("system_early_start" if ev.gap_kind == "early" else "system_gap", ev, sample,
                    target.off, rng, max(lo, -deepest), hi)
    if on < target.off:
        slot.overlap_ok = True
        if "latched_start" not in slot.phenomena:
            slot.phenomena.append("latched_start")
    return on


def interrupt(c: Clock, ev: PlannedEvent, target: _Slot, rng) -> int:
    L = c.laws
    k = c.word(ev, target)
    user_free = c.free(talker(ev))
    # the latency must leave the cut before the last word and 100 ms before the target's end; a
    # draw that does not is drawn again (the first fitting draw is the one every session that
    # placed before got: a short target with a long draw, e.g. "Can I have a snack?" cut by a
    # 1 s latency, was a reject, 1 of 3 thirty-minute group sessions)
    room = min(target.off - c.ms(100), target.on + target.words[-1].on - 1) - max(user_free, target.on + 1)

    def fitting_latency() -> float:
        for _ in range(64):
            x = L.stop_latency_ms.sample(rng)
            if c.ms(x) <= room:
                return x
        return x  # none fits (the law's low end is longer than the room): rejected below

    latency = c.ms(c.tape.take(ev.id, "stop_latency", fitting_latency))
    on = target.on + target.words[k].on + c.ms(
        c.tape.take(ev.id, "interrupt_onset", lambda: L.interrupt_onset_ms.sample(rng)))
    on = max(on, user_free, target.on + 1)
    # the cut lands before the last word starts, so something is left unsaid (text_after_cut)
    on = min(on, target.off - latency - c.ms(100), target.on + target.words[-1].on - latency - 1)
    if on < max(user_free, target.on + 1):
        raise SessionReject("place", "interrupt_unplaceable", f"{ev.id} on {target.ev.id}")
    c.draws.append(Draw("stop_latency", ev.id, on, c.to_ms(latency)))
    c.cut(target, on + latency - target.on, c.tape.take(ev.id, "cut_fade", lambda: L.cut_fade_ms.sample(rng)))
    return on


def backchannel(c: Clock, ev: PlannedEvent, slot: _Slot, target: _Slot, rng) -> int | None:
    """Onset law from the end of the attached word, inside the target, with >= 700 ms of the
    speaker's speech before it and >= 800 ms since the listener's last backchannel.

    Word order tried: the planned word, the pause after a continued target, then the other
    words nearest first. No room anywhere: the backchannel is dropped (it is not heard).
    """
    L = c.laws
    law = L.backchannel_onset_ms
    k = c.word(ev, target)
    lo = max(c.speech_point(target, c.ms(L.backchannel_min_speech_ms)), c.free(talker(ev)))
    last = [s.off for s in c.slots.values() if s.ev.speaker == ev.speaker and s.ev.relation == "backchannels_on"]
    if last:
        lo = max(lo, max(last) + c.ms(BACKCHANNEL_SPACING_MS))
    inside = len(slot.audio) if ev.sound is None else len(slot.audio) // 2  # a laugh may run past the end
    hi = target.off - inside
    law_lo = -math.inf if law.low is None else law.low
    law_hi = math.inf if law.high is None else law.high
    n = len(target.words)
    word = lambda j: (target.on + target.words[j].off, hi, -math.inf)  # noqa: E731
    tries = [word(k)]
    if target.ev.id in c.continued:  # into the speaker's pause that follows
        tries.append((target.off, math.inf, 0.0))
    for d in range(1, n):
        tries += [word(j) for j in (k + d, k - d) if 0 <= j < n]
    for anchor, top, floor in tries:
        a = max(law_lo, floor, c.to_ms(lo - anchor))
        b = min(law_hi, c.to_ms(top - anchor))
        if a <= b:
            return c.draw("backchannel_onset", ev, law, anchor, rng, a, b)
    c.drop(ev, f"backchannel_no_room on {target.ev.id}", target.ev.id)
    return None
