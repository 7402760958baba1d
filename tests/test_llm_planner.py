"""The LLM planner against a real chat-completions HTTP server on 127.0.0.1 (tests/chat_server.py).

No patched client: the ``openai`` client talks HTTP to a scripted server, which answers with
good plans, broken JSON, invalid plans, 429s, 500s on ``json_schema`` or slow replies.
"""

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from chat_server import ChatServer, Reply
from synth.backends.llm import EndpointError, LLMPlanner
from synth.backends.llm.planner import extract_json
from synth.backends.llm.prompt import examples
from synth.backends.llm.schema import LLMPlan, check_plan
from synth.errors import SessionReject
from synth.io.config_files import load_seed
from synth.rng import stream
from synth.schema.config import LLMConfig, PipelineConfig
from synth.schema.seed import ScenarioSeed

ROOT = Path(__file__).resolve().parents[1]

SEED = {
    "id": "llm-test-en", "domain": "smart_home", "language": "en",
    "personas": {"user": {"name": "Dana", "role": "tenant"}, "system": {"name": "Ada", "role": "home assistant"}},
    "goals": ["check tomorrow's weather"], "exchanges": {"dist": "fixed", "value": 2},
    "phenomena": {"smooth_exchange": 1.0, "delegate_with_ack": 1.0, "result_at_silence_gap": 1.0},
    "tools": [{"name": "weather_lookup", "description": "Gets the local weather forecast."}],
}


def ev(id, speaker, act, text, relation=None, attach_to=None, phenomena=(), floor="take", **kw):
    return {"id": id, "speaker": speaker, "act": act, "text": text, "floor_intent": floor, "relation": relation,
            "attach_to": attach_to, "attach_word": kw.get("attach_word"), "pause_before": kw.get("pause_before"),
            "gap_kind": "normal", "phenomena": list(phenomena)}


def good_plan(variant: str = "sunny") -> dict:
    return {"events": [
        ev("u1", "user", "request", "Hey Ada, what's the weather like tomorrow morning?"),
        ev("s1", "system", "acknowledge", "Sure, let me check the forecast for you.", "responds_to", "u1",
           ["smooth_exchange", "delegate_with_ack"]),
        ev("u2", "user", "followup", "Thanks, and please keep it short.", "responds_to", "s1"),
        ev("s2", "system", "deliver_result", f"Tomorrow morning will be {variant} and about eighteen degrees.",
           "delivers_result_of", "w1", ["result_at_silence_gap"]),
    ], "work": [{"work_id": "w1", "tool": "weather_lookup", "objective": "forecast for tomorrow morning",
                 "result_text": f"{variant}, 18 C", "opened_by": "s1"}]}


def good_batch() -> str:
    return json.dumps({"alternatives": [{"probability": 0.7, "plan": good_plan("sunny")},
                                        {"probability": 0.3, "plan": good_plan("cloudy")}]})


def bad_batch() -> str:
    plan = good_plan()
    plan["events"][1]["attach_to"] = "u9"  # attaches to an event that does not exist
    return json.dumps({"alternatives": [{"probability": 1.0, "plan": plan}]})


@pytest.fixture
def seed() -> ScenarioSeed:
    return ScenarioSeed.model_validate(SEED)


def planner(url: str, cache: Path, **kw) -> LLMPlanner:
    cfg = LLMConfig(**{"base_url": url, "model": "test-model", "alternatives": 2, "max_retries": 2,
                       "timeout_s": 10, **kw})
    return LLMPlanner(cfg, cache)


def plan_one(p: LLMPlanner, seed: ScenarioSeed, sid: str = "t-000000"):
    return p.plan(seed, sid, stream(7, sid, "plan"))


def kinds(srv: ChatServer) -> list:
    return [(r.get("response_format") or {}).get("type", "plain") for r in srv.requests]


