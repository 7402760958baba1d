"""The content checker: what ``python -m synth.backends.frames FILE`` (``synth frames check``) finds.

Beyond the models' own rules (:mod:`.frames`): the language rule, markup, digits and sizes of
every spoken line (:func:`speech_problems`), what a content folder's file may add
(:func:`added_problems`), and the glue rules of issue 32 (:func:`glue_problems`: a readdress picks
up the third party's reply; :func:`volunteer_problems`: a follow-up can be asked without a value
nobody asked for; :func:`answer_shaped_problems`: a task's request answers no question nobody
asked). :func:`check_file` runs them all on one file.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from ..text import CJK, HAN, word_count
from .frames import (_LOADER, LANGS, SAMPLE_NAME, AddedFile, DomainFile, _texts, block, domain_tools, domains,
                     fields, fill, is_added_file, slot_pool)

_MARKUP = re.compile(r"[\[\]<>*#_~`|\\]|[\U0001F300-\U0001FAFF\u2600-\u27BF]|\{(?![a-z_][a-z0-9_]*\})")
_LATIN = re.compile(r"[A-Za-z]")
_HAN = HAN
USER_WORDS, SYSTEM_WORDS = (2, 28), (4, 60)
"""Sizes that fit speech (CONTENT.md), in words (jieba words for Chinese)."""


# -- speech checks (language rule, markup, sizes) -------------------------------------------------
SYSTEM_KEYS = {"system", "short", "repair", "then", "ack", "result", "failure", "openings", "head", "tail"}


def speech_problems(block: dict, lang: str) -> list[str]:
    """Problems with the spoken lines of one language block, slots filled with their first value."""
    problems, english_lines, lines = [], 0, 0
    for frame in block.get("frames", []):
        pools = {k: _pool(v, lang) for k, v in frame.get("slots", {}).items()}
        for d in frame.get("delegations", []):
            pools.update({k: _pool(v, lang) for k, v in d.get("slots", {}).items()})
        values = {k: v[0] for k, v in pools.items()}
        first = next(iter(values.values()), "x")
        values.update(topic=fill(frame.get("topic", ""), values), old=first, new=first, user=SAMPLE_NAME[lang])
        values["task"] = fill(next((d.get("task", "") for d in frame.get("delegations", [])), ""), values)
        for name, pool in pools.items():
            for v in pool:  # every value is spoken somewhere: the same rules, without the size
                problems += [p for p in _line_problems(str(v), lang, f"frames[{frame.get('id')}].slots.{name}", "value")
                             if " words, want " not in p and "no Chinese" not in p]
        for where, text in _texts(frame, f"frames[{frame.get('id')}]"):
            key = re.sub(r"\[\d+\]", "", where).split(".")[-1]
            if key in ("id", "tool", "objective", "note", "slot", "task", "topic") or ".slots" in where:
                continue
            try:
                spoken = fill(text, values)
            except (KeyError, IndexError, ValueError):
                continue  # reported by the model check
            problems += _line_problems(spoken, lang, where, key)
            lines += 1
            english_lines += bool(_LATIN.search(spoken))
    frames = block.get("frames") or [{}]
    sample = {k: _pool(v, lang)[0] for k, v in frames[0].get("slots", {}).items()}
    sample = {"user": SAMPLE_NAME[lang], "topic": fill(frames[0].get("topic", ""), sample) or "x"}
    for key in ("openings", "self_talk", "side_talk", "closings"):
        for where, text in _texts(block.get(key, []), key):
            if re.search(r"\.frames\[\d+\]$", where):  # a closing's frame ids, not speech
                continue
            try:
                spoken = fill(text, sample)
            except (KeyError, IndexError, ValueError):
                problems.append(f"{where}: {text!r} uses a field other than {{user}} and {{topic}}")
                continue
            problems += _line_problems(spoken, lang, where, where.split(".")[-1] if "." in where else key)
    if lang == "en-zh" and lines and english_lines / lines < 0.4:
        problems.append(f"en-zh: only {english_lines} of {lines} frame lines switch to English (want >= 40 %)")
    return problems


def _pool(pool, lang: str) -> list[str]:
    """A slot's values to check: listed, or samples of a generator (a bad spec: none, the model check says why)."""
    try:
        return slot_pool(pool, lang) or ["x"]
    except (ValidationError, ValueError, TypeError):
        return ["x"]


