"""What a system line is to its listener (the scripted planner's backchannels and goodbyes).

:func:`line_kind` sorts a line into bad news, a yes, an instruction or news, so the user's
backchannel after it fits (CONTENT.md: "oh no" after bad news, "okay" after an instruction);
:data:`CONFIRMING` and :data:`BAD_NEWS` are the openings the composer reads too; a goodbye after
a question loses its opening thanks (:func:`without_thanks_head`).
"""

from __future__ import annotations

import re


# How an answer opens when it confirms what the user said or asked, and when it brings bad news
# (English words lower-cased; Chinese by prefix)
CONFIRMING = ({"yes", "yeah", "yep", "right", "exactly", "correct", "sure", "absolutely", "definitely", "indeed"},
              ("对", "是的", "没错", "可以", "当然", "确实", "就是"))
BAD_NEWS = ({"sorry", "unfortunately", "afraid", "sadly", "no", "nope"},
            ("不好意思", "抱歉", "对不起", "恐怕", "可惜", "很遗憾", "没有", "不行", "不能", "真不好意思", "很抱歉",
             "实在不好意思", "真的 sorry", "真的sorry"))


def _opens_with(text: str, marks: tuple[set[str], tuple[str, ...]]) -> bool:
    """Whether ``text`` opens with one of ``marks``: its first English word, or its second after a
    lead-in ("Oh, sorry", "I'm afraid", "Well, yes"), or its first Chinese characters."""
    words, prefixes = marks
    head = text.strip().lstrip("嗯呃哦，,.… ")
    first = [w.strip(",.!?;:'\"").lower() for w in re.split(r"[\s，、。！？]+", head)[:2]]
    lead_in = first[:1] in (["oh"], ["well"], ["i'm"], ["um"], ["hmm"], ["ah"])
    return bool(first) and (first[0] in words or (lead_in and first[1:] and first[1] in words)) \
        or head.startswith(prefixes)


_INSTRUCTION_EN = re.compile(
    r"(?:^|[,.;] )(?:(?:so|and|then|now|first|next|after that|just),? )?(?:first|then|next|try|make sure|keep|put|add|"
    r"turn|press|hold|open|go|take|use|leave|unplug|plug|switch|fill|pour|stir|remove|wait|tap|click|select|bring|"
    r"don't|do not|remember|you'll need|you need|you should|you can|you could|fry|brown|cook|bake|mix|rinse|"
    r"restart|reset|check|give|let it|bring|cover|store|avoid|call|book|pick)\b", re.I)
_INSTRUCTION_ZH = re.compile(r"先.{0,30}(然后|再)|(^|[，。；、])(先|然后|再|记得|别忘了|千万别|不要|别|把|试试|您可以|你可以|"
                             r"您先|你先|点一下|按一下|打开|关掉|拔掉|插上|去|带上|放进|倒进|加|最好|跟着|照着?|沿着|直接|"
                             r"提前|记住|注意|换上|擦|往.{0,4}(走|开|拐))")


def line_kind(text: str, lang: str, dispreferred: bool = False) -> str:
    """What a system line is to its listener, for the backchannel that follows it: ``bad_news``
    (declined, regretted, full, failed; or said with a dispreferred hesitation), ``yes`` (opens by
    confirming; not an instruction), ``instruction`` (steps or advice to follow: "first ..., then
    ...", 先……再……) or ``news`` (anything else that informs)."""
    from .compose import is_negative

    if dispreferred or is_negative(text, lang):
        return "bad_news"
    if (_INSTRUCTION_EN if lang == "en" else _INSTRUCTION_ZH).search(text) or (
            lang == "en-zh" and _INSTRUCTION_EN.search(text)):
        return "instruction"  # "Sure, brown the onions first": the listener takes it in ("okay"), no "oh nice"
    return "yes" if _opens_with(text, CONFIRMING) else "news"


_THANKS_HEAD = re.compile(r"^(?:okay|ok|ok ok|ok lah|alright|right|fine|great|perfect|brilliant|lovely|cool|fantastic|"
                         r"cheers|thanks|thank you|thanks 啊|thanks ah|nice|sorted|wah|好|好的|好嘞|好 lah|行|嗯|好了|"
                         r"太好了|太棒了|谢谢|谢谢啊|可以了|行了|好的好的|好了好了|哇|不错不错)[,，]\s*", re.I)


def without_thanks_head(line: str) -> str:
    """A goodbye without its opening "Great," / 好嘞，, which after a question would read as a yes."""
    return _THANKS_HEAD.sub("", line, count=1) or line
