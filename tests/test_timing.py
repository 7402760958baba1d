"""The timing contract on placed sessions (LABELS.md §3), not only on the laws.

600 sessions of ``pipelines/phenomena.yaml`` are planned (through the planner interface), given
their paralinguistic pass, "rendered" as tone bursts with word lengths of speech (the clock
only reads lengths, word times and energy), and placed. Each quantity is then measured on the
timeline, the way a user of the data would measure it, and compared with its law by the
Kolmogorov-Smirnov distance:

- **plain**: against the law as LABELS.md writes it;
- **as conditioned**: against the law conditioned on the interval the clock allowed for that
  draw (``Placed.draws``: a speaker never overlaps their own last sound, a backchannel needs
  700 ms of speech before it and 800 ms since the last one, an answer's early start stays in
  the user's last word, a user overlaps at most half of the system event, a tool finishes after
  the talk the plan puts before its result). The per-sample CDFs are pooled by the probability
  integral transform: if every value follows its conditioned law, ``F_i(x_i)`` is uniform.

Measured from the timeline:

| quantity | sample | law |
|---|---|---|
| system gap | system ``responds_to`` a user event (not an ack, ``gap_kind`` normal): ``on - target.off`` | Gamma(3, 100); answers with the 8 % early start −U(0, 200) |
| system gap after a barge-in | the same, when the user event ``interrupts`` the system | the same law, from the end of the interrupting turn |
| user gap | first user sound (a breath, a laugh or the words) answering a system event: ``on - target.off`` | Normal(200, 450) [−800, 2500] |
| stop latency | ``cut system off - interrupting user on`` | LogNormal(350, 0.4) [120, 1200] |
| within-turn / hesitation / long pause | ``continues`` by its planned ``pause_before`` | the three pause laws |
| backchannel onset | ``on`` minus the end of the word it was placed on | Normal(150, 200) [−400, 700] |
| backchannel spacing | per listener, ``on`` minus the end of their previous backchannel | >= 800 ms, a rule |
| tool latency | ``complete - open`` of every work item (R6) | LogNormal(3000, 0.8) [500, 60000] |

The plain distance of the tool latency is large by design (the plan puts talk before every
result; without the conditioning a result would come before it was asked about), so only its
conditioned distance is held to 0.1. Run with ``-s`` to see the table.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats

from synth.backends.planner import make_planner
from synth.backends.tts import Rendered, WordTime
from synth.inspection import measures
from synth.io.config_files import load_pipeline, load_seeds
from synth.rng import stream
from synth.stages.paraling import decorate
from synth.stages.place import place

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "phenomena.yaml"
SESSIONS = 600
SR = 16000
SOUND_MS = {"laughter": 800, "breath": 450, "sigh": 650, "cough": 350, "throat_clear": 400, "media": 5000}


def synthetic(ev, rng: np.random.Generator) -> Rendered:
    """Tone bursts with the lengths of speech: ~75 ms per English letter, ~210 ms per Chinese
    character, 40-90 ms between words and a longer break after a comma."""
    if ev.sound is not None:
        n = int(SOUND_MS[ev.sound] * rng.lognormal(0, 0.3) * SR / 1000)
        return Rendered(np.full(n, 0.1, np.float32), SR, (WordTime(ev.words[0].text, ev.words[0].lang, 0, n),))
    words, spans, t = [], [], 0
    for i, w in enumerate(ev.words):
        letters = sum(c.isalnum() for c in w.text)
        ms = 210 * max(1, letters) if w.lang == "zh" else min(700, 60 + 75 * max(1, letters))
        n = int(ms * rng.uniform(0.8, 1.2) * SR / 1000)
        if i == len(ev.words) - 1 and ev.prolong_ms:
            n += int(ev.prolong_ms * SR / 1000)
        words.append(WordTime(w.text, w.lang, t, t + n))
        spans.append((t, t + n))
        t += n + int((rng.uniform(40, 90) + (150 if w.text[-1] in ",，、" else 0)) * SR / 1000)
    audio = np.zeros(spans[-1][1], np.float32)
    for a, b in spans:
        audio[a:b] = 0.1
    return Rendered(audio, SR, tuple(words))


@pytest.fixture(scope="module")
def sessions():
    cfg = load_pipeline(PIPELINE)
    seeds = load_seeds(cfg, PIPELINE)
    planner = make_planner(cfg.planner)
    out, rule_breaks = [], []
    for i in range(SESSIONS):
        sid, seed = f"timing-{i:06d}", seeds[i % len(seeds)]
        plan = planner.plan(seed, sid, stream(cfg.seed, sid, "plan"))
        try:
            plan = decorate(plan, seed, cfg.paralinguistics, stream(cfg.seed, sid, "paraling"))
        except ValidationError as e:  # the paralinguistic pass broke a plan rule (reported, counted)
            rule_breaks.append(f"{sid}: {e.errors()[0]['msg']}")
            continue
        rendered = {e.id: synthetic(e, stream(0, "synthetic", sid, e.id)) for e in plan.events}
        placed = place(plan, rendered, cfg.timing, SR, lambda name: stream(cfg.seed, sid, "place", name))
        out.append((plan, rendered, placed))
    return cfg.timing, out, rule_breaks


def ms(samples: int) -> float:
    return samples * 1000.0 / SR


def quantities(plan, rendered, placed) -> dict[str, list[tuple]]:
    """``{quantity: [(value_ms, law_key, lo_ms, hi_ms), ...]}`` measured on one timeline; the
    interval comes from the clock's draw of that event (the plain law when there is none)."""
    tl = placed.timeline
    draws = {d.event_id: d for d in getattr(placed, "draws", [])}
    by = {e.id: e for e in tl.events}
    planned = {e.id: e for e in plan.events}
    out: dict[str, list[tuple]] = {q: [] for q in QUANTITIES}

    def add(q, value, law, key):
        d = draws.get(key)
        lo, hi = (d.lo_ms, d.hi_ms) if d is not None else (-math.inf, math.inf)
        out[q].append((value, law, lo, hi, d))

    answers: dict[str, list] = {}
    for e in tl.events:
        p, t = planned[e.id], by.get(e.attach_to or "")
        if t is None:
            continue
        if e.relation == "responds_to" and e.speaker == "system" and t.speaker == "user" \
                and p.act != "acknowledge" and p.gap_kind == "normal":
            q = "system_gap_after_barge_in" if t.relation == "interrupts" else "system_gap"
            add(q, ms(e.on_sample - t.off_sample), "answer" if p.act == "answer" else "system_gap_ms", e.id)
        elif e.relation == "responds_to" and e.speaker == "user" and t.speaker == "system":
            answers.setdefault(t.id, []).append((e, p))
        elif e.relation == "continues":
            q = {"long": "long_pause", "hesitation": "hesitation_pause"}.get(p.pause_before or "", "within_turn_pause")
            add(q, ms(e.on_sample - t.off_sample), LAW[q], e.id)
        elif e.relation == "interrupts" and t.completion == "interrupted":
            out["stop_latency"].append((ms(t.off_sample - e.on_sample), "stop_latency_ms", -math.inf, math.inf, None))
        elif e.relation == "backchannels_on":
            d = draws.get(e.id)
            anchor = d.anchor if d is not None else t.on_sample + rendered[t.id].words[
                min(p.attach_word or 0, len(rendered[t.id].words) - 1)].off
            add("backchannel_onset", ms(e.on_sample - anchor), "backchannel_onset_ms", e.id)
    for tid, group in answers.items():
        if all(p.gap_kind == "normal" for _, p in group):
            first = min((e for e, _ in group), key=lambda e: e.on_sample)
            end = by[tid].off_sample
            d = draws.get(first.id)
            if d is not None and d.anchor != end:  # an answer to a run of deliveries follows the last one
                assert d.anchor in {e.off_sample for e in tl.events if e.speaker == "system"}
                end = d.anchor
            add("user_gap", ms(first.on_sample - end), "user_gap_ms", first.id)
    for w in tl.work:
        add("tool_latency", ms(w.complete_sample - w.open_sample), "tool_latency_ms", w.work_id)
    return out


