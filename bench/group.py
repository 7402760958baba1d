"""Benchmark: the group measures of issue 33 over N rendered group sessions.

    .venv/bin/python bench/group.py [--sessions 200] [--pipeline pipelines/group.yaml] [--keep]

Runs ``synth run`` (1 worker) and ``synth validate`` into a fresh folder, then reads every
written session back and prints:

- coverage: sessions per language, and per language how many sessions hold each group phenomenon;
- behaviour: system answers attached to speech addressed to someone else (must be 0), system
  speech that starts while people talk to each other (the assistant butting in), answers to a
  person who asked nothing, the share of user-side speech addressed to the assistant;
- ``person_vad`` against WebRTC's VAD on each person's clean stem: every session is rendered again
  from its record (``synth render``'s path, byte for byte the run's, checked) and the stems that
  ``label_session`` receives are compared frame by frame with ``qa.speech_frames`` (10 ms WebRTC
  windows at 16 kHz, aggressiveness 3, peak >= -40 dBFS). Frames that are neither voiced nor
  silent by that reference (a peak between -60 and -40 dBFS with no WebRTC speech: breath-quiet
  onsets and tails) are left out of the score, as LABELS §5 leaves them out of the VAD rule.

The stems are captured by wrapping ``synth.session.label_session`` in this process only: a
measurement hook, not a change to what is rendered (the re-rendered FLACs are compared with the
run's). Not a test: it takes minutes and its figures are this machine's.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def synth(*args) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "synth.cli", *map(str, args)], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - t, 1)


def behaviour(rec) -> collections.Counter:
    """Counts over one record's timeline (group sessions: events carry ``person``/``addressee``)."""
    c = collections.Counter()
    ev = sorted(rec.events, key=lambda e: (e.on_sample, e.id))
    by_id = {e.id: e for e in ev}
    human = [e for e in ev if e.speaker == "user" and e.person and e.off_sample > e.on_sample]
    sr = rec.sample_rate
    askers = set()
    for e in ev:
        if e.speaker == "user" and e.person and e.addressee:
            c["utterances"] += 1
            c[f"utterances_to_{'system' if e.addressee == 'system' else 'group' if e.addressee == 'group' else 'person'}"] += 1
            c["speech_s"] += (e.off_sample - e.on_sample) / sr
            if e.addressee == "system":
                c["speech_to_system_s"] += (e.off_sample - e.on_sample) / sr
                askers.add(e.person)
        if e.speaker != "system" or e.floor_intent != "take" or e.off_sample <= e.on_sample:
            continue
        c["system_turns"] += 1
        target = by_id.get(e.attach_to)
        if e.relation == "responds_to" and target is not None and target.speaker == "user":
            c["system_answers"] += 1
            if target.addressee not in (None, "system"):
                c["takes_on_others_speech"] += 1
        if e.addressee not in (None, "group", "system") and e.addressee not in askers:
            c["answers_to_non_askers"] += 1
        # butting in: the system starts while a person is saying something meant for another person
        if any(h.on_sample < e.on_sample < h.off_sample and h.addressee not in (None, "system") for h in human):
            c["system_starts_in_others_speech"] += 1
    return c


