"""A spoken line with its slot values taken out: the template it was made from.

The diversity figures ask how often the *same sentence* comes back with other values in it
(issue 32): "Your savings account ending four two one seven has three hundred pounds" and
"Your joint account ending one nine five six has eighty pounds" are one template,
``your {account} ending {last4} has {balance}``. Plans do not record which frame line a system
line came from (and the LLM planner has none), so the template is recovered from the text:

1. the session's own slot values (``planner_meta``: the frames' slots and topic, each work item's
   values, the old and new values of corrections and supersedes) become ``{slot}``, longest first;
2. what is left that reads as a slot value anywhere becomes a placeholder: numbers in digits,
   in English words ("forty two", "seven thirty", "the fifteenth") and in Chinese numerals
   (二十五, 两点半, 三个), weekdays and months (``{n}``, ``{day}``, ``{month}``);
3. "a"/"an" before a placeholder is one word (the article agrees with the value, not the template).

:func:`template` gives the readable template, :func:`template_key` the normalised form that is
counted (case, spacing and punctuation ignored, as in :func:`.diversity.units`)::

    >>> template("Your joint account ending one nine five six has ninety pounds.",
    ...          [("account", "joint account"), ("last4", "one nine five six")])
    'Your {account} ending {last4} has {n} pounds.'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

from ..text import HAN_RANGES

_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
          "sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = "hundred thousand million billion".split()
_ORDINALS = ("third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
             "fifteenth sixteenth seventeenth eighteenth nineteenth twentieth thirtieth hundredth").split()
_EN_NUMBER_WORD = "|".join(sorted(_UNITS + _TENS + _SCALES + _ORDINALS + ["first", "second", "half"],
                                  key=len, reverse=True))
# A run of number words ("one nine five six", "two hundred and forty", "twenty-first"); a lone
# "one", "first", "second" or "half" is a word ("the one ending", "first, ...", "a second"), not a value.
_EN_NUMBER = re.compile(
    rf"(?<![\w'{{])(?:{_EN_NUMBER_WORD})(?:(?:[ -]|\s+and\s+)(?:{_EN_NUMBER_WORD}))*(?![\w'}}])", re.I)
_LONE_WORD = {"one", "first", "second", "half"}
_DIGITS = re.compile(r"\d+(?:[.,:]\d+)*")
_WEEKDAY = re.compile(r"(?<![\w{])(?:mon|tues|wednes|thurs|fri|satur|sun)day(?![\w}])", re.I)
_MONTH = re.compile(r"(?<![\w{])(?:january|february|march|april|june|july|august|september|october|november|"
                    r"december)(?![\w}])", re.I)
_ZH_DAY = re.compile(r"(?:星期|礼拜|周)[一二三四五六日天]")
_ZH_DIGIT = "零〇幺一二两三四五六七八九十百千万亿"
_ZH_UNIT = "点个块元号月日天分秒岁位张次周年斤米度折倍层楼份瓶杯碗钟遍人间辆家件本条双台把片盒包袋罐磅镑公小"
# Two or more numeral characters (二十五, 一九五六), or one (not 一: 一下, 一起, 一点 are words) before
# a measure word or unit (三个, 八块, 五点), with the rest of a clock time (两点半, 九点一刻, 四点十五分):
# a time is one value however it is said.
_ZH_TIME_TAIL = rf"(?:点(?:半|[一三]刻|[{_ZH_DIGIT}]+分?)?)?"
_ZH_NUMBER = re.compile(rf"(?:[{_ZH_DIGIT}]{{2,}}|[{_ZH_DIGIT[3:].replace('一', '')}](?=[{_ZH_UNIT}])){_ZH_TIME_TAIL}")
_ARTICLE = re.compile(r"(?<![\w])([Aa])n (?=\{)")
_PLACEHOLDER = re.compile(r"(\{[a-z0-9_]+\})")
_KEY_TOKEN = re.compile(rf"\{{[a-z0-9_]+\}}|[A-Za-z0-9']+|[{HAN_RANGES}]")


def slot_values(planner_meta: Mapping) -> list[tuple[str, str]]:
    """``(slot, value)`` of every value a session's ``planner_meta`` records: its frames' slots
    (and topic), each work item's values, and the old and new value of each correction and
    supersede (both under the corrected slot's name). Empty for a planner that records none."""
    out: list[tuple[str, str]] = []
    for f in planner_meta.get("frames") or []:
        if isinstance(f, Mapping):
            out += [(k, v) for k, v in (f.get("slots") or {}).items() if isinstance(v, str)]
    for values in (planner_meta.get("work") or {}).values():
        if isinstance(values, Mapping):
            out += [(k, v) for k, v in values.items() if isinstance(v, str)]
    for c in [*(planner_meta.get("corrections") or []), *(planner_meta.get("supersedes") or [])]:
        if isinstance(c, Mapping) and isinstance(c.get("slot"), str):
            out += [(c["slot"], c[k]) for k in ("old", "new") if isinstance(c.get(k), str)]
    return out


def template(text: str, values: Iterable[tuple[str, str]] = ()) -> str:
    """``text`` with the session's slot ``values`` and any number, weekday or month replaced by
    placeholders (see the module docstring)."""
    pattern, names = _values_pattern(tuple(sorted(set(values))))
    if pattern is not None:
        text = pattern.sub(lambda m: "{" + names[_squeeze(m.group(0))] + "}", text)
    pieces = _PLACEHOLDER.split(text)  # odd pieces are the placeholders just written: left alone
    for i in range(0, len(pieces), 2):
        pieces[i] = _generic(pieces[i])
    return _ARTICLE.sub(r"\1 ", "".join(pieces))


def _generic(text: str) -> str:
    """Numbers, weekdays and months of a piece of text as ``{n}``, ``{day}``, ``{month}``."""
    text = _DIGITS.sub("{n}", text)
    text = _EN_NUMBER.sub(lambda m: m.group(0) if m.group(0).lower() in _LONE_WORD else "{n}", text)
    text = _ZH_DAY.sub("{day}", _ZH_NUMBER.sub("{n}", text))
    return _MONTH.sub("{month}", _WEEKDAY.sub("{day}", text))


def template_key(tmpl: str) -> str:
    """The counted form of a template: words in lower case, Chinese per character, punctuation and
    spacing dropped, and every placeholder one token ``{}``: whether a number was found as the
    session's ``{servings}`` or as a number ``{n}``, the sentence is the same."""
    return " ".join("{}" if t[0] == "{" else t.lower() for t in _KEY_TOKEN.findall(tmpl))


@lru_cache(maxsize=4096)
def _values_pattern(values: tuple[tuple[str, str], ...]) -> tuple[re.Pattern | None, dict[str, str]]:
    """One regex for a session's values (longest first, so a topic "the travel card in JB" wins
    over its "travel card"), and the slot name of each value (lower case). A value that starts or
    ends with a Latin letter or digit matches only as whole words ("Jack's" has "Jack"), never inside
    a placeholder."""
    names: dict[str, str] = {}
    for name, value in values:
        v = value.strip()
        if len(v) >= 2 and not v.isdigit():  # a one-letter value would eat every "a"
            names.setdefault(v.lower(), name)
    if not names:
        return None, names
    alts = []
    for v in sorted(names, key=len, reverse=True):
        body = r"\s*".join(re.escape(p) for p in v.split())
        head = r"(?<![A-Za-z0-9'{_])" if re.match(r"[A-Za-z0-9]", v) else ""
        tail = r"(?![A-Za-z0-9}_])" if re.search(r"[A-Za-z0-9]$", v) else ""
        alts.append(head + body + tail)
    return re.compile("|".join(alts), re.I), {_squeeze(v): n for v, n in names.items()}


def _squeeze(text: str) -> str:
    """A value as looked up: lower case, no spaces (the text may space it otherwise: "在 JB")."""
    return re.sub(r"\s+", "", text).lower()