QUANTITIES = ("system_gap", "system_gap_after_barge_in", "user_gap", "stop_latency", "within_turn_pause",
              "hesitation_pause", "long_pause", "backchannel_onset", "tool_latency")
LAW = {"within_turn_pause": "within_turn_pause_ms", "hesitation_pause": "hesitation_pause_ms",
       "long_pause": "long_pause_ms"}
PLAIN_HELD = set(QUANTITIES) - {"tool_latency"}


def law_cdf(laws, law: str, x, lo=-math.inf, hi=math.inf) -> np.ndarray:
    """CDF at ``x`` of a law of ``TimingLaws`` (``answer``: the gap with the early-start share),
    conditioned on ``[lo, hi]``; arrays, one interval per value."""
    if law != "answer":
        return measures.cdf(getattr(laws, law), x, lo, hi)
    p = laws.system_early_start_prob

    def mix(v):
        v = np.asarray(v, dtype=float)
        return (1 - p) * measures.cdf(laws.system_gap_ms, v) + p * (1 - measures.cdf(laws.system_early_start_ms, -v))
    a, b = mix(lo), mix(hi)
    return np.clip((mix(x) - a) / np.maximum(b - a, 1e-300), 0.0, 1.0)


def ks(laws, rows, conditioned: bool) -> float:
    """KS distance of the pooled probability integral transform from the uniform law."""
    u = []
    for law in {r[1] for r in rows}:
        part = [r for r in rows if r[1] == law]
        x = np.array([r[0] for r in part])
        if conditioned:
            u += list(law_cdf(laws, law, x, np.array([r[2] for r in part]), np.array([r[3] for r in part])))
        else:
            u += list(law_cdf(laws, law, x))
    return float(stats.kstest(u, "uniform").statistic)


