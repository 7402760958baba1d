"""A session is its record: ``synth render`` rebuilds a written session from its record alone
(eSpeak NG run with room and noise, sessions in en, zh and en-zh), byte for byte."""

import io
import json
import tarfile
from pathlib import Path

import pytest
import yaml

from synth.inspection.runfolder import RunFolder
from synth.schema.config import PipelineConfig

from helpers import ROOT, synth


def demo_pipeline(tmp: Path, sessions: int, **over) -> Path:
    cfg = yaml.safe_load((ROOT / "pipelines" / "demo-espeak.yaml").read_text())
    cfg.update(seeds=[str(ROOT / "scenario_seeds" / "banking-*.yaml")], sessions=sessions,
               executor={"kind": "local", "workers": 1}, **over)
    cfg["acoustics"]["banks"] = [{"path": str(ROOT / "noise_banks" / "generated"), "generate": True}]
    p = tmp / "pipe.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def wds_members(out: Path) -> dict[str, bytes]:
    members = {}
    for tar in sorted((out / "shards" / "webdataset").glob("*.tar")):
        with tarfile.open(tar) as tf:
            for m in tf.getmembers():
                members[m.name] = tf.extractfile(m).read()
    return members


@pytest.fixture(scope="module")
def espeak_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("render")
    out = tmp / "out"
    synth("run", demo_pipeline(tmp, 3), "--out", out)
    return tmp, out


@pytest.fixture(scope="module")
def bare_run(espeak_run):
    """The run's shards alone: no run.json, no config, no bank folders listed anywhere."""
    import shutil

    tmp, out = espeak_run
    bare = tmp / "bare"
    if not bare.exists():
        shutil.copytree(out / "shards", bare / "shards")
    return bare


@pytest.mark.parametrize("lang", ["en", "zh", "en-zh"])
def test_rerender_from_the_record_alone_is_byte_identical(espeak_run, bare_run, lang):
    tmp, out = espeak_run
    rec = next(r for r in RunFolder(out).records if r.language == lang)
    assert rec.render_spec.version == 2 and rec.render_spec.params.engines.bank_digest
    dest = tmp / f"again-{lang}"
    r = synth("render", bare_run, "--session", rec.session_id, "-o", dest, "--bank", ROOT / "noise_banks" / "generated")
    assert "differs" not in r.stderr
    members = wds_members(out)
    assert f"{rec.session_id}.voice.flac" in members  # the voice prompt is rebuilt too
    for ext in ("user.flac", "system.flac", "json", "voice.flac"):
        rebuilt = (dest / f"{rec.session_id}.{ext}").read_bytes()
        assert rebuilt == members[f"{rec.session_id}.{ext}"], ext


def test_render_without_run_json_needs_the_bank_folders(espeak_run, bare_run, tmp_path):
    _, out = espeak_run
    rec = RunFolder(out).records[0]
    r = synth("render", bare_run, "--session", rec.session_id, "-o", tmp_path, check=False)
    assert r.returncode == 2 and "--bank" in r.stderr and "Traceback" not in r.stderr
    r = synth("render", bare_run, "--session", rec.session_id, "-o", tmp_path, "--bank", tmp_path, check=False)
    assert r.returncode == 2 and "--bank" in r.stderr and rec.render_spec.params.engines.bank_digest in r.stderr


def test_a_version_1_record_still_renders_through_the_run_config():
    """A record written before render params (stored: tests/data/render_v1, an en-zh eSpeak
    session with room, noise and bank sounds) renders with its run's config to the same PCM."""
    import hashlib

    import soundfile as sf

    from synth.banks.bank import resolve_banks
    from synth.errors import SessionReject
    from synth.executor.task import build_tts
    from synth.schema.record import SessionRecord
    from synth.session import rerender

    data = ROOT / "tests" / "data" / "render_v1"
    record = SessionRecord.model_validate_json((data / "record.json").read_text())
    expected = json.loads((data / "expected.json").read_text())
    assert record.render_spec.version == 1 and record.render_spec.params is None
    raw = json.loads((data / "config.json").read_text())
    raw["acoustics"]["banks"] = [{"path": str(ROOT / "noise_banks" / "generated"), "generate": True}]
    cfg = PipelineConfig.model_validate(raw)
    bank = resolve_banks(cfg.acoustics.banks, ROOT / "pipelines")
    assert bank.digest == expected["bank_digest"]
    with pytest.raises(SessionReject, match="run's config"):
        rerender(record, build_tts(cfg), bank)
    again = rerender(record, build_tts(cfg), bank, cfg)
    for ch, flac in (("user", again.user_flac), ("system", again.system_flac)):
        pcm, sr = sf.read(io.BytesIO(flac), dtype="int16")
        assert (sr, len(pcm)) == (expected[ch]["sample_rate"], expected[ch]["num_samples"])
        assert hashlib.sha256(pcm.astype("<i2").tobytes()).hexdigest() == expected[ch]["pcm16_sha256"], ch
    assert again.record.render_spec.version == 1  # and the rest of the record as written (scene keys sorted there)
    assert json.loads(again.record.model_dump_json()) == json.loads(record.model_dump_json())


