"""Exports for the tools people already use: Praat TextGrid, RTTM + CTM, Audacity label tracks.

Every file sits beside the session's audio, named by session id, times in seconds from the
start of the session (``samples / sample_rate``, written with Python's shortest round-trip
``repr`` so nothing is lost to rounding):

- ``textgrid``: ``<session>.wav`` (stereo, ch0 user side, ch1 system) and ``<session>.TextGrid``
  (long text format, UTF-8) with tiers ``<speaker> words`` and ``<speaker> events`` (label
  ``act: text [phenomena]``) for every speaker heard, ``sys_action``, ``sys_floor``,
  ``usr_floor`` (runs of equal frame values; listen / NOT_HOLD are left as empty intervals),
  ``work`` (delegated jobs from open to backend completion) and a ``markers`` point tier
  (``type ref`` at the marker's frame start; markers of one frame share a point, ``; ``-joined).
  An interval tier cannot hold overlapping intervals, so overlapping spans of one tier go to
  ``<tier> 2``, ``<tier> 3``... (e.g. a user laugh inside a user turn).
- ``rttm``: what NeMo's speech data simulator writes (``nemo.collections.asr.parts.utils``:
  ``labels_to_rttmfile``, ``create_new_ctm_entry``): ``<session>.wav`` (mono mix of both
  channels, the diarization input), ``<session>.rttm`` with one
  ``SPEAKER <session> 1 start dur <NA> <NA> <speaker> <NA> <NA>`` line per audible event,
  ``<session>.ctm`` in the RT-09 8-field form ``<session> 1 start dur word NA lex <speaker>`` per
  spoken word (sound tags typed ``non-lex``; NeMo's CTM reader takes the speaker from field 8),
  and ``manifest.json``, NeMo's diarization manifest (one JSON line per session).
- ``audacity``: ``<session>.wav`` (stereo) and one label file per track,
  ``<session>.<track>.txt``, each line ``start<TAB>end<TAB>label`` (File > Import > Labels;
  markers are point labels, start = end).

Speakers heard are ``user``, ``system``, ``third_party`` and ``background`` (``backend`` is text).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..schema.labels import FLOORS, SYS_ACTIONS
from ..schema.plan import people_of, talker
from .common import is_sound_tag, kept_word, write_json, write_wav

AUDIBLE = ("user", "system", "third_party", "background")


@dataclass(frozen=True)
class Span:
    """A labelled stretch ``[start, end)`` in samples; a point when ``start == end``."""

    start: int
    end: int
    label: str


def _t(samples: int, sr: int) -> str:
    return repr(samples / sr)


def _clean(text: str) -> str:
    return " ".join(text.split())


def event_label(ev) -> str:
    tags = f" [{', '.join(ev.phenomena)}]" if ev.phenomena else ""
    return _clean(f"{ev.act}: {ev.text}{tags}")


def speakers_heard(rec) -> list[str]:
    """The talkers heard, in lane order: the user (in a group, each person, in order of first
    speech), the third party, background, the system."""
    heard = [ev for ev in rec.events if ev.off_sample > ev.on_sample]
    people = people_of(heard)
    present = {talker(ev) for ev in heard}
    out = []
    for s in AUDIBLE:
        out += people if s == "user" and people else [s] if s in present else []
    return out


def frame_runs(values: list[int], names: tuple[str, ...], period: int, n: int, skip: int = 0) -> list[Span]:
    """Runs of equal frame values as spans (frame k covers ``[k*period, (k+1)*period)``, clipped to n)."""
    out, k = [], 0
    while k < len(values):
        j = k
        while j + 1 < len(values) and values[j + 1] == values[k]:
            j += 1
        if values[k] != skip:
            out.append(Span(k * period, min((j + 1) * period, n), names[values[k]]))
        k = j + 1
    return [s for s in out if s.end > s.start]


def marker_points(rec, period: int) -> list[Span]:
    """One point per frame holding markers, labels ``type ref`` joined by ``; `` in record order."""
    by_frame: dict[int, list[str]] = {}
    for m in rec.markers:
        by_frame.setdefault(m.frame, []).append(f"{m.type} {m.ref}")
    return [Span(f * period, f * period, "; ".join(v)) for f, v in sorted(by_frame.items())
            if f * period <= rec.num_samples]


def tracks(rec) -> dict[str, list[Span]]:
    """Every named track of a session: words and events per speaker, frame channels, work, markers."""
    period = round(rec.frame_period_s * rec.sample_rate)
    out: dict[str, list[Span]] = {}
    for spk in speakers_heard(rec):
        evs = sorted((e for e in rec.events if talker(e) == spk and e.off_sample > e.on_sample),
                     key=lambda e: (e.on_sample, e.off_sample))
        out[f"{spk} words"] = sorted((Span(w.on_sample, w.off_sample, _clean(w.word)) for e in evs for w in e.words
                                      if w.off_sample > w.on_sample), key=lambda s: (s.start, s.end))
        out[f"{spk} events"] = [Span(e.on_sample, e.off_sample, event_label(e)) for e in evs]
    n = rec.num_samples
    out["sys_action"] = frame_runs(rec.sys_action, SYS_ACTIONS, period, n)
    out["sys_floor"] = frame_runs(rec.sys_floor, FLOORS, period, n)
    out["usr_floor"] = frame_runs(rec.usr_floor, FLOORS, period, n)
    if rec.addressed is not None:  # group sessions: speech addressed to the system
        out["addressed"] = frame_runs(rec.addressed, ("", "to system"), period, n)
    out["work"] = sorted((Span(w.open_sample, min(w.complete_sample, n),
                               f"{w.tool} {w.outcome}{' stale' if w.stale else ''}: {_clean(w.objective)}")
                          for w in rec.delegations if min(w.complete_sample, n) > w.open_sample),
                         key=lambda s: (s.start, s.end))
    out["markers"] = marker_points(rec, period)
    return out


def lanes(spans: list[Span]) -> list[list[Span]]:
    """Spans (sorted by start) packed first-fit into lanes whose spans do not overlap."""
    out: list[list[Span]] = []
    for s in spans:
        for lane in out:
            if lane[-1].end <= s.start:
                lane.append(s)
                break
        else:
            out.append([s])
    return out or [[]]


# --- Praat TextGrid ---------------------------------------------------------------------------
# Written by hand: the long text format is a few lines per interval and needs no dependency;
# the tests read it back with praatio, an independent reader.

def _q(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _interval_tier(name: str, spans: list[Span], sr: int, n: int) -> list[str]:
    cells, at = [], 0
    for s in spans:
        if s.start > at:
            cells.append((at, s.start, ""))
        cells.append((s.start, s.end, s.label))
        at = s.end
    if at < n or not cells:
        cells.append((at, n, ""))
    lines = ['        class = "IntervalTier"', f"        name = {_q(name)}", "        xmin = 0",
             f"        xmax = {_t(n, sr)}", f"        intervals: size = {len(cells)}"]
    for i, (a, b, label) in enumerate(cells, 1):
        lines += [f"        intervals [{i}]:", f"            xmin = {_t(a, sr)}", f"            xmax = {_t(b, sr)}",
                  f"            text = {_q(label)}"]
    return lines


def _point_tier(name: str, points: list[Span], sr: int, n: int) -> list[str]:
    lines = ['        class = "TextTier"', f"        name = {_q(name)}", "        xmin = 0",
             f"        xmax = {_t(n, sr)}", f"        points: size = {len(points)}"]
    for i, p in enumerate(points, 1):
        lines += [f"        points [{i}]:", f"            number = {_t(p.start, sr)}", f"            mark = {_q(p.label)}"]
    return lines


def textgrid(rec) -> str:
    """The session's TextGrid (long text format) as a string."""
    sr, n = rec.sample_rate, rec.num_samples
    tiers = []
    for name, spans in tracks(rec).items():
        if name == "markers":
            tiers.append(_point_tier(name, spans, sr, n))
            continue
        for i, lane in enumerate(lanes(spans), 1):
            tiers.append(_interval_tier(name if i == 1 else f"{name} {i}", lane, sr, n))
    head = ['File type = "ooTextFile"', 'Object class = "TextGrid"', "", "xmin = 0", f"xmax = {_t(n, sr)}",
            "tiers? <exists>", f"size = {len(tiers)}", "item []:"]
    for i, tier in enumerate(tiers, 1):
        head += [f"    item [{i}]:", *tier]
    return "\n".join(head) + "\n"


