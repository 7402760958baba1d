"""synth export: each format checked against its rules on a small real run."""

import json
import math

import numpy as np
import pytest
import soundfile as sf

from inspect_helpers import run_dir, sessions, small_run, synth  # noqa: F401  (run_dir, sessions: shared fixtures)
from synth.export.minicpm import CHUNK_EOS, LISTEN, MAX_SPEAK_TOKENS, SPEAK, TURN_EOS, speak_tokens
from synth.stages.label import turns_of


def export(run_dir, tmp_path_factory, fmt, *extra):
    out = tmp_path_factory.mktemp(fmt)
    synth("export", run_dir, "--format", fmt, "-o", out, *extra)
    return out


@pytest.fixture(scope="module")
def minicpm(run_dir, tmp_path_factory):
    return export(run_dir, tmp_path_factory, "minicpm")


def assert_system_words_in_order(spoken: str, rec) -> None:
    """Every spoken system word is in ``spoken`` once, in time order (nothing of text_after_cut)."""
    pos = 0
    for e in sorted((e for e in rec.events if e.speaker == "system"), key=lambda e: e.on_sample):
        for w in e.words:
            i = spoken.find(w.word, pos)
            assert i >= 0, (w.word, rec.session_id)
            pos = i + len(w.word)


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_minicpm_units_follow_the_token_rules(minicpm, sessions):
    rows = _lines(minicpm / "data.jsonl")
    assert {r["session_id"] for r in rows} == set(sessions)
    for r in rows:
        s = sessions[r["session_id"]]
        rec = s.record
        units = r["units"]
        backchannel_units = {w.on_sample // rec.sample_rate for e in rec.events
                             if e.speaker == "system" and e.floor_intent == "none" for w in e.words}
        assert len(units) == math.ceil(rec.num_samples / rec.sample_rate)
        assert [u["unit"] for u in units] == list(range(len(units)))
        for u in units:
            out = u["output"]
            # a unit is either the single listen token or a chunk closed by chunk_eos
            assert out == LISTEN or (out.endswith(CHUNK_EOS) and out.count(CHUNK_EOS) == 1), out
            assert LISTEN not in out or out == LISTEN
            if TURN_EOS in out:
                assert out.index(TURN_EOS) < out.index(CHUNK_EOS)
            # a silent unit is listen, unless the system backchannels there without the floor
            if u["sys_action"] == 0 and u["unit"] not in backchannel_units:
                assert out == LISTEN
        sys_turns = turns_of(s.timeline, "system")
        assert sum(u["output"].count(TURN_EOS) for u in units) == len(sys_turns)
        assert sum(u["output"].count("<delegate>") for u in units) == len(rec.delegations)
        assert sum(u["output"].count("</delegate>") for u in units) == len(rec.delegations)
        wrap = lambda t: t if t.startswith("<backend>") else f"<backend>{t}</backend>"  # noqa: E731
        messages = [(m.sample, wrap(m.text)) for w in rec.delegations for m in w.backend]
        messages += [(w.inject_sample, wrap(w.result_text)) for w in rec.delegations
                     if not w.backend and w.inject_sample is not None]
        assert sum(u["input"].count("<backend>") for u in units) == len(messages)
        for sample, text in messages:  # the backend text is input in the unit of its injection
            assert text in units[sample // rec.sample_rate]["input"]
        # every spoken system word appears once, in time order, nothing of text_after_cut
        spoken = "".join(u["output"] for u in units)
        words = [w.word for e in rec.events if e.speaker == "system" for w in sorted(e.words, key=lambda w: w.on_sample)]
        assert_system_words_in_order(spoken, rec)
        assert words
        x, sr = sf.read(minicpm / r["user_audio"])
        assert sr == rec.sample_rate and len(x) == rec.num_samples


def test_minicpm_decision_lag_moves_text_earlier(run_dir, tmp_path_factory, minicpm):
    lag = export(run_dir, tmp_path_factory, "minicpm", "--decision-lag", "1")
    meta = json.loads((lag / "export.json").read_text())
    assert meta["decision_lag_units"] == 1
    for a, b in zip(_lines(minicpm / "data.jsonl"), _lines(lag / "data.jsonl")):
        outs0 = [u["output"] for u in a["units"]]
        outs1 = [u["output"] for u in b["units"]]
        assert outs1[1:-1] == outs0[2:] and outs1[-1] == LISTEN
        if outs0[0] == LISTEN:  # unit 0 also speaks what was heard before the lag ran out (nothing here)
            assert outs1[0] == outs0[1]
        assert [u["input"] for u in a["units"]] == [u["input"] for u in b["units"]]  # input never shifts
    r = synth("export", run_dir, "--format", "minicpm", "-o", lag, "--decision-lag", "-1", check=False)
    assert r.returncode == 2 and "--decision-lag" in r.stderr


def test_speak_tokens_estimate():
    assert speak_tokens("have") == 1 and speak_tokens("account，") == 3 and speak_tokens("一百一十") == 4
    assert speak_tokens("joint account") == speak_tokens("jointaccount") == 3


def test_minicpm_caps_speak_tokens_per_unit_and_loses_no_word(run_dir, tmp_path_factory, sessions):
    out = export(run_dir, tmp_path_factory, "minicpm", "--decision-lag", "5")
    meta = json.loads((out / "export.json").read_text())
    assert meta["experimental"] and meta["max_speak_tokens"] == MAX_SPEAK_TOKENS
    carried = 0
    for r in _lines(out / "data.jsonl"):
        rec = sessions[r["session_id"]].record
        spoken = ""
        for u in r["units"]:
            text = u["output"].removeprefix(SPEAK).split("<|")[0].split("<delegate>")[0]
            assert speak_tokens(text) <= MAX_SPEAK_TOKENS, text
            spoken += text
            carried += bool(u["carried_words"])
        assert_system_words_in_order(spoken, rec)
        assert r["units"][-1]["carried_words"] == 0
    assert carried == meta["units_with_carried_words"]


def test_moshi_puts_the_assistant_first_with_sorted_alignments(run_dir, tmp_path_factory, sessions):
    out = export(run_dir, tmp_path_factory, "moshi")
    meta = json.loads((out / "export.json").read_text())
    assert meta["channels"] == ["system", "user"] and meta["sample_rate"] == 24000
    lines = _lines(out / "data.jsonl")
    assert len(lines) == len(sessions)
    for line in lines:
        assert line["path"].startswith("audio/")  # relative to the manifest
        sid = line["path"].rsplit("/", 1)[1][:-4]
        s = sessions[sid]
        x, sr = sf.read(out / line["path"], dtype="float32")
        assert sr == 24000 and x.shape[1] == 2
        assert abs(line["duration"] - s.record.duration_s) < 0.01
        # channel 0 is the system: compare energy envelopes with the source stems
        sysf, _ = s.decode("system")
        usr, _ = s.decode("user")
        n = min(len(x) // 24000, len(sysf) // 16000)
        env = lambda a, rate: np.array([np.sqrt(np.mean(a[k * rate:(k + 1) * rate] ** 2)) for k in range(n)])
        assert np.corrcoef(env(x[:, 0], 24000), env(sysf, 16000))[0, 1] > 0.95
        assert np.corrcoef(env(x[:, 1], 24000), env(usr, 16000))[0, 1] > 0.95
        al = json.loads((out / "audio" / f"{sid}.json").read_text())["alignments"]
        assert [a[1][0] for a in al] == sorted(a[1][0] for a in al) and all(a[1][0] <= a[1][1] for a in al)
        assert not any(a[0].startswith("[") and a[0].endswith("]") for a in al)  # sound tags dropped
        label = {"system": "SPEAKER_MAIN", "user": "SPEAKER_OTHER", "third_party": "SPEAKER_THIRD_PARTY",
                 "background": "SPEAKER_BACKGROUND"}
        want = sorted((label[e.speaker], w.word) for e in s.record.events if e.speaker in label for w in e.words
                      if w.off_sample > w.on_sample and not (w.word.startswith("[") and w.word.endswith("]")))
        assert sorted((a[2], a[0]) for a in al) == want
        assert any(a[2] == "SPEAKER_MAIN" for a in al) and any(a[2] == "SPEAKER_OTHER" for a in al)
        assert al[-1][1][1] <= line["duration"]


def test_moshi_others_dropped_and_tags_kept_by_option(run_dir, tmp_path_factory, sessions):
    out = export(run_dir, tmp_path_factory, "moshi", "--others", "drop", "--sound-tags", "keep")
    labels = set()
    tags = 0
    for sid in sessions:
        al = json.loads((out / "audio" / f"{sid}.json").read_text())["alignments"]
        labels |= {a[2] for a in al}
        tags += sum(a[0].startswith("[") for a in al)
    assert labels == {"SPEAKER_MAIN", "SPEAKER_OTHER"}
    assert tags == sum(1 for s in sessions.values() for e in s.record.events if e.speaker in ("user", "system")
                       for w in e.words if w.word.startswith("[") and w.off_sample > w.on_sample) > 0


def test_fdb_folders_follow_the_benchmark_layout(run_dir, tmp_path_factory, sessions):
    out = export(run_dir, tmp_path_factory, "fdb")
    meta = json.loads((out / "export.json").read_text())
    samples = meta["samples"]
    assert samples.get("v1/smooth_turn_taking", 0) > 0 and samples.get("v1/user_interruption", 0) > 0
    required = {"v1/smooth_turn_taking": "turn_taking.json", "v1/pause_handling": "pause.json",
                "v1/user_interruption": "interrupt.json", "v1/backchannel": "backchannel.json"}
    for task, n in samples.items():
        folders = sorted(p for p in (out / task).iterdir() if p.is_dir())
        assert len(folders) == n
        for f in folders:
            names = {p.name for p in f.iterdir()}
            assert {"input.wav", "output.wav", "transcription.json"} <= names
            x, sr = sf.read(f / "input.wav")
            y, _ = sf.read(f / "output.wav")
            assert x.ndim == 1 and len(x) == len(y) and sr == 16000
            dur = len(x) / sr
            ann_name = required.get(task, "metadata.json")
            ann = json.loads((f / ann_name).read_text())
            stamp = ann[0]["timestamp"] if isinstance(ann, list) else ann["overlap"]["timestamp"]
            assert 0 <= stamp[0] <= stamp[1] <= dur + 1e-3
            tr = json.loads((f / "transcription.json").read_text())
            assert all(0 <= c["timestamp"][0] <= c["timestamp"][1] <= dur + 1e-3 for c in tr["chunks"])
            if task == "v1/user_interruption":
                assert {"context.wav", "interrupt.wav"} <= names and ann[0]["interrupt"]
                # the user's interrupting speech is in the input at the stated time
                a, b = int(stamp[0] * sr), int(stamp[1] * sr)
                assert np.sqrt(np.mean(x[a:b] ** 2)) > 0.01
            if task == "v1/smooth_turn_taking":
                start = ann[0]["response_start"]
                ref = json.loads((f / "reference_output.json").read_text())
                assert ref["chunks"] and ref["chunks"][0]["timestamp"][0] >= start - 0.05


def test_unknown_format_is_one_line(run_dir, tmp_path):
    r = synth("export", run_dir, "--format", "wav2vec", "-o", tmp_path, check=False)
    assert r.returncode == 2 and "--format" in r.stderr and "Traceback" not in r.stderr
