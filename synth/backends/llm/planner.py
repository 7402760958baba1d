"""The LLM planner: same interface as ``ScriptedPlanner`` (``name``, ``check_seed``, ``plan``).

Mode ``plan`` (the LLM authors structure and text), per session:

1. draw a brief from the session's plan stream (exchanges, 3-6 must-appear phenomena, examples);
2. with ``alternatives`` > 1, ask for that many short outlines with self-reported probabilities
   and sample one with the same stream (the diversity trick: each alternative is a few lines, so
   all of them fit in one reply);
3. ask for the full plan of that outline, with a ``max_tokens`` derived from the plan's allowed
   size (``budget``); check it (``schema.check_plan``: every rule the prompt states);
4. a complete reply that fails is sent back whole with its errors; a reply cut at ``max_tokens``
   is not: the next request asks for fewer exchanges. After ``max_attempts`` plan requests the
   session is rejected (``SessionReject("plan", "llm_invalid_plan", ...)``) and the run goes on.

Mode ``fill`` (``fill.py``): the offline planner builds the structure, the LLM writes the words.

``planner_meta`` records the mode, prompt version, response format, examples, attempts, the
outline chosen with its probability, and the must-appear phenomena.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from ...errors import SessionReject, UserError, short_error
from ...schema.config import LLMConfig
from ...schema.phenomena import DELEGATION, resolve_rates
from ...schema.plan import Plan
from ...schema.seed import ScenarioSeed
from . import budget
from .client import ChatClient, Reply
from .converse import converse
from .prompt import (Brief, draw_brief, outline_system_prompt, outline_user_prompt, plan_max_tokens,
                     plan_system_prompt, plan_user_prompt, repair_prompt)
from .schema import (LLMOutlines, check_plan, fmt_errors, outline_schema, parse_plan,
                     plan_schema, to_plan)

_THIRD_PARTY = {"user_to_third_party", "third_party_to_user", "readdress_after_side_talk"}


class LLMPlanner:
    def __init__(self, cfg: LLMConfig, cache_dir: Path | str | None = None, content=None):
        from ..content import BUILTIN

        self.cfg = cfg
        self.content = content or BUILTIN  # the frames mode fill's structure is planned from
        self.name = f"llm-{cfg.prompt}"
        self.client = ChatClient(cfg, Path(cache_dir) if cache_dir else None)
        self._prefetched: dict[str, Plan | SessionReject] = {}

    def check_seed(self, seed: ScenarioSeed, source: str = "") -> None:
        where = f"{source}: " if source else ""
        if seed.is_group and self.cfg.mode == "fill":  # fill's items know one user and one third party
            raise UserError(f"{where}people: group seeds are planned by the LLM in mode plan "
                            "(planner.llm.mode: plan) or by the offline planner; mode fill does not write them yet")
        if self.cfg.mode == "fill":
            from ..scripted_planner import ScriptedPlanner

            ScriptedPlanner(self.content).check_seed(seed, source)  # it builds the structure
        asked = {k for k, v in resolve_rates(seed.phenomena).items() if v > 0}
        if asked & DELEGATION and not seed.tools:
            raise UserError(f"{where}tools: delegation phenomena {sorted(asked & DELEGATION)} need a tool catalogue")
        if asked & _THIRD_PARTY and seed.personas.third_party is None:
            raise UserError(f"{where}personas.third_party: needed by {sorted(asked & _THIRD_PARTY)}")

    def usage(self) -> dict[str, int]:
        return dict(sorted(self.client.usage.items()))

    def prefetch(self, jobs: list[tuple[ScenarioSeed, str, np.random.Generator]]) -> None:
        """Plan several sessions concurrently (``max_concurrency`` threads); ``plan`` then returns them.

        Each job's generator is the one ``plan`` would get, so the result is the same either way.
        """
        def one(job):
            seed, sid, rng = job
            try:
                return sid, self._plan(seed, sid, rng)
            except SessionReject as r:
                return sid, r

        with ThreadPoolExecutor(max_workers=self.cfg.max_concurrency) as pool:
            for sid, result in pool.map(one, jobs):
                self._prefetched[sid] = result

    def plan(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator) -> Plan:
        done = self._prefetched.pop(session_id, None)
        if isinstance(done, SessionReject):
            raise done
        return done if done is not None else self._plan(seed, session_id, rng)

    def _plan(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator) -> Plan:
        if self.cfg.mode == "fill":
            from .fill import fill_plan

            return fill_plan(self, seed, session_id, rng)
        return self._author(seed, session_id, rng)

    # -- mode plan -------------------------------------------------------------------------
    def _author(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator) -> Plan:
        cfg = self.cfg
        brief = draw_brief(seed, cfg, rng)
        outline, prob, n_outlines, o_mode = self._outline(seed, brief, rng)
        asking = _PlanRequest(self, seed, brief, outline, session_id)
        done = converse(asking, cfg.max_attempts)
        if done.result is None:
            raise SessionReject("plan", "llm_invalid_plan",
                                f"{cfg.max_attempts} attempts; last: " + "; ".join(done.errors[:4])[:600])
        meta = {"mode": "plan", "prompt_version": cfg.prompt, "model": cfg.model,
                "response_format": done.reply.mode, "examples": list(asking.brief.example_ids),
                "attempts": done.attempts, "cut_replies": done.cuts, "outlines": n_outlines, "outline": outline,
                "outline_probability": prob, "outline_response_format": o_mode,
                "exchanges": asking.brief.exchanges, "required_phenomena": list(asking.brief.required)}
        return done.result.model_copy(update={"planner_meta": meta})

    def _outline(self, seed: ScenarioSeed, brief: Brief, rng: np.random.Generator):
        """``(outline, probability, how many were offered, response format)``; no outline with ``alternatives`` 1.

        One repair: a reply that fails is sent back with its errors, a cut one is asked again for
        fewer outlines. Still nothing usable: the plan is asked for without an outline.
        """
        if self.cfg.alternatives <= 1:
            return None, None, 0, None
        done = converse(_OutlineRequest(self.client, seed, brief, self.cfg.alternatives, rng), 2)
        return done.result or (None, None, 0, None)

    def _usable(self, reply: Reply, seed: ScenarioSeed, brief: Brief, session_id: str, allowed: set[str]):
        """``(Plan, [])`` or ``(None, errors)`` for one complete reply."""
        obj, err = extract_json(reply.content)
        if obj is None:
            return None, [f"reply: {err}"]
        p, errors = parse_plan(obj, seed.is_group)
        if p is None:
            return None, errors
        errors = check_plan(p, seed, list(brief.required), brief.max_events, allowed)
        if errors:
            return None, errors
        try:
            return to_plan(p, seed, session_id, self.name, {}), []
        except ValueError as e:
            return None, [f"plan: {short_error(e)}"]


class _PlanRequest:
    """Mode plan's request for the whole plan (``converse``): a cut reply asks for fewer exchanges."""

    def __init__(self, planner: LLMPlanner, seed: ScenarioSeed, brief: Brief, outline, session_id: str):
        self.planner, self.seed, self.brief, self.outline, self.session_id = planner, seed, brief, outline, session_id
        self.allowed = brief.allowed(seed)  # must-appear, optional and pipeline-added: all listed in the prompt
        self.max_tokens = plan_max_tokens(brief)
        self.history: list[dict] = []

    def ask(self) -> Reply:
        brief, outline, history = self.brief, self.outline, self.history
        schema = plan_schema(self.seed, brief.max_events, sorted(self.allowed))

        def messages_for(mode: str) -> list[dict]:
            sys = plan_system_prompt(self.seed, brief, None if mode == "json_schema" else schema)
            return [{"role": "system", "content": sys},
                    {"role": "user", "content": plan_user_prompt(brief, outline)}, *history]

        return self.planner.client.complete(messages_for, schema, brief.request_seed, self.max_tokens, "plan")

    def judge(self, reply: Reply):
        if reply.finish_reason == "length":
            return None, [f"reply: cut at max_tokens ({reply.max_tokens}) after {len(reply.content)} characters"]
        return self.planner._usable(reply, self.seed, self.brief, self.session_id, self.allowed)

    def shorter(self, reply: Reply) -> None:
        self.brief, self.history = self.brief.shorter(), []
        self.max_tokens = max(self.max_tokens, plan_max_tokens(self.brief))

    def repair(self, reply: Reply, errors: list[str]) -> None:
        self.history = [{"role": "assistant", "content": reply.content},
                        {"role": "user", "content": repair_prompt(errors, self.brief.prompt_language)}]