def _line_problems(text: str, lang: str, where: str, key: str) -> list[str]:
    out = []
    if _MARKUP.search(text):
        out.append(f"{where}: markup or emoji in speech: {text!r}")
    if lang == "en" and CJK.search(text):
        out.append(f"{where}: Chinese in an en line: {text!r}")
    if lang == "en-zh" and "," in text:  # the content's rule: "OK，", "Hi {user}，", "Hmm，well，"
        out.append(f"{where}: an ASCII comma in an en-zh line (write '，' after English words too): {text!r}")
    if lang == "zh" and _LATIN.search(text):
        out.append(f"{where}: Latin letters in a zh line (spell numbers and names in Chinese): {text!r}")
    if lang in ("zh", "en-zh") and not _HAN.search(text) and key not in ("completion", "chunks"):
        out.append(f"{where}: no Chinese in a {lang} line: {text!r}")
    if re.search(r"\d", text):
        out.append(f"{where}: digits in speech (write numbers as they are said): {text!r}")
    n = word_count(text)
    lo, hi = SYSTEM_WORDS if key in SYSTEM_KEYS else USER_WORDS
    if key in ("completion",):
        lo = 1
    if key in ("chunks",):
        lo = 1
    if not lo <= n <= hi:
        out.append(f"{where}: {n} words, want {lo}-{hi}: {text!r}")
    return out


SLUG_ID = re.compile(r"^[a-z][a-z0-9_]*$")


def added_problems(added: AddedFile, where: str = "") -> list[str]:
    """What a content folder's file may not do beyond the model's rules: name a domain without
    built-in content, use a frame id that is not a slug or that the built-in block (or the file
    itself) already has, or hand a task to a tool the domain has none of."""
    if added.domain not in domains():
        return [f"{where}domain: no built-in domain {added.domain!r} to add frames to (known: {', '.join(domains())})"]
    tools = domain_tools(added.domain)
    out = []
    for lang, blk in added.blocks().items():
        seen = {f.id for f in block(added.domain, lang).frames}
        for i, f in enumerate(blk.frames):
            at = f"{where}{lang}.frames[{i}]"
            if not SLUG_ID.match(f.id):
                out.append(f"{at}: id {f.id!r} is not a slug (lower-case letters, digits, _)")
            if f.id in seen:
                out.append(f"{at}: frame id {f.id!r} is already a frame of {added.domain} ({lang})")
            seen.add(f.id)
            out += [f"{at}: delegations: tool {d.tool!r} is not a tool of {added.domain} (known: "
                    f"{', '.join(sorted(tools))})" for d in f.delegations if d.tool not in tools]
        out += [f"{where}{lang}.{p}" for p in speech_problems(blk.model_dump(), lang)]
        out += [f"{where}{lang}.{p}" for p in volunteer_problems(blk.model_dump())]
    return out


