"""``synth frames draft`` against a real chat-completions server on 127.0.0.1, and pipelines that
plan with the drafted frames (``content: [folders]``).

The replay case ``tests/data/frames_draft/pharmacy-en`` holds the command's exact request and the
reply written for it from the request alone, as a capable model would: five pharmacy frames in
English, three good and two flawed (a follow-up naming a slot the frame does not have; an answer
with markup and digits), so both the accepted and the rejected path are real.
``tests/data/frames_draft/record.py CASE`` re-records the request when the prompt changes.
"""

from __future__ import annotations

import json
import pickle
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pytest
import yaml

from chat_server import ChatServer, Replay, Reply
from helpers import ROOT, synth
from synth.backends.content import BUILTIN, load_library
from synth.backends.frame_checks import check_file
from synth.backends.frames import AddedFile, fill
from synth.errors import UserError

CASE = ROOT / "tests" / "data" / "frames_draft" / "pharmacy-en"
DRAFTED = ["travel_supply", "blister_packs", "blood_pressure_check"]
SEED = ROOT / "scenario_seeds" / "pharmacy-en.yaml"


def draft(url: str, out: Path, cache: Path, *extra: str):
    return synth("frames", "draft", "pharmacy", "--language", "en", "-n", "5", "-o", out, "--llm-base-url", url,
                 "--llm-model", "replay-model", "--llm-cache-dir", cache, *extra, check=False, timeout=120)


@pytest.fixture(scope="module")
def drafted(tmp_path_factory):
    """The replayed round trip: ``(process, content folder, requests)``."""
    tmp = tmp_path_factory.mktemp("draft")
    rep = Replay(CASE)
    with ChatServer(rep) as srv:
        r = draft(srv.url, tmp / "content", tmp / "cache")
    assert rep.mismatches == [], "the draft request changed: re-record with tests/data/frames_draft/record.py pharmacy-en"
    return r, tmp / "content", srv.requests


def test_round_trip_accepts_the_good_frames_and_rejects_the_flawed_with_reasons(drafted):
    r, content, requests = drafted
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "accepted 3, rejected 2"
    assert lines[1] == ("rejected sharps_disposal: followups[1].user[0]: 'Can I bring them to {clinic} instead?' "
                        "uses unknown slot 'clinic'")
    assert lines[2].startswith("rejected vaccination: request.system[0]: markup or emoji in speech: ")
    assert "; request.system[0]: digits in speech" in lines[2] and "*free*" in lines[2]
    assert check_file(content / "pharmacy.yaml") == []
    assert synth("frames", "check", content / "pharmacy.yaml").stdout.strip().endswith("pharmacy.yaml: ok")
    added = AddedFile.model_validate(yaml.safe_load((content / "pharmacy.yaml").read_text("utf-8")))
    assert set(added.blocks()) == {"en"} and [f.id for f in added.en.frames] == DRAFTED
    rows = [json.loads(x) for x in (content / "rejected.jsonl").read_text("utf-8").splitlines()]
    assert [(x["id"], x["language"], len(x["reasons"])) for x in rows] == [("sharps_disposal", "en", 1),
                                                                         ("vaccination", "en", 2)]
    assert rows[0]["frame"]["followups"][1]["system"][0].startswith("{clinic} takes them")  # the frame as written


def test_the_request_shows_format_examples_ids_and_the_schema(drafted):
    _, _, requests = drafted
    assert len(requests) == 1
    body = requests[0]
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "A **unit** is one user line" in system and "## Rules" in system  # the format, from the frames README
    assert "- refill: the {medicine} refill" in system and "- hours: the opening hours at {branch}" in system
    assert system.count('{"id":"') == 2  # two examples of the block
    assert "insurance_check, pharmacist_consult, pharmacy_stock, prescription_service" in system
    assert user.startswith("Write 5 new frames for pharmacy (en)")
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["frames"]["maxItems"] == 5 and "Frame" in schema["$defs"]
    assert body["response_format"]["json_schema"]["strict"] is False


def pipeline(tmp: Path, content: list[str] | None) -> Path:
    p = tmp / ("with.yaml" if content else "without.yaml")
    data = {"name": "drafted", "seeds": [str(SEED)], "acoustics": {"room": False, "noise": False}}
    if content:
        data["content"] = content
    p.write_text(yaml.safe_dump(data), "utf-8")
    return p


def spoken(frame, slots: dict) -> set[str]:
    """Every system line of a frame's units, filled with a session's values (lower case)."""
    units = [frame.request, *frame.followups, *frame.new_requests]
    lines = [t for u in units for t in (*u.system, *u.short, *u.repair)]
    return {fill(t, slots).lower() for t in lines}


