"""The ASR round-trip gate: is each rendered speech event heard as the words it was meant to say?

Per event (user and system speech, the clean rendering, before room and mix): transcribe it,
normalise reference and hypothesis the same way, and score

- ``zh``: character error rate (CER) over Chinese characters, after Traditional -> Simplified
  (opencc), punctuation removed and digits read as Chinese numerals;
- ``en``: word error rate (WER) over lower-cased words, punctuation removed, digits read as words;
- ``en-zh``: mixed error rate (MER): English words and Chinese characters are the tokens.

An event over its language's threshold is rendered again with the next retry voice (the same
speaker variant at another rate, a deterministic schedule), up to ``max_retries`` times; if no
rendering passes, the session is a reject ``asr_unintelligible``. Every event's score, its
transcript and the attempt kept land in the record (``scene["asr"]``).

>>> error_rate("对，fee 大概十块钱。", "對Vida蓋時快前", "en-zh")
0.857...
"""

from __future__ import annotations

import itertools
import re
import threading
import unicodedata
from dataclasses import dataclass, replace
from typing import Callable

from ..backends.tts import Rendered, Voice
from ..errors import SessionReject
from ..text import HAN_RANGES
from ..schema.plan import talker

METRIC = {"en": "wer", "zh": "cer", "en-zh": "mer"}
FILLERS = {"um", "uh", "uhm", "umm", "er", "erm", "hmm", "hm", "mm", "mhm", "mm-hm", "uh-huh",
           "嗯", "呃", "额", "唔", "嗯嗯"}
_TOKEN = re.compile(rf"[{HAN_RANGES}]|[a-z0-9]+(?:['\-][a-z0-9]+)*")
_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_DOLLARS = re.compile(r"\$\s*(\d+(?:\.\d+)?)|(\d+(?:\.\d+)?)\s*\$")
_t2s = None
_t2s_lock = threading.Lock()


def _simplified(text: str) -> str:
    global _t2s
    if _t2s is None:
        with _t2s_lock:
            try:
                import opencc
            except ImportError:
                raise ImportError("the ASR gate needs the package opencc: pip install 'duplexsynth[asr]'") from None
            _t2s = opencc.OpenCC("t2s")
    return _t2s.convert(text)


def _digits(text: str, lang: str) -> str:
    """Numbers as words (en) or Chinese numerals (zh, en-zh), so '10' matches 'ten' / '十'."""
    if lang == "en":
        from num2words import num2words

        return _DIGITS.sub(lambda m: " " + num2words(float(m.group()) if "." in m.group() else int(m.group())) + " ",
                           text)
    import cn2an
    from num2words import num2words

    def read(m: re.Match) -> str:  # a number beside English words is read in English
        g = m.group()
        start, end = m.span()
        if re.search(r"[a-z]\s*$", text[max(0, start - 2):start]) or re.match(r"\s*[a-z]", text[end:end + 2]):
            return " " + num2words(float(g) if "." in g else int(g)) + " "
        return cn2an.an2cn(g)

    return _DIGITS.sub(read, text)


def tokens(text: str, lang: str) -> list[str]:
    """The scored units of ``text``: words for en, characters for zh, both for en-zh.

    >>> tokens("對， fee 大概10塊錢！", "en-zh")
    ['对', 'fee', '大', '概', '十', '块', '钱']
    """
    t = _DOLLARS.sub(lambda m: f"{m.group(1) or m.group(2)} dollars ", _normalised(text, lang))
    return _scored(_digits(t, lang), lang)


def _normalised(text: str, lang: str) -> str:
    """What reference and hypothesis share: NFKC, lower case, Simplified characters (zh, en-zh),
    ``okay`` as ``ok``."""
    t = unicodedata.normalize("NFKC", text).lower()
    return _OKAY.sub("ok", _simplified(t) if lang != "en" else t)


def _scored(text: str, lang: str) -> list[str]:
    """The tokens of normalised text, fillers left out (an English hyphen splits words)."""
    t = text.replace("-", " ") if lang == "en" else text
    return [w for w in (m.group() for m in _TOKEN.finditer(t)) if w not in FILLERS]


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    from rapidfuzz.distance import Levenshtein

    return Levenshtein.distance(ref, hyp)


_NUMBER = re.compile(r"\d+(?:[.:]\d+)?(?:st|nd|rd|th)?")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_EN_UNITS = [(re.compile(r"£\s*(\d[\d.,]*)"), r"\1 pounds "), (re.compile(r"€\s*(\d[\d.,]*)"), r"\1 euros "),
             (re.compile(r"(\d)\s*%"), r"\1 percent "), (re.compile(r"\blbs?\b"), "pounds"),
             (re.compile(r"\s&\s"), " and ")]
