"""Timing and rate measurements of written sessions, and the target laws they are compared to.

Every quantity is measured on the placed timeline (samples, trimmed rendered audio), the same
way the clock attached the events (``synth.stages.place``):

- ``system_gap``: a system ``responds_to`` a user event (not an acknowledgement, not a
  dispreferred answer): ``on - target.off``. Law: Gamma gap, plus the early-start share as -U.
- ``system_gap_after_barge_in``: the same, when the user event ``interrupts`` the system: the
  reply after a yield, measured from the end of the interrupting turn. Same law.
- ``user_gap``: the user's first sound (a breath, a laugh or the words) answering a system
  event, not after a system question the user lets a silence fall on. Law: the truncated Normal.
- ``overlap``: the depth (ms, positive) of every overlapped transition, i.e. ``-gap`` of the
  system and user gaps below zero. Law: LABELS.md's Gamma(1.5, 150) unless the run's config
  has an ``overlap_ms`` law (the clock itself draws overlaps from the user-gap law).
- ``within_turn_pause`` / ``hesitation_pause`` / ``long_pause``: a ``continues`` event's
  ``on - target.off``. The record has no ``pause_before``, so the law is read back from the
  turn: long when the turn is tagged ``long_thinking_pause`` or ``complete_sounding_pause``
  and the pause follows its first event; hesitation after a filler (a ``filler`` event, or a
  filler as the last word) or after a ``trailing_conjunction`` head; else within-turn.
- ``stop_latency``: an interrupted system event's ``off`` minus the onset of the user event
  that ``interrupts`` it.
- ``tool_latency``: a work item's ``complete - open`` (R6: completion = open + tool latency).

``HUMAN`` holds the published human figures the report draws beside the laws, with their
sources in ``CITATIONS``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable

import numpy as np

from ..schema.dist import Distribution
from ..schema.record import SessionRecord

QUANTITIES = ("system_gap", "system_gap_after_barge_in", "user_gap", "overlap", "within_turn_pause",
              "hesitation_pause", "long_pause", "stop_latency", "tool_latency")
LAW_KEYS = {
    "system_gap": "system_gap_ms", "system_gap_after_barge_in": "system_gap_ms", "user_gap": "user_gap_ms",
    "overlap": "overlap_ms",
    "within_turn_pause": "within_turn_pause_ms",
    "hesitation_pause": "hesitation_pause_ms", "long_pause": "long_pause_ms",
    "stop_latency": "stop_latency_ms", "tool_latency": "tool_latency_ms",
}
UNAMBIGUOUS_FILLERS = {"um", "uh", "er", "erm", "呃"}
FILLER_WORDS = UNAMBIGUOUS_FILLERS | {"嗯", "那个", "这个"}
LONG_PAUSE_TAGS = {"long_thinking_pause", "complete_sounding_pause"}

CITATIONS = {
    "stivers2009": "Stivers, T. et al. (2009). Universals and cultural variation in turn-taking in "
                   "conversation. PNAS 106(26), 10587-10592.",
    "levinson2015": "Levinson, S. C. & Torreira, F. (2015). Timing in turn-taking and its implications for "
                    "processing models of language. Frontiers in Psychology 6, 731.",
    "heldner2010": "Heldner, M. & Edlund, J. (2010). Pauses, gaps and overlaps in conversations. "
                   "Journal of Phonetics 38(4), 555-568.",
    "fdb3": "Full-Duplex-Bench v3: tool-call latencies of 4-10 s (a benchmark, not people; LABELS.md §3).",
}
# Published human figures, drawn on the histograms: (kind, value(s) in ms, label, citation key).
# "line" is a vertical line; "band" a shaded range; "share" a fraction compared with the measured share
# below zero. Only figures with a published source are here (none for pauses or stop latencies).
HUMAN = {
    "system_gap": [("line", 200.0, "modal human gap ≈ 200 ms", "stivers2009"),
                   ("share", 1 / 3, "≈ 1/3 of transitions overlap", "heldner2010")],
    "system_gap_after_barge_in": [("line", 200.0, "modal human gap ≈ 200 ms", "stivers2009")],
    "user_gap": [("line", 200.0, "modal human gap ≈ 200 ms", "stivers2009"),
                 ("share", 1 / 3, "≈ 1/3 of transitions overlap", "heldner2010")],
    "tool_latency": [("band", (4000.0, 10000.0), "benchmark tool latencies 4-10 s", "fdb3")],
}
# LABELS.md §3 "overlap at overlapped transitions", not (yet) a law of TimingLaws
OVERLAP_LAW = {"dist": "gamma", "k": 1.5, "theta": 150.0}
# LABELS.md §3 targets for the rates
BACKCHANNEL_TARGET_PER_MIN = {"en": 3.0, "zh": 1.5}
FILLER_TARGET_PER_100 = {"en": (1.5, 3.0), "zh": (1.1, 1.1)}


def _ms(samples: int, sr: int) -> float:
    return samples * 1000.0 / sr


def timings(rec: SessionRecord) -> dict[str, list[float]]:
    """Measured milliseconds of each quantity in one session."""
    sr = rec.sample_rate
    by_id = {e.id: e for e in rec.events}
    out: dict[str, list[float]] = {q: [] for q in QUANTITIES}
    first: dict[str, list] = {}  # system event -> the user's sounds answering it
    planned = _planned_pauses(rec)
    for ev in rec.events:
        target = by_id.get(ev.attach_to or "")
        if target is None:
            continue
        if ev.relation == "responds_to":
            if ev.speaker == "system" and target.speaker == "user" and ev.act != "acknowledge" \
                    and "dispreferred_answer" not in ev.phenomena:
                q = "system_gap_after_barge_in" if target.relation == "interrupts" else "system_gap"
                out[q].append(_ms(ev.on_sample - target.off_sample, sr))
            elif ev.speaker == "user" and target.speaker == "system":
                first.setdefault(target.id, []).append(ev)
        elif ev.relation == "continues":
            kind = planned.get(ev.id) or _pause_kind(ev, target, by_id)
            out[kind].append(_ms(ev.on_sample - target.off_sample, sr))
        elif ev.relation == "interrupts" and target.speaker == "system" and target.completion == "interrupted":
            out["stop_latency"].append(_ms(target.off_sample - ev.on_sample, sr))
    for tid, answers in first.items():  # to the user's first sound (a breath or a laugh may lead)
        if not any("silence_after_system_question" in e.phenomena for e in answers):
            out["user_gap"].append(_ms(min(e.on_sample for e in answers) - by_id[tid].off_sample, sr))
    for w in rec.delegations:
        out["tool_latency"].append(_ms(w.complete_sample - w.open_sample, sr))
    out["overlap"] = [-g for g in out["system_gap"] + out["system_gap_after_barge_in"] + out["user_gap"] if g < 0]
    return out


def _planned_pauses(rec: SessionRecord) -> dict[str, str]:
    """The pause law of every ``continues`` event, as the clock chose it from the plan the record
    holds (``render_spec.plan``: ``pause_before``); empty for a record without a spec."""
    spec = rec.render_spec
    if spec is None:
        return {}
    laws = {"long": "long_pause", "hesitation": "hesitation_pause"}
    return {e.id: laws.get(e.pause_before or "", "within_turn_pause")
            for e in spec.plan.events if e.relation == "continues"}


def _pause_kind(ev, target, by_id) -> str:
    """Which pause law a ``continues`` event was drawn from, guessed from its turn (a record
    without a render spec)."""
    head, chain = target, [ev, target]
    while head.relation == "continues" and head.attach_to in by_id:
        head = by_id[head.attach_to]
        chain.append(head)
    nxt = {e.attach_to: e for e in by_id.values() if e.relation == "continues"}
    while chain[0].id in nxt:  # the rest of the turn (tags sit on its last event)
        chain.insert(0, nxt[chain[0].id])
    tags = {t for e in chain for t in e.phenomena}
    last_word = target.words[-1].word.strip(",.?!，。？！、…").lower() if target.words else ""
    if target is head and tags & LONG_PAUSE_TAGS:
        return "long_pause"
    if target.act == "filler" or last_word in FILLER_WORDS or (target is head and "trailing_conjunction" in tags):
        return "hesitation_pause"
    return "within_turn_pause"


def timings_by_language(records: Iterable[SessionRecord]) -> dict[str, dict[str, list[float]]]:
    """``{language: {quantity: [ms, ...]}}`` over sessions."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: {q: [] for q in QUANTITIES})
    for rec in records:
        for q, xs in timings(rec).items():
            acc[rec.language][q].extend(xs)
    return dict(sorted(acc.items()))


