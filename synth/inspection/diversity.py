"""How much a run says, not only how it times it (CONTENT.md, diversity; issue 32).

Over the planned or written sessions of a run, system lines only unless said:

- whole run: ``distinct_system_utterances``: distinct system utterances / all system utterances
  (text after whitespace and punctuation are normalised; the pieces of a turn split around a pause
  are one utterance; sounds are not utterances); ``distinct_system_bigrams``: distinct word bigrams
  / all bigrams of system text, English counted per word (lower case), Chinese per character,
  bigrams inside one utterance (distinct-2). Both fall as a run grows, so runs of different sizes
  do not compare on them;
- fixed size: ``sample_distinct_system_utterances`` and ``sample_distinct_system_bigrams``, the
  same two over ``sample_sessions`` (1,000, the run CONTENT.md measures) sessions drawn by session
  id: the sessions whose blake2b hash of the id is smallest (a run of exactly 1,000 sessions is
  its own sample; a bigger run's sample is spread over all of it). ``None`` for a smaller run;
- ``top_template_share``: the share of system utterances made from the most used *de-slotted*
  template (:mod:`.templates`: the session's slot values, numbers, weekdays and months replaced
  by placeholders), with that template (``top_template``) and how many there are
  (``system_templates``); ``top_templates``: the ten most used, with their shares;
- ``new_bigrams_per_block``: how many system bigrams not seen before each further
  ``growth_block_sessions`` (1,000) sessions bring, sessions in session-id order, whole blocks only;
- ``top_opening_share``: the share of sessions that open with the most common opening user line
  (the first user utterance to the system: self-talk and side talk are asides), with that line;
  ``shared_opening_share``: the share of sessions whose opening line another session also opens with.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..text import HAN_RANGES
from .templates import slot_values, template, template_key

TARGETS = {"distinct_system_utterances": 0.6, "distinct_system_bigrams": 0.35, "top_opening_share": 0.01,
           "top_template_share": 0.005}
"""CONTENT.md: at least, at least, at most; the template share is issue 32's (at most)."""
SAMPLE_SESSIONS = 1000
"""Sessions in the fixed-size sample: the run size CONTENT.md's targets are measured on."""
GROWTH_BLOCK = 1000
"""Sessions per step of the bigram growth curve."""
TOP_TEMPLATES = 10
_WORD = re.compile(f"[A-Za-z0-9']+|[{HAN_RANGES}]")


@dataclass(frozen=True)
class SessionText:
    """What one session says, for the figures: its id, its utterances ``(speaker, text)`` in order
    (sounds left out) and its slot values ``(slot, value)`` (:func:`.templates.slot_values`)."""

    session_id: str
    utterances: Sequence[tuple[str, str]]
    values: tuple[tuple[str, str], ...] = ()


def units(text: str) -> list[str]:
    """English words (lower case) and Chinese characters, in order."""
    return [t.lower() for t in _WORD.findall(text)]


def normalise(text: str) -> str:
    return " ".join(units(text))


def diversity(sessions: Iterable[SessionText | Sequence[tuple[str, str]]], sample: int = SAMPLE_SESSIONS,
              block: int = GROWTH_BLOCK) -> dict:
    """The figures of the module docstring. ``sessions``: :class:`SessionText`, or per session its
    utterances as ``(speaker, text)`` (then in the order given, without slot values)."""
    texts = sorted((s if isinstance(s, SessionText) else SessionText(f"{i:012d}", s)
                    for i, s in enumerate(sessions)), key=lambda s: s.session_id)
    lines = [_system_units(s) for s in texts]  # per session, each system utterance as units
    utts, bigrams = _counts(lines)
    openings = Counter(normalise(first) for s in texts
                       if (first := next((t for sp, t in s.utterances if sp == "user"), None)) is not None)
    n = len(texts)
    top, top_n = openings.most_common(1)[0] if openings else ("", 0)
    shared = sum(c for c in openings.values() if c > 1)
    out = {"sessions": n, **_ratios(utts, bigrams)}
    drawn = _sample(texts, sample)
    s_utts, s_bigrams = _counts(lines[i] for i in drawn) if drawn else (Counter(), Counter())
    s_ratios = _ratios(s_utts, s_bigrams) if drawn else {}
    out.update({
        "top_opening_share": round(top_n / n, 4) if n else 0.0,
        "top_opening": top,
        "shared_opening_share": round(shared / n, 4) if n else 0.0,
        "sample_sessions": sample,
        "sample_distinct_system_utterances": s_ratios.get("distinct_system_utterances"),
        "sample_distinct_system_bigrams": s_ratios.get("distinct_system_bigrams"),
        **_templates(texts),
        "growth_block_sessions": block,
        "new_bigrams_per_block": bigram_growth(lines, block),
    })
    return out


