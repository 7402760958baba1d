"""Rooms, sound banks, noise at SNR, echo, paralinguistics and the peak guard (issue 3)."""

import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml

from synth.audio import active_rms_db, prolong
from synth.backends import room as room_mod
from synth.backends.espeak import EspeakTTS
from synth.backends.scripted_planner import ScriptedPlanner, tokenize
from synth.backends.tts import Voice
from synth.banks.bank import load_bank
from synth.banks.generate import build_bank
from synth.errors import UserError
from synth.io.config_files import load_seed
from synth.rng import stream
from synth.schema.config import ParalinguisticsConfig
from synth.schema.dist import Uniform
from synth.schema.scene import AcousticEnvironment, EchoSpec, NoiseLayer, NoiseSpec, RoomLaw, Scene
from synth.schema.timeline import PlacedEvent, Timeline
from synth.stages import qa
from synth.stages.mix import mix
from synth.stages.paraling import decorate, estimated_minutes

ROOT = Path(__file__).resolve().parents[1]
SR = 16000


@pytest.fixture(scope="module")
def bank_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bank") / "generated"
    build_bank(d)
    return d


def tree_digest(d: Path) -> dict:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


# -- rooms ------------------------------------------------------------------------------------
@pytest.mark.parametrize("rt60", [(0.2, 0.35), (0.35, 0.55), (0.55, 0.9)])
def test_rt60_measured_from_the_impulse_response_is_within_20_percent(rt60):
    env = AcousticEnvironment(room=RoomLaw(rt60_s=Uniform(a=rt60[0], b=rt60[1])))
    for i in range(4):
        spec = room_mod.draw_room(env, ["user", "third_party"], stream(3, f"room-{rt60}-{i}"), 3, 4000)
        irs = room_mod.room_irs(spec, SR)
        for name, ir in irs.items():
            measured = room_mod.measure_rt60(ir, SR)
            assert abs(measured / spec.rt60_s - 1) < 0.20, (name, spec.dims_m, spec.rt60_s, measured)


def test_rooms_are_drawn_jointly_with_a_reachable_rt60():
    # a big room cannot be as dry as 0.1 s: the draw is truncated to what the room can reach
    env = AcousticEnvironment(room=RoomLaw(length_m=Uniform(a=9, b=10), width_m=Uniform(a=7, b=8),
                                           rt60_s=Uniform(a=0.05, b=0.1)))
    spec = room_mod.draw_room(env, ["user"], stream(1, "big"), 3, 4000)
    lo, _ = room_mod.rt60_range(spec.dims_m)
    assert spec.rt60_s >= lo and 0 < spec.e_absorption < 1
    d = spec.distances_m["user"]
    assert 0.2 < d <= 2.0 + 1e-6


def test_room_impulse_responses_depend_only_on_the_spec():
    spec = room_mod.draw_room(AcousticEnvironment(), ["user", "background"], stream(5, "det"), 3, 2000)
    room_mod._CACHE.clear()
    a = room_mod.room_irs(spec, SR)
    np.random.seed(123)  # global state elsewhere must not matter
    room_mod._CACHE.clear()
    b = room_mod.room_irs(spec, SR)
    assert all(a[k].tobytes() == b[k].tobytes() for k in a)
    assert a["user"].tobytes() != a["background"].tobytes()


# -- banks ------------------------------------------------------------------------------------
def test_bank_builder_is_deterministic(bank_dir, tmp_path):
    again = tmp_path / "generated"
    build_bank(again)
    first, second = tree_digest(bank_dir), tree_digest(again)
    assert first == second
    cats = {json.loads(l)["category"] for l in (bank_dir / "manifest.jsonl").read_text().splitlines()}
    assert {"stationary", "hum", "clicks", "babble", "media", "laughter", "breath", "cough"} <= cats
    x, sr = sf.read(bank_dir / "laughter" / "hearty-low-0800ms.flac")
    assert sr == 24000 and 0.6 < len(x) / sr < 1.6 and np.abs(x).max() > 0.3


