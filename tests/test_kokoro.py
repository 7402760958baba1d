"""The Kokoro engine on the int8 model shipped on PyPI (run as its float32 graph by default, as
shipped with ``precision="int8"``): en, zh, code-switched, voice pool, word times from the
model's durations, determinism, cache, rejects and config errors."""

import hashlib
import subprocess
import sys

import numpy as np
import pytest

from synth.backends.kokoro import KokoroTTS, blend_pool, load_styles, pool_names
from synth.backends.neural import SynthCache
from synth.backends.scripted_planner import tokenize
from synth.backends.tts import Voice
from synth.errors import SessionReject, UserError
from synth.schema.plan import PlannedWord

V = Voice("pool-03", 170, 0, 0)
SENTENCES = {
    "en": "Can you book a table for two tonight?",
    "zh": "我明天有个会议，帮我订一张机票。",
    "en-zh": "我明天有个 meeting，帮我 check 一下。",
}


@pytest.fixture(scope="module")
def tts():
    return KokoroTTS().load()


def _check_times(r, words, sr):
    assert [t.word for t in r.words] == [w.text for w in words]
    assert [t.lang for t in r.words] == [w.lang for w in words]
    ons = [t.on for t in r.words]
    assert all(a < b for a, b in zip(ons, ons[1:])), ons  # strictly increasing onsets
    assert all(t.on < t.off <= len(r.audio) for t in r.words)
    assert all(a.off <= b.on for a, b in zip(r.words, r.words[1:]))
    assert r.words[0].on < 0.15 * sr and r.words[-1].off > len(r.audio) - 0.15 * sr


@pytest.mark.parametrize("lang", ["en", "zh", "en-zh"])
def test_sentence_is_spoken_with_a_time_for_every_word(tts, lang):
    words = tokenize(SENTENCES[lang])
    r = tts.synthesize(words, V, 16000)
    assert r.sample_rate == 16000 and r.audio.dtype == np.float32
    assert 1.0 < len(r.audio) / 16000 < 6.0
    assert np.sqrt(np.mean(r.audio ** 2)) > 0.01  # speech, not silence
    _check_times(r, words, 16000)


def test_word_times_follow_the_words_own_lengths(tts):
    """A word's span in the sentence tracks the length of the same word spoken alone: the
    durations are the model's, not an even split."""
    words = tokenize("Absolutely, I can reschedule the appointment tomorrow.")
    r = tts.synthesize(words, V, 24000)
    inside = np.array([t.off - t.on for t in r.words], float)
    alone = np.array([len(tts.synthesize([w], V, 24000).audio) for w in words], float)
    assert np.corrcoef(inside, alone)[0, 1] > 0.8
    assert inside.max() > 3 * inside.min()


def test_speed_follows_the_rate(tts):
    words = tokenize(SENTENCES["en"])
    slow = tts.synthesize(words, Voice("pool-03", 140, 0, 0), 16000)
    fast = tts.synthesize(words, Voice("pool-03", 200, 0, 0), 16000)
    assert len(slow.audio) > 1.25 * len(fast.audio)


def test_pool_of_20_gives_20_distinct_reproducible_voices(tts):
    names = pool_names(20)
    assert len(names) == 20 and set(names) <= set(tts.styles)
    styles = np.stack([tts.styles[n] for n in names])
    # distinct identities, not near-copies: every pair is apart by a good share of the spread
    # between the shipped base voices
    base = np.stack([tts.styles[n] for n in sorted(tts.styles) if n not in names])
    spread = np.mean([np.linalg.norm(a - b) for i, a in enumerate(base) for b in base[i + 1:]])
    gaps = [np.linalg.norm(a - b) for i, a in enumerate(styles) for b in styles[i + 1:]]
    assert min(gaps) > 0.05 * spread
    # the same names rebuild the same identities (any process: derived from (pool_seed, name))
    again = blend_pool(load_styles(None), 20, 0)
    assert all(np.array_equal(again[n], tts.styles[n]) for n in names)
    assert not np.array_equal(blend_pool(load_styles(None), 1, 1)["pool-00"], tts.styles["pool-00"])
    words = [PlannedWord(text="好", lang="zh")]
    digests = {hashlib.md5(tts.synthesize(words, Voice(n, 170, 0, 0), 16000).audio.tobytes()).hexdigest()
               for n in names}
    assert len(digests) == 20


