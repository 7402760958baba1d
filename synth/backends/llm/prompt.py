"""Prompts for the LLM planner: one template per language, a brief drawn per session, examples.

A session's brief (how many exchanges, which phenomena must appear, which prior example plans
are shown, the request's sampling seed) is drawn from the session's plan stream, so the prompt,
and with it the cache key, is a function of ``(run_seed, session_id)`` and the config.

Example plans live in ``synth/data/llm/examples/*.json`` (made by the scripted planner, in the
LLM-facing form); a prompt shows ``examples`` of them, one in the seed's language when there is
one, the rest drawn from the other languages and domains, so prompts rotate through the set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from string import Template

import numpy as np

from ...schema.config import LLMConfig
from ...schema.phenomena import REGISTRY, SETTLED_BY_PIPELINE, resolve_rates
from ...schema.seed import ScenarioSeed


@dataclass(frozen=True)
class Brief:
    """What one session's prompt asks for."""

    exchanges: int
    required: tuple[str, ...]
    optional: tuple[str, ...]
    example_ids: tuple[str, ...]
    request_seed: int
    prompt_language: str


@lru_cache(maxsize=None)
def template(version: str, lang: str) -> Template:
    text = resources.files("synth.data.llm").joinpath(f"{version}.{lang}.md").read_text("utf-8")
    return Template(text)


@lru_cache(maxsize=None)
def examples() -> dict[str, dict]:
    """Example id -> stored example (``language``, ``domain``, ``plan``), sorted by id."""
    out = {}
    folder = resources.files("synth.data.llm").joinpath("examples")
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".json"):
            ex = json.loads(entry.read_text("utf-8"))
            out[ex["id"]] = ex
    return dict(sorted(out.items()))


def draw_brief(seed: ScenarioSeed, cfg: LLMConfig, rng: np.random.Generator) -> Brief:
    """Draw the session's brief; the order of draws is fixed (it decides the data)."""
    n = max(2, int(seed.exchanges.sample(rng)))
    required, optional = [], []
    for pid, rate in sorted(resolve_rates(seed.phenomena).items()):
        if rate <= 0:
            continue
        # rates are per exchange: asked for in this session with P(at least once in n exchanges);
        # what later stages add (fillers, laughter, latched starts ...) is never required
        must = rng.random() < 1 - (1 - rate) ** n and pid not in SETTLED_BY_PIPELINE
        (required if must else optional).append(pid)
    pool = examples()
    same = [k for k, v in pool.items() if v["language"] == seed.language and v["scenario_id"] != seed.id]
    other = [k for k, v in pool.items() if v["language"] != seed.language]
    picked: list[str] = []
    if cfg.examples and same:
        picked.append(same[int(rng.integers(len(same)))])
    rest = [k for k in other + same if k not in picked]
    order = rng.permutation(len(rest)) if rest else []
    picked += [rest[int(i)] for i in order][: max(0, cfg.examples - len(picked))]
    lang = cfg.prompt_language
    if lang == "auto":
        lang = "zh" if seed.language == "zh" else "en"
    return Brief(exchanges=n, required=tuple(required), optional=tuple(optional), example_ids=tuple(picked),
                 request_seed=int(rng.integers(0, 2**31 - 1)), prompt_language=lang)


_LANG_RULE = {
    "en": {"en": "English only (no Chinese characters).",
           "zh": "Mandarin Chinese only, written in Chinese characters.",
           "en-zh": "code-switched Mandarin and English: Chinese sentences with English words and phrases "
                    "(e.g. 我明天有个 meeting), and switches between sentences and at turn boundaries."},
    "zh": {"en": "只用英语（不要出现汉字）。",
           "zh": "只用普通话，用汉字书写。",
           "en-zh": "中英夹杂：中文句子里夹英文词语（如 我明天有个 meeting），也可在句子之间、话轮之间切换。"},
}
_NONE = {"en": "none", "zh": "无"}


def system_prompt(seed: ScenarioSeed, brief: Brief, cfg: LLMConfig, schema: dict | None) -> str:
    """The instructions; ``schema`` is inlined for modes where the server does not enforce it."""
    lang = brief.prompt_language
    p = seed.personas
    persona = lambda x: _NONE[lang] if x is None else ", ".join(s for s in (x.name, x.role, x.style) if s)  # noqa: E731
    tools = "\n".join(f"- {t.name}: {t.description}" for t in seed.tools) or f"- {_NONE[lang]}"
    help_lines = "\n".join(f"- {pid}: {REGISTRY[pid].family}; system behaviour: {REGISTRY[pid].expected}"
                           for pid in (*brief.required, *brief.optional))
    schema_block = ""
    if schema is not None:
        head = "# JSON schema of the reply" if lang == "en" else "# 回复的 JSON schema"
        schema_block = f"{head}\n{json.dumps(schema, ensure_ascii=False, separators=(',', ':'))}\n"
    ex_block = ""
    if brief.example_ids:
        pool = examples()
        head = ("# Example plans from other sessions (for the format and style only; do not copy them)"
                if lang == "en" else "# 其他会话的计划示例（仅供参考格式和风格，不要照抄）")
        parts = [f"## {i}: {pool[i]['language']}, {pool[i]['domain']}\n"
                 + json.dumps(pool[i]["plan"], ensure_ascii=False, separators=(",", ":")) for i in brief.example_ids]
        ex_block = head + "\n" + "\n".join(parts) + "\n"
    return template(cfg.prompt_version, lang).substitute(
        scenario_id=seed.id, domain=seed.domain, description=seed.description or "",
        user_persona=persona(p.user), system_persona=persona(p.system),
        third_party_persona=persona(p.third_party), goals="; ".join(seed.goals),
        language_rule=_LANG_RULE[lang][seed.language], exchanges=brief.exchanges, tools=tools,
        required=", ".join(brief.required) or _NONE[lang], optional=", ".join(brief.optional) or _NONE[lang],
        phenomena_help=help_lines, alternatives=cfg.alternatives, schema_block=schema_block,
        examples_block=ex_block,
    )


def user_prompt(brief: Brief) -> str:
    if brief.prompt_language == "zh":
        return f"请写 {brief.exchanges} 轮左右的计划。只回复 JSON。"
    return f"Write the plans (about {brief.exchanges} exchanges each). Reply with JSON only."


def repair_prompt(errors: list[str], lang: str) -> str:
    """The feedback after a reply that failed: the validation errors, then the request again."""
    listed = "\n".join(f"- {e}" for e in errors[:12])
    if lang == "zh":
        return f"你上一次的回复无法使用：\n{listed}\n请改正这些问题，重新只回复完整的 JSON 对象。"
    return f"Your previous reply could not be used:\n{listed}\nFix these problems and reply again with the complete JSON object only."