def test_a_pipeline_with_the_content_folder_plans_with_the_drafted_frames(drafted, tmp_path):
    _, content, _ = drafted
    frames = {f.id: f for f in AddedFile.model_validate(yaml.safe_load((content / "pharmacy.yaml").read_text())).en.frames}
    (tmp_path / "lib").symlink_to(content)
    with_plans = plans(pipeline(tmp_path, ["lib"]))
    used, said = 0, 0
    for p in with_plans:
        texts = {e.text.lower() for e in p.events if e.speaker == "system"}
        for f in p.planner_meta["frames"]:
            if f["id"] in frames:
                used += 1
                said += bool(texts & spoken(frames[f["id"]], f["slots"]))
    assert used >= 3 and said >= 3
    without = plans(pipeline(tmp_path, None))
    ids = {f["id"] for p in without for f in p.planner_meta["frames"]}
    assert not ids & set(frames)
    assert not any("blister pack" in e.text or "travel supply" in e.text for p in without for e in p.events)


def plans(pipe: Path, n: int = 16) -> list:
    """``synth plan PIPE -n N``, read back as plans."""
    from synth.schema.plan import Plan

    return [Plan.model_validate(p) for p in json.loads(synth("plan", pipe, "-n", str(n)).stdout)]


def test_a_frame_id_that_clashes_is_one_line_naming_the_file_and_id(drafted, tmp_path):
    _, content, _ = drafted
    raw = yaml.safe_load((content / "pharmacy.yaml").read_text("utf-8"))
    raw["en"]["frames"][0]["id"] = "refill"  # a built-in frame of pharmacy en
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "pharmacy.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), "utf-8")
    r = synth("plan", pipeline(tmp_path, ["mine"]), check=False)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr
    assert str(tmp_path / "mine" / "pharmacy.yaml") in lines[0] and "'refill'" in lines[0]
    with pytest.raises(UserError, match=r"frame id 'travel_supply' is also a frame of .*pharmacy\.yaml"):
        load_library([str(content), str(content)], tmp_path)  # two folders with the same frame


def test_workers_plan_with_the_drivers_frames_and_the_digest_is_a_data_setting(drafted, tmp_path):
    from synth.executor.run import data_settings, prepare_folder
    from synth.executor.task import RunSpec
    from synth.io.config_files import load_pipeline, load_seeds

    _, content, _ = drafted
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "pharmacy.yaml").write_bytes((content / "pharmacy.yaml").read_bytes())
    pipe = pipeline(tmp_path, ["lib"])
    cfg = load_pipeline(pipe)
    lib = load_library(cfg.content, tmp_path)
    spec = RunSpec(config=cfg, seeds=tuple(load_seeds(cfg, pipe)), out_dir=str(tmp_path / "run"), content=lib)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:  # fresh module state, as a Ray worker
        theirs = pool.submit(_plan_in_worker, pickle.dumps(spec), 5).result(timeout=120)
    assert theirs == _plan_in_worker(pickle.dumps(spec), 5)
    assert any(f in theirs for f in DRAFTED)

    assert data_settings(spec)["content"] == lib.digest
    plain = RunSpec(config=cfg.model_copy(update={"content": []}), seeds=spec.seeds, out_dir=spec.out_dir)
    assert "content" not in data_settings(plain) and "content" not in data_settings(plain)["config"]
    prepare_folder(spec)
    text = (tmp_path / "lib" / "pharmacy.yaml").read_text("utf-8")
    (tmp_path / "lib" / "pharmacy.yaml").write_text(text.replace("Portugal", "Spain"), "utf-8")
    changed = RunSpec(config=cfg, seeds=spec.seeds, out_dir=spec.out_dir, content=load_library(cfg.content, tmp_path))
    with pytest.raises(UserError, match=r"different data settings \(content \(digest of the folders' files\)"):
        prepare_folder(changed)


def _plan_in_worker(blob: bytes, n: int) -> str:
    from synth.backends.planner import make_planner
    from synth.rng import stream

    spec = pickle.loads(blob)
    planner = make_planner(spec.config.planner, content=spec.content)
    plans = [planner.plan(seed, sid, stream(spec.config.seed, sid, "plan")).model_dump_json()
             for sid, seed in [(f"w-{i:06d}", spec.seeds[0]) for i in range(n)]]
    return "\n".join(plans)


def test_builtin_library_is_the_package_content():
    from synth.backends.frames import block

    assert BUILTIN.block("pharmacy", "en") is block("pharmacy", "en")
    assert load_library([], ROOT) is BUILTIN


