"""The checks of LABELS.md §5. Each returns a list of violations (empty when the session is good)."""

from __future__ import annotations

import numpy as np

from ..schema.labels import RELEASE, TAKE, FrameLabels
from ..schema.timeline import Timeline
from .label import addressed_frames, frame_channels, period_samples, span_frames, turns_of


def check_labels(tl: Timeline, labels: FrameLabels, frame_period_ms: int, ttl_ms: float) -> list[str]:
    bad: list[str] = []
    period = period_samples(tl.sample_rate, frame_period_ms)
    n = labels.num_frames
    for name in ("sys_action", "sys_floor", "usr_floor", "sys_vad", "usr_vad"):
        if len(getattr(labels, name)) != n:
            bad.append(f"length_mismatch:{name}")
    fresh = frame_channels(tl, frame_period_ms)
    for name in ("sys_action", "sys_floor", "usr_floor"):
        if fresh[name].tolist() != getattr(labels, name):
            bad.append(f"labels_differ_from_timeline:{name}")
    if [m.model_dump() for m in fresh["markers"]] != [m.model_dump() for m in labels.markers]:
        bad.append("markers_differ_from_timeline")
    sys_turns = turns_of(tl, "system")
    user_turns = turns_of(tl, "user")
    floor = np.asarray(labels.sys_floor)
    starts = {span_frames(t.on, t.off, period)[0] for t in sys_turns}
    ends = {}
    for m in labels.markers:
        if m.type in ("turn_eos", "yield"):
            ends.setdefault(m.ref, []).append(m.type)
    for t in sys_turns:
        first, last = span_frames(t.on, t.off, period)
        if floor[first] != TAKE:
            bad.append(f"turn_without_take:{t.events[0].id}")
        if floor[last] != RELEASE and not (last == first or last in starts):
            bad.append(f"turn_without_release:{t.events[0].id}")
        kinds = ends.get(t.last_id, [])
        if len(kinds) != 1 or kinds[0] != ("yield" if t.interrupted else "turn_eos"):
            bad.append(f"turn_end_marker:{t.last_id}")
        if not t.overlap_ok and any(u.on < t.on < u.off for u in user_turns):
            bad.append(f"system_take_inside_user_floor:{t.events[0].id}")
    per_turn: dict[int, int] = {}
    for w in tl.work:
        owner = [i for i, t in enumerate(sys_turns) if any(e.id == w.opened_by for e in t.events)]
        for i in owner:
            per_turn[i] = per_turn.get(i, 0) + 1
        if w.deliver_sample is not None:
            if w.inject_sample is None or w.inject_sample > w.deliver_sample:
                bad.append(f"deliver_without_inject:{w.work_id}")
            elif (w.inject_sample - w.complete_sample) > ttl_ms * tl.sample_rate / 1000:
                bad.append(f"inject_after_ttl:{w.work_id}")
    if any(c > 1 for c in per_turn.values()):
        bad.append("several_delegate_spans_in_one_turn")
    bad += check_work(tl)
    return bad


def check_group(tl: Timeline, labels: FrameLabels, frame_period_ms: int) -> list[str]:
    """Group sessions (events with an ``addressee``): the assistant never takes the floor on
    speech addressed to someone else; its answer goes to a person who asked it (or the group);
    the ``addressed`` channel is 1 exactly on the frames of speech addressed to it."""
    if not any(e.addressee for e in tl.events):
        return []
    bad = addressee_faults(sorted(tl.events, key=lambda e: e.on_sample))
    if labels.addressed is not None:
        if addressed_frames(tl, frame_period_ms).tolist() != labels.addressed:
            bad.append("labels_differ_from_timeline:addressed")
    return bad


def addressee_faults(events) -> list[str]:
    """The addressee rule on events in the order they are heard (placed events by onset, planned
    ones in plan order): ``system_takes_speech_for_others:<id>``
    for a system take answering a human line addressed to someone else,
    ``system_answers_who_did_not_ask:<id>`` for an answer to a person who never asked it.
    One rule for QA, ``synth validate`` and ``synth report``."""
    bad = []
    by_id = {e.id: e for e in events}
    askers = set()
    for e in events:
        if e.speaker == "user" and e.addressee == "system" and e.person:
            askers.add(e.person)
        if e.speaker != "system" or e.floor_intent != "take" or e.relation != "responds_to":
            continue
        target = by_id.get(e.attach_to)
        if target is not None and target.speaker == "user" and target.addressee != "system":
            bad.append(f"system_takes_speech_for_others:{e.id}")
        if e.addressee not in (None, "group") and e.addressee not in askers:
            bad.append(f"system_answers_who_did_not_ask:{e.id}")
    return bad