def test_same_samples_in_a_fresh_process(tts):
    """onnxruntime on one thread, sequential: bit-identical output run to run."""
    code = ("import hashlib\nfrom synth.backends.kokoro import KokoroTTS\n"
            "from synth.backends.scripted_planner import tokenize\nfrom synth.backends.tts import Voice\n"
            f"r = KokoroTTS().synthesize(tokenize({SENTENCES['en-zh']!r}), Voice('pool-03', 170, 0, 0), 16000)\n"
            "print(hashlib.md5(r.audio.tobytes()).hexdigest(), [(w.on, w.off) for w in r.words])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")[-2]
    r = tts.synthesize(tokenize(SENTENCES["en-zh"]), V, 16000)
    assert out == f"{hashlib.md5(r.audio.tobytes()).hexdigest()} {[(w.on, w.off) for w in r.words]}"


def test_cache_returns_the_same_rendering_without_the_model(tts, tmp_path):
    cached = KokoroTTS(cache=SynthCache(tmp_path)).load()
    words = tokenize(SENTENCES["zh"])
    first = cached.synthesize(words, V, 16000)
    assert len(list(tmp_path.rglob("*.npz"))) == 1 and not list(tmp_path.rglob(".tmp-*"))
    cached._session = _Broken()  # a hit must not touch the model
    second = cached.synthesize(words, V, 16000)
    assert np.array_equal(first.audio, second.audio) and first.words == second.words
    with pytest.raises(SessionReject, match="tts_failed"):
        cached.synthesize(tokenize("something new"), V, 16000)


class _Broken:
    def run(self, *a, **k):
        raise RuntimeError("model gone")


def test_unspeakable_text_is_a_reject(tts):
    with pytest.raises(ValueError):  # plan validation refuses a word with nothing to say ...
        PlannedWord(text="☃☃", lang="zh")
    with pytest.raises(SessionReject, match="tts_unsupported_text"):  # ... and the engine, given one anyway
        tts.synthesize([PlannedWord.model_construct(text="☃☃", lang="zh")], V, 16000)


def test_unknown_voice_and_bad_model_path_are_user_errors(tts, tmp_path):
    with pytest.raises(UserError, match="no voice 'pool-99'"):
        tts.check_voices(["pool-00", "pool-99"])
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(UserError, match="tts.model_path"):
        KokoroTTS(model_path=str(bad)).load()
    with pytest.raises(UserError, match="tts.voices_path"):
        KokoroTTS(voices_path=str(tmp_path / "missing.bin")).load()
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():  # CPU-only onnxruntime
        with pytest.raises(UserError, match="tts.device: cuda"):
            KokoroTTS(device="cuda").load()


def test_unknown_voice_in_a_run_is_one_line_without_jieba_chatter(tmp_path):
    """misaki's G2P loads jieba, which printed four lines ("Building prefix dict ...") before the error."""
    import yaml

    from tests.test_errors_cli import ROOT, one_line, synth

    pipe = tmp_path / "pipe.yaml"
    pipe.write_text(yaml.safe_dump({"name": "t", "seeds": [str(ROOT / "scenario_seeds" / "banking-zh.yaml")],
                                    "sessions": 1, "tts": {"engine": "kokoro", "variants": ["nosuchvoice"]},
                                    "acoustics": {"room": False, "noise": False}}))
    line = one_line(synth("run", pipe, "--out", tmp_path / "out"))
    assert line.startswith(f"error: {pipe}: tts.variants:") and "'nosuchvoice'" in line, line


