"""Answers composed from interchangeable parts (issue 32): acknowledgement + content + follow-on.

A frame's answer is the *content clause*: what answers the request. Around it the composer puts an
optional acknowledgement and an optional follow-on (an offer or an open question), each drawn from
many paraphrases in ``_parts.yaml`` (per language; follow-ons also per domain), so that the same
content is said in many ways at corpus scale. Agreement is kept:

- an answer that already opens with an acknowledgement ("Sure, ...", "Yes, ...", 不好意思，...)
  has it *replaced* by one of the same kind (never two acknowledgements);
- one that opens straight with content gets one that fits the question: a request gets a
  compliance ("Sure", 好的), a question a neutral receipt ("Let me see", 我查一下); an answer with
  a refusal or a negation in it gets only the neutral kind (no "sure!" before bad news);
- the follow-on after bad news is an alternative offered, after any other answer an offer or an
  open invitation that the next user turn, whatever it is, answers; none after an answer that
  asks something (``asks_user``: a question, "tell me the new number"); the domain's own
  follow-ons fit its requests. ``open_question`` says what a line leaves open for a goodbye.

Sizes stay those of the frames (CONTENT.md): a composed answer keeps at most ``MAX_WORDS`` words
(or the content's own length if longer), phrases joined with commas. ``check_parts`` is the frame
checker's rule set for the pools (``python -m synth.backends.frames synth/data/frames/_parts.yaml``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

import numpy as np
import yaml

from ..text import word_count

ACK_KINDS = ("confirm", "deny", "comply", "neutral", "bad_news")
FOLLOW_KINDS = ("any", "bad_news")
ACK_P = 0.55
"""Share of answers without an acknowledgement that get one."""
SWAP_P = 0.8
"""Share of answers with an acknowledgement whose acknowledgement is re-drawn from its kind."""
FOLLOW_P = 0.3
"""Share of long answers that get a follow-on."""
SIGNOFF_P = 0.6
"""Share of closings that end on no wish ("just ask if anything changes") that get a sign-off
added: most spoken closings end on one, and a closing said as written recurs across sessions."""
MAX_WORDS = 40
ACK_WORDS, FOLLOW_WORDS = (1, 6), (3, 16)
LANGS = ("en", "zh", "en-zh")

_NEG_EN = re.compile(r"\b(sorry|unfortunately|afraid|sadly|can't|cannot|unable|couldn't|won't be able|fully booked|"
                     r"booked up|sold out|out of stock|not available|unavailable|no longer|too late|closed|"
                     r"cancelled|delayed|failed|declined|no tables?|nothing left)\b", re.I)
_NEG_ZH = re.compile(r"抱歉|不好意思|对不起|恐怕|可惜|遗憾|满了|订满|没有了|卖完|缺货|不行|不能|没办法|来不及|关门|"
                     r"取消了|延误|失败|被拒|sorry|unfortunately|can't|cannot|fully booked|sold out", re.I)
_REQUEST_EN = re.compile(r"^(?:\w+, )?(?:(?:can|could|would|will) you|please|i want|i need|i'd like|i would like|"
                         r"i'm looking|help me|let's|set|book|add|turn|play|send|remind|move|find|cancel|put|get|"
                         r"make|check|start|show|tell me|give me|read|order|change|call|text|email|schedule|"
                         r"look up|search)\b", re.I)
_WH_EN = re.compile(r"\b(what|how|when|where|which|who|why)\b", re.I)
_REQUEST_ZH = re.compile(r"帮我|帮忙|请|我想|我要|给我|麻烦|帮.{0,2}(订|查|设|加|放|找|看|改|取消)|^(设|订|把|放|开|关|加|查)")
_WH_ZH = re.compile(r"什么|怎么|多少|几|哪|谁|为什么|多久|多长|how|what|when|where|which", re.I)


_ASK_EN = re.compile(r"\?|\b(?:tell|read|give|send) me (?:the|your|which|what|who|where|when|how|a|an)\b|\bjust tell me\b", re.I)
_ASK_ZH = re.compile(r"[?？]|(?:您|你)(?:说|讲)一下|告诉我|把.{1,16}(?:告诉|发给)我|tell me|read me", re.I)
"""A line that asks the listener for something: a question, or "tell me the number" / 您说一下新号码."""
_MORE = re.compile(r"\b(?:anything else|what else|any other|anything more)\b|还有(?:别的|什么|其他|问题)|别的.{0,8}吗|other questions?|随时(?:问|找)",
                   re.I)
"""A follow-on that invites more ("Anything else?", 还有别的事吗？), not one that offers something."""


def asks_user(text: str, lang: str) -> bool:
    """Whether ``text`` asks the listener something that wants an answer: a question anywhere in
    it, or a request for information ("tell me the new number", 您说一下尾号). Nothing is composed
    after it, and a session does not close on it (the closing would leave it unanswered)."""
    return bool((_ASK_EN if lang == "en" else _ASK_ZH).search(text))


def _bare(text: str) -> str:
    """``text`` without spaces, in lower case: a planned line (words joined; after "well, um," its
    first word goes on in lower case) is compared with what was composed."""
    return re.sub(r"\s+", "", text).lower()


_ECHO = re.compile(r"(?i)(you|it|they|we|i|he|she|that|there|this)\s+(will|do|does|did|can|could|is|are|was|were|"
                   r"would|should|have|has|had|may|might)\b")
"""An answer that echoes the question's auxiliary ("yes, you will", "yes, it does"): its yes stays a yes."""
_DONE = re.compile(r"^(?:i've|i have|done|all done|it's done|added|saved|booked|sent|set|changed|updated|"
                   r"finished|ordered)\b|^[^，。,]{0,12}(?:已经|好了|上了|完了|了，)", re.I)