def _user_bank(tmp: Path) -> Path:
    d = tmp / "mybank"
    d.mkdir()
    t = np.arange(SR) / SR
    tone = (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    sf.write(d / "a.wav", tone, SR)
    sf.write(d / "b.ogg", tone, SR, format="OGG", subtype="VORBIS")
    sf.write(d / "c.mp3", tone, SR, format="MP3")
    (d / "broken.flac").write_bytes(b"fLaC" + bytes(range(256)) * 8)
    rows = [{"path": p, "category": "hum", "duration_s": 1.0, "sample_rate": SR, "licence": "CC-BY-4.0"}
            for p in ("a.wav", "b.ogg", "c.mp3", "broken.flac", "gone.wav")]
    (d / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def test_a_corrupt_or_missing_file_in_a_user_bank_is_skipped_and_counted(tmp_path):
    bank = load_bank([_user_bank(tmp_path)])
    assert sorted(f.entry.path for f in bank.files) == ["a.wav", "b.ogg", "c.mp3"]
    assert sorted(Path(f).name for f, _ in bank.skipped) == ["broken.flac", "gone.wav"]


def test_a_bad_manifest_line_names_file_line_field_and_value(tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "manifest.jsonl").write_text(json.dumps({"path": "x.wav", "category": "hum", "duration_s": -1,
                                                  "sample_rate": SR, "licence": "CC0-1.0"}) + "\n")
    with pytest.raises(UserError, match=r"manifest.jsonl:1: duration_s: .*got -1"):
        load_bank([d])
    with pytest.raises(UserError, match="no manifest.jsonl"):
        load_bank([tmp_path])


def test_a_run_with_a_corrupt_bank_file_finishes_and_reports_it(tmp_path, bank_dir):
    mine = _user_bank(tmp_path)
    cfg = {"name": "cb", "seeds": [str(ROOT / "scenario_seeds" / "smart-home-en.yaml")], "sessions": 2, "seed": 3,
           "acoustics": {"banks": [{"path": str(bank_dir)}, {"path": str(mine)}]},
           "output": {"sessions_per_shard": 2}}
    p = tmp_path / "pipe.yaml"
    p.write_text(yaml.safe_dump(cfg))
    r = subprocess.run([sys.executable, "-m", "synth.cli", "run", str(p), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "2 unreadable bank files skipped" in r.stderr
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["bank_files_skipped"] == 2 and stats["sessions"] == 2
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert {Path(s["file"]).name for s in run["bank"]["skipped"]} == {"broken.flac", "gone.wav"}


# -- mixing: SNR, echo, peak guard ------------------------------------------------------------
def _timeline(tts) -> tuple[Timeline, dict]:
    """Two user utterances and one system answer between them, on a 7 s clock."""
    texts = [("u1", "user", "Could you turn the kitchen lights on, please?", 8000),
             ("s1", "system", "Sure, the kitchen lights are on now.", 48000),
             ("u2", "user", "Thanks, and set the heating to twenty one degrees.", 72000)]
    events, audio = [], {}
    for eid, spk, text, on in texts:
        r = tts.synthesize(tokenize(text), Voice("m3" if spk == "user" else "f1", 170, 50, 60), SR)
        x = r.audio * 10 ** ((-24 - active_rms_db(r.audio, SR)) / 20)
        events.append(PlacedEvent(id=eid, speaker=spk, act="x", floor_intent="take", text=text, lang="en",
                                  on_sample=on, off_sample=on + len(x)))
        audio[eid] = x.astype(np.float32)
    n = max(e.off_sample for e in events) + SR
    return Timeline(sample_rate=SR, num_samples=n, events=events), audio


def _level(x):  # the test's own speech-active level meter: 10 ms windows within 40 dB of the top
    w = SR // 100
    f = x[: len(x) // w * w].astype(np.float64).reshape(-1, w)
    db = 10 * np.log10(np.mean(f ** 2, axis=1) + 1e-20)
    act = db[db > db.max() - 40]
    return 10 * np.log10(np.mean(10 ** (act / 10)))


@pytest.mark.parametrize("snr_db,category", [(5.0, "stationary"), (15.0, "babble"), (25.0, "hum")])
def test_mixed_snr_is_within_1_db_of_the_drawn_value(bank_dir, snr_db, category):
    bank = load_bank([bank_dir])
    tts = EspeakTTS({"en": "en-us", "zh": "cmn"})
    tl, audio = _timeline(tts)
    spec = room_mod.draw_room(AcousticEnvironment(), ["user"], stream(9, "snr"), 3, 2000)
    irs = room_mod.room_irs(spec, SR)
    f = bank.of(category)[0]
    layers = [NoiseLayer(bank=f.bank, path=f.entry.path, category=category, licence="CC0-1.0", offset_s=3.3,
                         gain_db=0.0)]
    clicks = bank.of("clicks")[0]
    layers.append(NoiseLayer(bank=clicks.bank, path=clicks.entry.path, category="clicks", licence="CC0-1.0",
                             offset_s=0.5, gain_db=-3.0))
    noisy = Scene(environment="home", room=spec, levels_db={"user": -18.0},
                  noise=NoiseSpec(snr_db=snr_db, layers=layers), echo=None)
    clean = noisy.model_copy(update={"noise": None})
    a, b = mix(tl, audio, noisy, irs, bank, 0.95), mix(tl, audio, clean, irs, bank, 0.95)
    scale = lambda m: 10 ** (m.gains_db["peak_scale_user_side_db"] / 20)  # noqa: E731
    speech = b.user_side / scale(b)
    noise = a.user_side / scale(a) - speech
    measured = _level(speech) - 10 * np.log10(np.mean(noise.astype(np.float64) ** 2))
    assert abs(measured - snr_db) < 1.0, measured
    assert np.abs(a.user_side).max() <= 0.95 + 1e-6
    # the system channel stays the clean system speech
    assert np.array_equal(a.system, b.system)


def test_echo_comes_back_at_the_drawn_return_loss(bank_dir):
    tts = EspeakTTS({"en": "en-us", "zh": "cmn"})
    tl, audio = _timeline(tts)
    env = AcousticEnvironment()
    spec = room_mod.draw_room(env, ["user"], stream(2, "echo"), 3, 2000, extra={"loudspeaker": ("mic", 0.08)})
    irs = room_mod.room_irs(spec, SR)
    base = Scene(environment="home", room=spec, levels_db={"user": -24.0}, noise=None, echo=None)
    with_echo = base.model_copy(update={"echo": EchoSpec(erl_db=12.0)})
    a, b = mix(tl, audio, with_echo, irs, None, 0.95), mix(tl, audio, base, irs, None, 0.95)
    s = lambda m: 10 ** (m.gains_db["peak_scale_user_side_db"] / 20)  # noqa: E731
    echo = a.user_side / s(a) - b.user_side / s(b)
    assert abs((_level(a.system / 10 ** (a.gains_db["peak_scale_system_db"] / 20)) - _level(echo)) - 12.0) < 1.0
    sys_on = tl.events[1].on_sample
    assert np.abs(echo[: sys_on - SR // 100]).max() < 1e-6  # nothing before the system speaks


def test_qa_rejects_clipped_audio():
    x = np.zeros(100, np.float32)
    assert qa.check_peaks({"user_side": x}) == []
    x[5] = 1.0
    assert qa.check_peaks({"user_side": x}) == ["clipped:user_side"]


# -- paralinguistics --------------------------------------------------------------------------
def _plans(seed_file: str, n: int):
    seed = load_seed(ROOT / "scenario_seeds" / seed_file)
    planner, cfg = ScriptedPlanner(), ParalinguisticsConfig()
    for i in range(n):
        sid = f"rate-{i:04d}"
        p = planner.plan(seed, sid, stream(11, sid, "plan"))
        yield decorate(p, seed, cfg, stream(11, sid, "paraling"))


@pytest.mark.parametrize("seed_file,lo,hi", [("smart-home-en.yaml", 1.5, 3.0), ("cooking-help-zh.yaml", 0.8, 1.4)])
def test_filled_pauses_come_at_the_labels_rate_over_300_sessions(seed_file, lo, hi):
    """Rate and (zh) the shares of the four fillers; 300 sessions give ~200 zh fillers, so a share
    is within 0.1 of its target at ~3 standard errors."""
    fillers, words, names = 0, 0, {}
    for plan in _plans(seed_file, 300):
        for e in plan.events:
            if e.speaker != "user" or e.floor_intent == "none":
                continue
            if e.act == "filler":
                fillers += 1
                names[e.words[0].text] = names.get(e.words[0].text, 0) + 1
            else:
                words += len(e.words)
    rate = 100 * fillers / words
    assert lo <= rate <= hi, rate
    if "zh" in seed_file:  # 那个 42 %, 呃 24 %, 这个 20 %, 嗯 14 %
        share = {k: v / fillers for k, v in names.items()}
        for k, want in {"那个": 0.42, "呃": 0.24, "这个": 0.20, "嗯": 0.14}.items():
            assert abs(share.get(k, 0) - want) < 0.1, share


def test_laughter_comes_at_the_labels_rate_over_100_sessions():
    laughs, minutes = 0, 0.0
    for plan in _plans("travel-booking-en.yaml", 100):
        laughs += sum(e.act == "laughter" for e in plan.events)
        minutes += estimated_minutes(plan.events)
    assert 0.5 * 1.1 <= laughs / minutes <= 2.0 * 0.9, laughs / minutes  # law U(0.5, 2): mean 1.25


def test_every_paralinguistic_addition_is_its_own_tagged_event():
    acts = {}
    for plan in _plans("smart-home-en-zh.yaml", 60):
        for e in plan.events:
            acts.setdefault(e.act, set()).update(e.phenomena)
    for act, tag in {"filler": "filled_pause", "laughter": "laughter", "breath": "breath_sigh",
                     "cough": "cough", "false_start": "false_start", "self_repair": "self_repair",
                     "media": "background_media"}.items():
        assert act in acts and tag in acts[act], (act, acts.get(act))


def test_a_seed_rate_of_zero_switches_a_sound_off():
    seed = load_seed(ROOT / "scenario_seeds" / "smart-home-en.yaml")
    seed = seed.model_copy(update={"phenomena": {**seed.phenomena, "laughter": 0.0, "filled_pause": 0.0}})
    for i in range(30):
        p = ScriptedPlanner().plan(seed, f"z-{i}", stream(1, f"z-{i}", "plan"))
        d = decorate(p, seed, ParalinguisticsConfig(), stream(1, f"z-{i}", "paraling"))
        assert not any(e.act in ("laughter", "filler") for e in d.events)


def test_prolong_inserts_sustained_voice():
    t = np.arange(SR // 2) / SR
    x = (0.3 * np.sin(2 * np.pi * 150 * t)).astype(np.float32)
    y = prolong(x, 6000, 4000, SR)
    assert len(y) == len(x) + 4000
    assert np.array_equal(y[:6000], x[:6000]) and np.array_equal(y[10000:], x[6000:])
    inserted = y[6000:9000]
    assert abs(active_rms_db(inserted, SR) - active_rms_db(x, SR)) < 1.5  # voice, not a gap


# -- written sessions -------------------------------------------------------------------------
def test_written_sessions_never_clip_and_record_their_scene(tmp_path, bank_dir):
    cfg = {"name": "hot", "seeds": [str(ROOT / "scenario_seeds" / "*-en.yaml")], "sessions": 3, "seed": 5,
           "audio": {"speaker_rms_dbfs": -9.0},
           "acoustics": {"banks": [{"path": str(bank_dir)}], "echo": {"enabled": True}},
           "output": {"sessions_per_shard": 3, "formats": ["parquet"]}}
    p = tmp_path / "pipe.yaml"
    p.write_text(yaml.safe_dump(cfg))
    r = subprocess.run([sys.executable, "-m", "synth.cli", "run", str(p), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = pq.read_table(tmp_path / "out" / "shards" / "parquet").to_pylist()
    assert len(rows) == 3
    for row in rows:
        for col in ("user_audio", "system_audio"):
            pcm, _ = sf.read(io.BytesIO(row[col]["bytes"]), dtype="int16")
            assert np.abs(pcm.astype(np.int32)).max() < 32767
        scene = row["scene"] if isinstance(row["scene"], dict) else json.loads(row["scene"])
        assert scene["room"]["rt60_s"] > 0 and scene["echo"]["erl_db"] > 0
        assert scene["noise"]["layers"][0]["licence"] == "CC0-1.0"
    v = subprocess.run([sys.executable, "-m", "synth.cli", "validate", str(tmp_path / "out")],
                       capture_output=True, text=True, cwd=ROOT)
    assert v.returncode == 0, v.stdout + v.stderr


def test_noise_loops_without_a_seam():
    from synth.stages.mix import loop

    clip = np.sin(2 * np.pi * 3.3 * np.arange(4000) / 4000)  # not a whole number of periods
    step = np.abs(np.diff(clip)).max()
    assert np.abs(np.diff(np.tile(clip, 5))).max() > 10 * step  # a plain tile jumps at the seam
    y = loop(clip, 1234, 20000, 400)
    assert len(y) == 20000
    assert np.abs(np.diff(y)).max() < 1.5 * step
