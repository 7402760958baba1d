"""Addressee statistics of group sessions (README "Group conversations"), for ``synth report``.

Read from the written records alone: the placed events' ``person`` and ``addressee``, the
``person_vad`` channel (each person's voice activity from their own clean stem) and the
phenomenon hits. Per language:

- how the user side's speech splits by addressee class (``system``, ``group``, ``person``): share
  of utterances and share of speech time (an event's trimmed rendered extent);
- the system's takes on speech addressed to someone else, two ways: answers to such a line (the
  QA rule, ``qa.addressee_faults``: must be 0) and system turn onsets that fall inside such a
  line (the system starting to talk while a person talks to another);
- each person's speech time and the time two or more people speak at once (``person_vad``);
- coverage of the six group phenomena (zeros included).

Dyadic records (no addressee anywhere) are left out; a run without group sessions has no
group section at all.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from ..schema.record import SessionRecord
from ..schema.seed import GROUP_PHENOMENA
from ..stages.qa import addressee_faults

CLASSES = ("system", "group", "person")
"""Addressee classes of the user side's speech: the assistant, everyone, one named person."""


def is_group_record(rec: SessionRecord) -> bool:
    return rec.person_vad is not None or any(e.addressee for e in rec.events)


def addressee_class(addressee: str) -> str:
    return addressee if addressee in ("system", "group") else "person"


def group_statistics(records: list[SessionRecord]) -> dict[str, dict]:
    """``{language: figures}`` over the group sessions of ``records``; ``{}`` when there are none."""
    by_lang: dict[str, list[SessionRecord]] = defaultdict(list)
    for rec in records:
        if is_group_record(rec):
            by_lang[rec.language].append(rec)
    return {lang: _language_figures(recs) for lang, recs in sorted(by_lang.items())}


def _language_figures(recs: list[SessionRecord]) -> dict:
    n_utt: Counter = Counter()
    samples: Counter = Counter()
    faults: Counter = Counter()
    onsets_inside = 0
    person_s: Counter = Counter()
    overlap_s = speech_s = 0.0
    hits = Counter(h.id for rec in recs for h in rec.phenomena if h.id in GROUP_PHENOMENA)
    for rec in recs:
        sr = rec.sample_rate
        for e in rec.events:
            if e.speaker == "user" and e.addressee:
                c = addressee_class(e.addressee)
                n_utt[c] += 1
                samples[c] += (e.off_sample - e.on_sample) / sr
        heard = sorted(rec.events, key=lambda e: e.on_sample)
        faults.update(f.split(":")[0] for f in addressee_faults(heard))
        onsets_inside += len(take_onsets_inside_other_speech(rec))
        p_s, o_s, any_s = person_times(rec)
        person_s.update(p_s)
        overlap_s += o_s
        speech_s += any_s
    total_utt, total_s = sum(n_utt.values()), sum(samples.values())
    return {
        "sessions": len(recs),
        "utterances": {c: n_utt[c] for c in CLASSES},
        "utterance_share": {c: round(n_utt[c] / total_utt, 4) if total_utt else 0.0 for c in CLASSES},
        "speech_s": {c: round(samples[c], 2) for c in CLASSES},
        "speech_time_share": {c: round(samples[c] / total_s, 4) if total_s else 0.0 for c in CLASSES},
        "system_takes_on_other_addressed": faults["system_takes_speech_for_others"],
        "system_answers_who_did_not_ask": faults["system_answers_who_did_not_ask"],
        "system_onsets_inside_other_addressed_speech": onsets_inside,
        "person_speech_s": {p: round(s, 2) for p, s in sorted(person_s.items())},
        "people_overlap_s": round(overlap_s, 2),
        "people_overlap_share": round(overlap_s / speech_s, 4) if speech_s else 0.0,
        "phenomena": {pid: hits.get(pid, 0) for pid in GROUP_PHENOMENA},
    }


def take_onsets_inside_other_speech(rec: SessionRecord) -> list[str]:
    """Ids of system events that take the floor while a person is speaking to someone else
    (the onset strictly inside that person's line)."""
    others = [(e.on_sample, e.off_sample) for e in rec.events
              if e.speaker == "user" and e.addressee not in (None, "system")]
    return [e.id for e in rec.events if e.speaker == "system" and e.floor_intent == "take"
            and any(on < e.on_sample < off for on, off in others)]


def person_times(rec: SessionRecord) -> tuple[dict[str, float], float, float]:
    """``(seconds per person, seconds with two or more people speaking, seconds with anyone
    speaking)`` from the record's ``person_vad`` frames; nothing for a record without them."""
    if not rec.person_vad:
        return {}, 0.0, 0.0
    period = rec.frame_period_s
    active = np.array([rec.person_vad[p] for p in sorted(rec.person_vad)], dtype=np.int8)
    per = {p: float(row.sum()) * period for p, row in zip(sorted(rec.person_vad), active)}
    count = active.sum(axis=0)
    return per, float((count >= 2).sum()) * period, float((count >= 1).sum()) * period
