"""Full-Duplex-Bench style export: one folder per test sample, grouped by task.

What we read (Full-Duplex-Bench v1 dataset README and evaluation scripts): every sample is a
folder ``{task}/{ID}/`` holding ``input.wav`` (the user stream fed to the model under test), a task
annotation ``{TASK}.json`` and ``transcription.json``; the model's answer is written as
``output.wav`` beside them and transcribed to ``output.json`` (``{"text", "chunks": [{"text",
"timestamp": [s, e]}]}``). The scripts read ``turn_taking.json[0]["timestamp"][0]`` as the end of
the user turn (we write ``[user turn end, reference answer end]`` and the answer's
``response_start``, which is earlier than the end for a latched start), ``interrupt.json[0]`` as ``{"timestamp": [s, e], "context", "interrupt"}`` (plus
``context.wav`` and ``interrupt.wav`` for the synthetic interruption set), and ``pause.json`` as a
list of ``{"timestamp": [s, e]}`` pauses. v1.5 adds overlap handling (user backchannel, user talks
to someone else, background speech, interruption) with per-sample overlap metadata.

We write the same folders from our sessions, with our system channel as a *reference*
``output.wav`` and ``reference_output.json`` (its words in the ``output.json`` format), so a
model's output can be compared against it. Times are seconds from the start of the clip.

    v1/smooth_turn_taking/{ID}/   input.wav output.wav turn_taking.json transcription.json
    v1/pause_handling/{ID}/       input.wav output.wav pause.json transcription.json
    v1/backchannel/{ID}/          input.wav output.wav backchannel.json transcription.json
    v1/user_interruption/{ID}/    input.wav output.wav context.wav interrupt.wav interrupt.json
    v1.5/{user_backchannel,talking_to_other,background_speech,user_interruption}/{ID}/
                                  input.wav output.wav metadata.json transcription.json

``ID`` is ``<session>-<event>``. For turn taking and pauses the reference answer (``output.wav``,
``reference_output.json``) holds only system speech from the answer (or the pause) on. A clip runs from ``PRE_S`` before the first event of the case to
``POST_S`` after its last, so the reference answer is inside it. The v1.5 metadata layout is
our reading of the released description, not a copy of its files.
"""

from __future__ import annotations

from pathlib import Path

from ..stages.label import turns_of
from .common import seconds, words_of, write_json, write_wav

PRE_S, POST_S = 1.0, 4.0
PAUSE_TAGS = {"phrase_boundary_pause", "long_thinking_pause", "trailing_conjunction", "list_dictation",
              "complete_sounding_pause", "filled_pause"}
SIDE_TAGS = {"user_to_third_party", "third_party_to_user", "user_self_talk"}


class _Clip:
    """A window ``[a, b)`` (samples) of one session and the writers for its folder."""

    def __init__(self, session, user, system, a: int, b: int, ref_from: int = 0):
        rec = session.record
        self.rec, self.sr = rec, rec.sample_rate
        self.a, self.b = max(0, a), min(rec.num_samples, b)
        self.user, self.system = user, system
        self.ref_from = max(self.a, ref_from)

    def t(self, sample: int) -> float:
        return seconds(max(0, min(sample, self.b) - self.a), self.sr)

    def chunks(self, speakers, start: int | None = None) -> dict:
        ws = [w for w in words_of(self.rec, speakers) if (start or self.a) <= w[1] < self.b]
        from ..schema.plan import PlannedWord, join_words

        return {"text": join_words([PlannedWord(text=w[0], lang=w[5]) for w in ws]),
                "chunks": [{"text": w[0], "timestamp": [self.t(w[1]), self.t(w[2])]} for w in ws]}

    def write(self, folder: Path, task_json: str | None, annotation) -> None:
        write_wav(folder / "input.wav", self.user[self.a:self.b], self.sr)
        ref = self.system[self.a:self.b].copy()
        ref[: self.ref_from - self.a] = 0.0  # the reference answer starts at the case, not before it
        write_wav(folder / "output.wav", ref, self.sr)
        write_json(folder / "transcription.json", self.chunks(("user", "third_party", "background")))
        write_json(folder / "reference_output.json", self.chunks(("system",), self.ref_from))
        if task_json:
            write_json(folder / task_json, annotation)


def _window(sr: int, on: int, off: int) -> tuple[int, int]:
    return on - int(PRE_S * sr), off + int(POST_S * sr)