def vad_scores(out: Path, sessions) -> dict:
    """Per-frame agreement of ``person_vad`` with WebRTC on each person's clean stem, over all
    sessions (re-rendered from their records, checked byte for byte)."""
    import synth.session as session_mod
    from synth.rerender import rerender_from_run
    from synth.stages.qa import speech_frames

    captured: dict = {}
    real = session_mod.label_session

    def hook(timeline, frame_period_ms, sys_stem, usr_stem, *a, person_stems=None, **kw):
        if person_stems is None and len(a) >= 3:
            person_stems = a[2]
        captured.update(stems=dict(person_stems or {}), sr=timeline.sample_rate, period=frame_period_ms)
        return real(timeline, frame_period_ms, sys_stem, usr_stem, *a, **({"person_stems": person_stems} if len(a) < 3 else {}), **kw)

    session_mod.label_session = hook
    tp = fp = fn = scored = ignored = 0
    per_person: list[float] = []
    identical = 0
    tmp = Path(tempfile.mkdtemp(prefix="bench-group-rr-"))
    try:
        for s in sessions:
            captured.clear()
            same = rerender_from_run(out, s.record.session_id, tmp)
            identical += all(same.values())
            for p, stem in sorted(captured["stems"].items()):
                if np.issubdtype(stem.dtype, np.integer):  # stems as written (int16) since the leaner group mix
                    stem = stem.astype(np.float32) / 32768.0
                voiced, silent = speech_frames(stem, captured["sr"], captured["period"])
                hyp = np.zeros(len(voiced), bool)
                lab = np.asarray(s.record.person_vad[p], bool)[: len(hyp)]
                hyp[: len(lab)] = lab
                keep = voiced | silent
                ignored += int((~keep).sum())
                scored += int(keep.sum())
                a, b, c = int((hyp & voiced).sum()), int((hyp & silent).sum()), int((~hyp & voiced).sum())
                tp, fp, fn = tp + a, fp + b, fn + c
                if a + c:
                    per_person.append(2 * a / (2 * a + b + c))
    finally:
        session_mod.label_session = real
        shutil.rmtree(tmp, ignore_errors=True)
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return {"frames_scored": scored, "frames_left_out": ignored, "precision": round(tp / max(tp + fp, 1), 4),
            "recall": round(tp / max(tp + fn, 1), 4), "f1": round(f1, 4),
            "f1_worst_person_stem": round(min(per_person), 4) if per_person else None,
            "person_stems": len(per_person), "rerendered_identical": f"{identical}/{len(sessions)}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", type=Path, default=ROOT / "pipelines" / "group.yaml")
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--keep", action="store_true", help="keep the run folder")
    a = ap.parse_args()
    from synth.backends.cpu import describe
    from synth.inspection.runfolder import RunFolder
    from synth.schema.seed import GROUP_PHENOMENA

    base = Path(tempfile.mkdtemp(prefix="bench-group-"))
    out = base / "out"
    res: dict = {"cpu": describe(), "pipeline": str(a.pipeline.relative_to(ROOT) if a.pipeline.is_relative_to(ROOT) else a.pipeline)}
    res["run_s"] = synth("run", a.pipeline, "--out", out, "--workers", "1", "--sessions", a.sessions)
    stats = json.loads((out / "stats.json").read_text())
    res.update(sessions=stats["sessions"], rejects=stats["rejects"], rejects_by_reason=stats.get("rejects_by_reason"),
               audio_h=round(stats["audio_s"] / 3600, 2), peak_rss_mb=stats.get("peak_rss_mb"))
    res["validate_s"] = synth("validate", out)
    sessions = list(RunFolder(out).sessions(with_audio=False))
    langs = collections.Counter(s.record.language for s in sessions)
    cover = {lang: {p: 0 for p in sorted(GROUP_PHENOMENA)} for lang in sorted(langs)}
    total = collections.Counter()
    for s in sessions:
        for p in {h.id for h in s.record.phenomena} & set(GROUP_PHENOMENA):
            cover[s.record.language][p] += 1
        total += behaviour(s.record)
    res["sessions_per_language"] = dict(sorted(langs.items()))
    res["group_phenomena_sessions_per_language"] = cover
    res["behaviour"] = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in sorted(total.items())}
    res["share_of_user_speech_time_to_system"] = round(total["speech_to_system_s"] / max(total["speech_s"], 1e-9), 3)
    t = time.perf_counter()
    res["person_vad_vs_webrtc"] = vad_scores(out, sessions)
    res["person_vad_s"] = round(time.perf_counter() - t, 1)
    print(json.dumps(res, indent=1, ensure_ascii=False))
    if a.keep:
        print(f"kept {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
