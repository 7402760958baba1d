"""The ASR round-trip gate: metrics on known strings, the packaged model, garbled speech caught,
and byte-identical shards with the gate on."""

from types import SimpleNamespace

import numpy as np
import pytest

from synth.errors import SessionReject, UserError
from synth.schema.config import AsrGateConfig
from synth.schema.plan import PlannedWord
from synth.stages.asr import error_rate, gate, tokens

pytest.importorskip("faster_whisper")


def test_zh_cer_normalises_traditional_punctuation_and_digits():
    assert tokens("對，大概10塊錢！", "zh") == list("对大概十块钱")
    assert error_rate("对，大概十块钱。", "對 大概10塊錢", "zh") == 0.0
    assert error_rate("帮我加个日程", "按和夾個日程", "zh") == pytest.approx(3 / 6)


def test_en_wer_lowercases_reads_digits_and_drops_fillers():
    assert error_rate("Uh, a table for two, please.", "a table for 2 please", "en") == 0.0
    assert error_rate("I would like to book a table", "I would like to look atable", "en") == pytest.approx(3 / 7)
    assert error_rate("yes", "", "en") == 1.0 and error_rate("", "", "en") == 0.0


def test_mixed_error_rate_counts_english_words_and_chinese_characters():
    # the example: 7 tokens (对 fee 大 概 十 块 钱), one hit (对)
    assert tokens("对， fee 大概十块钱。", "en-zh") == ["对", "fee", "大", "概", "十", "块", "钱"]
    assert error_rate("对， fee 大概十块钱。", "對Vida蓋時快前", "en-zh") == pytest.approx(6 / 7)
    assert error_rate("Anytime， 祝您晚餐愉快。", "Anytime, 祝您晚餐愉快", "en-zh") == 0.0


def test_a_chunk_that_does_not_match_its_record_hash_is_refused(tmp_path):
    from synth.backends.whisper import _b64_sha256, _check

    f = tmp_path / "model.bin.part1"
    f.write_bytes(b"not the model")
    _check((f, _b64_sha256(f)), "model.bin.part1", None)
    with pytest.raises(UserError, match="model.bin.part1 .* RECORD"):
        _check((f, "AAAA"), "model.bin.part1", None)


@pytest.fixture(scope="module")
def asr_cfg(tmp_path_factory):
    return AsrGateConfig(cache_dir=str(tmp_path_factory.mktemp("whisper") / "base"))


