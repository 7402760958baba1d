"""Words of spoken text: split into planned words with their language, and join them back.

One place for the tokenisation every planner, the paralinguistic pass, the LLM schema and the
sound banks use: jieba for Chinese runs, whitespace for the rest; punctuation sticks to the word
before it.
"""

from __future__ import annotations

import logging
import re

from .schema.plan import PlannedWord, join_words, strip_unspeakable

__all__ = ["tokenize", "join_words", "word_count", "says", "CJK", "HAN", "HAN_RANGES", "CJK_RANGES"]

HAN_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs: extension A, unified, compatibility
CJK_RANGES = "\u3000-\u303f" + HAN_RANGES + "\uff00-\uffef"  # ... with CJK and full-width punctuation
HAN = re.compile(f"[{HAN_RANGES}]")
CJK = re.compile(f"([{CJK_RANGES}]+)")
_PUNCT = set(",.?!;:，。？！；：、…-'")


def quiet_jieba():
    """jieba, without its four lines on stderr ("Building prefix dict ...") when it first loads."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


def tokenize(text: str) -> list[PlannedWord]:
    """Words with their language: jieba for Chinese runs, whitespace for the rest."""
    jieba = quiet_jieba()
    words: list[PlannedWord] = []
    for part in CJK.split(strip_unspeakable(text)):  # emoji and control characters are not said
        if not part.strip():
            continue
        if CJK.fullmatch(part):
            tokens, lang = [t for t in jieba.lcut(part) if t.strip()], "zh"
        else:
            tokens, lang = part.split(), "en"
        for tok in tokens:
            if words and all(c in _PUNCT for c in tok):
                words[-1] = PlannedWord(text=words[-1].text + tok, lang=words[-1].lang)
            elif not all(c in _PUNCT for c in tok):
                words.append(PlannedWord(text=tok, lang=lang))
    return words


def word_count(text: str) -> int:
    return len(tokenize(text))


def says(text: str, value: str) -> bool:
    """Whether a line says a slot value (long-range references): an English value as whole words
    ("eight" is not in "eighteen"), any other compared without spaces (Chinese is written
    without them, and the words of a mixed line are joined with or without)."""
    if value.isascii():
        words = " ".join(re.sub(r"[^\w']+", " ", text.lower()).split())
        return re.search(rf"(?<![a-z0-9']){re.escape(' '.join(value.lower().split()))}(?![a-z0-9'])", words) is not None
    return "".join(value.lower().split()) in "".join(text.lower().split())