_OKAY = re.compile(r"\bokay\b")
_ZH_DIGITS = "零一二三四五六七八九"
_EN_DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
MAX_READINGS = 256


def _en_readings(g: str) -> list[str]:
    """How a number ASR wrote as digits may have been said in English."""
    from num2words import num2words

    core = g.rstrip("stndrh")
    if core != g:
        return [num2words(int(core), to="ordinal")]
    if ":" in core or "." in core:
        a, b = re.split(r"[.:]", core)
        out = [num2words(float(core))] if "." in core else []
        if len(b) == 2 and int(a) <= 24:
            m = int(b)
            out += [num2words(int(a)) + " o'clock", num2words(int(a))] if m == 0 else \
                [num2words(int(a)) + " " + ("oh " + num2words(m) if m < 10 else num2words(m))]
        return out or [num2words(float(core))]
    n = int(core)
    out = [num2words(n), " ".join(_EN_DIGITS[int(c)] for c in core), " ".join("oh" if c == "0" else _EN_DIGITS[int(c)] for c in core)]
    if 1000 <= n <= 2999:
        out.append(num2words(n, to="year"))
    return out


def _zh_readings(g: str) -> list[str]:
    """How a number ASR wrote as digits may have been said in Mandarin."""
    import cn2an

    core = g.rstrip("stndrh")
    if ":" in core:
        a, b = core.split(":")
        return [cn2an.an2cn(a) + "点" + (cn2an.an2cn(b) if int(b) else ""), cn2an.an2cn(a) + "点" + cn2an.an2cn(b) + "分"]
    spelt = "".join(_ZH_DIGITS[int(c)] if c.isdigit() else "点" for c in core)
    out = [cn2an.an2cn(core), spelt, spelt.replace("一", "幺")]  # 幺: a 1 in a spoken digit string
    if core == "2":
        out.append("两")
    return out


def _readings(g: str, lang: str) -> list[str]:
    """Every reading of the number ``g`` in ``lang``; a number too long to read as one is its digits."""
    try:
        return (_en_readings(g) if lang != "zh" else []) + (_zh_readings(g) if lang != "en" else [])
    except (ValueError, OverflowError, ArithmeticError):  # cn2an and num2words refuse huge numbers
        digits = [c for c in g if c.isdigit()]
        return ([" ".join(_EN_DIGITS[int(c)] for c in digits)] if lang != "zh" else []) + \
            (["".join(_ZH_DIGITS[int(c)] for c in digits)] if lang != "en" else [])


def _hyp_pieces(text: str, lang: str) -> list[list[str]]:
    """``text`` cut into literal pieces and numbers; each number is the list of its possible
    readings (English, Mandarin or both for en-zh)."""
    t = _THOUSANDS.sub("", _normalised(text, lang))
    t = _DOLLARS.sub(lambda m: f"{m.group(1) or m.group(2)} dollars ", t)
    if lang != "zh":
        for pat, rep in _EN_UNITS:
            t = pat.sub(rep, t)
    pieces, pos = [], 0
    for m in _NUMBER.finditer(t):
        pieces.append([t[pos:m.start()]])
        g = m.group()
        readings = _readings(g, lang)
        pieces.append([f" {r} " for r in dict.fromkeys(readings)])
        pos = m.end()
    pieces.append([t[pos:]])
    return pieces


def error_rate(ref_text: str, hyp_text: str, lang: str) -> float:
    """Edits (substitutions + deletions + insertions) over reference tokens; 0 for an empty
    reference heard as nothing, 1 per inserted token for an empty reference.

    A number the ASR wrote in digits is read the way that fits the reference best (cardinal, digit by
    digit, ordinal, clock time, year; English or Mandarin): how an ASR formats a number says nothing
    of how well it was spoken.

    >>> error_rate("Make the reminder for four fifteen.", "Make the reminder for 4.15.", "en")
    0.0
    """
    ref = tokens(ref_text, lang)
    pieces = _hyp_pieces(hyp_text, lang)
    combos = 1
    for p in pieces:
        combos *= len(p)
    if combos > MAX_READINGS:  # many numbers: each one's first reading
        pieces = [p[:1] for p in pieces]
    best = None
    for choice in itertools.product(*pieces):
        hyp = _scored("".join(choice), lang)
        d = edit_distance(ref, hyp)
        best = d if best is None else min(best, d)
    if not ref:
        return float(best > 0)
    return best / len(ref)


def event_lang(words) -> str:
    langs = {w.lang for w in words}
    return "en-zh" if len(langs) > 1 else next(iter(langs), "en")


