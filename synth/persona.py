"""The assistant's system prompt of a session, from its seed's persona and scenario, in the
session's language: what a trainer's ``system_prompt`` / text condition gets (NeMo duplex S2S
``custom["system_prompt"]``, persona-conditioned Moshi forks).

English and code-switched sessions get an English prompt (code-switched ones are told to answer
in the user's mix); Mandarin sessions a Mandarin one. Seeds write persona roles, scenario
descriptions and tool descriptions in English for most domains: a Mandarin prompt uses the seed's
role where it is written in Chinese, else the domain's Chinese name (``ZH_DOMAINS``), and leaves
out the English description; tool names stay as the tools are called.
"""

from __future__ import annotations

from .schema.seed import ScenarioSeed
from .text import HAN

ZH_DOMAINS = {
    "banking": "银行", "calendar_email": "日程和邮件", "cooking_help": "烹饪", "customer_support": "零售客服",
    "doctor_appointment": "预约挂号", "home_repair": "家居维修", "music_media": "音乐影音", "navigation": "车载导航",
    "restaurant_booking": "餐厅订位", "smart_home": "智能家居", "tech_support": "技术支持", "travel_booking": "旅行预订",
}
_MANNER_EN = ("Speak briefly and naturally, as in a phone call: keep listening while you talk, stop when you "
              "are interrupted, and say so when a tool is still working.")
_MANNER_ZH = "说话要简短自然，像打电话一样：边说边听，被打断就停下来，工具还没有结果时要告诉对方。"


def _own_name(seed: ScenarioSeed) -> str | None:
    """The assistant's name, unless the persona calls it just "assistant"."""
    name = seed.personas.system.name
    return None if name.lower() in ("assistant", "") else name


def _article(role: str) -> str:
    return "an" if role[:1].lower() in "aeiou" else "a"


def _english(seed: ScenarioSeed) -> str:
    me = seed.personas.system
    role = me.role or "voice assistant"
    name = _own_name(seed)
    who = f"You are {name}, {_article(role)} {role}." if name else f"You are {_article(role)} {role}."
    parts = [who]
    if seed.description:
        parts.append(f"Scenario: {seed.description.rstrip('.')}.")
    if seed.tools:
        parts.append("Tools you can use: " + "; ".join(f"{t.name} ({t.description.rstrip('.')})" for t in seed.tools) + ".")
    if seed.language == "en-zh":
        parts.append("The user mixes Mandarin and English; answer in the same mix.")
    if me.style:
        parts.append(f"Your manner: {me.style.rstrip('.')}.")
    parts.append(_MANNER_EN)
    return " ".join(parts)


def _mandarin(seed: ScenarioSeed) -> str:
    me = seed.personas.system
    role = me.role if me.role and HAN.search(me.role) else f"{ZH_DOMAINS.get(seed.domain.replace('-', '_'), '')}语音助手"
    parts = [f"你是{_own_name(seed) or '语音助手'}，{role}。"]
    if seed.tools:
        parts.append("你可以使用这些工具：" + "、".join(t.name for t in seed.tools) + "。")
    if me.style and HAN.search(me.style):
        parts.append(f"你的风格：{me.style}。")
    parts.append(_MANNER_ZH)
    return "".join(parts)


def voice_prompt_text(seed: ScenarioSeed) -> str:
    """What the assistant says in its voice prompt: a greeting of a few seconds in the session's
    language, naming itself where the persona has a name."""
    name = _own_name(seed)
    topic = seed.domain.replace("_", " ").replace("-", " ")
    if seed.language == "zh":
        return f"你好，我是{name or '你的语音助手'}。今天有什么可以帮你的？直接告诉我就好。"
    if seed.language == "en-zh":
        return f"Hello, 我是你的 {topic} assistant。今天有什么可以帮你？Just tell me what you need."
    who = name or f"your {topic} assistant"
    return f"Hello, this is {who}. What can I do for you today? Just tell me what you need."


def system_prompt(seed: ScenarioSeed) -> str:
    """The assistant's system prompt for a session of ``seed`` (in the seed's language)."""
    return _mandarin(seed) if seed.language == "zh" else _english(seed)