def test_official_voices_file_names_its_voices(tts, tmp_path):
    """A user voices file (the official ``voices-v1.0.bin`` layout: npz of (510, 1, 256))."""
    path = tmp_path / "voices.bin"
    with open(path, "wb") as f:  # a file object: np.savez would append .npz to a path
        np.savez(f, zf_test=tts.styles["jf_alpha"].reshape(510, 1, 256))
    own = KokoroTTS(voices_path=str(path), pool_size=2).load()
    assert set(own.styles) == {"zf_test", "pool-00", "pool-01"}
    r = own.synthesize(tokenize("你好"), Voice("zf_test", 170, 0, 0), 16000)
    ref = tts.synthesize(tokenize("你好"), Voice("jf_alpha", 170, 0, 0), 16000)
    assert np.array_equal(r.audio, ref.audio)


def test_float32_graph_is_the_default_and_speaks_like_the_int8_one(tts):
    """The default runs the dequantized graph (no integer op left); the shipped int8 graph stays
    available. Both say the same words in about the same time (activation rounding moves the
    durations a little), and the two graphs are told apart in the synthesis cache."""
    from synth.backends.dequant import QUANTIZED_OPS

    int8 = KokoroTTS(precision="int8").load()
    assert (tts.graph, int8.graph) == ("float32", "int8")
    assert tts.model_digest != int8.model_digest
    ops = {n.op_type for n in __import__("onnx").load(tts.graph_file, load_external_data=False).graph.node}
    assert not ops & QUANTIZED_OPS and "Conv" in ops
    for lang, text in SENTENCES.items():
        words = tokenize(text)
        a, b = tts.synthesize(words, V, 16000), int8.synthesize(words, V, 16000)
        _check_times(a, words, 16000)
        assert abs(len(a.audio) - len(b.audio)) < 0.08 * len(b.audio), lang
        ons_a = np.array([w.on for w in a.words]) / len(a.audio)
        ons_b = np.array([w.on for w in b.words]) / len(b.audio)
        assert np.abs(ons_a - ons_b).max() < 0.05, lang


def test_auto_precision_follows_the_cpu(monkeypatch):
    import synth.backends.kokoro as k

    for vnni, graph in ((True, "int8"), (False, "float32")):
        monkeypatch.setattr(k, "has_vnni", lambda vnni=vnni: vnni)
        assert KokoroTTS(precision="auto").load().graph == graph


def test_a_line_of_several_sentences_is_said_in_calls_of_whole_sentences():
    """``call_tokens`` (pipelines default 100): a call's memory grows with its audio, so a long line
    is split at sentence ends, never inside a sentence; every word still gets its time, in order."""
    from synth.backends.kokoro import sentences

    text = ("Yes, for a payment you didn't make, we put the eighteen pounds back into your account, and then "
            "we take it up with the shop ourselves. Tell me when you first noticed it. 好的，我现在就帮你冻结这张卡。")
    words = tokenize(text)
    cut = sentences(words)
    assert [w.text for w in cut[0]][-1] == "ourselves." and len(cut) == 3
    whole, split = KokoroTTS(precision="int8").load(), KokoroTTS(precision="int8", call_tokens=100).load()
    assert len(whole._chunks(words)) == 1
    calls = split._chunks(words)
    # the first sentence alone is over 100 tokens; the two short ones share a call
    assert [[w for w, _ in c] for c in calls] == [cut[0], cut[1] + cut[2]]
    r = split.synthesize(words, V, 16000)
    _check_times(r, words, 16000)
    assert abs(len(r.audio) - len(whole.synthesize(words, V, 16000).audio)) < 0.15 * len(r.audio)


def test_the_packed_lexicon_answers_as_the_dict_it_was_made_from():
    from synth.backends.kokoro import Lexicon, _misaki_lexicon

    entries = {"read": "ɹˈid", "Reading": "ɹˈɛdɪŋ", "café": "kæfˈA", "a": "ɐ", "zebra": "zˈibɹə", "b": "bˈi"}
    lex = Lexicon(entries)
    assert len(lex) == len(entries)
    assert all(lex.get(w) == p for w, p in entries.items())
    assert [lex.get(w) for w in ("", "reading", "zebras", "Z", "aa", "cafe")] == [None] * 6
    full = _misaki_lexicon()
    assert len(full) > 150_000 and full.get("hello") and full.get("zzzzqx") is None
