"""Slot values generated per session where a slot is open-ended (issue 32): names, numbers, times,
dates, prices, codes, addresses, said in words as a speaker says them in each language.

A frame's slot is either a listed set (``dish: [curry, stew]``: closed sets stay listed) or a
generator spec (``time: {generate: time, min: 9, max: 17}``): :class:`GenSpec`. A listed set of
six order numbers recurs every few hundred sessions at corpus scale; a generated one does not, and
neither do the word pairs around it. Every value is drawn with the session's rng, so the same seed
gives the same plan bytes. Text rules of the frames (no digits, zh in Chinese characters) hold
for every value: numbers are spelt out (``en_number``, ``zh_number``). The word lists (given
names, surnames, Chinese surname and given-name characters, streets) are in ``_names.yaml``.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Literal

import numpy as np
import yaml
from pydantic import Field, model_validator

from ..schema.common import Model

KINDS = ("name", "given", "surname", "number", "digits", "time", "date", "price", "address")
Say = Literal["en", "zh", "mix"]


class GenSpec(Model):
    """A generated slot: ``{generate: KIND, ...}``. ``min``/``max``: the range (a number, a price,
    the hours of a time, the day of a date); ``n``: how many digits a code has; ``unit``: the word
    after a price (``pounds``, ``块``); ``say``: the language the value is said in (default: the
    block's, ``en-zh`` saying numbers in Chinese and names either way); ``period``: a Chinese time
    with 上午/下午/晚上; ``form``: a date as ``ordinal`` ("the twelfth") or ``month`` ("the
    twelfth of March", 三月十二号); ``prefix``/``suffix``: words around it ("Doctor ", "医生");
    ``example``: one value to read lines with (below)."""

    generate: Literal[KINDS]  # type: ignore[valid-type]
    min: int | None = Field(default=None, ge=0, le=999_999)
    max: int | None = Field(default=None, ge=0, le=999_999)
    step: int = Field(default=1, ge=1, le=1000)
    n: int = Field(default=4, ge=2, le=12)
    unit: str = ""
    say: Say | None = None
    period: bool = False
    form: Literal["ordinal", "month"] = "ordinal"
    prefix: str = ""
    suffix: str = ""
    example: str | None = None
    """A value to read the frame's lines with where one fixed value is wanted (the noise bank's
    babble, the checker's first sample); the value the slot listed before it was generated, so the
    generated bank stays byte-identical."""

    @model_validator(mode="after")
    def _range(self):
        lo, hi = LIMITS.get(self.generate, (0, 999_999))
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"generate {self.generate}: min {self.min} is above max {self.max}")
        for name, v in (("min", self.min), ("max", self.max)):
            if v is not None and not lo <= v <= hi:
                raise ValueError(f"generate {self.generate}: {name} {v} is outside {lo}-{hi}")
        return self


LIMITS = {"time": (0, 23), "date": (1, 31), "number": (0, 999_999), "price": (1, 999_999)}
DEFAULTS = {"time": (8, 20), "date": (1, 28), "number": (2, 20), "price": (5, 500)}

# -- numbers as said -----------------------------------------------------------------------------
_EN_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
             "sixteen seventeen eighteen nineteen").split()
_EN_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_EN_ORD = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth", "nine": "ninth",
           "twelve": "twelfth"}


def en_number(n: int) -> str:
    """0..999,999 in British English words: "two hundred and forty five"."""
    if not 0 <= n <= 999_999:
        raise ValueError(f"en_number: {n} out of range")
    if n < 20:
        return _EN_UNITS[n]
    if n < 100:
        t, u = divmod(n, 10)
        return _EN_TENS[t] + (f" {_EN_UNITS[u]}" if u else "")
    if n < 1000:
        h, r = divmod(n, 100)
        return f"{_EN_UNITS[h]} hundred" + (f" and {en_number(r)}" if r else "")
    th, r = divmod(n, 1000)
    tail = "" if not r else (f" and {en_number(r)}" if r < 100 else f" {en_number(r)}")
    return f"{en_number(th)} thousand{tail}"


def en_ordinal(n: int) -> str:
    words = en_number(n).split()
    last = words[-1]
    if last in _EN_ORD:
        words[-1] = _EN_ORD[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


_ZH_DIGITS = "零一二三四五六七八九"


def zh_number(n: int, liang: bool = True) -> str:
    """0..999,999 as said in Mandarin: 二十五, 一百零五, 两千三百, 十二万; ``liang``: 两 for a
    leading 2 before 百/千/万 (two of a measure word is 两, said by the caller)."""
    if not 0 <= n <= 999_999:
        raise ValueError(f"zh_number: {n} out of range")
    if n < 10:
        return _ZH_DIGITS[n]
    if n < 20:
        return "十" + (_ZH_DIGITS[n - 10] if n > 10 else "")
    if n >= 10_000:
        w, r = divmod(n, 10_000)
        head = ("两" if w == 2 and liang else zh_number(w, liang)) + "万"
        return head + ("" if not r else ("零" if r < 1000 else "") + _zh_below(r, liang, inner=True))
    return _zh_below(n, liang)


def _zh_below(n: int, liang: bool, inner: bool = False) -> str:
    """1..9,999: 三千零五, 一百一十, 两百."""
    out, zero = "", False
    for unit, size in (("千", 1000), ("百", 100), ("十", 10), ("", 1)):
        d, n = divmod(n, size)
        if d:
            if zero and out:
                out += "零"
            digit = "两" if d == 2 and liang and size >= 100 else _ZH_DIGITS[d]
            out += digit + unit
            zero = False
        elif out:
            zero = True
    return out if (inner or not out.startswith("一十")) else out[1:]


def en_digits(s: str) -> str:
    return " ".join(_EN_UNITS[int(c)] for c in s)


def zh_digits(s: str) -> str:
    return "".join(_ZH_DIGITS[int(c)] for c in s)


# -- the generators -------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def names() -> dict:
    """The word lists of ``_names.yaml``."""
    text = resources.files("synth.data.frames").joinpath("_names.yaml").read_text("utf-8")
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _pick(rng: np.random.Generator, items):
    return items[int(rng.integers(len(items)))]


def _lang(spec: GenSpec, lang: str, rng: np.random.Generator, numbers: bool) -> str:
    """The language a value is said in: the spec's, else the block's; ``en-zh`` says numbers in
    Chinese and names either way (mix: one or the other per draw)."""
    say = spec.say or {"en": "en", "zh": "zh"}.get(lang) or ("zh" if numbers else "mix")
    return ("en" if rng.random() < 0.5 else "zh") if say == "mix" else say


def _range(spec: GenSpec) -> tuple[int, int]:
    lo, hi = DEFAULTS.get(spec.generate, (0, 100))
    return (lo if spec.min is None else spec.min), (hi if spec.max is None else spec.max)


def _number(spec: GenSpec, rng: np.random.Generator) -> int:
    lo, hi = _range(spec)
    steps = (hi - lo) // spec.step
    return lo + spec.step * int(rng.integers(steps + 1))


def gen_name(kind: str, say: str, rng: np.random.Generator, lang: str) -> str:
    """A person's name: ``name`` (given and surname, or 姓+名), ``given`` or ``surname``. An en-zh
    Latin name is as Singapore or Malaysia Chinese say theirs: an English given name and a
    romanised surname ("Stephanie Tan")."""
    n = names()
    if say == "zh":
        surname = _pick(rng, n["zh_surnames"])
        given = "".join(_pick(rng, n["zh_given"]) for _ in range(1 + int(rng.random() < 0.7)))
        return {"name": surname + given, "given": given if len(given) == 2 else "小" + given,
                "surname": surname}[kind]
    given = _pick(rng, n["en_given"])
    surname = _pick(rng, n["sg_surnames"] if lang == "en-zh" else n["en_surnames"])
    return {"name": f"{given} {surname}", "given": given, "surname": surname}[kind]


def gen_time(spec: GenSpec, say: str, rng: np.random.Generator) -> str:
    """A clock time between ``min`` and ``max`` o'clock (24 h; said in 12 h in English, with
    上午/下午/晚上 in Chinese where ``period``), on a quarter or a five-minute mark."""
    lo, hi = _range(spec)
    h = int(rng.integers(lo, hi + 1))
    m = 0 if h == hi else int(_pick(rng, (0, 0, 15, 30, 30, 45, 10, 20, 40, 50)))
    return en_time(h, m, rng) if say == "en" else zh_time(h, m, spec.period)


def en_time(h: int, m: int, rng: np.random.Generator) -> str:
    h12 = (h - 1) % 12 + 1
    nxt = h12 % 12 + 1
    if m == 0:
        return _pick(rng, (en_number(h12), f"{en_number(h12)} o'clock"))
    if m == 30 and rng.random() < 0.4:
        return f"half past {en_number(h12)}"
    if m == 15 and rng.random() < 0.4:
        return f"quarter past {en_number(h12)}"
    if m == 45 and rng.random() < 0.4:
        return f"quarter to {en_number(nxt)}"
    return f"{en_number(h12)} {en_number(m)}"


def zh_time(h: int, m: int, period: bool) -> str:
    pre = ""
    if period:
        pre = "早上" if h < 9 else "上午" if h < 12 else "中午" if h < 13 else "下午" if h < 18 else "晚上"
    h12 = h - 12 if h > 12 else h
    head = ("两" if h12 == 2 else zh_number(h12)) + "点"
    tail = {0: "", 30: "半", 15: "一刻"}.get(m, zh_number(m) if m >= 10 else "零" + zh_number(m))
    return pre + head + tail


_MONTHS = "January February March April May June July August September October November December".split()


def gen_date(spec: GenSpec, say: str, rng: np.random.Generator) -> str:
    lo, hi = _range(spec)
    d = int(rng.integers(lo, hi + 1))
    month = int(rng.integers(12))
    if say == "en":
        return f"the {en_ordinal(d)}" + (f" of {_MONTHS[month]}" if spec.form == "month" else "")
    return (f"{zh_number(month + 1)}月" if spec.form == "month" else "") + f"{zh_number(d)}号"


def gen_price(spec: GenSpec, say: str, rng: np.random.Generator) -> str:
    """A price in ``unit`` (default pounds / 块): a whole amount, sometimes with the small change
    as it is said ("twelve pounds fifty", 二十二块九)."""
    n = _number(spec, rng)
    cents = int(_pick(rng, (0, 0, 0, 50, 99, 20, 80))) if n < 100 else 0
    if say == "en":
        unit = spec.unit or "pounds"
        return f"{en_number(n)} {unit}" + (f" {en_number(cents)}" if cents else "")
    unit = spec.unit or "块"
    head = "两" if n == 2 else zh_number(n)
    tail = "" if not cents else (zh_number(cents // 10) if cents % 10 == 0 else zh_number(cents // 10) + "毛" + zh_number(cents % 10))
    return head + unit + tail if unit == "块" else head + unit


def gen_address(say: str, rng: np.random.Generator, lang: str) -> str:
    """A street address as said: "forty two Station Road", 人民路一百二十八号, and in en-zh
    a Singapore block address ("Block two one eight Tampines Street twenty one")."""
    n = names()
    num = int(rng.integers(1, 200))
    if say == "zh":
        return f"{_pick(rng, n['zh_roads'])}{zh_number(num)}号"
    if lang == "en-zh":
        block = en_digits(str(int(rng.integers(100, 990))))
        return f"Block {block} {_pick(rng, n['sg_areas'])} Street {en_number(int(rng.integers(11, 90)))}"
    return f"{en_number(num)} {_pick(rng, n['en_streets'])} {_pick(rng, n['en_street_types'])}"


def draw(spec: GenSpec, rng: np.random.Generator, lang: str) -> str:
    """One value of ``spec`` for a block of language ``lang``, with the session's ``rng``."""
    kind = spec.generate
    say = _lang(spec, lang, rng, numbers=kind not in ("name", "given", "surname", "address"))
    if kind in ("name", "given", "surname"):
        v = gen_name(kind, say, rng, lang)
    elif kind == "number":
        n = _number(spec, rng)
        v = en_number(n) if say == "en" else ("两" if n == 2 and spec.unit else zh_number(n)) + spec.unit
    elif kind == "digits":
        s = "".join(str(int(d)) for d in rng.integers(0, 10, spec.n))
        v = en_digits(s) if say == "en" else zh_digits(s)
    elif kind == "time":
        v = gen_time(spec, say, rng)
    elif kind == "date":
        v = gen_date(spec, say, rng)
    elif kind == "price":
        v = gen_price(spec, say, rng)
    else:
        v = gen_address(say, rng, lang)
    return spec.prefix + v + spec.suffix


def draw_other(spec: GenSpec, rng: np.random.Generator, lang: str, old: str) -> str:
    """A value other than ``old`` (a correction changes what was said)."""
    for _ in range(32):
        v = draw(spec, rng, lang)
        if v != old:
            return v
    return v


def samples(spec: GenSpec, lang: str, k: int = 24) -> list[str]:
    """``k`` values of ``spec`` from a fixed rng, after its ``example``: what the frame checker
    checks against the text rules, and what the noise bank reads lines with (the first)."""
    rng = np.random.default_rng(0)
    return ([spec.example] if spec.example is not None else []) + [draw(spec, rng, lang) for _ in range(k)]


# -- reading numbers back (tests, and the one-off conversion of listed slots) ----------------------
def parse_en_number(text: str) -> int | None:
    """"two hundred and forty five" -> 245; None for anything else."""
    total, cur = 0, 0
    words = text.replace("-", " ").split()
    if not words:
        return None
    for w in words:
        if w == "and":
            continue
        if w in _EN_UNITS:
            cur += _EN_UNITS.index(w)
        elif w in _EN_TENS[2:]:
            cur += 10 * _EN_TENS.index(w)
        elif w == "hundred":
            cur = (cur or 1) * 100
        elif w == "thousand":
            total, cur = total + (cur or 1) * 1000, 0
        else:
            return None
    return total + cur


def parse_zh_number(text: str) -> int | None:
    """二十五 -> 25, 两千三百 -> 2300, 十二万零四十五 -> 120045; None for anything else."""
    digits = {c: i for i, c in enumerate(_ZH_DIGITS)} | {"两": 2}
    if not text or any(c not in "零一二两三四五六七八九十百千万" for c in text):
        return None
    total, sec, cur = 0, 0, 0
    for c in text:
        if c in digits:
            cur = digits[c]
        elif c == "十":
            sec, cur = sec + (cur or 1) * 10, 0
        elif c in "百千":
            sec, cur = sec + cur * (100 if c == "百" else 1000), 0
        else:  # 万
            total, sec, cur = total + (sec + cur) * 10_000, 0, 0
    return total + sec + cur
