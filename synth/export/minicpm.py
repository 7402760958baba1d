"""MiniCPM-o duplex export (experimental): each session cut into 1 s units, one output string per unit.

Experimental because MiniCPM-o publishes no training code or data format: this follows what its
duplex runtimes consume and emit, and nothing here can be loaded by a reference reader.

What we read (MiniCPM-o 4.5 duplex runtimes and their notes): the model consumes one
``<unit>`` of streaming input per second and answers each unit with either the single token
``<|listen|>`` (stay silent) or ``<|speak|>`` followed by the unit's text and closed by
``<|chunk_eos|>``; the last chunk of an utterance has ``<|turn_eos|>`` before the close, and
``<|listen|>`` only follows a finished turn. Text runs about one unit ahead of the audio it
becomes (measured offset: one chunk), which is what ``decision_lag`` models. Delegation to a
slow tool is our addition in the same style: a private ``<delegate>{json}</delegate>`` span in
the unit where the system opens the work item (LABELS.md R6) and the tool's answer as
``<backend>…</backend>`` on the *input* side of the unit where it is injected.

Layout under ``DIR``::

    audio/<session>.user.wav     ch0, what the model hears (16-bit PCM)
    audio/<session>.system.wav   ch1, the model's own speech
    data.jsonl                   one session per line: ids, audio paths, units
    export.json                  format, unit length, decision lag, channel order

A unit ``k`` covers samples ``[k*sr, (k+1)*sr)``. Its ``output`` is built from the timeline:
the system words whose onset falls in unit ``k + decision_lag``, ``<|turn_eos|>`` if a system turn
ends (``turn_eos`` or ``yield``) in that unit, the delegate span if a work item opens there.
``decision_lag = 0`` pairs text with the unit in which it is heard; ``1`` emits it one unit early
(words heard before the lag has run out are all emitted in unit 0, so none is lost; at most
``MAX_DECISION_LAG`` units).
A unit speaks at most ``MAX_SPEAK_TOKENS`` (20) text tokens, the runtimes' cap (estimated by
``speak_tokens``); words beyond it are carried to the next unit (``carried_words`` counts what
waits), and the turn's ``<|turn_eos|>`` comes in the unit that speaks its last word.
The input side (``<backend>`` injections) and each unit's ``sys_action`` (the timeline's labels
at a 1 s frame period) are never shifted.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..stages.label import frame_channels
from ..text import HAN
from .common import seconds, words_of, write_json, write_wav

LISTEN, SPEAK, TURN_EOS, CHUNK_EOS = "<|listen|>", "<|speak|>", "<|turn_eos|>", "<|chunk_eos|>"
UNIT_MS = 1000
MAX_DECISION_LAG = 5  # units: a lag of seconds more would pair text with unrelated audio
MAX_SPEAK_TOKENS = 20  # per unit: the duplex runtimes stop a unit's speak generation there


def _join(words: list[tuple[str, str]]) -> str:
    from ..schema.plan import PlannedWord, join_words

    return join_words([PlannedWord(text=w, lang=lang) for w, lang in words])


def speak_tokens(word: str) -> int:
    """Text tokens a word costs, estimated from above for a Qwen-style BPE: one per Han character
    and per punctuation mark, one per 4 letters or digits of a Latin word (at least one)."""
    han = len(HAN.findall(word))
    punct = sum(1 for c in word if not c.isalnum() and not c.isspace())
    latin = sum(1 for c in word if c.isalnum()) - han
    return han + punct + -(-latin // 4)


def _within_cap(queue: list[tuple[str, str]]) -> int:
    """How many words from the head of ``queue`` fit in one unit's ``MAX_SPEAK_TOKENS`` (at least one)."""
    used = 0
    for i, (word, _) in enumerate(queue):
        used += speak_tokens(word)
        if used > MAX_SPEAK_TOKENS:
            return max(i, 1)
    return len(queue)


def backend_text(work: dict, ref: str) -> str:
    """The text injected at a ``backend_inject`` marker: ref ``w1`` is the result (or the error)
    of work item w1, ``w1:progress`` its progress note."""
    wid, _, kind = ref.partition(":")
    w = work[wid]
    msgs = [m for m in getattr(w, "backend", None) or [] if (m.kind == "progress") == (kind == "progress")]
    text = msgs[0].text if msgs else w.result_text
    return text.removeprefix("<backend>").removesuffix("</backend>")  # records may hold it wrapped