def _spoken(tl_by_id: dict, eid: str) -> str:
    """What an event's turn said of its own words: the pieces the paralinguistic pass split it into
    (``continues`` links back, same act), fillers and other added sounds left out."""
    e = tl_by_id[eid]
    pieces = [e]
    while pieces[0].relation == "continues" and pieces[0].attach_to in tl_by_id:
        pieces.insert(0, tl_by_id[pieces[0].attach_to])
    return " ".join(p.text for p in pieces if p.act == e.act)


def check_long_range(tl: Timeline, planner_meta: dict) -> list[str]:
    """Long group sessions (``planner_meta.long_range``): every value a late answer refers back to
    was said, in the event the plan names, before the question that asked for it, and the answer
    says it."""
    from ..text import says

    refs = planner_meta.get("long_range") or []
    if not refs:
        return []
    by_id = {e.id: e for e in tl.events}
    bad = []
    for r in refs:
        ask, ans = by_id.get(r.get("ask")), by_id.get(r.get("answer"))
        if ask is None or ans is None or not r.get("values"):
            bad.append(f"long_range_missing:{r.get('answer')}")
            continue
        for slot, value in sorted(r["values"].items()):
            said = by_id.get((r.get("said") or {}).get(slot))
            if said is None or not says(_spoken(by_id, said.id), value):
                bad.append(f"long_range_not_said_before:{ans.id}:{slot}")
            elif said.on_sample >= ask.on_sample:
                bad.append(f"long_range_said_after:{ans.id}:{slot}")
            if not says(ans.text, value):
                bad.append(f"long_range_answer_lacks:{ans.id}:{slot}")
    return bad


_NEXT = {"QUEUED": {"RUNNING", "CANCELLING"}, "RUNNING": {"COMPLETED", "FAILED", "CANCELLING"},
         "COMPLETED": {"DELIVERING", "CANCELLING"}, "FAILED": {"DELIVERING", "CANCELLING"},
         "DELIVERING": {"DELIVERED"}, "CANCELLING": {"CANCELLED"}, "DELIVERED": set(), "CANCELLED": set()}


def check_work(tl: Timeline) -> list[str]:
    """R6 work items: legal state sequence in time order; stale items never delivered."""
    bad: list[str] = []
    for w in tl.work:
        seq = [s.state for s in w.states]
        times = [s.sample for s in w.states]
        if seq and (seq[0] != "QUEUED" or any(b not in _NEXT[a] for a, b in zip(seq, seq[1:]))
                    or times != sorted(times)):
            bad.append(f"work_states:{w.work_id}")
        if w.stale and (w.deliver_sample is not None or w.delivered_sample is not None):
            bad.append(f"stale_delivered:{w.work_id}")
        if w.cancel_sample is not None and not w.stale:
            bad.append(f"cancelled_not_dropped:{w.work_id}")
    return bad


SILENCE_PEAK_DBFS = -60.0  # a frame whose peak is below this (and that WebRTC hears no voice in) is silent
VOICED_PEAK_DBFS = -40.0  # voiced speech reaches this peak (speech is levelled to -24 dBFS RMS, peaks ~ -12)


def _pcm16(x: np.ndarray, chunk: int = 1 << 20) -> np.ndarray:
    """``x`` (floats in [-1, 1]) as int16, a chunk at a time (no float64 copies of a long stem)."""
    out = np.empty(len(x), "<i2")
    for a in range(0, len(x), chunk):
        out[a : a + chunk] = np.clip(np.round(np.asarray(x[a : a + chunk], dtype=np.float64) * 32767), -32768, 32767)
    return out