"""A reply that reports what was just done ("I've added it", 加上了): it follows a compliance ("Okay"),
not "let me check"."""


@lru_cache(maxsize=None)
def parts() -> dict:
    """``_parts.yaml``: per language, ``ack`` pools by kind and ``heads`` (the openings of each kind
    that the composer recognises), ``followon`` pools by kind and ``followon_domain`` by domain."""
    text = resources.files("synth.data.frames").joinpath("_parts.yaml").read_text("utf-8")
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def question_kind(user_line: str, lang: str) -> str:
    """``request`` (do something, tell me how), ``wh`` (a content question) or ``yn``."""
    text = user_line.strip()
    if lang == "en":
        if _REQUEST_EN.search(text):
            return "request"
        return "wh" if _WH_EN.search(text) else "yn"
    if _REQUEST_ZH.search(text) or _REQUEST_EN.search(text):
        return "request"
    return "wh" if _WH_ZH.search(text) else "yn"


_NOT_NEGATIVE = re.compile(r"no problem|no worries|not a problem|don't worry|no need to worry|没问题|没错|不错|不客气|"
                           r"不用担心|没关系|不用客气|要不要|不清楚|好不好|是不是|能不能|可不可以|有没有|会不会|"
                           r"要不|对不对|行不行", re.I)


def is_negative(text: str, lang: str) -> bool:
    """Whether an answer brings bad news (opens with an apology or a no, or declines, regrets,
    reports something full, closed, failed): then only a neutral acknowledgement, and a follow-on
    that offers an alternative. Set phrases that only look negative ("no problem", 没问题) do not count."""
    from .line_kinds import BAD_NEWS, _opens_with

    text = _NOT_NEGATIVE.sub(" ", text)
    return _opens_with(text, BAD_NEWS) or bool((_NEG_EN if lang == "en" else _NEG_ZH).search(text))


