"""The fallback word aligner (DTW against an eSpeak NG rendering), checked against Kokoro's own
per-token durations as the reference word times."""

import numpy as np
import pytest

from synth.backends.aligner import align_words, mfcc, warp
from synth.backends.kokoro import KokoroTTS
from synth.backends.scripted_planner import tokenize
from synth.backends.tts import Voice

SENTENCES = {
    "en": ["Could you tell me what time the museum opens on Sunday?",
           "I think we should leave a bit earlier, because the traffic is terrible after five."],
    "zh": ["我明天上午有个会议，下午可以吗？", "这个价格有点贵，能便宜一点吗？"],
    "en-zh": ["这个 project 的 deadline 是下周五。", "你可以帮我 check 一下 email 吗？"],
}


def test_warp_recovers_a_known_time_stretch():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((60, 13))
    repeats = rng.integers(0, 3, 60)  # each reference frame lasts 0, 1 or 2 recording frames
    repeats[0] = 1
    rec = np.repeat(ref, repeats, axis=0)
    path = warp(ref, rec)
    ends = np.cumsum(repeats) - 1
    kept = repeats > 0
    assert np.all(np.diff(path) >= 0) and path[-1] == len(rec) - 1
    assert np.mean(np.abs(path[kept] - ends[kept]) <= 1) > 0.95


def test_mfcc_frames_are_10_ms():
    assert mfcc(np.zeros(16000, np.float32) + 1e-3).shape == (101, 26)


@pytest.fixture(scope="module")
def kokoro():
    return KokoroTTS().load()


@pytest.mark.parametrize("lang", sorted(SENTENCES))
def test_word_boundaries_land_near_the_models_own(kokoro, lang):
    errors = []
    for i, text in enumerate(SENTENCES[lang]):
        words = tokenize(text)
        r = kokoro.synthesize(words, Voice(f"pool-{i + 4:02d}", 170, 0, 0), 16000)
        spans = align_words(r.audio, 16000, words)
        assert len(spans) == len(words)
        assert all(a <= b for a, b in spans) and all(x[1] <= y[0] for x, y in zip(spans, spans[1:]))
        errors += [abs(a - t.on) / 16 for t, (a, _) in zip(r.words, spans)]
        errors += [abs(b - t.off) / 16 for t, (_, b) in zip(r.words, spans)]
    errors = np.array(errors)  # ms
    assert np.median(errors) < 100, np.median(errors)
    assert np.percentile(errors, 90) < 260, np.percentile(errors, 90)