def check_file(path: Path) -> list[str]:
    """Every problem of one domain file, or of a content folder's file (``AddedFile``), one line
    each (empty when it is good)."""
    try:
        raw = yaml.load(path.read_text("utf-8"), Loader=_LOADER)
    except yaml.YAMLError as e:
        return [f"{path}: not YAML: {e}"]
    if path.name.startswith("_parts"):  # the pools answers are composed from (compose.py)
        from .compose import check_parts

        return check_parts(raw, str(path))
    if is_added_file(raw):
        try:
            added = AddedFile.model_validate(raw)
        except ValidationError as e:
            return [f"{path}: {'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors()]
        return added_problems(added, f"{path}: ")
    try:
        DomainFile.model_validate(raw)
    except ValidationError as e:
        return [f"{path}: {'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors()]
    out = []
    for lang in LANGS:
        out += [f"{path}: {lang}.{p}" for p in speech_problems(raw[lang], lang)]
        out += [f"{path}: {lang}.{p}" for p in glue_problems(raw[lang], lang)]
        out += [f"{path}: {lang}.{p}" for p in volunteer_problems(raw[lang])]
        out += [f"{path}: {lang}.{p}" for p in answer_shaped_problems(raw[lang])]
    return out


# -- glue: what the user says back after side talk (issue 32) --------------------------------------
_EN_STOP = frozenset("""the and that this with have what there they their them then than about back where were
from your you'll you're i'll i'm it's that's okay sorry just going into over some will would could should been
being yeah yes sure thanks thank right well where's what's here's here there's can't don't didn't isn't wasn't
good great fine let's let carry keep again saying said anyway""".split())
_ZH_STOP = frozenset("不好 好意 意思 我们 你们 一下 已经 可以 什么 这个 那个 没有 知道 现在 接着 继续 刚才 说到 "
                     "回来 咱们 哪儿 回到 好的 好吧 刚刚 讲到 那就".split())


def content_keys(text: str) -> set[str]:
    """What a line is about, to see whether another line picks it up: English content words
    (their first five letters, so "asleep"/"sleeping" do not count but "drawer"/"drawers" do)
    and Chinese character pairs, without the glue words every readdress has ("sorry", 接着, 刚才)."""
    en = {w[:5] for w in re.findall(r"[a-z']+", text.lower()) if len(w) >= 3 and w not in _EN_STOP}
    zh = {h[i:i + 2] for h in re.findall(r"[\u4e00-\u9fff]+", text) for i in range(len(h) - 1)}
    return en | (zh - _ZH_STOP)


def picks_up(reply: str, back: str) -> bool:
    """Whether ``back`` (the user's line after side talk) refers to ``reply`` (what was said to them)."""
    return bool(content_keys(reply) & content_keys(back))


def established(frame: dict) -> set[str]:
    """The slots a frame's opening establishes: said by every request line, or by every answer
    to it (its long and short forms), whichever way the session opens."""
    req = frame.get("request") or {}

    def every(lines) -> set[str]:
        sets = [fields(t) for t in lines or [] if isinstance(t, str)]
        return set.intersection(*sets) if sets else set()
    return every(req.get("user")) | every(list(req.get("system") or []) + list(req.get("short") or []))


def volunteer_problems(block: dict) -> list[str]:
    """No volunteered details (issue 32): each follow-up and new request has a user line that
    names only slots the opening established, so the planner can ask it without the user giving a
    value nobody asked for ("Will Rex be comfortable there?" before the dog was named)."""
    out = []
    for frame in block.get("frames") or []:
        if not isinstance(frame, dict):
            continue
        known = established(frame) | {"topic"}
        for key in ("followups", "new_requests"):
            for i, unit in enumerate(frame.get(key) or []):
                lines = [t for t in (unit or {}).get("user") or [] if isinstance(t, str)]
                if lines and all(fields(t) - known for t in lines):
                    slot = sorted(fields(lines[0]) - known)[0]
                    out.append(f"frames[{frame.get('id')}].{key}[{i}].user: every line names {{{slot}}}, which "
                               f"the request does not establish (add a line that asks without it)")
    return out


_ANSWER_SHAPED = re.compile(r"(?:^|[，,。.!?？] ?|[说讲])(?:是|it's|it is)\s*(?:因为)?(?:for )?(?:a |an |the )?\{(?!old\}|new\})"
                            r"|\b(?:tell|say)\b[^.?!]*\bit's (?:for )?(?:a |an |the )?\{", re.I)
"""A request clause shaped as an answer ("..., it's for {reason}", 跟学校说是{reason}): it answers a
question nobody asked ("what's the reason?"); the request says the detail as part of what it asks."""


def answer_shaped_problems(block: dict) -> list[str]:
    """No delegation request answers a question nobody asked (issue 32): "Please send it, it's for
    a music exam" after talk about the pickup volunteers the reason; "Can you send the office a
    note that Noah is leaving early for a music exam?" asks for the task with it."""
    out = []
    for frame in block.get("frames") or []:
        for d in (frame or {}).get("delegations") or []:
            for t in (d or {}).get("user") or []:
                if isinstance(t, str) and _ANSWER_SHAPED.search(t):
                    out.append(f"frames[{frame.get('id')}].delegations[{d.get('tool')}].user: {t!r} answers a "
                               f"question nobody asked (say the detail as part of the request)")
    return out


def glue_problems(block: dict, lang: str) -> list[str]:
    """A readdress after side talk picks up what the third party said (its ``heard`` line, or the
    readdress itself); a ``heard`` line that does not is no acknowledgement either."""
    out = []
    for i, st in enumerate(block.get("side_talk") or []):
        if not isinstance(st, dict) or not isinstance(st.get("third_party"), str):
            continue
        reply, heard = st["third_party"], st.get("heard") or []
        for h in heard:
            if isinstance(h, str) and not picks_up(reply, h):
                out.append(f"side_talk[{i}].heard: {h!r} does not pick up the reply {reply!r}")
        if not heard and not picks_up(reply, str(st.get("readdress", ""))):
            out.append(f"side_talk[{i}]: the readdress {st.get('readdress')!r} ignores the reply {reply!r} "
                       f"(add heard: what the user says back about it)")
    return out


def main(argv: list[str]) -> int:
    bad = 0
    for arg in argv:
        problems = check_file(Path(arg))
        for p in problems:
            print(p)
        bad += len(problems)
        if not problems:
            print(f"{arg}: ok")
    return 1 if bad else 0