def split_head(text: str, lang: str) -> tuple[str | None, str, str]:
    """``(kind, head, rest)``: the answer's opening acknowledgement, its kind and the rest, or
    ``(None, "", text)`` when the answer opens straight with content. A head is the first phrase
    (up to the first comma) when it is one of the ``heads`` of ``_parts.yaml``."""
    m = re.match(r"\s*([^,，。.!?？！]{1,16})[,，]\s*", text)
    if m:
        head = m.group(1).strip()
        key = head.lower()
        for kind, heads in parts()[lang]["heads"].items():
            if key in (h.lower() for h in heads):
                return kind, head, text[m.end():]
    return None, "", text


_KEEP_CASE = {"I", "I'm", "I'd", "I've", "I'll"}


@lru_cache(maxsize=None)
def _common_words() -> frozenset[str]:
    """English words written in lower case somewhere in the content (all domains): a sentence's
    first word that is one of them goes on in lower case after an acknowledgement ("Right, since
    ..."); a name ("Bob Marley", "Doctor Gray") never is one, so it keeps its capital."""
    from .frames import _texts, domain_content, domains

    words: set[str] = set()
    for d in domains():
        dc = domain_content(d)
        for blk in (dc.en, dc.en_zh):
            words.update(w for _, t in _texts(blk.model_dump()) for w in re.findall(r"[A-Za-z']+", t) if w.islower())
    return frozenset(words)


def _regrets(text: str, lang: str) -> bool:
    """Bad news said outright (sorry, unfortunately, fully booked, 抱歉, 满了 ...), not a mere "no"."""
    return bool((_NEG_EN if lang == "en" else _NEG_ZH).search(_NOT_NEGATIVE.sub(" ", text)))


def lower_head(text: str, keep=()) -> str:
    """An en-zh piece that goes on after an acknowledgement ("好的，" + "Forward 好了"): its first
    word in lower case where it is a common English word; a name ("Bishan") and a slot value of
    the session (``keep``: "Kopi" the dog, "Block six six two") keep their capital."""
    m = re.match(r"[A-Z][a-z']+\b", text)
    if not m or m.group(0).lower() not in _common_words() or m.group(0) in _KEEP_CASE:
        return text
    if any(v[:1].isupper() and text.startswith(v) for v in keep):
        return text
    return text[:1].lower() + text[1:]


def _opens_marked(text: str) -> bool:
    """Whether an answer opens with its own yes or apology ("Sorry 给你添麻烦了，..."): no ack before it."""
    from .line_kinds import BAD_NEWS, CONFIRMING, _opens_with

    return _opens_with(text, BAD_NEWS) or _opens_with(text, CONFIRMING)