def diversity_lines(d: dict, what: str = "sessions") -> list[str]:
    """The figures as lines to read (``synth plan --text``, ``synth report``): whole run, fixed-size
    sample, most used template, growth of the bigrams when there are two blocks or more."""
    out = [f"{d['sessions']:,} {what}, whole run: distinct system utterances {d['distinct_system_utterances']:.3f}, "
           f"distinct system bigrams {d['distinct_system_bigrams']:.3f}, most common opening in "
           f"{d['top_opening_share']:.1%} of sessions"]
    if d["sample_distinct_system_utterances"] is None:
        out.append(f"fixed size ({d['sample_sessions']:,} sessions): needs a run of at least that many")
    else:
        out.append(f"fixed size, {d['sample_sessions']:,} sessions drawn by session id: distinct system utterances "
                   f"{d['sample_distinct_system_utterances']:.3f}, distinct system bigrams "
                   f"{d['sample_distinct_system_bigrams']:.3f}")
    if d["top_templates"]:
        out.append(f"most used de-slotted system template: {d['top_template_share']:.2%} of "
                   f"{d['system_utterances']:,} system lines ({d['system_templates']:,} templates): "
                   f"{d['top_template']!r}")
    if len(d["new_bigrams_per_block"]) >= 2:
        out.append(f"new distinct system bigrams per {d['growth_block_sessions']:,} sessions (in session-id order): "
                   + ", ".join(f"{x:,}" for x in d["new_bigrams_per_block"]))
    return out


def session_text(session_id: str, utterances: Sequence[tuple[str, str]], planner_meta: dict) -> SessionText:
    return SessionText(session_id, utterances, tuple(slot_values(planner_meta)))


def plan_text(plan) -> SessionText:
    """A plan for :func:`diversity`: its id, utterances and slot values."""
    return session_text(plan.session_id, plan_utterances(plan), plan.planner_meta)


def record_text(rec) -> SessionText:
    """A written session for :func:`diversity`: its id, utterances and slot values."""
    return session_text(rec.session_id, record_utterances(rec), rec.planner_meta)


def bigram_growth(lines: Sequence[Sequence[Sequence[str]]], block: int = GROWTH_BLOCK) -> list[int]:
    """How many bigrams no earlier session said each whole ``block`` of sessions brings;
    ``lines``: per session, its system utterances as units, in order."""
    seen: set = set()
    out = []
    for start in range(0, len(lines) - block + 1, block):
        before = len(seen)
        for utterance_units in (u for session in lines[start:start + block] for u in session):
            seen.update(zip(utterance_units, utterance_units[1:]))
        out.append(len(seen) - before)
    return out


def _system_units(s: SessionText) -> list[list[str]]:
    return [u for sp, t in s.utterances if sp == "system" and (u := units(t))]


def _counts(lines: Iterable[list[list[str]]]) -> tuple[Counter, Counter]:
    utts: Counter = Counter()
    bigrams: Counter = Counter()
    for session in lines:
        for u in session:
            utts[" ".join(u)] += 1
            bigrams.update(zip(u, u[1:]))
    return utts, bigrams


def _ratios(utts: Counter, bigrams: Counter) -> dict:
    total_utts, total_bi = sum(utts.values()), sum(bigrams.values())
    return {"system_utterances": total_utts,
            "distinct_system_utterances": round(len(utts) / total_utts, 4) if total_utts else 0.0,
            "system_bigrams": total_bi,
            "distinct_system_bigrams": round(len(bigrams) / total_bi, 4) if total_bi else 0.0}


def _sample(texts: Sequence[SessionText], size: int) -> list[int]:
    """The indices of the ``size`` sessions with the smallest blake2b hash of their id (none when
    there are fewer): the same sessions whatever the order, and a copy of a session goes with it."""
    if len(texts) < size:
        return []
    rank = [(hashlib.blake2b(s.session_id.encode(), digest_size=8).digest(), i) for i, s in enumerate(texts)]
    return sorted(i for _, i in sorted(rank)[:size])


def _templates(texts: Sequence[SessionText]) -> dict:
    """The de-slotted templates of the system utterances: how many, the most used and its share."""
    counts: Counter = Counter()
    shown: dict[str, str] = {}
    for s in texts:
        for speaker, text in s.utterances:
            if speaker != "system" or not units(text):
                continue
            t = template(text, s.values)
            key = template_key(t)
            counts[key] += 1
            shown.setdefault(key, t)
    total = sum(counts.values())
    top = [{"template": shown[k], "share": round(c / total, 4), "count": c}
           for k, c in counts.most_common(TOP_TEMPLATES)]
    return {"system_templates": len(counts),
            "top_template_share": top[0]["share"] if top else 0.0,
            "top_template": top[0]["template"] if top else "",
            "top_templates": top}


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
