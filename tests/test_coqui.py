"""The Coqui engine on small, randomly initialised VITS and XTTS models built from Coqui's own
config classes and saved to a temp folder (``coqui_models.py``): Coqui's loading code, the
models' own inference, word times from VITS durations and from the aligner for XTTS."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import yaml

# Coqui is not in the test extra (its torch/torchaudio pair is a ~9 GB CUDA build): `make test-coqui`
pytest.importorskip("TTS", reason="Coqui is not installed here; `make test-coqui` runs these tests in .venv-coqui")

from coqui_models import tiny_vits, tiny_xtts
from synth.backends.coqui import CoquiTTS
from synth.backends.neural import SynthCache
from synth.backends.scripted_planner import tokenize
from synth.backends.tts import Voice
from synth.errors import SessionReject, UserError
from synth.schema.config import CoquiConfig
from synth.schema.plan import PlannedWord

ROOT = Path(__file__).resolve().parents[1]
SPEAKERS = [f"spk{i:02d}" for i in range(20)]
SENTENCES = {
    "en": "Sure, I will check the flights to Shanghai tomorrow.",
    "zh": "我明天有个会议，请帮我查一下航班。",
    "en-zh": "我明天有个 meeting，帮我 check 一下。",
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("coqui")
    rng = np.random.default_rng(0)
    for name in ("ref_a", "ref_b"):  # two different "speakers": filtered noise of different colour
        x = rng.standard_normal(22050 * 3)
        x = np.convolve(x, np.ones(3 if name == "ref_a" else 30) / 10, "same")
        sf.write(d / f"{name}.wav", (0.3 * x / np.abs(x).max()).astype(np.float32), 22050)
    return {"vits": tiny_vits(d / "vits"), "xtts": tiny_xtts(d / "xtts"), "dir": d}


@pytest.fixture(scope="module")
def vits(models):
    return CoquiTTS(CoquiConfig(engine="coqui", model_path=str(models["vits"]), variants=SPEAKERS)).load()


@pytest.fixture(scope="module")
def xtts(models):
    d = models["dir"]
    cfg = CoquiConfig(engine="coqui", model_path=str(models["xtts"]), variants=["a", "b"],
                      speaker_wavs={"a": [str(d / "ref_a.wav")], "b": [str(d / "ref_b.wav")]})
    engine = CoquiTTS(cfg)
    engine.check_voices(["a", "b"])
    return engine


def _check_times(r, words):
    assert [t.word for t in r.words] == [w.text for w in words]
    assert [t.lang for t in r.words] == [w.lang for w in words]
    ons = [t.on for t in r.words]
    assert all(a <= b for a, b in zip(ons, ons[1:])), ons
    assert all(0 <= t.on <= t.off <= len(r.audio) for t in r.words)
    assert all(a.off <= b.on for a, b in zip(r.words, r.words[1:]))
    assert sum(t.off > t.on for t in r.words) >= 0.8 * len(words)  # nearly every word gets time


@pytest.mark.parametrize("engine", ["vits", "xtts"])
@pytest.mark.parametrize("lang", ["en", "zh", "en-zh"])
def test_sentence_is_spoken_with_a_time_for_every_word(request, engine, lang):
    tts = request.getfixturevalue(engine)
    words = tokenize(SENTENCES[lang])
    voice = Voice("spk03" if engine == "vits" else "a", 170, 0, 0)
    r = tts.synthesize(words, voice, 16000)
    assert r.sample_rate == 16000 and r.audio.dtype == np.float32
    assert len(r.audio) > 0.2 * 16000 and np.sqrt(np.mean(r.audio ** 2)) > 1e-4
    _check_times(r, words)


def test_timing_source_is_named(vits, xtts):
    assert vits.word_timing == "model-durations"
    assert xtts.word_timing == "aligner:dtw-espeak"


def test_vits_word_spans_are_the_models_durations(vits):
    """Every token gets at least one frame, so a word's span grows with its tokens; and the
    spans tile the utterance: together they hold nearly all of the audio."""
    words = tokenize("a supercalifragilistic b extraordinarily c")
    r = vits.synthesize(words, Voice("spk01", 170, 0, 0), 22050)
    spans = np.array([t.off - t.on for t in r.words], float)
    chars = np.array([len(w.text) for w in words], float)
    assert np.corrcoef(spans, chars)[0, 1] > 0.8
    assert spans[1] > 3 * spans[0]


def test_speed_follows_the_rate(vits):
    words = tokenize(SENTENCES["en"])
    slow = vits.synthesize(words, Voice("spk02", 120, 0, 0), 16000)
    fast = vits.synthesize(words, Voice("spk02", 220, 0, 0), 16000)
    assert len(slow.audio) > 1.4 * len(fast.audio)


def test_pool_of_20_speakers_gives_20_distinct_reproducible_voices(vits):
    words = tokenize("hello there")
    digests = [hashlib.md5(vits.synthesize(words, Voice(s, 170, 0, 0), 16000).audio.tobytes()).hexdigest()
               for s in SPEAKERS]
    assert len(set(digests)) == 20
    vits.synthesize(tokenize("something else first"), Voice("spk09", 170, 0, 0), 16000)
    again = hashlib.md5(vits.synthesize(words, Voice("spk05", 170, 0, 0), 16000).audio.tobytes()).hexdigest()
    assert again == digests[5]


def test_same_samples_in_a_fresh_process(models, xtts):
    """Noise and sampling are seeded by the request: bit-identical in another process."""
    d = models["dir"]
    code = ("import hashlib\nfrom synth.backends.coqui import CoquiTTS\nfrom synth.schema.config import CoquiConfig\n"
            "from synth.backends.scripted_planner import tokenize\nfrom synth.backends.tts import Voice\n"
            f"cfg = CoquiConfig(engine='coqui', model_path={str(models['xtts'])!r}, variants=['a'], "
            f"speaker_wavs={{'a': [{str(d / 'ref_a.wav')!r}]}})\n"
            f"r = CoquiTTS(cfg).synthesize(tokenize({SENTENCES['en-zh']!r}), Voice('a', 170, 0, 0), 16000)\n"
            "print(hashlib.md5(r.audio.tobytes()).hexdigest(), [(w.on, w.off) for w in r.words])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    r = xtts.synthesize(tokenize(SENTENCES["en-zh"]), Voice("a", 170, 0, 0), 16000)
    assert out.stdout.strip().splitlines()[-1] == f"{hashlib.md5(r.audio.tobytes()).hexdigest()} {[(w.on, w.off) for w in r.words]}"


def test_reference_clips_and_builtin_speakers_make_different_voices(xtts, models):
    words = tokenize("good morning")
    a = xtts.synthesize(words, Voice("a", 170, 0, 0), 16000).audio
    b = xtts.synthesize(words, Voice("b", 170, 0, 0), 16000).audio
    assert not (len(a) == len(b) and np.array_equal(a, b))
    builtin = CoquiTTS(CoquiConfig(engine="coqui", model_path=str(models["xtts"]), variants=["Ana Florence"]))
    builtin.check_voices(["Ana Florence"])  # from the model's speakers_xtts.pth, no clips
    assert "Ana Florence" in builtin.speakers
    r = builtin.synthesize(words, Voice("Ana Florence", 170, 0, 0), 16000)
    _check_times(r, words)
    assert not (len(r.audio) == len(a) and np.array_equal(r.audio, a))


def test_cache_returns_the_same_rendering_without_the_model(models, tmp_path):
    cfg = CoquiConfig(engine="coqui", model_path=str(models["vits"]), variants=SPEAKERS)
    cached = CoquiTTS(cfg, cache=SynthCache(tmp_path)).load()
    words = tokenize(SENTENCES["zh"])
    first = cached.synthesize(words, Voice("spk04", 170, 0, 0), 16000)
    assert len(list(tmp_path.rglob("*.npz"))) == 1
    cached.model.inference = _broken  # a hit must not touch the model
    second = cached.synthesize(words, Voice("spk04", 170, 0, 0), 16000)
    assert np.array_equal(first.audio, second.audio) and first.words == second.words
    with pytest.raises(SessionReject, match="tts_failed"):
        cached.synthesize(tokenize("something new"), Voice("spk04", 170, 0, 0), 16000)


def _broken(*a, **k):
    raise RuntimeError("model gone")


def test_unspeakable_text_and_missing_language_are_rejects(vits, models):
    with pytest.raises(ValueError):  # plan validation refuses a word with nothing to say ...
        PlannedWord(text="☃☃", lang="zh")
    with pytest.raises(SessionReject, match="tts_unsupported_text"):  # ... and the engine, given one anyway
        vits.synthesize([PlannedWord.model_construct(text="☃☃", lang="zh")], Voice("spk00", 170, 0, 0), 16000)
    cfg = CoquiConfig(engine="coqui", model_path=str(models["xtts"]), variants=["a"], languages={"en": "en"},
                      speaker_wavs={"a": [str(models["dir"] / "ref_a.wav")]})
    en_only = CoquiTTS(cfg)
    with pytest.raises(SessionReject, match="tts_unsupported_language"):
        en_only.synthesize(tokenize("你好"), Voice("a", 170, 0, 0), 16000)


def test_bad_model_speaker_and_clip_are_user_errors(vits, models, tmp_path):
    vits.check_voices(["spk00", "19"])  # a name, or an id of the speaker table
    with pytest.raises(UserError, match="no speaker 'spk99'"):
        vits.check_voices(["spk00", "spk99"])
    with pytest.raises(UserError, match="no speaker '20'"):
        vits.check_voices(["20"])
    with pytest.raises(UserError, match="no config.json"):
        CoquiTTS(CoquiConfig(engine="coqui", model_path=str(tmp_path))).load()
    (tmp_path / "config.json").write_text('{"model": "tacotron2"}')
    with pytest.raises(UserError, match="vits and xtts"):
        CoquiTTS(CoquiConfig(engine="coqui", model_path=str(tmp_path))).load()
    bad = CoquiConfig(engine="coqui", model_path=str(models["xtts"]), variants=["x"], speaker_wavs={"x": [str(tmp_path / "no.wav")]})
    with pytest.raises(UserError, match="tts.speaker_wavs.x"):
        CoquiTTS(bad).check_voices(["x"])
    with pytest.raises(UserError, match="no language 'ja'"):
        CoquiTTS(CoquiConfig(engine="coqui", model_path=str(models["xtts"]), languages={"zh": "ja"},
                             variants=["a"], speaker_wavs={"a": [str(models["dir"] / "ref_a.wav")]})).check_voices(["a"])
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="tts.device: cuda"):
            CoquiTTS(CoquiConfig(engine="coqui", model_path=str(models["vits"]), device="cuda")).load()
    with pytest.raises(ValueError, match="exactly one of model_path and model_name"):
        CoquiConfig(engine="coqui")


def test_pipeline_run_with_coqui_voices(models, tmp_path):
    """The CLI end to end on the VITS model: sessions written and valid, timing source recorded,
    same bytes with two workers."""
    import pyarrow.parquet as pq

    cfg = {"name": "coqui", "seeds": [str(ROOT / "scenario_seeds" / "travel-booking-en.yaml")], "sessions": 2,
           "seed": 3,
           "tts": {"engine": "coqui", "model_path": str(models["vits"]), "variants": SPEAKERS[:6]}}
    pipe = tmp_path / "p.yaml"
    pipe.write_text(yaml.safe_dump(cfg))
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}"
        p = subprocess.run([sys.executable, "-m", "synth.cli", "run", str(pipe), "--out", str(out), "--workers", workers],
                           capture_output=True, text=True, cwd=ROOT)
        assert p.returncode == 0, p.stderr[-2000:]
        outs.append(out)
    v = subprocess.run([sys.executable, "-m", "synth.cli", "validate", str(outs[0])], capture_output=True, text=True, cwd=ROOT)
    assert v.returncode == 0, v.stdout + v.stderr
    table = pq.read_table(sorted((outs[0] / "shards").rglob("*.parquet"))[0])
    scenes = [json.loads(s) for s in table.column("scene").to_pylist()]
    assert scenes and all(s["word_timing"] == "model-durations" and s["tts_engine"] == "coqui" for s in scenes)
    digest = [{p.relative_to(o).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in sorted((o / "shards").rglob("*")) if p.is_file()} for o in outs]
    assert digest[0] == digest[1]


def test_routed_code_switch_with_coqui_for_english(models):
    from synth.backends.routed import draw_routed_voices
    from synth.executor.task import build_tts
    from synth.rng import stream
    from synth.schema.config import PipelineConfig

    cfg = PipelineConfig(name="t", seeds=["x"], tts={
        "engine": "routed", "default": "kokoro", "languages": {"en": "coqui"},
        "engines": {"kokoro": {"engine": "kokoro"},
                    "coqui": {"engine": "coqui", "model_path": str(models["vits"]), "variants": SPEAKERS[:4]}}})
    tts = build_tts(cfg, check=True)
    voices = draw_routed_voices(cfg.tts, ["system", "user"], stream(1, "s", "voices"))
    words = tokenize(SENTENCES["en-zh"])
    r = tts.synthesize(words, voices["user"], 16000)
    _check_times(r, words)
    assert tts.word_timing == "coqui=model-durations,kokoro=model-durations"


def test_a_coqui_model_that_cannot_load_stops_the_run_with_one_line(tmp_path):
    pipe = tmp_path / "p.yaml"
    pipe.write_text(yaml.safe_dump({
        "name": "bad", "seeds": [str(ROOT / "scenario_seeds" / "travel-booking-en.yaml")], "sessions": 1,
        "tts": {"engine": "coqui", "model_path": str(tmp_path / "no-model")}, "output": {"dir": str(tmp_path / "out")}}))
    p = subprocess.run([sys.executable, "-m", "synth.cli", "run", str(pipe)], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode != 0
    lines = [x for x in (p.stdout + p.stderr).splitlines() if x.strip()]
    assert len(lines) == 1 and "tts.model_path" in lines[0] and "no config.json" in lines[0], lines
    assert not (tmp_path / "out").exists()