class _OutlineRequest:
    """Mode plan's request for ``k`` outlines (``converse``); a good reply is sampled by their
    probabilities: ``(outline, probability, how many, response format)``."""

    def __init__(self, client: ChatClient, seed: ScenarioSeed, brief: Brief, k: int, rng: np.random.Generator):
        self.client, self.seed, self.brief, self.k, self.rng = client, seed, brief, k, rng
        self.lang = brief.prompt_language
        self.history: list[dict] = []

    def ask(self) -> Reply:
        k, history = self.k, self.history
        schema = outline_schema(k, budget.OUTLINE_CHARS[self.lang])

        def messages_for(mode: str) -> list[dict]:
            sys = outline_system_prompt(self.seed, self.brief, k, None if mode == "json_schema" else schema)
            return [{"role": "system", "content": sys},
                    {"role": "user", "content": outline_user_prompt(self.brief, k)}, *history]

        return self.client.complete(messages_for, schema, self.brief.request_seed,
                                    budget.outline_reply_tokens(k, self.lang), "outline")

    def judge(self, reply: Reply):
        if reply.finish_reason == "length":
            return None, []
        obj, err = extract_json(reply.content)
        if obj is None:
            return None, [f"reply: {err}"]
        try:
            raw = obj if isinstance(obj, dict) else {"outlines": obj}
            outlines = LLMOutlines.model_validate(raw).outlines[:self.k]
        except ValidationError as e:
            return None, fmt_errors("", e)
        if not outlines:
            return None, []
        p = np.array([max(o.probability, 0.0) for o in outlines], dtype=float)
        p = p / p.sum() if p.sum() > 0 else np.full(len(outlines), 1 / len(outlines))
        i = int(self.rng.choice(len(outlines), p=p))
        return (outlines[i].outline, round(float(outlines[i].probability), 4), len(outlines), reply.mode), []

    def shorter(self, reply: Reply) -> None:
        self.k, self.history = max(1, self.k - 1 - self.k // 3), []

    def repair(self, reply: Reply, errors: list[str]) -> None:
        self.history = [{"role": "assistant", "content": reply.content},
                        {"role": "user", "content": repair_prompt(errors, self.lang, "outlines")}]


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def extract_json(text: str):
    """``(object, None)`` or ``(None, reason)``: the JSON in a reply, fenced, prefixed or bare."""
    text = (text or "").strip()
    if not text:
        return None, "empty reply"
    candidates = [text] + _FENCE.findall(text)
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start >= 0:
        candidates.append(text[start:])
    dec = json.JSONDecoder(strict=False)  # raw newlines/tabs inside strings: small models write them
    last = ""
    for c in candidates:
        c = c.strip()
        try:
            return dec.decode(c), None
        except ValueError as e:
            last = str(e)
        try:
            obj, _ = dec.raw_decode(c)  # JSON followed by chatter
            return obj, None
        except ValueError:
            pass
    return None, f"not valid JSON ({last})"