def speech_frames(stem: np.ndarray, sample_rate: int, frame_period_ms: int,
                  aggressiveness: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Per label frame, from a detector independent of the labeller's energy VAD:
    ``voiced`` (a 10 ms window of it in which WebRTC's VAD hears speech and the peak reaches
    -40 dBFS: breath-quiet tails do not count) and ``silent`` (no voiced window and a peak
    below -60 dBFS). WebRTC's VAD runs at 16 kHz (24 kHz is resampled)."""
    import _webrtcvad
    import webrtcvad

    from ..audio import polyphase

    period = period_samples(sample_rate, frame_period_ms)
    n = -(-len(stem) // period)
    x16 = stem if sample_rate == 16000 else polyphase(np.asarray(stem, dtype=np.float64), 16000, sample_rate)
    pcm = _pcm16(x16)
    vad, win = webrtcvad.Vad(aggressiveness), 160
    k = len(pcm) // win
    windows = pcm[: k * win].reshape(k, win)
    # WebRTC's hangover keeps "speech" for a while after it stops: a window without signal is not voiced
    # (|x| as max(max, -min): no copy of the stem; _pcm16 never gives -32768)
    loud = np.maximum(windows.max(axis=1), -windows.min(axis=1)) >= 32768 * 10 ** (VOICED_PEAK_DBFS / 20)
    # the C call itself: Vad.is_speech only checks the length, and 10 ms windows are ~40k calls a minute;
    # it reads the windows through a view of the samples (a 30-minute stem is not copied to bytes)
    process, handle, data = _webrtcvad.process, vad._vad, memoryview(np.ascontiguousarray(pcm)).cast("B")
    step = 2 * win
    voiced_win = np.array([process(handle, 16000, data[i * step:(i + 1) * step], win) for i in range(k)],
                          dtype=bool) & loud
    frame_of = np.minimum((np.arange(k) * 10) // frame_period_ms, n - 1)
    voiced = np.zeros(n, dtype=bool)
    np.logical_or.at(voiced, frame_of, voiced_win)
    silent = ~voiced & (frame_peaks(stem, period, n) < 10 ** (SILENCE_PEAK_DBFS / 20))
    return voiced, silent


def frame_peaks(x: np.ndarray, period: int, n: int, block: int = 1 << 20) -> np.ndarray:
    """The peak ``|x|`` of each of ``n`` frames of ``period`` samples (the last one may be short),
    read ``block`` samples at a time: no absolute or padded float64 copy of a long stem (a
    30-minute one made ~350 MB of them per check, the peak of a long group session's QA)."""
    peak = np.zeros(n)
    full = min(n, len(x) // period)
    step = max(1, block // period)
    for a in range(0, full, step):
        b = min(full, a + step)
        rows = np.asarray(x[a * period : b * period]).reshape(b - a, period)
        peak[a:b] = np.maximum(rows.max(axis=1), -rows.min(axis=1))
    if full < n and len(x) > full * period:
        tail = np.asarray(x[full * period :])
        peak[full] = max(float(tail.max()), -float(tail.min()))
    return peak


def check_vad(stem: np.ndarray, vad: list[int], sample_rate: int, frame_period_ms: int, name: str,
              min_recall: float = 0.9) -> list[str]:
    """LABELS §5: the VAD channel is 1 on >= 90 % of the frames where WebRTC's VAD hears speech
    in the clean stem, and 0 on every frame where the stem is silent."""
    voiced, silent = speech_frames(stem, sample_rate, frame_period_ms)
    v = np.zeros(len(voiced), dtype=bool)
    v[: min(len(vad), len(v))] = np.asarray(vad[: len(v)], dtype=bool)
    bad = []
    if voiced.any() and v[voiced].mean() < min_recall:
        bad.append(f"{name}_misses_speech")
    if (v & silent).any():
        bad.append(f"{name}_on_silence")
    return bad


def check_vad_in_events(tl: Timeline, vad: list[int], speakers: tuple[str, ...], frame_period_ms: int,
                        name: str) -> list[str]:
    """Every active VAD frame lies in a frame covered by an event of ``speakers``."""
    period = period_samples(tl.sample_rate, frame_period_ms)
    covered = np.zeros(len(vad), dtype=bool)
    for e in tl.events:
        if e.speaker in speakers and e.off_sample > e.on_sample:
            a, b = span_frames(e.on_sample, e.off_sample, period)
            covered[a : b + 1] = True
    stray = np.asarray(vad, dtype=bool) & ~covered
    return [f"{name}_outside_events"] if stray.any() else []


FULL_SCALE = 32767 / 32768


def check_peaks(channels: dict[str, np.ndarray]) -> list[str]:
    """No channel touches int16 full scale (what is left of a clipped mix after quantising)."""
    return [f"clipped:{k}" for k, x in channels.items() if len(x) and float(np.abs(x).max()) >= FULL_SCALE]


def check_silent(channels: dict[str, np.ndarray]) -> list[str]:
    """No channel is silent throughout (peak below -60 dBFS): both sides of a session speak, and
    an all-zero channel means the mix broke (e.g. a non-finite gain), not a conversation."""
    floor = 10 ** (SILENCE_PEAK_DBFS / 20)
    return [f"silent_channel:{k}" for k, x in channels.items()
            if not len(x) or not np.all(np.isfinite(x)) or float(np.abs(x).max()) < floor]