class Composer:
    """Composes one session's answers: its rng, language and domain."""

    def __init__(self, rng: np.random.Generator, lang: str, domain: str):
        self.rng, self.lang, self.domain = rng, lang, domain
        self.said: set[str] = set()
        self.keep: tuple[str, ...] = ()
        self.composed: dict[str, tuple[bool, str | None]] = {}
        """Each composed answer (without spaces): whether its content asks something, and the kind of
        the follow-on question it ends with (``offer``, ``more``) or None."""
        p = parts()[lang]
        self.acks = p["ack"]
        self.follow = {"any": list(p["followon"]["any"]) + list(p.get("followon_domain", {}).get(domain, [])),
                       "bad_news": list(p["followon"]["bad_news"])}

    def _choose(self, items):
        """One of ``items``, one not yet said in this session where there is one (a follow-on or
        an acknowledgement said twice in a conversation sounds canned)."""
        rest = [x for x in items if x not in self.said] or list(items)
        x = rest[int(self.rng.integers(len(rest)))]
        self.said.add(x)
        return x

    def compose(self, content: str, user_line: str, short: bool = False, say=None, ack: bool = True,
                keep=()) -> str:
        """``content`` (a filled answer) with an acknowledgement and a follow-on where they fit.
        ``say`` fills a follow-on's ``{topic}``; ``short``: a brief answer gets no follow-on;
        ``keep``: the session's slot values (an en-zh value after an acknowledgement keeps its case)."""
        from .script import join_lines  # (script imports the frames; the planner imports both)

        self.keep = tuple(keep)
        kind, head, rest = split_head(content, self.lang)
        negative = is_negative(content, self.lang)
        out = content
        if not ack:
            pass
        elif kind is not None:
            if kind == "confirm" and not _ECHO.match(rest):  # "Yes, you will" keeps a yes; a yes to a
                # request is a compliance; to a wh-question it stays as said
                kind = {"request": "comply", "wh": None}.get(question_kind(user_line, self.lang), kind)
            pool = self.acks.get(kind)
            if isinstance(pool, dict):  # a no said with its question's verb: 不用 for "do I need", 不会 for "will it"
                pool = pool.get(head.lower())
            if pool and self.rng.random() < SWAP_P:
                out = self._join(self._choose(pool), rest, join_lines)
        elif not _opens_marked(content) and self.rng.random() < ACK_P:
            q = question_kind(user_line, self.lang)
            k = "comply" if (q == "request" or _DONE.search(content)) and not negative else "neutral"
            out = self._join(self._choose(self.acks[k]), content, join_lines)
        if self.lang == "en-zh" and out is content and kind is not None:  # its own head kept: "OK，Diagnostic ..."
            out = content[: len(content) - len(rest)] + lower_head(rest, keep)
        asks = asks_user(content, self.lang)
        self.composed[_bare(out)] = (asks, None)
        if short or asks or self.rng.random() >= FOLLOW_P:
            return out
        bad = kind == "bad_news" or _regrets(content, self.lang)  # "No ads, ..." is good news
        f = self._choose(self.follow["bad_news" if bad else "any"])
        if "{" in f:
            if say is None:
                return out
            f = say(f)
        longer = out + (" " if self.lang == "en" or out[-1:].isascii() and f[:1].isascii() else "") + f
        if word_count(longer) > max(MAX_WORDS, word_count(content)):
            return out
        if f.rstrip()[-1:] in "?？":
            self.composed[_bare(longer)] = (False, "more" if _MORE.search(f) else "offer")
        return longer

    def open_question(self, text: str) -> str | None:
        """What a system line leaves open for the user's next turn: None (nothing), ``offer`` or
        ``more`` (it ends with a follow-on question this composer added: "Shall I note that down?",
        "Anything else?", which a "no thanks" answers), or ``content`` (the answer itself asks
        something only an answer with content can settle: "tell me the new number")."""
        bare = _bare(text)
        ends = [out for out in self.composed if bare.endswith(out)]  # a dispreferred answer: "well, um," before it
        if ends:
            out = max(ends, key=len)
            asks, kind = self.composed[out]
            return "content" if asks or asks_user(bare[: len(bare) - len(out)], self.lang) else kind
        return "content" if asks_user(text, self.lang) else None

    def closing(self, text: str, keep=()) -> str:
        """A system closing (filled) re-said from parts: a thanks-receipt opening ("You're
        welcome") re-drawn, and its last phrase, when it is a wish ("have a good day"), replaced by
        another sign-off, or a sign-off added (the rest, what the session did, stays)."""
        c = parts()[self.lang]["closing"]
        comma = ", " if self.lang == "en" else "，"
        body = text.rstrip()
        end = body[-1:] if body[-1:] in ".!。！" else ""
        phrases = [p.strip() for p in re.split(r"[,，]", body[: len(body) - len(end)]) if p.strip()]
        if len(phrases) > 1 and phrases[0].lower() in {h.lower() for h in c["heads"]} and self.rng.random() < SWAP_P:
            phrases[0] = self._choose(c["welcome"])
            if self.lang == "en-zh":
                phrases[1] = lower_head(phrases[1], keep)
        last = phrases[-1].lower()
        wish = len(phrases) > 1 and any(last.startswith(w.lower()) or w.lower() in last for w in c["wish"])
        if wish or self.rng.random() < SIGNOFF_P:
            said = _echo_units(" ".join(phrases[:-1] if wish else phrases))
            signoff = self._choose([s for s in c["signoff"] if not _echo_units(s) & said] or c["signoff"])
            phrases = phrases[:-1] + [signoff] if wish else phrases + [signoff]
        out = comma.join(phrases) + (end or ("." if self.lang == "en" else "。"))
        return out if word_count(out) <= max(MAX_WORDS, word_count(text)) else text

    def clarify(self, say=None) -> str:
        """"Sorry, the line broke up, could you say that again?": an apology, why, and the ask
        (one that names the topic only where ``say`` can fill it)."""
        c = parts()[self.lang]["clarify"]
        asks = [a for a in c["ask"] if say is not None or "{" not in a]
        ask = self._choose(asks)
        comma = ", " if self.lang == "en" else "，"
        line = comma.join([self._choose(c["open"]), self._choose(c["why"]), ask])
        return say(line) if say is not None and "{" in line else line

    def _join(self, ack: str, rest: str, join_lines) -> str:
        """English: "Sure," and the content going on in lower case (names keep their capital);
        Chinese and en-zh: a Chinese comma, the content as written ("Sorry 啊，travel card ...")."""
        if self.lang == "en":
            word = re.match(r"[A-Za-z']*", rest).group(0)
            if word.lower() in _common_words() and word not in _KEEP_CASE and not (word.isupper() and len(word) > 1):
                rest = rest[:1].lower() + rest[1:]
            return join_lines(ack + ",", rest, self.domain)
        return ack + "，" + lower_head(rest, self.keep)