def test_packaged_model_is_joined_once_and_its_digest_recorded(asr_cfg):
    import hashlib

    from synth.backends.whisper import model_digest, packaged_model_dir

    d = packaged_model_dir(asr_cfg.cache_dir)
    assert sorted(p.name for p in d.iterdir()) == sorted(
        ["config.json", "tokenizer.json", "vocabulary.txt", "model.bin", "duplexsynth-model.json"])
    assert model_digest(d) == hashlib.sha256((d / "model.bin").read_bytes()).hexdigest()
    assert packaged_model_dir(asr_cfg.cache_dir) == d  # reused, not rebuilt
    assert not [p for p in d.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left


GOOD = "Please turn on the kitchen lights now"
RANDOM = "ka lu mi po zeb tra fon gi da ve"  # random syllables in place of the text


def _event(text):
    return SimpleNamespace(id="s1", speaker="system", sound=None,
                           words=[PlannedWord(text=w, lang="en") for w in text.split()])


def test_garbled_speech_is_rerendered_then_rejected(asr_cfg):
    from synth.backends.espeak import EspeakTTS
    from synth.backends.tts import Voice

    tts = EspeakTTS({"en": "en-us", "zh": "cmn"})
    voice = Voice("en-us", 160, 50, 60)
    ev = _event(GOOD)
    garbled = tts.synthesize(_event(RANDOM).words, voice, 16000)
    calls = []

    def clean_on_retry(e, v):  # a retry (slower voice) says the real words
        calls.append(v.rate_wpm)
        return tts.synthesize(e.words, v, 16000)

    out, info = gate(asr_cfg, SimpleNamespace(events=[ev]), {"s1": garbled}, {"system": voice}, clean_on_retry)
    assert calls == [round(160 * asr_cfg.retry_rate_factors[0])]
    assert info["events"]["s1"]["attempt"] == 1 and info["events"]["s1"]["error"] <= asr_cfg.max_error["en"]
    assert out["s1"] is not garbled and len(out["s1"].audio) != len(garbled.audio)

    with pytest.raises(SessionReject) as e:
        gate(asr_cfg, SimpleNamespace(events=[ev]), {"s1": garbled}, {"system": voice},
             lambda e, v: tts.synthesize(_event(RANDOM).words, v, 16000))
    assert e.value.reason == "asr_unintelligible" and "s1 (en): wer" in e.value.detail


@pytest.mark.slow
def test_gate_on_gives_the_same_shards_with_one_and_two_workers(tmp_path, asr_cfg):
    import json

    import pyarrow.parquet as pq

    from test_e2e import ROOT, digest, synth

    import yaml

    cfg = {"name": "t", "seeds": [str(ROOT / "scenario_seeds" / "smart-home-en.yaml")], "sessions": 2, "seed": 7,
           "output": {"sessions_per_shard": 1}, "acoustics": {"room": False, "noise": False},
           "qa": {"asr": {"cache_dir": asr_cfg.cache_dir, "speakers": ["system"], "min_tokens": 6, "max_error": {"en": 0.5}}}}
    pipe = tmp_path / "pipe.yaml"
    pipe.write_text(yaml.safe_dump(cfg))
    synth("run", pipe, "--out", tmp_path / "a", "--workers", "1")
    synth("run", pipe, "--out", tmp_path / "b", "--workers", "2")
    assert digest(tmp_path / "a") == digest(tmp_path / "b") != {}
    rows = pq.read_table(sorted((tmp_path / "a" / "shards" / "parquet").glob("*.parquet"))).to_pylist()
    rejects = (tmp_path / "a" / "rejects.jsonl").read_text().splitlines()
    assert len(rows) + len(rejects) == 2
    for row in rows:
        heard = json.loads(row["scene"])["asr"]["events"]
        system = [e["id"] for e in row["events"] if e["speaker"] == "system" and len(e["text"].split()) >= 6]
        assert heard and set(heard) <= set(system) and all(h["error"] <= 0.5 for h in heard.values())
    # synth render from the record alone (no run.json, no config) makes the same bytes: the voices
    # the gate kept are in the spec, its transcripts in the scene, so nothing is heard or drawn again
    import shutil
    import tarfile

    bare = tmp_path / "bare"
    shutil.copytree(tmp_path / "a" / "shards", bare / "shards")
    sid = rows[0]["session_id"]
    synth("render", bare, "--session", sid, "-o", tmp_path / "again", "--bank", tmp_path.parent / "noise_banks" / "generated")
    members = {}
    for tar in sorted((tmp_path / "a" / "shards" / "webdataset").glob("*.tar")):
        with tarfile.open(tar) as tf:
            members |= {m.name: tf.extractfile(m).read() for m in tf.getmembers()}
    for ext in ("user.flac", "system.flac", "json"):
        assert (tmp_path / "again" / f"{sid}.{ext}").read_bytes() == members[f"{sid}.{ext}"], ext


def test_report_gives_error_distribution_per_engine_and_language():
    from synth.inspection.report import asr_errors

    def rec(engine, events):
        return SimpleNamespace(scene={"tts_engine": engine, "asr": {"events": events}})

    recs = [rec("kokoro", {"a": {"lang": "en", "metric": "wer", "error": 0.1, "attempt": 0},
                           "b": {"lang": "zh", "metric": "cer", "error": 0.4, "attempt": 2}}),
            rec("kokoro", {"c": {"lang": "en", "metric": "wer", "error": 0.3, "attempt": 1}}),
            SimpleNamespace(scene={"tts_engine": "espeak"})]  # a record made without the gate
    rep = asr_errors(recs)
    assert set(rep) == {"kokoro/en", "kokoro/zh"}
    assert rep["kokoro/en"]["mean"] == pytest.approx(0.2) and rep["kokoro/en"]["rerendered"] == 0.5
    assert rep["kokoro/zh"] == {"events": 1, "metric": "cer", "mean": 0.4, "p90": 0.4, "rerendered": 1.0}


def test_a_number_beside_english_is_read_in_english_in_mixed_lines():
    ref = "OK， two hundred and fourteen dollars 的 waiver 我来 办， 等 一下。"
    assert error_rate(ref, "OK,214$的Waver我來辦等一下", "en-zh") == pytest.approx(1 / 14)  # waiver/waver
    assert tokens("大概10塊錢", "en-zh") == list("大概十块钱")


def test_a_number_in_digits_is_read_the_way_the_reference_said_it():
    # how Whisper formats a number is not how well it was spoken: clock times, ordinals, digit
    # strings, thousands separators, years and units match their spoken reference
    ref = "Then it's two thousand and sixty pounds in the account ending eight eight zero three."
    assert error_rate(ref, "Then it's 2,060 lbs in the account ending 8803.", "en") == 0.0
    assert error_rate("Make the reminder for four fifteen.", "Make the reminder for 4.15.", "en") == 0.0
    assert error_rate("at nine oh five, on the twenty eighth", "at 9:05, on the 28th", "en") == 0.0
    assert error_rate("born in nineteen ninety", "born in 1990", "en") == 0.0
    assert error_rate("Okay, thanks.", "OK, thanks.", "en") == 0.0
    assert error_rate("尾号是三零二九，九点四十到，买两个", "尾號是3029,9:40到,買2個", "zh") == 0.0
    # a wrong number is still wrong: one substituted word (fifteen/sixteen) of six
    assert error_rate("Make the reminder for four fifteen.", "Make the reminder for 4.16.", "en") == pytest.approx(1 / 6)
    assert error_rate("尾号是三零二九", "尾号是3028", "zh") == pytest.approx(1 / 7)
    assert error_rate("不是四二幺七", "不是4217", "zh") == 0.0
    for lang in ("en", "zh", "en-zh"):  # a number too long to read is scored by its digits, not a crash
        assert error_rate("ok", "ok 12345678901234567890123.5", lang) > 0


def test_one_encoder_pass_gives_what_faster_whisper_transcribe_gives_per_language(asr_cfg):
    from synth.backends.espeak import EspeakTTS
    from synth.backends.tts import Voice
    from synth.stages.asr import engine_for

    tts = EspeakTTS({"en": "en-us", "zh": "cmn"})
    r = tts.synthesize(_event(GOOD).words, Voice("en-us", 160, 50, 60), 16000)
    asr = engine_for(asr_cfg)
    got = asr.transcripts(r.audio, 16000, ["en", "zh", "auto"])
    assert [t.language for t in got] == ["en", "zh"]  # auto detects en: not decoded twice
    for t in got:
        segments, _ = asr._model.transcribe(
            r.audio, language=t.language, beam_size=1, best_of=1, temperature=0.0, condition_on_previous_text=False,
            without_timestamps=True, vad_filter=False, compression_ratio_threshold=None, log_prob_threshold=None,
            no_speech_threshold=None)
        assert t.text == "".join(s.text for s in segments).strip() and t.text
    assert got[0].text != got[1].text
    assert asr.transcribe(r.audio, 16000, None).language == "en"


def test_a_mixed_line_is_scored_by_its_better_decoding(asr_cfg):
    from synth.backends.tts import Rendered
    from synth.stages.asr import decode_languages, hear

    class Two:  # the zh decoding drops the English, the detected (en) one the Chinese
        def transcripts(self, audio, sr, languages):
            from synth.backends.whisper import Transcript
            assert languages == ["zh", "auto"]
            return [Transcript("帮我订", "zh"), Transcript("book a table", "en")]

    ref = "帮我 book a table"
    h = hear(Two(), Rendered(np.zeros(1600, np.float32), 16000, []), ref, "en-zh", asr_cfg, 0)
    assert h.decoded_as == "en" and h.error == pytest.approx(2 / 5)  # zh: 3 edits of 5
    assert decode_languages("en", asr_cfg) == ["en"]
    assert decode_languages("en-zh", AsrGateConfig(decode_language={"en-zh": "auto"})) == ["auto"]
