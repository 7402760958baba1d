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
from .prompt import (Brief, draw_brief, outline_system_prompt, outline_user_prompt, plan_max_tokens,
                     plan_system_prompt, plan_user_prompt, repair_prompt)
from .schema import (LLMOutlines, check_plan, fmt_errors, outline_schema, parse_plan,
                     plan_schema, to_plan)

_THIRD_PARTY = {"user_to_third_party", "third_party_to_user", "readdress_after_side_talk"}


class LLMPlanner:
    def __init__(self, cfg: LLMConfig, cache_dir: Path | str | None = None):
        self.cfg = cfg
        self.name = f"llm-{cfg.prompt}"
        self.client = ChatClient(cfg, Path(cache_dir) if cache_dir else None)
        self._prefetched: dict[str, Plan | SessionReject] = {}

    def check_seed(self, seed: ScenarioSeed, source: str = "") -> None:
        where = f"{source}: " if source else ""
        if self.cfg.mode == "fill":
            from ..scripted_planner import ScriptedPlanner

            ScriptedPlanner().check_seed(seed, source)  # it builds the structure
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
        allowed = brief.allowed(seed)  # must-appear, optional and pipeline-added: all listed in the prompt
        history: list[dict] = []
        errors: list[str] = []
        max_tokens = plan_max_tokens(brief)
        cuts = 0
        for attempt in range(1, cfg.max_attempts + 1):
            schema = plan_schema(seed, brief.max_events, sorted(allowed))

            def messages_for(mode: str, brief=brief, schema=schema) -> list[dict]:
                sys = plan_system_prompt(seed, brief, None if mode == "json_schema" else schema)
                return [{"role": "system", "content": sys},
                        {"role": "user", "content": plan_user_prompt(brief, outline)}, *history]

            reply = self.client.complete(messages_for, schema, brief.request_seed, max_tokens, "plan")
            if reply.finish_reason == "length":
                # a cut reply is lost JSON: ask for less, never for the same again
                cuts += 1
                errors = [f"reply: cut at max_tokens ({reply.max_tokens}) after {len(reply.content)} characters"]
                brief, history = brief.shorter(), []
                max_tokens = max(max_tokens, plan_max_tokens(brief))
                continue
            plan, errors = self._usable(reply, seed, brief, session_id, allowed)
            if plan is not None:
                meta = {"mode": "plan", "prompt_version": cfg.prompt, "model": cfg.model,
                        "response_format": reply.mode, "examples": list(brief.example_ids), "attempts": attempt,
                        "cut_replies": cuts, "outlines": n_outlines, "outline": outline,
                        "outline_probability": prob, "outline_response_format": o_mode,
                        "exchanges": brief.exchanges, "required_phenomena": list(brief.required)}
                return plan.model_copy(update={"planner_meta": meta})
            history = [{"role": "assistant", "content": reply.content},
                       {"role": "user", "content": repair_prompt(errors, brief.prompt_language)}]
        raise SessionReject("plan", "llm_invalid_plan",
                            f"{cfg.max_attempts} attempts; last: " + "; ".join(errors[:4])[:600])

    def _outline(self, seed: ScenarioSeed, brief: Brief, rng: np.random.Generator):
        """``(outline, probability, how many were offered, response format)``; no outline with ``alternatives`` 1.

        One repair: a reply that fails is sent back with its errors, a cut one is asked again for
        fewer outlines. Still nothing usable: the plan is asked for without an outline.
        """
        k = self.cfg.alternatives
        if k <= 1:
            return None, None, 0, None
        lang = brief.prompt_language
        history: list[dict] = []
        for _ in range(2):
            schema = outline_schema(k, budget.OUTLINE_CHARS[lang])

            def messages_for(mode: str, k=k, schema=schema) -> list[dict]:
                sys = outline_system_prompt(seed, brief, k, None if mode == "json_schema" else schema)
                return [{"role": "system", "content": sys},
                        {"role": "user", "content": outline_user_prompt(brief, k)}, *history]

            reply = self.client.complete(messages_for, schema, brief.request_seed,
                                         budget.outline_reply_tokens(k, lang), "outline")
            if reply.finish_reason == "length":
                k, history = max(1, k - 1 - k // 3), []
                continue
            obj, err = extract_json(reply.content)
            outlines, errors = [], [f"reply: {err}"] if obj is None else []
            if obj is not None:
                try:
                    raw = obj if isinstance(obj, dict) else {"outlines": obj}
                    outlines = LLMOutlines.model_validate(raw).outlines[:k]
                except ValidationError as e:
                    errors = fmt_errors("", e)
            if outlines:
                p = np.array([max(o.probability, 0.0) for o in outlines], dtype=float)
                p = p / p.sum() if p.sum() > 0 else np.full(len(outlines), 1 / len(outlines))
                i = int(rng.choice(len(outlines), p=p))
                return outlines[i].outline, round(float(outlines[i].probability), 4), len(outlines), reply.mode
            history = [{"role": "assistant", "content": reply.content},
                       {"role": "user", "content": repair_prompt(errors, lang, "outlines")}]
        return None, None, 0, None

    def _usable(self, reply: Reply, seed: ScenarioSeed, brief: Brief, session_id: str, allowed: set[str]):
        """``(Plan, [])`` or ``(None, errors)`` for one complete reply."""
        obj, err = extract_json(reply.content)
        if obj is None:
            return None, [f"reply: {err}"]
        p, errors = parse_plan(obj)
        if p is None:
            return None, errors
        errors = check_plan(p, seed, list(brief.required), brief.max_events, allowed)
        if errors:
            return None, errors
        try:
            return to_plan(p, seed, session_id, self.name, {}), []
        except ValueError as e:
            return None, [f"plan: {short_error(e)}"]


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