# -- target laws ---------------------------------------------------------------------------
def laws_from_config(config: dict) -> dict[str, Any]:
    """The run's timing laws (``run.json`` ``config.timing``); absent ones take the defaults."""
    from pydantic import TypeAdapter

    from ..schema.config import TimingLaws

    defaults = TimingLaws()
    timing = config.get("timing", {}) or {}
    adapter = TypeAdapter(Distribution)
    laws: dict[str, Any] = {}
    for q, key in LAW_KEYS.items():
        fallback = getattr(defaults, key, None) or adapter.validate_python(OVERLAP_LAW)
        laws[q] = adapter.validate_python(timing[key]) if key in timing else fallback
    for key in ("system_early_start_ms",):
        laws[key] = adapter.validate_python(timing[key]) if key in timing else getattr(defaults, key)
    laws["system_early_start_prob"] = float(timing.get("system_early_start_prob", defaults.system_early_start_prob))
    laws["zh_gap_offset_ms"] = float(timing.get("zh_gap_offset_ms", defaults.zh_gap_offset_ms))
    return laws


def pdf(dist, x: np.ndarray) -> np.ndarray:
    """Density of a (possibly truncated) distribution of ``synth.schema.dist`` on ``x``."""
    frozen, lo, hi = _frozen(dist)
    if frozen is None:
        return np.where(np.isclose(x, dist.value), 1.0, 0.0)
    mass = frozen.cdf(hi) - frozen.cdf(lo)
    y = frozen.pdf(x) / max(mass, 1e-12)
    return np.where((x >= lo) & (x <= hi), y, 0.0)


