"""How much a run says, not only how it times it (CONTENT.md, diversity).

Over the planned or written sessions of a run:

- ``distinct_system_utterances``: distinct system utterances / all system utterances (text after
  whitespace and punctuation are normalised; the pieces of a turn split around a pause are one
  utterance; sounds are not utterances);
- ``distinct_system_bigrams``: distinct word bigrams / all bigrams of system text, English counted
  per word (lower case), Chinese per character, bigrams inside one utterance (distinct-2);
- ``top_opening_share``: the share of sessions that open with the most common opening user line
  (the first user utterance to the system: self-talk and side talk are asides), with that line; ``shared_opening_share``: the share
  of sessions whose opening line another session also opens with.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from ..text import HAN_RANGES

TARGETS = {"distinct_system_utterances": 0.6, "distinct_system_bigrams": 0.35, "top_opening_share": 0.01}
"""CONTENT.md: at least, at least, at most."""
_WORD = re.compile(f"[A-Za-z0-9']+|[{HAN_RANGES}]")


def units(text: str) -> list[str]:
    """English words (lower case) and Chinese characters, in order."""
    return [t.lower() for t in _WORD.findall(text)]


def normalise(text: str) -> str:
    return " ".join(units(text))


def diversity(sessions: Iterable[list[tuple[str, str]]]) -> dict:
    """``sessions``: per session, its utterances as ``(speaker, text)`` in order (sounds left out)."""
    utts: Counter = Counter()
    bigrams: Counter = Counter()
    openings: Counter = Counter()
    n = 0
    for events in sessions:
        n += 1
        first_user = next((t for s, t in events if s == "user"), None)
        if first_user is not None:
            openings[normalise(first_user)] += 1
        for speaker, text in events:
            if speaker != "system":
                continue
            u = units(text)
            if not u:
                continue
            utts[" ".join(u)] += 1
            bigrams.update(zip(u, u[1:]))
    top, top_n = openings.most_common(1)[0] if openings else ("", 0)
    shared = sum(c for c in openings.values() if c > 1)
    total_utts, total_bi = sum(utts.values()), sum(bigrams.values())
    return {
        "sessions": n,
        "system_utterances": total_utts,
        "distinct_system_utterances": round(len(utts) / total_utts, 4) if total_utts else 0.0,
        "system_bigrams": total_bi,
        "distinct_system_bigrams": round(len(bigrams) / total_bi, 4) if total_bi else 0.0,
        "top_opening_share": round(top_n / n, 4) if n else 0.0,
        "top_opening": top,
        "shared_opening_share": round(shared / n, 4) if n else 0.0,
    }


def plan_utterances(plan) -> list[tuple[str, str]]:
    """A plan's utterances as ``(speaker, text)``: the pieces of one turn (events linked by
    ``continues``, split around a pause) are one utterance; sounds are none."""
    return _turns((e, e.text) for e in plan.events if e.sound is None)


def record_utterances(rec) -> list[tuple[str, str]]:
    """A written session's utterances as ``(speaker, text)``: the planned line of every spoken
    event (what was cut by a barge-in included), the pieces of a turn joined."""
    from ..stages.paraling import PHENOMENON_OF  # the acts the paralinguistic pass adds

    return _turns((e, " ".join(t for t in (e.text, e.text_after_cut) if t)) for e in rec.events
                  if e.speaker in ("user", "system", "third_party") and e.act not in PHENOMENON_OF
                  and not e.text.startswith("["))


def _turns(items) -> list[tuple[str, str]]:
    """``(event, text)`` pairs joined along ``continues`` into one utterance per turn."""
    out: list[list[str]] = []
    where: dict[str, int] = {}
    for e, text in items:
        if e.relation == "continues" and e.attach_to in where:
            i = where[e.attach_to]
            out[i][1] += (" " if text[:1].isascii() else "") + text
        else:
            i = len(out)
            out.append([_aside(e), text])
        where[e.id] = i
    return [(s, t) for s, t in out]


def _aside(e) -> str:
    """Talk to someone else (self-talk, side talk) is not a line to the system: speaker ``aside``."""
    return "aside" if e.relation == "addresses_other" else e.speaker
