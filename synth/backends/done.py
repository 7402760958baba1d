"""Whether a system line already reported a task done (issue 32: "约好了，周四早上八点。", then the
user asks "帮我把四轮定位约上").

A task is reported done by the verb its request asks with, said as done: its results say how
("Booked, ...", "order ... is cancelled", 约好了，...), and a request line that asks for more of
the same ("book the next one too", 下次也约了吧, 连着约三周) asks for something new. So an earlier
system line with one of those verbs said as done ("I've cancelled it", "Cancelled,", 约好了,
已经帮你约上) or as being done now ("I'll book you in", 我先给您约上), not in a question ("要不要
先订上？"), makes the request needless.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .frames import Delegation

_EN_WORD = re.compile(r"[a-z']+")
_EN_DONE = re.compile(r"\b([a-z]{3,})ed\b")
_ZH_DONE = re.compile(r"([\u4e00-\u9fff]|[A-Za-z]+)\s*(?:好了|好啦|完了)")
_MORE = re.compile(r"\b(?:also|too|next|another|again|more|rest|extra|every|each|as well|other)\b|也|下次|下一次|后面|"
                   r"连着|往后|再|其他|别的|一起|每", re.I)
_GENERIC = {"do", "don", "mak", "set", "get", "us", "need", "call", "all", "chang", "check", "find", "look"}
"""Verbs too general to tell one task from another ("Done," "I've set the lights" before another setting)."""
_CLAUSE = re.compile(r"[^,，。.!！?？;；]+[,，。.!！?？;；]?")


def _stems(text: str) -> set[str]:
    """The stems of English words as a request says them ("cancel", "book")."""
    return {w[:-1] if w.endswith("e") else w for w in _EN_WORD.findall(text.lower())}


def repeat_verbs(d: Delegation) -> tuple[frozenset[str], frozenset[str]]:
    """``(English stems, Chinese verbs)`` that report ``d`` done: verbs its results say as done
    ("cancelled" -> "cancel", 约好了 -> 约) that one of its request lines asks with, where that
    line does not ask for more of the same."""
    return _repeat_verbs(tuple(d.user), tuple(d.result))


@lru_cache(maxsize=4096)
def _repeat_verbs(user: tuple[str, ...], result: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    asking = [u for u in user if not _MORE.search(u)]
    asked_en = set().union(*(_stems(u) for u in asking)) if asking else set()
    en, zh = set(), set()
    for r in result:
        for m in _EN_DONE.finditer(r.lower()):
            stem = m.group(1)
            stem = stem[:-1] if m.group(0).endswith("led") and stem.endswith("l") else stem
            if stem not in _GENERIC and stem in asked_en:
                en.add(stem)
        for m in _ZH_DONE.finditer(r):
            v = m.group(1).lower()
            if v not in _GENERIC and any(v in u.lower() for u in asking):
                zh.add(v)
    return frozenset(en), frozenset(zh)


def reports_done(text: str, d: Delegation) -> bool:
    """Whether ``text`` (a system line) reports the task ``d`` done, or being done now."""
    done = _said_done(*repeat_verbs(d))
    return done is not None and any(clause.rstrip()[-1:] not in "?？" and done.search(clause.strip().lower())
                                    for clause in _CLAUSE.findall(text))


@lru_cache(maxsize=4096)
def _said_done(en: frozenset[str], zh: frozenset[str]) -> re.Pattern | None:
    """The verbs said as done ("I've booked", "Cancelled,", 约好了, 已经帮你约上) or as being done now
    ("I'll book", "I'm cancelling", 我先给您约上); None without verbs."""
    if not en and not zh:
        return None
    en_re = "|".join(sorted(map(re.escape, en))) or "(?!)"
    zh_re = "|".join(sorted(map(re.escape, zh))) or "(?!)"
    return re.compile(
        rf"(?:^|\b(?:i've|i have|i just|it's|that's|is|are|been|already|now)\s+(?:\w+\s+)?)(?:{en_re})e?(?:ed|led)\b"
        rf"|\b(?:i'll|i will|let me)\s+(?:\w+\s+)?(?:{en_re})\b|\bi'm\s+(?:{en_re})e?ing\b"
        rf"|(?:{zh_re})\s*(?:好了|好啦|上了|上(?!午|面|次|个|周|班|网|门|来|去|课|线|传))|已经(?:帮.{{0,8}})?(?:{zh_re})", re.I)