def cdf(dist, x, lo=-math.inf, hi=math.inf) -> np.ndarray:
    """CDF of a (possibly truncated) distribution on ``x``, further conditioned on ``[lo, hi]``
    (arrays broadcast: one interval per value)."""
    frozen, a, b = _frozen(dist)
    x = np.asarray(x, dtype=float)
    if frozen is None:
        return (x >= dist.value).astype(float)
    a, b = np.maximum(a, lo), np.minimum(b, hi)
    f_a, f_b = frozen.cdf(a), frozen.cdf(b)
    c = (frozen.cdf(np.clip(x, a, b)) - f_a) / np.maximum(f_b - f_a, 1e-300)
    return np.clip(np.where(x < a, 0.0, np.where(x >= b, 1.0, c)), 0.0, 1.0)


def _frozen(dist):
    """``(scipy frozen distribution, low, high)`` of a law; ``(None, ...)`` for a fixed value."""
    from scipy import stats

    kind = dist.dist
    lo = -math.inf if dist.low is None else dist.low
    hi = math.inf if dist.high is None else dist.high
    if kind == "fixed":
        return None, lo, hi
    if kind == "uniform":
        frozen = stats.uniform(dist.a, dist.b - dist.a)
    elif kind == "normal":
        frozen = stats.norm(dist.mean, dist.std)
    elif kind == "lognormal":
        frozen = stats.lognorm(s=dist.sigma, scale=dist.median)
    elif kind == "gamma":
        frozen = stats.gamma(dist.k, scale=dist.theta)
    elif kind == "int_uniform":
        frozen = stats.uniform(dist.a, dist.b + 1 - dist.a)
    else:
        raise ValueError(f"unknown distribution {kind!r}")
    return frozen, lo, hi


def target_pdf(quantity: str, laws: dict, language: str, x: np.ndarray) -> np.ndarray:
    """The target density of ``quantity`` (ms) for ``language``, as the clock draws it."""
    gaps = ("system_gap", "system_gap_after_barge_in", "user_gap")
    shift = laws["zh_gap_offset_ms"] if language != "en" and quantity in gaps else 0.0
    y = pdf(laws[quantity], x - shift)
    if quantity in ("system_gap", "system_gap_after_barge_in"):
        p = laws["system_early_start_prob"]
        y = (1 - p) * y + p * pdf(laws["system_early_start_ms"], -x)
    return y


def target_median(quantity: str, laws: dict, language: str) -> float:
    """Median (ms) of the target law, numerically from its density."""
    x = np.linspace(-5000.0, 120000.0, 250_001)
    y = target_pdf(quantity, laws, language, x)
    c = np.cumsum(y) * (x[1] - x[0])
    return float(x[np.searchsorted(c, c[-1] / 2)])


# -- rates and shares ----------------------------------------------------------------------
def _speech_minutes(rec: SessionRecord, speaker: str) -> float:
    n = sum(e.off_sample - e.on_sample for e in rec.events if e.speaker == speaker and e.floor_intent != "none")
    return n / rec.sample_rate / 60.0