# --- RTTM + CTM (NeMo speech data simulator) ---------------------------------------------------

def rttm(rec) -> str:
    sid, sr = rec.session_id, rec.sample_rate
    evs = sorted((e for e in rec.events if e.speaker in AUDIBLE and e.off_sample > e.on_sample),
                 key=lambda e: (e.on_sample, e.off_sample))
    return "".join(f"SPEAKER {sid} 1   {e.on_sample / sr:.3f}   {(e.off_sample - e.on_sample) / sr:.3f} "
                   f"<NA> <NA> {talker(e)} <NA> <NA>\n" for e in evs)


def ctm(rec, sound_tags: str = "keep") -> str:
    """RT-09 8-field CTM, ``<session> 1 start dur token NA type speaker``: ``type`` is ``lex`` for a
    word and ``non-lex`` for a sound tag (``[laughter]``; dropped with ``sound_tags="drop"``).
    NeMo's CTM reader takes the speaker from the 8th field."""
    sid, sr = rec.session_id, rec.sample_rate
    words = sorted((w.on_sample, w.off_sample, talker(e), w.word) for e in rec.events if e.speaker in AUDIBLE
                   for w in e.words if kept_word(w, sound_tags))
    return "".join(f"{sid} 1 {round(a / sr, 3)} {round((b - a) / sr, 3)} {'_'.join(word.split())} NA "
                   f"{'non-lex' if is_sound_tag(word) else 'lex'} {spk}\n" for a, b, spk, word in words)


