"""How many tokens a request may cost: ``max_tokens`` derived from what the request asks for.

The estimate is deliberately tokenizer-free so that a request (and with it the cache key and the
data) does not depend on which optional package is installed: it counts characters, 1 token per
3.5 non-CJK characters and 1.3 tokens per CJK character, and a fixed cost per event and work item.
The constants were measured with cl100k (tiktoken) on the stored example replies and are checked
by ``tests/test_llm_planner.py::test_budgets_hold_the_example_replies``. Tokenizers weak on
Chinese (SmolLM2's spends 2-3 tokens a character) need a larger ceiling or fewer exchanges.
"""

from __future__ import annotations

import math
import re

from ...text import CJK_RANGES

_CJK = re.compile(f"[{CJK_RANGES}]")

HEADROOM = 1.25
"""Every derived ``max_tokens`` is this much above the estimate of the largest allowed reply."""

LATIN_CHARS_PER_TOKEN = 3.5
CJK_TOKENS_PER_CHAR = 1.3
"""cl100k on the stored examples: 4.5 characters per token of English text, 1.23 tokens per Chinese character."""
EVENT_SKELETON_TOKENS = 100
"""One event's keys, punctuation and short values, pretty-printed with a two-space indent (cl100k: 93-107)."""
GROUP_FIELD_TOKENS = 16
"""A group event's ``person`` and ``addressee`` keys and values, pretty-printed (cl100k: 12-15)."""
WORK_SKELETON_TOKENS = 70
TEXT_CHARS = {"en": 80, "zh": 26}
"""Average text of one event in characters over a plan (backchannels short, answers long; the stored
examples average 60 English or 18 Chinese characters)."""
OUTLINE_CHARS = {"en": 500, "zh": 260}
"""Most characters of one outline (the schema's ``maxLength``)."""


def estimate_tokens(text: str) -> int:
    cjk = len(_CJK.findall(text))
    return math.ceil((len(text) - cjk) / LATIN_CHARS_PER_TOKEN + CJK_TOKENS_PER_CHAR * cjk)


def _chars_tokens(chars: int, zh: bool) -> int:
    return math.ceil(chars * CJK_TOKENS_PER_CHAR if zh else chars / LATIN_CHARS_PER_TOKEN)


def plan_reply_tokens(max_events: int, max_work: int, zh: bool, group: bool = False) -> int:
    """``max_tokens`` for one full plan of at most ``max_events`` events and ``max_work`` items
    (``group``: each event also names its person and addressee)."""
    text = _chars_tokens(TEXT_CHARS["zh" if zh else "en"], zh)
    skeleton = EVENT_SKELETON_TOKENS + (GROUP_FIELD_TOKENS if group else 0)
    est = 40 + max_events * (skeleton + text) + max_work * (WORK_SKELETON_TOKENS + 3 * text)
    return math.ceil(HEADROOM * est)


def outline_reply_tokens(k: int, lang: str) -> int:
    """``max_tokens`` for ``k`` outlines of at most ``OUTLINE_CHARS[lang]`` characters each."""
    per = 20 + _chars_tokens(OUTLINE_CHARS[lang], lang == "zh")
    return math.ceil(HEADROOM * (20 + k * per))


MIXED_TOKENS_PER_CHAR = 0.8
"""Code-switched text: Chinese characters with English words (about 1.3 and 0.3 tokens a character)."""


def fill_reply_tokens(limits_chars: list[tuple[int, str]]) -> int:
    """``max_tokens`` for a fill reply: one ``"name": "text"`` pair per ``(max_chars, language)``."""
    per = {"en": 1 / LATIN_CHARS_PER_TOKEN, "zh": CJK_TOKENS_PER_CHAR}
    est = 10 + sum(10 + math.ceil(chars * per.get(lang, MIXED_TOKENS_PER_CHAR)) for chars, lang in limits_chars)
    return math.ceil(HEADROOM * est)