def test_valid_plans(seed, tmp_path):
    with ChatServer(lambda body, i: Reply(good_batch())) as srv:
        plan = plan_one(planner(srv.url, tmp_path), seed)
        again = plan_one(planner(srv.url, tmp_path / "other-cache"), seed)
    assert [e.id for e in plan.events] == ["u1", "s1", "u2", "s2"]
    assert plan.work[0].tool == "weather_lookup" and plan.events[3].work_id == "w1"
    assert all(w.lang == "en" for e in plan.events for w in e.words)
    meta = plan.planner_meta
    assert meta["mode"] == "json_schema" and meta["prompt_version"] == "plan-v1" and meta["attempts"] == 1
    assert meta["alternatives"] == 2 and meta["chosen"] in (0, 1)
    assert meta["probability"] == (0.7 if meta["chosen"] == 0 else 0.3)
    assert set(meta["examples"]) <= set(examples()) and len(meta["examples"]) == 2
    assert again.model_dump() == plan.model_dump()  # same session, same request, same choice
    body = srv.requests[0]
    assert body["model"] == "test-model" and body["response_format"]["type"] == "json_schema"
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["$defs"]["LLMEvent"]["properties"]["text"]["maxLength"] == 240
    assert schema["$defs"]["LLMWork"]["properties"]["tool"]["enum"] == ["weather_lookup"]
    assert schema["$defs"]["LLMPlan"]["properties"]["events"]["maxItems"] == 14  # 2 exchanges
    system = body["messages"][0]["content"]
    for needle in ("Dana", "weather_lookup", "delegate_with_ack", "check tomorrow's weather", "English only"):
        assert needle in system
    assert "JSON schema of the reply" not in system  # the server enforces it in this mode


def test_sampling_follows_probabilities(seed, tmp_path):
    with ChatServer(lambda body, i: Reply(good_batch())) as srv:
        p = planner(srv.url, tmp_path)
        chosen = [plan_one(p, seed, f"t-{i:06d}").planner_meta["chosen"] for i in range(30)]
    assert 0 < chosen.count(1) < chosen.count(0)  # 0.7 vs 0.3, drawn with each session's stream


def test_chinese_prompt_for_chinese_seed(tmp_path):
    seed = load_seed(ROOT / "scenario_seeds" / "cooking-help-zh.yaml")
    with ChatServer(lambda body, i: Reply("{}")) as srv:
        with pytest.raises(SessionReject):
            plan_one(planner(srv.url, tmp_path, max_attempts=1), seed)
    system = srv.requests[0]["messages"][0]["content"]
    assert "场景" in system and "只用普通话" in system and seed.personas.user.name in system


def test_broken_json_then_good(seed, tmp_path):
    replies = ['{"alternatives": [{"probability": 1.0, "plan": {"events": [', good_batch()]
    with ChatServer(lambda body, i: Reply(replies[min(i, 1)])) as srv:
        plan = plan_one(planner(srv.url, tmp_path), seed)
    assert plan.planner_meta["attempts"] == 2 and len(srv.requests) == 2
    repair = srv.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": replies[0]}
    assert "could not be used" in repair[-1]["content"] and "not valid JSON" in repair[-1]["content"]


def test_invalid_reply_errors_are_fed_back(seed, tmp_path):
    with ChatServer(lambda body, i: Reply(bad_batch() if i == 0 else good_batch())) as srv:
        plan = plan_one(planner(srv.url, tmp_path), seed)
    assert plan.planner_meta["attempts"] == 2
    feedback = srv.requests[1]["messages"][-1]["content"]
    assert "'u9' is not an earlier event id" in feedback


def test_missing_phenomenon_and_wrong_language_are_errors(seed):
    plan = LLMPlan.model_validate(good_plan())
    assert check_plan(plan, seed, ["smooth_exchange", "delegate_with_ack"]) == []
    data = good_plan()
    data["events"][1]["phenomena"] = ["smooth_exchange"]
    data["events"][2]["text"] = "谢谢，短一点。"
    errs = check_plan(LLMPlan.model_validate(data), seed, ["delegate_with_ack"])
    assert any("requested phenomena not tagged" in e and "delegate_with_ack" in e for e in errs)
    assert any(e.startswith("language:") for e in errs)