# --- Audacity ----------------------------------------------------------------------------------

def audacity_tracks(rec) -> dict[str, str]:
    """``{file suffix: label text}``: one Audacity label track per named track."""
    sr = rec.sample_rate
    return {name.replace(" ", "-"): "".join(f"{s.start / sr:.6f}\t{s.end / sr:.6f}\t{s.label}\n" for s in spans)
            for name, spans in tracks(rec).items()}


# --- the exporters -----------------------------------------------------------------------------

def _stereo(session) -> tuple[np.ndarray, int]:
    user, sr = session.decode("user")
    system, _ = session.decode("system")
    return np.stack([user, system], axis=1), sr


def _meta(fmt: str, run, count: int, **extra) -> dict:
    return {"format": fmt, "channels": ["user", "system"], "sessions": count, **extra, "source": str(run.path)}


def export_textgrid(run, out: Path, **_) -> dict:
    from ..io.files import write_text_atomic

    count = 0
    for s in run.sessions():
        audio, sr = _stereo(s)
        write_wav(out / f"{s.record.session_id}.wav", audio, sr)
        write_text_atomic(out / f"{s.record.session_id}.TextGrid", textgrid(s.record))
        count += 1
    meta = _meta("textgrid", run, count, note="WAV ch0 = user side, ch1 = system")
    write_json(out / "export.json", meta)
    return meta


def export_rttm(run, out: Path, sound_tags: str = "keep", **_) -> dict:
    from ..io.files import write_text_atomic

    lines = []
    for s in run.sessions():
        rec = s.record
        audio, sr = _stereo(s)
        wav, rttm_path, ctm_path = (out / f"{rec.session_id}.{x}" for x in ("wav", "rttm", "ctm"))
        write_wav(wav, np.clip(audio.sum(axis=1), -1.0, 1.0), sr)
        write_text_atomic(rttm_path, rttm(rec))
        write_text_atomic(ctm_path, ctm(rec, sound_tags))
        lines.append(json.dumps({"audio_filepath": str(wav.resolve()), "offset": 0, "duration": rec.num_samples / sr,
                                 "label": "infer", "text": "-", "num_speakers": len(speakers_heard(rec)),
                                 "rttm_filepath": str(rttm_path.resolve()), "uem_filepath": None,
                                 "ctm_filepath": str(ctm_path.resolve())}, ensure_ascii=False))
    write_text_atomic(out / "manifest.json", "\n".join(lines) + ("\n" if lines else ""))
    meta = _meta("rttm", run, len(lines), note="WAV is the mono mix of ch0 (user side) and ch1 (system)")
    write_json(out / "export.json", meta)
    return meta


def export_audacity(run, out: Path, **_) -> dict:
    from ..io.files import write_text_atomic

    count = 0
    for s in run.sessions():
        sid = s.record.session_id
        audio, sr = _stereo(s)
        write_wav(out / f"{sid}.wav", audio, sr)
        for suffix, text in audacity_tracks(s.record).items():
            write_text_atomic(out / f"{sid}.{suffix}.txt", text)
        count += 1
    meta = _meta("audacity", run, count, note="WAV ch0 = user side, ch1 = system; one label file per track")
    write_json(out / "export.json", meta)
    return meta
