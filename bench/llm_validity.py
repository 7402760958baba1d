"""Do plans that pass the LLM planner's checks render? A replayed run of N sessions, counted by stage.

    .venv/bin/python bench/llm_validity.py --mode plan --sessions 100
    .venv/bin/python bench/llm_validity.py --mode fill --sessions 100 [--perturb]
    .venv/bin/python bench/llm_validity.py --mode fill --base-url http://127.0.0.1:8765/v1 --model smollm2-135m \
        --seeds tests/data/llm/seeds/fill-en.yaml --sessions 10 --examples 0

``plan``: every session's offline plan (``ScriptedPlanner``) is turned into the reply an LLM would
send (``schema.from_plan``: the exact plan-mode output format, anchors as ``attach_text``), checked
with ``schema.check_plan`` (no must-appear phenomena; 40 events), converted back (``to_plan``) and
rendered by ``make_session`` like any LLM plan. ``fill``: the real fill path over HTTP
(``tests/chat_server.py``) with a model that returns the drafts (``--perturb``: without the ‖
marks and with a word dropped or repeated per text, so anchors are mapped proportionally), or,
with ``--base-url``, a real server (one line per session on stderr as it goes).
Prints how many plans passed the checks and, of those, how many were rejected later and why.
Seeds: the demo pipeline's (``pipelines/demo-espeak.yaml``: every scenario seed, eSpeak voices).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _copy_model(perturb: bool):
    import numpy as np

    from chat_server import Reply

    def respond(body, i):
        keys = list((body.get("response_format") or {}).get("json_schema", {}).get("schema", {}).get("properties", {}))
        drafts = {}
        for line in body["messages"][0]["content"].splitlines():
            m = re.match(r"^([0-9a-z][a-z0-9_-]*) \| .* \| draft: (\".*\")$", line)
            if m:
                drafts[m.group(1)] = json.loads(m.group(2))
        out = {}
        rng = np.random.default_rng(i)
        for k in keys:
            text = drafts[k]
            if perturb:
                words = text.replace("‖", " ").split()
                if len(words) > 3:
                    j = int(rng.integers(len(words)))
                    words = words[:j] + words[j + 1:] if rng.random() < 0.5 else words[:j] + [words[j]] + words[j:]
                text = " ".join(words)
            out[k] = text
        return Reply(json.dumps(out, ensure_ascii=False))

    return respond


class _Fixed:
    """A planner that returns a given plan (the LLM-converted one)."""

    name = "llm-plan-v2"

    def __init__(self, plan):
        self._plan = plan

    def check_seed(self, seed, source=""):
        pass

    def plan(self, seed, session_id, rng):
        return self._plan


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["plan", "fill"], default="plan")
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--base-url", help="a real OpenAI-compatible server (mode fill)")
    ap.add_argument("--model", default="local")
    ap.add_argument("--seeds", nargs="*", help="seed files instead of the demo pipeline's")
    ap.add_argument("--examples", type=int, default=2)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--no-lengths", action="store_true", help="schema_string_lengths: false (llama.cpp grammars)")
    ap.add_argument("--response-format", default="auto", choices=["auto", "json_schema", "json_object", "plain"])
    args = ap.parse_args()

    from synth.backends.llm import LLMPlanner
    from synth.backends.llm.schema import check_plan, from_plan, to_plan
    from synth.backends.scripted_planner import ScriptedPlanner
    from synth.banks.bank import resolve_banks
    from synth.errors import SessionReject
    from synth.executor.task import build_tts
    from synth.io.config_files import load_pipeline, load_seed, load_seeds
    from synth.rng import stream
    from synth.schema.config import LLMConfig
    from synth.session import Reject, make_session

    pipe = ROOT / "pipelines" / "demo-espeak.yaml"
    cfg = load_pipeline(pipe)
    seeds = [load_seed(Path(p)) for p in args.seeds] if args.seeds else load_seeds(cfg, pipe)
    bank = resolve_banks(cfg.acoustics.banks, pipe.parent, on_build=lambda f: None)
    tts = build_tts(cfg)
    counts: Counter = Counter()
    invalid: Counter = Counter()
    later: Counter = Counter()
    t0 = time.time()
    server = None
    if args.mode == "fill":
        import tempfile

        from chat_server import ChatServer

        url = args.base_url
        if url is None:
            server = ChatServer(_copy_model(args.perturb)).__enter__()
            url = server.url
        llm = LLMPlanner(LLMConfig(base_url=url, model=args.model if args.base_url else "copy", mode="fill",
                                   examples=args.examples, max_retries=1 if args.base_url else 0,
                                   schema_string_lengths=not args.no_lengths, response_format=args.response_format,
                                   timeout_s=3600), args.cache_dir or tempfile.mkdtemp())
    for i in range(args.sessions):
        seed = seeds[i % len(seeds)]
        sid = f"v-{i:06d}"
        try:
            if args.mode == "plan":
                scripted = ScriptedPlanner().plan(seed, sid, stream(args.seed, sid, "plan"))
                try:
                    reply = from_plan(scripted)
                except ValueError:  # more events than the reply format allows (40)
                    invalid["length"] += 1
                    counts["invalid"] += 1
                    continue
                errs = check_plan(reply, seed, [], 40)
                if errs:
                    invalid.update(re.findall(r"\(rule \d+: (\w+)\)", errs[0])[:1] or ["other"])
                    counts["invalid"] += 1
                    continue
                planner = _Fixed(to_plan(reply, seed, sid, "llm-plan-v2", {}))
            else:
                planner = _Fixed(llm.plan(seed, sid, stream(args.seed, sid, "plan")))
        except SessionReject as r:
            invalid[r.reason] += 1
            counts["invalid"] += 1
            print(f"{sid} {seed.id}: invalid {r.reason}: {r.detail[:300]}", file=sys.stderr, flush=True)
            continue
        counts["valid"] += 1
        out = make_session(cfg, seed, args.seed, sid, planner, tts, None, bank)
        if isinstance(out, Reject):
            later[f"{out.stage}:{out.reason}"] += 1
            counts["rejected_later"] += 1
            print(f"{sid} {seed.id}: valid, rejected later {out.stage}:{out.reason} {out.detail[:200]}",
                  file=sys.stderr, flush=True)
        else:
            counts["rendered"] += 1
            print(f"{sid} {seed.id}: rendered ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    if server is not None:
        server.__exit__(None, None, None)
    valid = counts["valid"]
    print(json.dumps({"mode": args.mode + ("-perturbed" if args.perturb else ""), "sessions": args.sessions,
                      **counts, "rejected_later_share": round(counts["rejected_later"] / valid, 4) if valid else None,
                      "invalid_by_first_rule": dict(invalid), "rejected_later_by_reason": dict(later),
                      "llm_usage": llm.usage() if args.mode == "fill" else None,
                      "seconds": round(time.time() - t0, 1)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