@pytest.fixture(scope="module")
def measured(sessions):
    laws, placed, _ = sessions
    acc: dict[str, list] = {q: [] for q in QUANTITIES}
    for plan, rendered, p in placed:
        for q, rows in quantities(plan, rendered, p).items():
            acc[q] += rows
    print(f"\n{'quantity':28s} {'n':>5s} {'KS plain':>9s} {'KS cond.':>9s} {'median':>8s} {'p90':>8s}")
    for q, rows in acc.items():
        x = np.array([r[0] for r in rows])
        print(f"{q:28s} {len(rows):5d} {ks(laws, rows, False):9.3f} {ks(laws, rows, True):9.3f} "
              f"{np.median(x):8.1f} {np.percentile(x, 90):8.1f}")
    return laws, acc


def test_plans_are_placed_without_rejects(sessions):
    laws, placed, rule_breaks = sessions
    assert laws.zh_gap_offset_ms == 0  # the laws below are compared without the per-language offset
    assert len(placed) + len(rule_breaks) == SESSIONS
    assert len(rule_breaks) <= SESSIONS // 100, rule_breaks  # see the report: paraling's filler split
    assert all(p.timeline.events for _, _, p in placed)


@pytest.mark.parametrize("quantity", QUANTITIES)
def test_quantity_follows_its_law(measured, quantity):
    laws, acc = measured
    rows = acc[quantity]
    assert len(rows) >= 150, f"{quantity}: only {len(rows)} samples"
    for value, _, lo, hi, d in rows:  # the timeline says what the clock drew, inside its interval
        if d is not None and quantity != "stop_latency":
            assert abs(value - d.value_ms) <= 1000 / SR + 1e-6, (quantity, d)
            assert lo - 1e-6 <= value <= hi + 1000 / SR, (quantity, d)
    bound = ks_bound(len(rows))
    assert ks(laws, rows, conditioned=True) <= bound
    if quantity in PLAIN_HELD:
        assert ks(laws, rows, conditioned=False) <= bound


def ks_bound(n: int) -> float:
    """KS distance 0.1, or, for a sample too small for that to be decided, the distance that
    draws from the law itself exceed only once in 1,000 samples of size ``n``. At n = 185 (the
    long pauses of 600 sessions) the 0.1 bound alone is the 5 % critical value: a sample drawn
    exactly from the law failed it one time in twenty (0.102 seen; 0.028 over 746 pauses)."""
    return max(0.1, float(stats.kstwo.ppf(0.999, n)))


def test_barge_in_reply_starts_after_the_spoken_end(sessions):
    """The reply after a yield: from the end of the interrupting turn, after the cut system end."""
    _, placed, _ = sessions
    gaps = []
    for _, _, p in placed:
        by = {e.id: e for e in p.timeline.events}
        for e in p.timeline.events:
            t = by.get(e.attach_to or "")
            if e.speaker == "system" and e.relation == "responds_to" and t is not None and t.relation == "interrupts":
                cut = by[t.attach_to]
                assert cut.completion == "interrupted"
                assert e.on_sample >= cut.off_sample + 50 * SR // 1000
                gaps.append(ms(e.on_sample - t.off_sample))
    assert len(gaps) >= 150 and np.percentile(gaps, 90) < 800


def test_backchannel_rules_hold(sessions):
    """>= 700 ms of the speaker's speech before it, >= 800 ms since the listener's last one."""
    _, placed, _ = sessions
    n = 0
    for _, _, p in placed:
        by = {e.id: e for e in p.timeline.events}
        last: dict[str, int] = {}
        for e in sorted(p.timeline.events, key=lambda e: e.on_sample):
            if e.relation != "backchannels_on":
                continue
            n += 1
            if e.speaker in last:
                assert e.on_sample - last[e.speaker] >= 800 * SR // 1000
            last[e.speaker] = e.off_sample
            turn, t = 0, by[e.attach_to]
            speech = max(0, min(e.on_sample, t.off_sample) - t.on_sample)
            while t.relation == "continues" and t.attach_to in by:
                t = by[t.attach_to]
                speech += t.off_sample - t.on_sample
            assert speech >= 700 * SR // 1000 - 1, e.id
            turn += 1
    assert n >= 150


def test_report_sets_the_published_human_figures_beside_the_measured_ones():
    """``synth report``: modal gap (Stivers et al. 2009) and overlap share (Heldner & Edlund 2010)."""
    from synth.inspection.report import timing_figure

    times = {"en": {"user_gap": [-100.0, 180.0, 190.0, 210.0, 900.0], "system_gap": [220.0, 230.0, 600.0]}}
    rows = {(r["quantity"], r["source"]): r for r in measures.against_people(times)}
    assert rows[("user_gap", "stivers2009")]["published"] == 200.0
    assert rows[("user_gap", "stivers2009")]["measured"] == 175.0  # the modal 50 ms bin
    assert rows[("user_gap", "heldner2010")]["measured"] == pytest.approx(0.2)
    assert all(k in measures.CITATIONS for _, k in rows)
    assert "Stivers" in measures.CITATIONS["stivers2009"] and "Heldner" in measures.CITATIONS["heldner2010"]
    png = timing_figure("user_gap", times["en"] and {"en": times["en"]["user_gap"]},
                        measures.laws_from_config({}))
    assert png[:4] == b"\x89PNG"