def test_stored_examples_pass_the_rules():
    for ex_id, ex in examples().items():
        seed = load_seed(ROOT / "scenario_seeds" / f"{ex['scenario_id']}.yaml")
        assert check_plan(LLMPlan.model_validate(ex["plan"]), seed, []) == [], ex_id


def test_always_invalid_session_rejected_and_run_completes(tmp_path):
    from synth.executor.run import execute, merge, prepare_folder
    from synth.executor.task import RunSpec

    with ChatServer(lambda body, i: Reply(bad_batch())) as srv:
        cfg = PipelineConfig(name="t", seeds=["x"], sessions=3, seed=7, output={"sessions_per_shard": 2},
                             planner={"kind": "llm", "llm": {"base_url": srv.url, "model": "test-model",
                                                             "max_attempts": 2, "cache_dir": str(tmp_path / "c")}})
        spec = RunSpec(config=cfg, seeds=(ScenarioSeed.model_validate(SEED),), out_dir=str(tmp_path / "out"))
        prepare_folder(spec)
        execute(spec, "local", 1)
        stats = merge(spec)
    assert stats["sessions"] == 0 and stats["rejects"] == 3
    assert stats["rejects_by_reason"] == {"llm_invalid_plan": 3}
    assert stats["llm_usage"]["requests"] == 6 and stats["llm_usage"]["prompt_tokens"] == 600
    rejects = [json.loads(x) for x in (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()]
    assert len(rejects) == 3 and all(r["stage"] == "plan" and "u9" in r["detail"] for r in rejects)
    assert len(list((tmp_path / "out" / "tasks").glob("*.done.json"))) == 2  # both tasks finished


def test_429_then_success_backs_off(seed, tmp_path):
    def respond(body, i):
        return Reply(status=429, headers={"retry-after-ms": "300"}) if i == 0 else Reply(good_batch())

    with ChatServer(respond) as srv:
        t0 = time.monotonic()
        plan = plan_one(planner(srv.url, tmp_path), seed)
        elapsed = time.monotonic() - t0
    assert len(srv.requests) == 2 and elapsed >= 0.3
    assert plan.planner_meta["mode"] == "json_schema" and plan.planner_meta["attempts"] == 1


def test_429_while_probing_gets_the_full_retry_budget(seed, tmp_path):
    def respond(body, i):
        return Reply(status=429, headers={"retry-after-ms": "50"}) if i < 3 else Reply(good_batch())

    with ChatServer(respond) as srv:
        plan = plan_one(planner(srv.url, tmp_path, max_retries=3), seed)
    assert plan.planner_meta["mode"] == "json_schema" and kinds(srv) == ["json_schema"] * 4


def test_500_on_json_schema_falls_back_and_is_remembered(seed, tmp_path):
    def respond(body, i):  # llama-cpp-python's server: HTTP 500 for json_schema
        rf = body.get("response_format") or {}
        return Reply(status=500) if rf.get("type") == "json_schema" else Reply(good_batch())

    with ChatServer(respond) as srv:
        p = planner(srv.url, tmp_path)
        first = plan_one(p, seed, "t-000000")
        second = plan_one(p, seed, "t-000001")
    assert first.planner_meta["mode"] == "json_object" and second.planner_meta["mode"] == "json_object"
    k = kinds(srv)
    assert k[-2:] == ["json_object", "json_object"] and set(k[:-2]) == {"json_schema"}
    assert len(k) - 2 <= 2  # one probe (and one retry), then never again in this task
    obj = srv.requests[-1]
    assert obj["response_format"]["schema"]["$defs"]["LLMEvent"]
    assert "JSON schema of the reply" in obj["messages"][0]["content"]
    assert p.usage()["mode_fallbacks"] == 1


def test_plain_mode_extracts_fenced_json(seed, tmp_path):
    def respond(body, i):
        if body.get("response_format"):
            return Reply(status=400)
        return Reply("Here are the plans:\n```json\n" + good_batch() + "\n```\nHope this helps!")

    with ChatServer(respond) as srv:
        plan = plan_one(planner(srv.url, tmp_path), seed)
    assert plan.planner_meta["mode"] == "plain" and kinds(srv) == ["json_schema", "json_object", "plain"]


def test_prefetch_keeps_to_the_concurrency_limit(seed, tmp_path):
    with ChatServer(lambda body, i: Reply(good_batch(), delay_s=0.3)) as srv:
        p = planner(srv.url, tmp_path, max_concurrency=2)
        sids = [f"t-{i:06d}" for i in range(6)]
        p.prefetch([(seed, sid, stream(7, sid, "plan")) for sid in sids])
        plans = [plan_one(p, seed, sid) for sid in sids]  # served from the prefetch, no new request
    assert srv.max_in_flight == 2 and len(srv.requests) == 6  # two at a time, never more
    with ChatServer(lambda body, i: Reply(good_batch())) as srv2:  # one by one, another cache: asks again
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
    with ChatServer(lambda body, i: Reply(good_batch(), delay_s=2.0 if i == 0 else 0)) as srv:
        p = LLMPlanner(LLMConfig(base_url=srv.url, model="m", alternatives=2, timeout_s=0.5, max_retries=2), tmp_path)
        t0 = time.monotonic()
        plan = plan_one(p, seed)
        elapsed = time.monotonic() - t0
    assert plan.planner_meta["attempts"] == 1 and len(srv.requests) == 2 and elapsed < 2.0


def test_endpoint_that_never_answers_in_time_stops_with_one_error(seed, tmp_path):
    with ChatServer(lambda body, i: Reply(good_batch(), delay_s=1.5)) as srv:
        p = LLMPlanner(LLMConfig(base_url=srv.url, model="m", timeout_s=0.3, max_retries=0,
                                 response_format="json_object"), tmp_path)
        with pytest.raises(EndpointError, match=r"planner\.llm\.base_url: http://127\.0\.0\.1:\d+/v1: APITimeoutError"):
            plan_one(p, seed)


def test_cache_hit_on_second_run_sends_nothing(seed, tmp_path):
    def llama_like(body, i):
        rf = body.get("response_format") or {}
        return Reply(status=500) if rf.get("type") == "json_schema" else Reply(good_batch())

    with ChatServer(llama_like) as srv:
        first = plan_one(planner(srv.url, tmp_path), seed)
    assert srv.requests
    with ChatServer(lambda body, i: Reply(status=503)) as srv2:
        p2 = planner(srv2.url, tmp_path)
        second = plan_one(p2, seed)
    assert srv2.requests == [] and second.model_dump() == first.model_dump()
    assert p2.usage()["cache_hits"] == 1 and p2.usage()["requests"] == 0
    assert list(tmp_path.rglob("*.json"))  # one file per request hash


def test_request_cache_key_changes_with_sampling(seed, tmp_path):
    with ChatServer(lambda body, i: Reply(good_batch())) as srv:
        plan_one(planner(srv.url, tmp_path), seed)
        plan_one(planner(srv.url, tmp_path, temperature=0.2), seed)
    assert len(srv.requests) == 2 and srv.requests[1]["temperature"] == 0.2


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
    with ChatServer(lambda body, i: Reply(good_batch())) as srv:
        r = _synth("plan", seed_file, "--planner", "llm", "--llm-base-url", srv.url, "--llm-model", "test-model",
                   "-n", "3", "--llm-cache-dir", tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    plans = json.loads(r.stdout)
    assert [p["session_id"] for p in plans] == ["plan-000000", "plan-000001", "plan-000002"]
    assert all(p["planner"] == "llm-plan-v1" and p["planner_meta"]["mode"] == "json_schema" for p in plans)
    assert srv.models_calls == 1 and len(srv.requests) == 3  # endpoint checked once, then one request each
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
    with ChatServer(lambda body, i: Reply(good_batch())) as srv:
        r = _synth("run", pipe, "--out", tmp_path / "a", "--planner", "llm", "--llm-base-url", srv.url, *opts)
        assert r.returncode == 0, r.stderr
        n_first = len(srv.requests)
        r = _synth("run", pipe, "--out", tmp_path / "b", "--planner", "llm", "--llm-base-url", srv.url, *opts)
        assert r.returncode == 0, r.stderr
    assert n_first == 2 and len(srv.requests) == 2  # the second run was served from the cache
    rows = pq.read_table(tmp_path / "a" / "shards" / "parquet" / "part-00000.parquet").to_pylist()
    assert len(rows) == 2 and all(row["planner"] == "llm-plan-v1" for row in rows)
    assert all(json.loads(row["planner_meta"])["mode"] == "json_schema" for row in rows)
    for name in ("parquet/part-00000.parquet", "webdataset/part-00000.tar"):
        assert (tmp_path / "a" / "shards" / name).read_bytes() == (tmp_path / "b" / "shards" / name).read_bytes()
    stats_a = json.loads((tmp_path / "a" / "stats.json").read_text())
    stats_b = json.loads((tmp_path / "b" / "stats.json").read_text())
    assert stats_a["llm_usage"]["requests"] == 2 and stats_a["llm_usage"]["completion_tokens"] == 100
    assert stats_b["llm_usage"]["cache_hits"] == 2 and stats_b["llm_usage"].get("requests", 0) == 0
    run_json = (tmp_path / "a" / "run.json").read_text()
    assert "test-model" in run_json and "OPENAI_API_KEY" in run_json  # the variable's name, never a key
    assert json.loads(run_json)["fingerprint"] == json.loads((tmp_path / "b" / "run.json").read_text())["fingerprint"]
    ok = _synth("validate", tmp_path / "a")
    assert ok.returncode == 0, ok.stdout + ok.stderr


@pytest.mark.skipif(not os.environ.get("SYNTH_TEST_LLM_BASE_URL"), reason="set SYNTH_TEST_LLM_BASE_URL to a real server")
def test_real_server_plans(tmp_path):
    """Against a real model: the call path works and every returned plan passed validation.

    SYNTH_TEST_LLM_MODEL names the model (default: the first one the server lists);
    SYNTH_TEST_LLM_SESSIONS how many sessions to plan (default 1).
    """
    import openai

    url = os.environ["SYNTH_TEST_LLM_BASE_URL"]
    model = os.environ.get("SYNTH_TEST_LLM_MODEL") or openai.OpenAI(base_url=url, api_key="x").models.list().data[0].id
    seed = ScenarioSeed.model_validate(SEED)  # two exchanges: small enough for a CPU-served model
    p = LLMPlanner(LLMConfig(base_url=url, model=model, alternatives=1, examples=1, max_attempts=2,
                             max_tokens=1200, timeout_s=600, max_retries=1), tmp_path)
    outcomes = []
    for i in range(int(os.environ.get("SYNTH_TEST_LLM_SESSIONS", "1"))):
        try:
            outcomes.append(plan_one(p, seed, f"real-{i:06d}"))
        except SessionReject as r:  # a weak model may fail validation: then it must be a clean reject
            outcomes.append(r)
            assert r.reason == "llm_invalid_plan" and r.detail
    assert p.usage()["requests"] >= len(outcomes) and p.usage()["completion_tokens"] > 0
    for o in outcomes:
        if not isinstance(o, SessionReject):
            assert o.planner_meta["mode"] in ("json_schema", "json_object", "plain")
            assert check_plan(LLMPlan.model_validate(_as_llm(o)), seed, o.planner_meta["required_phenomena"], 2) == []


def _as_llm(plan):
    from synth.backends.llm.schema import from_plan

    return copy.deepcopy(from_plan(plan).model_dump(mode="json"))