# -- the checker's rules for the pools ------------------------------------------------------------
def check_parts(raw, where: str = "_parts.yaml") -> list[str]:
    """Problems of a parts file: every language, every kind, enough paraphrases, the speech rules
    of the frames (language, markup, digits), sizes, only ``{topic}`` as a field, and agreement:
    a ``bad_news`` ack opens with an apology or a regret, a ``confirm`` one with a yes, a ``comply``
    or ``confirm`` one says no 'no' or 'not', a follow-on for any answer offers nothing regretful."""
    from .frame_checks import _line_problems
    from .frames import domains, fields
    from .line_kinds import BAD_NEWS, CONFIRMING, _opens_with

    if not isinstance(raw, dict):
        return [f"{where}: not a mapping of languages"]
    out = []
    for lang in LANGS:
        p = raw.get(lang)
        if not isinstance(p, dict):
            out.append(f"{where}: {lang}: missing")
            continue
        at = f"{where}: {lang}"
        for kind in ACK_KINDS:
            for t in _ack_paraphrases(p, kind, at, out):
                out += _part_problems(t, lang, f"{at}.ack.{kind}", ACK_WORDS)
                if kind == "bad_news" and not _opens_with(t + ",", BAD_NEWS):
                    out.append(f"{at}.ack.bad_news: {t!r} does not open with an apology or a regret")
                if kind == "confirm" and not _opens_with(t + ",", CONFIRMING):
                    out.append(f"{at}.ack.confirm: {t!r} does not open with a yes")
                if kind in ("confirm", "comply") and is_negative(t, lang):
                    out.append(f"{at}.ack.{kind}: {t!r} says no or not (a {kind} ack agrees)")
        for kind, heads in (p.get("heads") or {}).items():
            if kind not in ACK_KINDS and kind != "keep":
                out.append(f"{at}.heads: unknown kind {kind!r} (known: {', '.join(ACK_KINDS)}, keep)")
        for kind in FOLLOW_KINDS:
            for t in _paraphrases(p, "followon", kind, at, out):
                out += _part_problems(t, lang, f"{at}.followon.{kind}", FOLLOW_WORDS)
                if kind == "any" and is_negative(t, lang):
                    out.append(f"{at}.followon.any: {t!r} is regretful (it follows good news too)")
        out += _closing_problems(p, lang, at)
        known = set(domains())
        for dom, pool in (p.get("followon_domain") or {}).items():
            if dom not in known:
                out.append(f"{at}.followon_domain: no domain {dom!r}")
            for t in pool or []:
                out += _part_problems(t, lang, f"{at}.followon_domain.{dom}", FOLLOW_WORDS)
                bad = fields(t) - {"topic"}
                if bad:
                    out.append(f"{at}.followon_domain.{dom}: {t!r} uses {{{sorted(bad)[0]}}} (only {{topic}})")
    return out