def rates(records: list[SessionRecord]) -> dict[str, dict[str, float]]:
    """Per language: backchannels per listener-minute (user on system speech, system on user
    speech) and the user's fillers per 100 of the user's other words, by word language."""
    acc: dict[str, Counter] = defaultdict(Counter)
    for rec in records:
        a = acc[rec.language]
        by_id = {e.id: e for e in rec.events}
        for ev in rec.events:
            if ev.relation == "backchannels_on":
                target = by_id.get(ev.attach_to or "")
                if target is not None and target.speaker != ev.speaker:
                    a[f"bc_{ev.speaker}"] += 1
            if ev.speaker == "user":  # LABELS' filler rates are rates of human speech
                for w in ev.words:
                    token = w.word.strip(",.?!，。？！、…").lower()
                    # filler events are counted whole; inside other events only unambiguous
                    # fillers count (那个/这个 are also ordinary demonstratives)
                    if ev.act == "filler" or token in UNAMBIGUOUS_FILLERS:
                        a["fillers"] += 1
                        a[f"fillers_{w.lang}"] += 1
                    else:
                        a["words"] += 1
                        a[f"words_{w.lang}"] += 1
        a["sys_min"] += _speech_minutes(rec, "system")
        a["usr_min"] += _speech_minutes(rec, "user")
    out = {}
    for lang, a in sorted(acc.items()):
        out[lang] = {
            "user_backchannels_per_min": a["bc_user"] / a["sys_min"] if a["sys_min"] else 0.0,
            "system_backchannels_per_min": a["bc_system"] / a["usr_min"] if a["usr_min"] else 0.0,
            "fillers_per_100_words": 100.0 * a["fillers"] / a["words"] if a["words"] else 0.0,
            "fillers_per_100_en_words": 100.0 * a["fillers_en"] / a["words_en"] if a["words_en"] else 0.0,
            "fillers_per_100_zh_words": 100.0 * a["fillers_zh"] / a["words_zh"] if a["words_zh"] else 0.0,
            "words": float(a["words"]),
        }
    return out


def action_balance(records: list[SessionRecord]) -> dict[str, float]:
    """Share of frames per ``sys_action`` value over all sessions."""
    from ..schema.labels import SYS_ACTIONS

    counts = Counter()
    for rec in records:
        counts.update(rec.sys_action)
    total = sum(counts.values()) or 1
    return {name: counts.get(i, 0) / total for i, name in enumerate(SYS_ACTIONS)}


def hours_by_language(records: list[SessionRecord]) -> dict[str, float]:
    out: Counter = Counter()
    for rec in records:
        out[rec.language] += rec.duration_s / 3600.0
    return dict(sorted(out.items()))


def phenomenon_coverage(records: list[SessionRecord]) -> dict[str, dict[str, int]]:
    """``{family: {phenomenon: count}}`` over the whole registry (zeros included)."""
    from ..schema.phenomena import REGISTRY

    counts = Counter(h.id for rec in records for h in rec.phenomena)
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for pid, ph in REGISTRY.items():
        out[ph.family][pid] = counts.get(pid, 0)
    for pid, n in counts.items():  # ids from a newer registry still show up
        if pid not in REGISTRY:
            out["other"][pid] = n
    return dict(out)


def summary_stats(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"n": 0}
    a = np.asarray(xs, dtype=float)
    return {"n": int(a.size), "median": float(np.median(a)), "mean": float(a.mean()),
            "p10": float(np.percentile(a, 10)), "p90": float(np.percentile(a, 90)),
            "overlap_share": float((a < 0).mean()), "mode_50ms": modal_bin(a)}


def modal_bin(a: np.ndarray, width: float = 50.0) -> float:
    """Centre of the most populated ``width``-ms bin (the "modal gap" of the turn-taking papers)."""
    if not a.size:
        return float("nan")
    idx = np.floor(a / width).astype(int)
    values, counts = np.unique(idx, return_counts=True)
    return float((values[np.argmax(counts)] + 0.5) * width)


def against_people(times: dict[str, dict[str, list[float]]]) -> list[dict]:
    """Each published figure of ``HUMAN`` beside the measured value, per language."""
    rows = []
    for q, figures in HUMAN.items():
        for kind, value, label, cite in figures:
            for lang, d in times.items():
                a = np.asarray(d.get(q, []), dtype=float)
                if not a.size:
                    continue
                measured = {"line": modal_bin(a), "share": float((a < 0).mean()),
                            "band": float(np.median(a))}[kind]
                rows.append({"quantity": q, "language": lang, "figure": label, "published": value,
                             "measured": measured, "measured_as": {"line": "modal 50 ms bin", "share":
                                                                   "share below 0", "band": "median"}[kind],
                             "source": cite})
    return rows
