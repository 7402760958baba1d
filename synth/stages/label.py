"""Frame labels from the timeline (LABELS.md §2, rules R1-R6).

Frame k covers samples ``[k*P, (k+1)*P)``; a span ``[on, off)`` covers frames
``floor(on/P) .. floor((off-1)/P)``. Arrays are always recomputed from the timeline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..audio import window_mean_square
from ..schema.labels import (
    DELEGATE, HOLD, LISTEN, NOT_HOLD, RELEASE, SPEAK, TAKE, TURN_EOS, FrameLabels, Marker,
)
from ..schema.record import RecordedMessage, RecordedWork
from ..schema.timeline import PlacedEvent, Timeline, WorkItem
from ..schema.turns import chain_turns

FLOOR_SPEAKERS = {"system", "user"}
# When two facts land on one frame the floor channel shows the stronger one.
_FLOOR_RANK = {NOT_HOLD: 0, HOLD: 1, RELEASE: 2, TAKE: 3}


@dataclass(frozen=True)
class Turn:
    """A maximal chain of one speaker's floor-taking events linked by ``continues``."""

    speaker: str
    events: tuple[PlacedEvent, ...]

    @property
    def on(self) -> int:
        return self.events[0].on_sample

    @property
    def off(self) -> int:
        return self.events[-1].off_sample

    @property
    def last_id(self) -> str:
        return self.events[-1].id

    @property
    def interrupted(self) -> bool:
        return self.events[-1].completion == "interrupted"

    @property
    def overlap_ok(self) -> bool:
        return self.events[0].overlap_ok


def turns_of(timeline: Timeline, speaker: str) -> list[Turn]:
    """The turns of ``speaker`` (``system`` or ``user``) in time order (R1)."""
    events = sorted(timeline.events, key=lambda e: (e.on_sample, e.id))
    return [Turn(speaker, tuple(c)) for c in chain_turns(events, speaker)]