def _ack_paraphrases(p: dict, kind: str, at: str, out: list[str]) -> list:
    """The acknowledgements of ``kind``: a list, or (a ``deny`` said with its question's verb) a
    mapping from each of its heads to a list; a key that is not one of the kind's heads is a problem."""
    pool = (p.get("ack") or {}).get(kind)
    if not isinstance(pool, dict):
        return _paraphrases(p, "ack", kind, at, out)
    heads = {h.lower() for h in (p.get("heads") or {}).get(kind) or []}
    lines = []
    for head, sub in pool.items():
        if str(head).lower() not in heads:
            out.append(f"{at}.ack.{kind}: {head!r} is not one of heads.{kind}")
        lines += _paraphrases({"ack": pool}, "ack", head, f"{at}.{kind}", out)
    return lines


def _paraphrases(p: dict, section: str, kind: str, at: str, out: list[str]) -> list:
    """The pool ``p[section][kind]``; where it is not a list of at least 3 lines, a problem is added
    to ``out`` and the pool is taken as empty."""
    pool = (p.get(section) or {}).get(kind)
    if not isinstance(pool, list) or len(pool) < 3:
        out.append(f"{at}.{section}.{kind}: want a list of at least 3 paraphrases")
        return []
    return pool


def _echo_units(text: str) -> set[str]:
    """English words of three letters or more and Chinese character pairs: a sign-off sharing one
    with the closing would say its thing twice ("有变化随时找我，有事随时找我")."""
    words = {w.lower() for w in re.findall(r"[A-Za-z']{3,}", text)}
    han = re.findall(r"[\u4e00-\u9fff]+", text)
    return words | {run[i:i + 2] for run in han for i in range(len(run) - 1)}


def _closing_problems(p: dict, lang: str, at: str) -> list[str]:
    """The closing and clarify pools: present, long enough, spoken-text rules; a clarify ask is a question."""
    out = []
    for sect, keys in (("closing", ("welcome", "heads", "wish", "signoff")), ("clarify", ("open", "why", "ask"))):
        for key in keys:
            pool = (p.get(sect) or {}).get(key)
            if not isinstance(pool, list) or len(pool) < 3:
                out.append(f"{at}.{sect}.{key}: want a list of at least 3")
                continue
            if key in ("heads", "wish"):
                continue
            for t in pool:
                out += _part_problems(t, lang, f"{at}.{sect}.{key}", (1, 10))
                if key == "ask" and isinstance(t, str) and t.rstrip()[-1:] not in "?？":
                    out.append(f"{at}.clarify.ask: {t!r} is not a question")
    return out


def _part_problems(text, lang: str, where: str, size: tuple[int, int]) -> list[str]:
    from .frame_checks import _line_problems
    from .frames import fields

    if not isinstance(text, str) or not text.strip():
        return [f"{where}: {text!r} is not a line"]
    if fields(text) - {"topic"}:
        return [f"{where}: {text!r} uses a field other than {{topic}}"]
    spoken = text.replace("{topic}", "它" if lang != "en" else "it")
    out = [p for p in _line_problems(spoken, lang, where, "part") if " words, want " not in p
           and not (re.search(r"\.(ack|closing|clarify)\.", where) and "no Chinese" in p)]  # an en-zh part of a
    # line may be all English ("OK", "Sorry", "take care"): the line it goes into is mixed
    n = word_count(spoken)
    if not size[0] <= n <= size[1]:
        out.append(f"{where}: {n} words, want {size[0]}-{size[1]}: {text!r}")
    return out