def session_units(session, decision_lag: int = 0) -> list[dict]:
    """The unit list of one session (see the module docstring)."""
    rec = session.record
    sr = rec.sample_rate
    tl = session.timeline
    ch = frame_channels(tl, UNIT_MS)
    n = ch["num_frames"]
    unit = sr * UNIT_MS // 1000
    spoken: list[list[tuple[str, str]]] = [[] for _ in range(n)]
    for word, on, _, _, _, lang in words_of(rec, ("system",)):
        spoken[min(on // unit, n - 1)].append((word, lang))
    ends, opens, injects = [set() for _ in range(n)], [[] for _ in range(n)], [[] for _ in range(n)]
    work = {w.work_id: w for w in rec.delegations}
    for m in ch["markers"]:
        if m.type in ("turn_eos", "yield"):
            ends[m.frame].add(m.ref)
        elif m.type == "delegate_open":
            opens[m.frame].append(work[m.ref])
        elif m.type == "backend_inject":
            injects[m.frame].append(backend_text(work, m.ref))
    units = []
    queue: list[tuple[str, str]] = []
    eos_due = False
    for k in range(n):
        # unit k speaks what is heard in unit k + lag; unit 0 also what is heard before the lag
        # has run out (units 0 .. lag-1), so that no word is dropped
        src = [j for j in (range(0, decision_lag + 1) if k == 0 else [k + decision_lag]) if j < n]
        queue += [w for j in src for w in spoken[j]]
        take = _within_cap(queue)
        text, queue = _join(queue[:take]), queue[take:]
        eos_due = eos_due or any(ends[j] for j in src)
        out = ""
        if text:
            out += SPEAK + text
        if eos_due and not queue:  # a turn ends in the unit that speaks its last word
            out, eos_due = (out or SPEAK) + TURN_EOS, False
        for w in [w for j in src for w in opens[j]]:
            out += "<delegate>" + json.dumps({"work_id": w.work_id, "tool": w.tool, "objective": w.objective},
                                             ensure_ascii=False) + "</delegate>"
        out = out + CHUNK_EOS if out else LISTEN
        backend = "".join(f"<backend>{text}</backend>" for text in injects[k])
        units.append({"unit": k, "start_s": seconds(k * unit, sr), "end_s": seconds(min((k + 1) * unit, rec.num_samples), sr),
                      "input": "<unit></unit>" + backend, "output": out, "sys_action": int(ch["sys_action"][k]),
                      "carried_words": len(queue)})
    return units


def export(run, out: Path, decision_lag: int = 0, **_) -> dict:
    from ..errors import UserError

    if not 0 <= decision_lag <= MAX_DECISION_LAG:
        raise UserError(f"--decision-lag: must be 0..{MAX_DECISION_LAG} units of 1 s (MiniCPM-o's text runs one "
                        f"unit ahead; got {decision_lag})")
    lines, n_units, carried = [], 0, 0
    for s in run.sessions():
        sid = s.record.session_id
        for ch in ("user", "system"):
            x, sr = s.decode(ch)
            write_wav(out / "audio" / f"{sid}.{ch}.wav", x, sr)
        units = session_units(s, decision_lag)
        n_units += len(units)
        carried += sum(1 for u in units if u["carried_words"])
        lines.append(json.dumps({
            "session_id": sid, "language": s.record.language, "sample_rate": s.record.sample_rate,
            "duration_s": s.record.duration_s, "user_audio": f"audio/{sid}.user.wav",
            "system_audio": f"audio/{sid}.system.wav", "units": units}, ensure_ascii=False))
    from ..io.files import write_text_atomic

    write_text_atomic(out / "data.jsonl", "\n".join(lines) + ("\n" if lines else ""))
    meta = {"format": "minicpm-duplex", "unit_s": UNIT_MS / 1000, "decision_lag_units": decision_lag,
            "channels": {"user_audio": "ch0 user side (model input)", "system_audio": "ch1 system (model output)"},
            "tokens": [LISTEN, SPEAK, TURN_EOS, CHUNK_EOS, "<delegate>", "<backend>"],
            "max_speak_tokens": MAX_SPEAK_TOKENS, "units_with_carried_words": carried, "experimental": True,
            "note": "experimental: MiniCPM-o publishes no training code or data format to check this against",
            "sessions": len(lines), "units": n_units, "source": str(run.path)}
    write_json(out / "export.json", meta)
    return meta
