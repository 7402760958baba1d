"""Prompts for the LLM planner: templates per language, a brief drawn per session, examples.

A session's brief (how many exchanges, which handful of phenomena must appear, which example
conversations are shown, the request's sampling seed) is drawn from the session's plan stream, so
the prompts, and with them the cache keys, are a function of ``(run_seed, session_id)`` and the
config. Coverage of the seed's phenomena over a run comes from many sessions each asking for a
few (``required_min``..``required_max``, drawn by the seed's rates), not from one asking for all.

Example conversations live in ``synth/data/llm/examples/*.json``: written by hand to be coherent
(``shared/CONTENT.md``), in the exact reply format, with their own outline and a small seed to
check them against. A prompt shows ``examples`` of them: one in the seed's language (another
domain where there is one), the rest drawn from the other languages, so prompts rotate through
the set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from string import Template

import numpy as np
import yaml

from ...schema.config import LLMConfig
from ...schema.phenomena import DELEGATION, REGISTRY, SETTLED_BY_PIPELINE, resolve_rates
from ...schema.seed import ScenarioSeed
from . import budget
from .group import goals_label, group_block, people_lines
from .schema import rule_lines

MAX_EVENTS = 40
MAX_OPTIONAL = 6


@dataclass(frozen=True)
class Brief:
    """What one session's requests ask for."""

    exchanges: int
    required: tuple[str, ...]
    optional: tuple[str, ...]
    example_ids: tuple[str, ...]
    request_seed: int
    prompt_language: str
    max_work: int
    text_zh: bool = False  # the texts are (mostly) Chinese: zh and en-zh seeds
    group: bool = False  # a group seed: every event also carries person and addressee
    cuts: int = 0  # replies cut at max_tokens so far: each one asks for fewer events

    def allowed(self, seed: ScenarioSeed) -> set[str]:
        """Ids a plan may tag: every phenomenon of the seed (the prompt explains the brief's, lists the rest)."""
        return {p for p, r in resolve_rates(seed.phenomena).items() if r > 0}

    @property
    def max_events(self) -> int:
        full = max_events(self.exchanges, len(self.required))
        return max(2 * self.exchanges + 2, int(full * 0.8 ** self.cuts))

    def shorter(self) -> "Brief":
        """What a cut reply is asked for next: about two thirds of the exchanges and fewer events."""
        return replace(self, exchanges=max(2, self.exchanges - max(1, self.exchanges // 3)), cuts=self.cuts + 1)


def max_events(exchanges: int, n_required: int) -> int:
    """Events allowed for ``exchanges`` exchanges with ``n_required`` phenomena (each may add one or two)."""
    return min(MAX_EVENTS, 2 * exchanges + (3 * n_required + 1) // 2 + 3)


@lru_cache(maxsize=None)
def template(name: str, lang: str) -> Template:
    return Template(resources.files("synth.data.llm").joinpath(f"{name}.{lang}.md").read_text("utf-8"))


@lru_cache(maxsize=None)
def tag_lines() -> dict[str, dict[str, str]]:
    return yaml.safe_load(resources.files("synth.data.llm").joinpath("tags.yaml").read_text("utf-8"))


@lru_cache(maxsize=None)
def examples(folder: str = "examples") -> dict[str, dict]:
    """Example id -> stored example (``language``, ``domain``, ``seed``, ``outline``, ``plan``), by id.
    ``examples/groups`` holds the group examples (people, ``person`` and ``addressee``): shown to group
    seeds only, so dyadic prompts and their draws are what they were."""
    out = {}
    root = resources.files("synth.data.llm")
    for part in folder.split("/"):
        root = root.joinpath(part)
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".json"):
            ex = json.loads(entry.read_text("utf-8"))
            out[ex["id"]] = ex
    return dict(sorted(out.items()))


GROUP_EXAMPLES = "examples/groups"


def example(example_id: str) -> dict:
    """One stored example, dyadic or group."""
    pool = examples()
    return pool[example_id] if example_id in pool else examples(GROUP_EXAMPLES)[example_id]


def draw_brief(seed: ScenarioSeed, cfg: LLMConfig, rng: np.random.Generator) -> Brief:
    """Draw the session's brief; the order of draws is fixed (it decides the data)."""
    n = max(2, int(seed.exchanges.sample(rng)))
    rates = {p: r for p, r in sorted(resolve_rates(seed.phenomena).items()) if r > 0}
    eligible = [p for p in rates if p not in SETTLED_BY_PIPELINE]
    # rates are per exchange: weight = P(at least once in n exchanges); a handful are required
    weights = np.array([1 - (1 - min(rates[p], 1.0)) ** n for p in eligible], dtype=float)
    k = int(rng.integers(cfg.required_min, cfg.required_max + 1))
    k = min(k, int((weights > 0).sum()))
    chosen = set()
    if k:
        idx = rng.choice(len(eligible), size=k, replace=False, p=weights / weights.sum())
        chosen = {eligible[int(i)] for i in idx}
    required = tuple(p for p in eligible if p in chosen)
    # a few more may appear (the prompt explains each; a long list of options costs tokens and focus)
    rest = [i for i, p in enumerate(eligible) if p not in chosen and weights[i] > 0]
    extra: set[str] = set()
    if rest:
        w = weights[rest] / weights[rest].sum()
        pick = rng.choice(len(rest), size=min(MAX_OPTIONAL, len(rest)), replace=False, p=w)
        extra = {eligible[rest[int(i)]] for i in pick}
    optional = tuple(p for p in eligible if p in extra)
    picked = _pick_examples(seed, cfg.examples, rng)
    lang = cfg.prompt_language
    if lang == "auto":
        lang = "zh" if seed.language == "zh" else "en"
    max_work = 0
    if seed.tools:
        max_work = min(3, 1 + sum(p in DELEGATION - {"delegate_with_ack", "result_at_silence_gap"}
                                  for p in required))
    brief = Brief(exchanges=n, required=required, optional=optional, example_ids=tuple(picked),
                  request_seed=int(rng.integers(0, 2**31 - 1)), prompt_language=lang, max_work=max_work,
                  text_zh=seed.language != "en", group=seed.is_group)
    while brief.exchanges > 2 and plan_max_tokens(brief) > cfg.max_tokens:  # fit the ceiling
        brief = replace(brief, exchanges=brief.exchanges - 1)
    return brief


def _pick_examples(seed: ScenarioSeed, count: int, rng: np.random.Generator) -> list[str]:
    """``count`` example ids: one in the seed's language first (from another domain where there is
    one), the rest from the other languages. A group seed's first is a group example (its language
    where there is one); the rest are dyadic ones."""
    if seed.is_group and count:
        groups = examples(GROUP_EXAMPLES)
        same = [k for k, v in groups.items() if v["language"] == seed.language] or list(groups)
        first = same[int(rng.integers(len(same)))]
        return [first] + _pick_examples(seed.model_copy(update={"people": []}), count - 1, rng)
    pool = examples()
    same = [k for k, v in pool.items() if v["language"] == seed.language]
    same = [k for k in same if pool[k]["domain"] != seed.domain] or same
    other = [k for k, v in pool.items() if v["language"] != seed.language]
    picked: list[str] = []
    if count and same:
        picked.append(same[int(rng.integers(len(same)))])
    rest = [k for k in other + same if k not in picked]
    order = rng.permutation(len(rest)) if rest else []
    return picked + [rest[int(i)] for i in order][: max(0, count - len(picked))]


def plan_max_tokens(brief: Brief) -> int:
    return budget.plan_reply_tokens(brief.max_events, brief.max_work, brief.text_zh, brief.group)


LANG_RULE = {
    "en": {"en": "English only (no Chinese characters).",
           "zh": "Mandarin Chinese only, in Simplified characters, natural spoken register (了, 吧, 呢, 嗯); "
                 "no Latin letters; numbers as a speaker says them.",
           "en-zh": "code-switched: Mandarin sentences with English words and phrases where bilingual speakers "
                    "really switch (product names, work and tech terms, OK, sorry, by the way), e.g. "
                    "我明天有个 meeting; also a switch between sentences, at a turn boundary and at a repair."},
    "zh": {"en": "只用英语（不要出现汉字）。",
           "zh": "只用普通话，简体汉字，自然的口语（了、吧、呢、嗯）；不要出现拉丁字母；数字按说话的方式写。",
           "en-zh": "中英夹杂：以中文为主，在双语者真会切换的地方用英文词语（产品名、工作和技术词、OK、sorry、"
                    "by the way），如 我明天有个 meeting；也可以在句子之间、话轮之间和改口时切换。"},
}
_NONE = {"en": "none", "zh": "无"}
_LABELS = {
    "en": ("Scenario", "User", "System", "Third party in the room", "Goals of the user", "Language", "Length",
           "about {n} user-system exchanges, at most {m} events", "Tools the system can delegate to"),
    "zh": ("场景", "用户", "系统", "房间里的第三方", "用户的目标", "语言", "长度",
           "大约 {n} 轮用户与系统的对话，最多 {m} 个事件", "系统可以委托的工具"),
}


def scenario_block(seed: ScenarioSeed, brief: Brief, lang: str, length: bool = True) -> str:
    lb = _LABELS[lang]
    p = seed.personas

    def persona(x) -> str:
        return _NONE[lang] if x is None else ", ".join(s for s in (x.name, x.role, x.style) if s)

    lines = [f"# {lb[0]}: {seed.id} ({seed.domain})"]
    if seed.description:
        lines.append(seed.description)
    if seed.is_group:
        lines += [*people_lines(seed, lang), f"- {lb[2]}: {persona(p.system)}",
                  f"- {goals_label(lang)}: {'; '.join(seed.goals)}"]
    else:
        lines += [f"- {lb[1]}: {persona(p.user)}", f"- {lb[2]}: {persona(p.system)}",
                  f"- {lb[3]}: {persona(p.third_party)}", f"- {lb[4]}: {'; '.join(seed.goals)}"]
    lines.append(f"- {lb[5]}: {LANG_RULE[lang][seed.language]}")
    if length:
        lines.append(f"- {lb[6]}: {lb[7].format(n=brief.exchanges, m=brief.max_events)}")
    lines.append(f"# {lb[8]}")
    lines += [f"- {t.name}: {t.description}" for t in seed.tools] or [f"- {_NONE[lang]}"]
    return "\n".join(lines) + "\n"


def phenomena_block(seed: ScenarioSeed, brief: Brief, lang: str, where: bool = True) -> str:
    """Must-appear and optional phenomena; ``where`` adds which event carries each tag."""
    tags = tag_lines()
    head = ("# Phenomena (tag the event that realises one with its id in \"phenomena\")",
            "Must appear, each at least once:", "May also appear:", "Added later by the pipeline (do not tag):",
            "Other ids you may tag if they happen:",
            ) if lang == "en" else (
            "# 现象（在体现它的事件的 \"phenomena\" 里标注它的 id）", "必须出现，每个至少一次：", "也可以出现：",
            "之后由流水线添加（不要标注）：", "其他可以标注的 id（如果出现了）：")

    def line(pid: str) -> str:
        return f"- {pid}: {tags[pid][lang] if where else REGISTRY[pid].definition}"

    rates = resolve_rates(seed.phenomena)
    later = sorted(p for p, r in rates.items() if r > 0 and p in SETTLED_BY_PIPELINE)
    others = sorted(p for p, r in rates.items() if r > 0 and p not in SETTLED_BY_PIPELINE
                    and p not in brief.required and p not in brief.optional)
    out = [head[0], head[1], *([line(p) for p in brief.required] or [f"- {_NONE[lang]}"])]
    if brief.optional:
        out += [head[2], *map(line, brief.optional)]
    if others:
        out.append(f"{head[4]} {', '.join(others)}")
    if later:
        out.append(f"{head[3]} {', '.join(later)}")
    return "\n".join(out) + "\n"


def schema_block(schema: dict | None, lang: str) -> str:
    if schema is None:
        return ""
    head = "# JSON schema of the reply" if lang == "en" else "# 回复的 JSON schema"
    return f"\n{head}\n{json.dumps(schema, ensure_ascii=False, separators=(',', ':'))}\n"


def plan_system_prompt(seed: ScenarioSeed, brief: Brief, schema: dict | None) -> str:
    """The instructions of a full-plan request; ``schema`` is inlined where the server does not enforce it."""
    lang = brief.prompt_language
    ex = ""
    if brief.example_ids:
        pool = {i: example(i) for i in brief.example_ids}
        head = ("# Example plans of other conversations (the format and the coherence to follow; do not copy)"
                if lang == "en" else "# 其他对话的计划示例（照着它的格式和连贯性写，不要照抄）")
        parts = [f"## {i} ({pool[i]['language']}, {pool[i]['domain']})\n"
                 + json.dumps(pool[i]["plan"], ensure_ascii=False, separators=(",", ":")) for i in brief.example_ids]
        ex = "\n" + head + "\n" + "\n".join(parts) + "\n"
    return template("plan-v2", lang).substitute(
        scenario=scenario_block(seed, brief, lang), phenomena=phenomena_block(seed, brief, lang),
        rules=rule_lines(lang, brief.max_events, seed.is_group), schema_block=schema_block(schema, lang),
        examples_block=ex, group_block=group_block(seed, lang))


def plan_user_prompt(brief: Brief, outline: str | None) -> str:
    if brief.prompt_language == "zh":
        head = f"按这个提纲写计划：{outline}\n" if outline else ""
        return f"{head}大约 {brief.exchanges} 轮，最多 {brief.max_events} 个事件。只回复 JSON。"
    head = f"Write the plan of this outline: {outline}\n" if outline else "Write the plan. "
    return f"{head}About {brief.exchanges} exchanges, at most {brief.max_events} events. Reply with JSON only."


def outline_system_prompt(seed: ScenarioSeed, brief: Brief, k: int, schema: dict | None) -> str:
    lang = brief.prompt_language
    ex = ""
    if brief.example_ids:
        head = "# Example outlines of other conversations" if lang == "en" else "# 其他对话的提纲示例"
        ex = "\n" + head + "\n" + "\n".join(f"- {example(i)['outline'][lang]}" for i in brief.example_ids) + "\n"
    return template("outline-v2", lang).substitute(
        scenario=scenario_block(seed, brief, lang), phenomena=phenomena_block(seed, brief, lang),
        k=k, max_chars=budget.OUTLINE_CHARS[lang], schema_block=schema_block(schema, lang), examples_block=ex,
        group_block=group_block(seed, lang, outline=True))


def outline_user_prompt(brief: Brief, k: int) -> str:
    if brief.prompt_language == "zh":
        return f"请写 {k} 个提纲。只回复 JSON。"
    return f"Write {k} outlines. Reply with JSON only."


def repair_prompt(errors: list[str], lang: str, what: str = "plan") -> str:
    """The feedback after a complete reply that failed: its errors, then the request again."""
    listed = "\n".join(f"- {e}" for e in errors[:20])
    more = len(errors) - 20
    if more > 0:
        listed += f"\n- ({more} more)" if lang == "en" else f"\n- （还有 {more} 条）"
    if lang == "zh":
        return f"你上一次的回复不能用：\n{listed}\n请改正这些问题，重新只回复完整的 JSON 对象。"
    return (f"Your previous reply could not be used:\n{listed}\nFix these problems and reply again with the "
            f"complete JSON object only.")