# -- the mechanics: repair, cut replies, bad input ----------------------------------------------
def test_a_reply_that_is_not_json_is_sent_back_a_cut_one_asks_for_fewer_and_the_rest_comes_next(tmp_path):
    from synth.backends.llm.draft import draft_frames
    from synth.schema.config import LLMConfig

    good = (CASE / "00.reply.json").read_text("utf-8")
    fixed = json.loads(good)["frames"][4]  # the vaccination frame without its markup and digits
    fixed["request"]["system"][0] = fixed["request"]["system"][0].replace("*free*", "free").replace("65", "sixty five")
    replies = [Reply("Sure! Here are five new pharmacy frames for you."), Reply(good[:3000], finish_reason="length"),
               Reply(good), Reply(json.dumps({"frames": [fixed]}))]
    with ChatServer(lambda body, i: replies[min(i, 3)]) as srv:
        cfg = LLMConfig(base_url=srv.url, model="m", max_tokens=16384, json_schema_strict=False, max_retries=0)
        done = draft_frames("pharmacy", "en", 5, tmp_path, cfg, tmp_path / "cache")
    reqs = srv.requests
    assert len(reqs) == 4 and [f.id for f in done.accepted] == [*DRAFTED, "vaccination"]
    assert [r["id"] for r in done.rejected] == ["sharps_disposal"]
    assert reqs[1]["messages"][-2] == {"role": "assistant", "content": replies[0].content}
    assert "could not be used" in reqs[1]["messages"][-1]["content"] and "not valid JSON" in reqs[1]["messages"][-1]["content"]
    assert len(reqs[2]["messages"]) == 2  # the cut reply is not sent back; fewer frames are asked for
    max_items = [r["response_format"]["json_schema"]["schema"]["properties"]["frames"]["maxItems"] for r in reqs]
    assert max_items == [5, 5, 4, 1]  # the fifth frame is asked for on its own, after the first four
    assert "- blood_pressure_check: the blood pressure check at {branch}" in reqs[3]["messages"][0]["content"]
    assert check_file(tmp_path / "pharmacy.yaml") == []


def test_drafting_again_appends_and_refuses_the_ids_already_drafted(drafted, tmp_path):
    from synth.backends.llm.draft import draft_frames
    from synth.schema.config import LLMConfig

    _, content, _ = drafted
    (tmp_path / "pharmacy.yaml").write_bytes((content / "pharmacy.yaml").read_bytes())
    good = (CASE / "00.reply.json").read_text("utf-8")
    with ChatServer(lambda body, i: Reply(good)) as srv:
        cfg = LLMConfig(base_url=srv.url, model="m", max_tokens=16384, json_schema_strict=False, max_retries=0,
                        max_attempts=1)
        done = draft_frames("pharmacy", "en", 5, tmp_path, cfg, tmp_path / "cache")
    assert done.accepted == [] and done.failure  # the same five frames: every one refused
    reasons = {r["id"]: r["reasons"] for r in done.rejected}
    assert reasons["travel_supply"] == ["id: 'travel_supply' is already a frame of pharmacy (en)"]
    assert "- travel_supply: the travel supply of {medicine}" in srv.requests[0]["messages"][0]["content"]
    assert check_file(tmp_path / "pharmacy.yaml") == []


@pytest.mark.parametrize("args, says", [
    (["nosuch", "-o", "{tmp}/c"], "DOMAIN: no built-in domain 'nosuch'"),
    (["pharmacy", "--language", "fr", "-o", "{tmp}/c"], "--language: must be en, zh or en-zh (got 'fr')"),
    (["pharmacy", "-n", "0", "-o", "{tmp}/c"], "-n: 1 to 50 frames per draft (got 0)"),
    (["pharmacy", "-n", "51", "-o", "{tmp}/c"], "-n: 1 to 50 frames per draft (got 51)"),
    (["pharmacy", "-o", "{tmp}/file.txt"], "-o: {tmp}/file.txt is a file, not a folder"),
    (["pharmacy", "-o", "{tmp}/c", "--llm-model", "m"], "--llm-base-url: an OpenAI-compatible endpoint is needed"),
    (["pharmacy", "-o", "{tmp}/c", "--llm-base-url", "http://127.0.0.1:9/v1"], "--llm-model: the model name"),
    (["pharmacy", "-o", "{tmp}/c", "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", "m"],
     "planner.llm.base_url: cannot reach http://127.0.0.1:9/v1"),
])
def test_bad_input_is_one_line_naming_the_option_and_exit_2(args, says, tmp_path):
    (tmp_path / "file.txt").write_text("x")
    r = synth("frames", "draft", *[a.format(tmp=tmp_path) for a in args], "--llm-cache-dir", tmp_path / "cache",
              check=False, timeout=120)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("error: ") and says.format(tmp=tmp_path) in lines[0], lines[0]
    assert not (tmp_path / "c").exists()