def test_render_spec_versions_are_checked():
    from pydantic import ValidationError

    from synth.schema.record import RenderSpec

    stored = json.loads((ROOT / "tests" / "data" / "render_v1" / "record.json").read_text())["render_spec"]
    base = {k: stored[k] for k in ("plan", "voices", "events", "clock")}
    RenderSpec.model_validate({**base, "version": 1})
    with pytest.raises(ValidationError, match="version"):
        RenderSpec.model_validate({**base, "version": 3})
    with pytest.raises(ValidationError, match="params"):
        RenderSpec.model_validate({**base, "version": 2})
    with pytest.raises(ValidationError, match="plan.events"):  # the plan is the typed Plan, checked on load
        RenderSpec.model_validate({**base, "version": 1, "plan": {**base["plan"], "events": "none"}})
    with pytest.raises(ValidationError, match="rate_wpm"):  # and every voice a Voice
        RenderSpec.model_validate({**base, "version": 1, "voices": {"user": {"variant": "x"}}})


def test_render_spec_holds_every_draw(espeak_run):
    _, out = espeak_run
    for rec in RunFolder(out).records:
        spec = rec.render_spec
        planned = [e.id for e in spec.plan.events]
        assert sorted(spec.events) == sorted(planned)
        assert set(spec.voices) == {e.speaker for e in spec.plan.events} & {"user", "system", "third_party"}
        for eid, e in spec.events.items():
            assert (e.sound is None) == (e.voice is not None), eid
            if e.sound is not None:
                assert e.sound.num_samples > 0 and e.sound.path
        # the clock's draws: the lead-in of the first event and the tail at least
        first = rec.events[0].id
        assert spec.clock[first]["lead_in"] and spec.clock["tail"]["tail"]
        assert sum(len(v) for s in spec.clock.values() for v in s.values()) >= len(rec.events)


def test_an_edited_draw_is_what_gets_rendered(espeak_run):
    """The record is the source: a longer tail in the spec makes a longer session, no draw is made."""
    from synth.executor.task import build_tts
    from synth.session import rerender
    from synth.banks.bank import load_bank

    _, out = espeak_run
    run = RunFolder(out)
    cfg = PipelineConfig.model_validate(run.info["config"])
    rec = run.records[0]
    spec = rec.render_spec
    clock = {**spec.clock, "tail": {"tail": [spec.clock["tail"]["tail"][0] + 500.0]}}
    edited = rec.model_copy(update={"render_spec": spec.model_copy(update={"clock": clock})})
    bank = load_bank([Path(f) for f in run.info["bank"]["folders"]])
    again = rerender(edited, build_tts(cfg), bank)
    assert again.record.num_samples == rec.num_samples + 500 * rec.sample_rate // 1000
    assert again.record.events == rec.events


def test_no_draws_stand_in_refuses_use():
    from synth.stages.tape import NoDraws, Tape
    from synth.errors import SessionReject

    with pytest.raises(RuntimeError, match="drew from a generator"):
        NoDraws().uniform(0, 1)
    t = Tape({"e1": {"gap": [1.5]}})
    assert t.take("e1", "gap", lambda: 9.0) == 1.5
    with pytest.raises(SessionReject, match="clock.e1.gap\\[1\\]"):
        t.take("e1", "gap", lambda: 9.0)