@dataclass(frozen=True)
class Heard:
    """One event's ASR result, as stored in the record."""

    lang: str
    metric: str
    error: float
    hyp: str
    attempt: int
    tokens: int
    decoded_as: str = ""

    def as_dict(self) -> dict:
        return {"lang": self.lang, "metric": self.metric, "error": round(self.error, 4), "hyp": self.hyp,
                "attempt": self.attempt, "tokens": self.tokens, "decoded_as": self.decoded_as}


def retry_voice(voice: Voice, attempt: int, factors: list[float]) -> Voice:
    """The voice of render ``attempt`` (0: the drawn one): the same variant at a scaled rate."""
    if attempt == 0:
        return voice
    return replace(voice, rate_wpm=max(60, int(round(voice.rate_wpm * factors[(attempt - 1) % len(factors)]))))


_ENGINES: dict[tuple, object] = {}
_ENGINES_LOCK = threading.Lock()


def engine_for(cfg):
    """One loaded ASR model per process and config (workers load their own on first use)."""
    key = (cfg.model_path, cfg.cache_dir, cfg.device, cfg.compute_type, cfg.threads)
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            from ..backends.whisper import WhisperASR

            _ENGINES[key] = WhisperASR(cfg.model_path, cfg.cache_dir, cfg.device, cfg.compute_type, cfg.threads).load()
        return _ENGINES[key]


DECODE_LANGUAGES = {"en": ["en"], "zh": ["zh"], "en-zh": ["zh", "auto"]}


def decode_languages(lang: str, cfg) -> list[str]:
    """Whisper's decoding languages for an event of ``lang``; ``auto`` is the detected language.

    An en-zh event is decoded as Mandarin and as the language Whisper detects (one encoder pass),
    and scored by the better of the two: whisper-base often takes a line that starts in English for
    English and drops its Chinese, or a Chinese line for Chinese and spells its English in
    characters (measured on 30 Kokoro en-zh lines: MER 0.42 detected only, 0.62 Mandarin only
    (a few runaway repetitions), 0.41 the better of both). ``qa.asr.decode_language`` overrides.
    """
    chosen = cfg.decode_language.get(lang, DECODE_LANGUAGES[lang])
    return [chosen] if isinstance(chosen, str) else list(chosen)


def hear(asr, r: Rendered, ref_text: str, lang: str, cfg, attempt: int) -> Heard:
    """The best-scoring transcript of ``r`` over the decoding languages of ``lang``."""
    best = None
    for t in asr.transcripts(r.audio, r.sample_rate, decode_languages(lang, cfg)):
        e = error_rate(ref_text, t.text, lang)
        if best is None or e < best[0]:
            best = (e, t)
    e, t = best
    return Heard(lang, METRIC[lang], e, t.text, attempt, len(tokens(ref_text, lang)), t.language)


def gate(cfg, plan, rendered: dict[str, Rendered], voices: dict[str, Voice],
         render_event: Callable, asr=None) -> tuple[dict[str, Rendered], dict]:
    """The rendered events with every unintelligible one re-rendered, and the record's summary.

    ``render_event(event, voice) -> Rendered`` renders one planned event again (at its level).
    ``cfg`` is ``qa.asr``; with ``cfg`` None or disabled nothing is checked. Raises
    ``SessionReject("qa", "asr_unintelligible", ...)`` when an event fails every attempt.
    """
    if cfg is None or not cfg.enabled:
        return rendered, {}
    asr = asr or engine_for(cfg)
    out, events = dict(rendered), {}
    for ev in plan.events:
        if ev.sound is not None or ev.speaker not in cfg.speakers or not ev.words:
            continue
        ref = " ".join(w.text for w in ev.words)
        lang = event_lang(ev.words)
        if len(tokens(ref, lang)) < cfg.min_tokens:
            continue
        limit = cfg.max_error.get(lang, type(cfg).model_fields["max_error"].default[lang])
        best, best_r = None, None
        for attempt in range(cfg.max_retries + 1):
            r = out[ev.id] if attempt == 0 else render_event(ev, retry_voice(voices[talker(ev)], attempt,
                                                                               cfg.retry_rate_factors))
            h = hear(asr, r, ref, lang, cfg, attempt)
            if best is None or h.error < best.error:
                best, best_r = h, r
            if h.error <= limit:
                break
        events[ev.id] = best.as_dict()
        if best.error > limit:
            raise SessionReject("qa", "asr_unintelligible",
                                f"{ev.id} ({lang}): {best.metric} {best.error:.2f} > {limit} after "
                                f"{cfg.max_retries + 1} renders; heard {best.hyp[:60]!r} for {ref[:60]!r}")
        out[ev.id] = best_r
    return out, {"engine": asr.name, "model": getattr(asr, "model_label", ""), "events": events}