def span_frames(on: int, off: int, period: int) -> tuple[int, int]:
    """First and last frame of the span ``[on, off)`` (at least one frame)."""
    first = on // period
    return first, max(first, (off - 1) // period)


def num_frames(num_samples: int, period: int) -> int:
    return -(-num_samples // period)


def floor_channel(turns: list[Turn], n: int, period: int) -> np.ndarray:
    floor = np.full(n, NOT_HOLD, dtype=np.int8)

    def put(k: int, value: int) -> None:
        if 0 <= k < n and _FLOOR_RANK[value] > _FLOOR_RANK[int(floor[k])]:
            floor[k] = value

    for t in turns:
        first, last = span_frames(t.on, t.off, period)
        for k in range(first + 1, last):
            put(k, HOLD)
        put(last, RELEASE)
        put(first, TAKE)
    return floor


def period_samples(sample_rate: int, frame_period_ms: int) -> int:
    period, rem = divmod(sample_rate * frame_period_ms, 1000)
    if rem:
        raise ValueError(f"frame period {frame_period_ms} ms is not a whole number of samples at {sample_rate} Hz")
    return period


def frame_of(sample: int, sample_rate: int, frame_period_ms: int) -> int:
    """The frame that holds ``sample`` (frame k covers ``[k*P, (k+1)*P)``): where a point marker
    (``backend_inject``, ``deliver_start``, ``cancel``, ``stale_drop``) and a backend message land."""
    return sample // period_samples(sample_rate, frame_period_ms)


def frame_channels(timeline: Timeline, frame_period_ms: int) -> dict:
    """``sys_action``, ``sys_floor``, ``usr_floor`` and markers of a timeline (no VAD)."""
    period = period_samples(timeline.sample_rate, frame_period_ms)
    n = num_frames(timeline.num_samples, period)
    sys_turns = turns_of(timeline, "system")
    sys_floor = floor_channel(sys_turns, n, period)
    usr_floor = floor_channel(turns_of(timeline, "user"), n, period)
    markers: list[tuple[int, str, str]] = []

    action = np.where(np.isin(sys_floor, (TAKE, HOLD, RELEASE)), SPEAK, LISTEN).astype(np.int8)
    for t in sys_turns:
        _, last = span_frames(t.on, t.off, period)
        action[min(last, n - 1)] = TURN_EOS
        markers.append((last, "yield" if t.interrupted else "turn_eos", t.last_id))
    for w in timeline.work:
        first, last = span_frames(w.open_sample, w.close_sample, period)
        action[first : min(last, n - 1) + 1] = DELEGATE
        markers.append((first, "delegate_open", w.work_id))
        markers.append((last, "delegate_close", w.work_id))
        markers += work_points(w, timeline.sample_rate, frame_period_ms)
    markers = sorted(m for m in markers if m[0] < n)
    return {
        "frame_period_s": frame_period_ms / 1000,
        "num_frames": n,
        "sys_action": action,
        "sys_floor": sys_floor,
        "usr_floor": usr_floor,
        "markers": [Marker(frame=f, type=t, ref=r) for f, t, r in markers],
    }


def work_points(w: WorkItem, sample_rate: int, frame_period_ms: int) -> list[tuple[int, str, str]]:
    """The point markers of a work item, ``(frame, type, ref)``: each backend message's
    ``backend_inject`` (or the item's inject sample), ``deliver_start``, ``cancel``, ``stale_drop``."""
    def at(sample: int) -> int:
        return frame_of(sample, sample_rate, frame_period_ms)

    out = [(at(m.sample), "backend_inject", w.work_id if m.kind != "progress" else f"{w.work_id}:progress")
           for m in w.backend]
    if not w.backend and w.inject_sample is not None:
        out.append((at(w.inject_sample), "backend_inject", w.work_id))
    if w.deliver_sample is not None:
        out.append((at(w.deliver_sample), "deliver_start", w.work_id))
    if w.cancel_sample is not None:
        out.append((at(w.cancel_sample), "cancel", w.work_id))
    if w.stale:
        out.append((at(w.drop_sample if w.drop_sample is not None else w.complete_sample), "stale_drop", w.work_id))
    return out


def recorded_work(timeline: Timeline, frame_period_ms: int) -> list[RecordedWork]:
    """The work items as the record writes them: each backend message with its frame (``frame_of``)."""
    sr = timeline.sample_rate
    return [RecordedWork(**{k: getattr(w, k) for k in WorkItem.model_fields if k != "backend"},
                         backend=[RecordedMessage(kind=m.kind, sample=m.sample, text=m.text,
                                                  frame=frame_of(m.sample, sr, frame_period_ms))
                                  for m in w.backend])
            for w in timeline.work]


def vad_frames(stem: np.ndarray, sample_rate: int, frame_period_ms: int,
               threshold_dbfs: float = -50.0, window_ms: int = 10) -> np.ndarray:
    """1 where any ``window_ms`` window of the frame is above ``threshold_dbfs`` RMS."""
    period = period_samples(sample_rate, frame_period_ms)
    n = num_frames(len(stem), period)
    win = max(1, sample_rate * window_ms // 1000)
    # the stem zero-padded to n frames; int16 read as ``unit`` floats (x / 32768, exact), without their copy
    rms = np.sqrt(window_mean_square(stem, win, n * period // win,
                                     scale=1 / 32768 if stem.dtype == np.int16 else None))
    active = 20 * np.log10(np.maximum(rms, 1e-12)) > threshold_dbfs
    out = np.zeros(n, dtype=np.int8)
    starts = np.arange(len(active)) * win
    np.maximum.at(out, np.minimum(starts // period, n - 1), active.astype(np.int8))
    return out


def addressed_frames(timeline: Timeline, frame_period_ms: int) -> np.ndarray:
    """1 in the frames of human speech addressed to the system (group sessions' ``addressee``)."""
    period = period_samples(timeline.sample_rate, frame_period_ms)
    n = num_frames(timeline.num_samples, period)
    out = np.zeros(n, np.int8)
    for e in timeline.events:
        if e.speaker == "user" and e.addressee == "system" and e.off_sample > e.on_sample:
            first, last = span_frames(e.on_sample, e.off_sample, period)
            out[first : min(last, n - 1) + 1] = 1
    return out


def label_session(timeline: Timeline, frame_period_ms: int, sys_stem: np.ndarray,
                  usr_stem: np.ndarray, threshold_dbfs: float = -50.0,
                  window_ms: int = 10, person_stems: dict[str, np.ndarray] | None = None) -> FrameLabels:
    ch = frame_channels(timeline, frame_period_ms)
    sys_vad = vad_frames(sys_stem, timeline.sample_rate, frame_period_ms, threshold_dbfs, window_ms)
    usr_vad = vad_frames(usr_stem, timeline.sample_rate, frame_period_ms, threshold_dbfs, window_ms)
    group = {}
    if person_stems:
        group = dict(addressed=addressed_frames(timeline, frame_period_ms).tolist(),
                     person_vad={p: vad_frames(person_stems[p], timeline.sample_rate, frame_period_ms,
                                               threshold_dbfs, window_ms)[: ch["num_frames"]].tolist()
                                 for p in sorted(person_stems)})  # int16 stems as written
    return FrameLabels(**group,
        frame_period_s=ch["frame_period_s"],
        num_frames=ch["num_frames"],
        sys_action=ch["sys_action"].tolist(),
        sys_floor=ch["sys_floor"].tolist(),
        usr_floor=ch["usr_floor"].tolist(),
        sys_vad=sys_vad[: ch["num_frames"]].tolist(),
        usr_vad=usr_vad[: ch["num_frames"]].tolist(),
        markers=ch["markers"],
    )