def test_kokoro_session_rerenders_byte_identical():
    """A short en / zh / en-zh Kokoro session (three turns: Kokoro is slow) made, then rebuilt
    from its record: same FLAC bytes and the same record."""
    from synth.banks.bank import resolve_banks
    from synth.executor.task import build_tts
    from synth.io.config_files import load_seed
    from synth.schema.plan import Plan, PlannedEvent
    from synth.session import SessionOutput, make_session, rerender
    from synth.text import tokenize

    cfg = PipelineConfig.model_validate(yaml.safe_load((ROOT / "pipelines" / "demo.yaml").read_text())
                                        | {"tts": {"engine": "kokoro"}})
    bank = resolve_banks(cfg.acoustics.banks, ROOT / "pipelines")
    seed = load_seed(ROOT / "scenario_seeds" / "banking-en-zh.yaml")
    turns = [("u1", "user", "request", None, None, "我明天有个 meeting，帮我 check 一下。"),
             ("s1", "system", "answer", "responds_to", "u1", "Sure, you are free after three."),
             ("u2", "user", "acknowledge", "responds_to", "s1", "好的，谢谢。")]
    plan = Plan(session_id="kokoro-000000", scenario_id=seed.id, language="en-zh", planner="test", events=[
        PlannedEvent(id=i, speaker=spk, act=act, floor_intent="take", relation=rel, attach_to=to, words=tokenize(text))
        for i, spk, act, rel, to, text in turns])
    tts = build_tts(cfg)
    made = make_session(cfg, seed, 5, plan.session_id, None, tts, bank=bank, plan=plan)
    assert isinstance(made, SessionOutput), made
    again = rerender(made.record, tts, bank)
    assert (again.user_flac, again.system_flac) == (made.user_flac, made.system_flac)
    assert again.record.model_dump_json() == made.record.model_dump_json()
    assert {e.lang for e in made.record.events} == {"en", "zh", "en-zh"}


def test_plans_file_round_trips_to_the_same_shards(espeak_run):
    """``plan -o`` then ``run --plans`` makes the same shards, byte for byte, as a plain run."""
    tmp, out = espeak_run
    plans = tmp / "plans.jsonl"
    synth("plan", tmp / "pipe.yaml", "-n", "3", "-o", plans)
    rows = [json.loads(x) for x in plans.read_text().splitlines()]
    assert [r["session_id"] for r in rows] == [r.session_id for r in RunFolder(out).records]
    # the decorated plan is what was rendered
    assert [r["plan"] for r in rows] == [r.render_spec.plan.model_dump(mode="json") for r in RunFolder(out).records]
    again = tmp / "from-plans"
    synth("run", tmp / "pipe.yaml", "--plans", plans, "--out", again)
    for fmt in ("parquet", "webdataset"):
        for f in sorted((out / "shards" / fmt).iterdir()):
            assert (again / "shards" / fmt / f.name).read_bytes() == f.read_bytes(), f.name


def test_bad_plans_become_rejects_and_a_bad_file_is_one_line(espeak_run):
    tmp, _ = espeak_run
    plans = tmp / "plans.jsonl"
    if not plans.exists():
        synth("plan", tmp / "pipe.yaml", "-n", "3", "-o", plans)
    rows = [json.loads(x) for x in plans.read_text().splitlines()]
    rows[1]["plan"]["events"][1]["attach_to"] = "nowhere"
    edited = tmp / "edited.jsonl"
    edited.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    out = tmp / "edited-run"
    synth("run", tmp / "pipe.yaml", "--plans", edited, "--out", out)
    rejects = [json.loads(x) for x in (out / "rejects.jsonl").read_text().splitlines()]
    assert [(r["session_id"], r["reason"]) for r in rejects] == [(rows[1]["session_id"], "plan_invalid")]
    assert "nowhere" in rejects[0]["detail"]
    assert [r.session_id for r in RunFolder(out).records] == [rows[0]["session_id"]]
    (tmp / "not.jsonl").write_text('{"session_id": "a", "seed_id": "b", "plan": {}}\nnot json\n')
    r = synth("run", tmp / "pipe.yaml", "--plans", tmp / "not.jsonl", "--out", tmp / "x", check=False)
    assert r.returncode == 2 and "not.jsonl: line 2: not JSON" in r.stderr and "Traceback" not in r.stderr