def session_cases(session) -> list[tuple[str, str, dict]]:
    """``(version/task, event_id, case)`` for every benchmark case found in one session."""
    rec = session.record
    by_id = {e.id: e for e in rec.events}
    user_turns = turns_of(session.timeline, "user")
    sys_offs = sorted(e.off_sample for e in rec.events if e.speaker == "system")

    def after_system(on: int) -> int:
        """The end of the last system speech before ``on`` (the clip starts no earlier)."""
        before = [o for o in sys_offs if o <= on]
        return before[-1] if before else 0

    cases = []
    for ev in rec.events:
        tgt = by_id.get(ev.attach_to or "")
        if ev.speaker == "system" and ev.relation == "responds_to" and tgt is not None and tgt.speaker == "user":
            turn = next((t for t in user_turns if tgt in t.events), None)
            if turn is not None and turn.events[-1].id == tgt.id:
                cases.append(("v1/smooth_turn_taking", ev.id, {"span": (turn.on, ev.off_sample),
                              "not_before": after_system(turn.on), "ref_from": ev.on_sample,
                              "ann": (turn.off, ev.on_sample, ev.off_sample)}))
        if ev.speaker == "user" and ev.relation == "continues" and tgt is not None and PAUSE_TAGS & set(ev.phenomena):
            cases.append(("v1/pause_handling", ev.id, {"span": (tgt.on_sample, ev.off_sample),
                          "not_before": after_system(tgt.on_sample), "ref_from": tgt.off_sample,
                          "pause": (tgt.off_sample, ev.on_sample)}))
        if ev.relation == "backchannels_on" and tgt is not None:
            task = "v1/backchannel" if ev.speaker == "system" else "v1.5/user_backchannel"
            cases.append((task, ev.id, {"span": (tgt.on_sample, tgt.off_sample), "overlap": (ev.on_sample, ev.off_sample),
                                        "text": ev.text}))
        if ev.relation == "interrupts" and tgt is not None and tgt.speaker == "system":
            ctx = by_id.get(tgt.attach_to or "")
            c = {"span": ((ctx or tgt).on_sample, ev.off_sample), "overlap": (ev.on_sample, ev.off_sample),
                 "context_span": ((ctx or tgt).on_sample, (ctx or tgt).off_sample),
                 "context": ctx.text if ctx is not None else "", "text": ev.text}
            cases.append(("v1/user_interruption", ev.id, c))
            cases.append(("v1.5/user_interruption", ev.id, c))
        if ev.speaker in ("user", "third_party") and SIDE_TAGS & set(ev.phenomena):
            cases.append(("v1.5/talking_to_other", ev.id, {"span": (ev.on_sample, ev.off_sample),
                          "overlap": (ev.on_sample, ev.off_sample), "text": ev.text}))
        if ev.speaker == "background":
            cases.append(("v1.5/background_speech", ev.id, {"span": (ev.on_sample, ev.off_sample),
                          "overlap": (ev.on_sample, ev.off_sample), "text": ev.text}))
    return cases


def _write_case(task: str, folder: Path, clip: _Clip, c: dict) -> None:
    if task == "v1/smooth_turn_taking":
        end, start, answer_end = c["ann"]
        clip.write(folder, "turn_taking.json", [{"timestamp": [clip.t(end), clip.t(answer_end)],
                                                 "response_start": clip.t(start)}])
    elif task == "v1/pause_handling":
        clip.write(folder, "pause.json", [{"timestamp": [clip.t(c["pause"][0]), clip.t(c["pause"][1])]}])
    elif task == "v1/backchannel":
        clip.write(folder, "backchannel.json", [{"timestamp": [clip.t(c["overlap"][0]), clip.t(c["overlap"][1])],
                                                 "text": c["text"]}])
    elif task == "v1/user_interruption":
        on, off = c["overlap"]
        clip.write(folder, "interrupt.json", [{"timestamp": [clip.t(on), clip.t(off)], "context": c["context"],
                                               "interrupt": c["text"]}])
        ca, cb = c["context_span"]
        write_wav(folder / "context.wav", clip.user[max(ca, clip.a):cb], clip.sr)
        write_wav(folder / "interrupt.wav", clip.user[on:off], clip.sr)
    else:  # v1.5 overlap categories
        on, off = c["overlap"]
        clip.write(folder, "metadata.json", {"category": task.split("/", 1)[1], "session_id": clip.rec.session_id,
                                             "language": clip.rec.language,
                                             "overlap": {"timestamp": [clip.t(on), clip.t(off)], "text": c["text"]},
                                             "context": c.get("context", "")})


def export(run, out: Path, **_) -> dict:
    counts: dict[str, int] = {}
    for s in run.sessions():
        cases = session_cases(s)
        if not cases:
            continue
        user, _ = s.decode("user")
        system, _ = s.decode("system")
        sr = s.record.sample_rate
        for task, eid, c in cases:
            a, b = _window(sr, *c["span"])
            a = max(a, c.get("not_before", 0))
            folder = out / task / f"{s.record.session_id}-{eid}"
            _write_case(task, folder, _Clip(s, user, system, a, b, c.get("ref_from", 0)), c)
            counts[task] = counts.get(task, 0) + 1
    meta = {"format": "full-duplex-bench", "versions": ["v1", "v1.5"], "samples": dict(sorted(counts.items())),
            "input": "ch0 user side", "output": "ch1 system (reference answer)", "source": str(run.path)}
    write_json(out / "export.json", meta)
    return meta
