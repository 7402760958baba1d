"""The LLM planner: same interface as ``ScriptedPlanner`` (``name``, ``check_seed``, ``plan``).

Per session: draw a brief from the session's plan stream, ask for ``alternatives`` plans in
one request, keep those that pass the LLM-facing schema, the plan rules and the seed's rules,
and sample one by its self-reported probability with the same stream. A reply with no usable
plan is answered with its validation errors, up to ``max_attempts`` requests; then the session
is rejected (``SessionReject("plan", "llm_invalid_plan", ...)``) and the run goes on.

``planner_meta`` of the plan records the prompt version, mode, example ids, attempts and which
alternative was chosen with what probability.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ...errors import SessionReject, UserError
from ...schema.config import LLMConfig
from ...schema.plan import Plan
from ...schema.seed import ScenarioSeed
from ...schema.phenomena import resolve_rates
from .client import ChatClient
from .prompt import Brief, draw_brief, repair_prompt, system_prompt, user_prompt
from .schema import alternatives_of, batch_schema, check_plan, parse_alternative, to_plan

_DELEGATION = {"delegate_with_ack", "continue_while_working", "result_at_silence_gap", "result_deferred",
               "stale_result_dropped", "progress_question"}
_THIRD_PARTY = {"user_to_third_party", "third_party_to_user", "readdress_after_side_talk"}


class LLMPlanner:
    def __init__(self, cfg: LLMConfig, cache_dir: Path | str | None = None):
        self.cfg = cfg
        self.name = f"llm-{cfg.prompt_version}"
        self.client = ChatClient(cfg, Path(cache_dir) if cache_dir else None)
        self._prefetched: dict[str, Plan | SessionReject] = {}

    def check_seed(self, seed: ScenarioSeed, source: str = "") -> None:
        where = f"{source}: " if source else ""
        asked = {k for k, v in resolve_rates(seed.phenomena).items() if v > 0}
        if asked & _DELEGATION and not seed.tools:
            raise UserError(f"{where}tools: delegation phenomena {sorted(asked & _DELEGATION)} need a tool catalogue")
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
        cfg = self.cfg
        brief = draw_brief(seed, cfg, rng)
        schema = batch_schema(seed, cfg.alternatives, brief.exchanges)
        history: list[dict] = []

        def messages_for(mode: str) -> list[dict]:
            sys = system_prompt(seed, brief, cfg, None if mode == "json_schema" else schema)
            return [{"role": "system", "content": sys}, {"role": "user", "content": user_prompt(brief)}, *history]

        errors: list[str] = []
        for attempt in range(1, cfg.max_attempts + 1):
            reply = self.client.complete(messages_for, schema, brief.request_seed)
            good, errors = self._usable(reply.content, reply.finish_reason, seed, brief, session_id)
            if good:
                probs = np.array([max(p, 0.0) for p, _, _ in good], dtype=float)
                probs = probs / probs.sum() if probs.sum() > 0 else np.full(len(good), 1 / len(good))
                prob, index, plan = good[int(rng.choice(len(good), p=probs))]
                meta = {"prompt_version": cfg.prompt_version, "model": cfg.model, "mode": reply.mode,
                        "examples": list(brief.example_ids), "attempts": attempt, "alternatives": len(good),
                        "chosen": index, "probability": round(float(prob), 4),
                        "required_phenomena": list(brief.required)}
                return plan.model_copy(update={"planner_meta": meta})
            history += [{"role": "assistant", "content": reply.content[:6000]},
                        {"role": "user", "content": repair_prompt(errors, brief.prompt_language)}]
        raise SessionReject("plan", "llm_invalid_plan",
                            f"{cfg.max_attempts} attempts; last: " + "; ".join(errors[:4])[:600])

    def _usable(self, content: str, finish: str, seed: ScenarioSeed, brief: Brief, session_id: str):
        """``([(probability, index, Plan), ...], errors)`` for one reply: its usable alternatives."""
        obj, err = extract_json(content)
        if obj is None:
            cut = " (the reply was cut at max_tokens: write shorter plans)" if finish == "length" else ""
            return [], [f"reply: {err}{cut}"]
        raws = alternatives_of(obj)
        if not raws:
            return [], ['reply: expected {"alternatives": [{"probability": ..., "plan": {...}}]}']
        good, errors = [], []
        for i, raw in enumerate(raws[: self.cfg.alternatives]):
            alt, errs = parse_alternative(raw, i)
            if alt is not None:
                errs = [f"alternatives[{i}].plan.{e}" for e in check_plan(alt.plan, seed, list(brief.required), brief.exchanges)]
            if alt is not None and not errs:
                try:
                    plan = to_plan(alt.plan, seed, session_id, self.name, {})
                    good.append((alt.probability, i, plan))
                    continue
                except ValueError as e:
                    errs = [f"alternatives[{i}].plan: {str(e).splitlines()[-1] if str(e) else e}"]
            errors += errs
        return good, errors


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
