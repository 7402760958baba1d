"""Exports for trainers, loaded back by the trainers' own readers: lhotse (NeMo duplex S2S) incl.
Shar, moshi-finetune's sphn loader; each moved to another folder first, as a user copying an
export to a training machine would."""

import io
import json
import shutil

import numpy as np
import pytest
import soundfile as sf
from inspect_helpers import run_dir, sessions, small_run, synth  # noqa: F401  (run_dir, sessions: shared fixtures)

from synth.export import export_run
from synth.export.check import _prefixed
from synth.export.common import is_sound_tag, resample
from synth.inspection.runfolder import RunFolder
from synth.schema.timeline import Timeline
from synth.stages.label import turns_of

lhotse = pytest.importorskip("lhotse")
sphn = pytest.importorskip("sphn")


def moved(run_dir, tmp_path_factory, fmt, **options):
    """Export, then move the whole export folder elsewhere (the original is gone)."""
    first = tmp_path_factory.mktemp(f"{fmt}-here") / "x"
    export_run(run_dir, fmt, first, **options)
    there = tmp_path_factory.mktemp(f"{fmt}-there") / "y"
    shutil.move(first, there)
    assert not first.exists()
    return there


def _kept(e):
    return [w for w in e.words if w.off_sample > w.on_sample and not is_sound_tag(w.word)]


def _check_cut(cut, s, rate):
    rec = s.record
    sr = rec.sample_rate
    # the recording is the user side (ch0), 16-bit PCM of the run's channel
    audio = cut.load_audio()[0]
    user, _ = s.decode("user")
    assert cut.sampling_rate == sr and len(audio) == rec.num_samples
    assert np.max(np.abs(audio - user)) < 2 / 32768
    # target_audio: the system channel at the target rate, as long as the cut
    target = cut.load_target_audio()[0]
    assert cut.target_audio.sampling_rate == rate
    assert abs(len(target) - cut.duration * rate) <= 1
    want = resample(s.decode("system")[0], sr, rate)[:len(target)]
    assert np.max(np.abs(target - want)) < 2 / 32768
    # one supervision per user / system turn, plus each non-floor event on its own
    timeline = Timeline(sample_rate=sr, num_samples=rec.num_samples, events=rec.events)
    for spk, role in (("user", "User"), ("system", "Assistant")):
        turns = [t for t in turns_of(timeline, spk) if any(_kept(e) for e in t.events)]
        alone = [e for e in rec.events if e.speaker == spk and e.floor_intent == "none" and _kept(e)]
        sups = sorted((s_ for s_ in cut.supervisions if s_.speaker == role), key=lambda x: x.start)
        assert len(sups) == len(turns) + len(alone)
        spans = {(round(x.start * sr), round(x.end * sr)) for x in sups}
        for t in turns:
            evs = [e for e in t.events if _kept(e)]
            assert (evs[0].on_sample, evs[-1].off_sample) in spans
    words = {s_.id: [a.symbol for a in s_.alignment["word"]] for s_ in cut.supervisions}
    for e in rec.events:
        if e.speaker == "system" and e.completion == "interrupted" and _kept(e):
            sup = next(x for x in cut.supervisions if x.speaker == "Assistant"
                       and abs(x.end * sr - e.off_sample) < 2 and [w.word for w in _kept(e)][-1] in words[x.id])
            assert words[sup.id][-len(_kept(e)):] == [w.word for w in _kept(e)]  # only the words spoken
    assert not any(is_sound_tag(a) for ws in words.values() for a in ws)
    assert cut.custom["language"] == rec.language and cut.custom["sys_action"] == list(rec.sys_action)
    assert rec.system_prompt and cut.custom["system_prompt"] == rec.system_prompt


def _voice(s):
    """The record's voice-prompt clip, as stored (float32 of its 16-bit FLAC)."""
    return sf.read(io.BytesIO(s.voice_flac), dtype="float32")[0]


def _check_voice(cut, s, nemo_rate):
    """The cut's voice prompt is the record's clip whole, read as lhotse's load_custom and as NeMo's
    get_audio_prompt read it (``cut.context_audio.resample(rate).load_audio()``)."""
    want = _voice(s)
    voice = cut.load_context_audio()[0]
    assert cut.context_audio.sampling_rate == cut.sampling_rate and len(voice) == len(want)
    assert 2 < len(voice) / cut.sampling_rate < 12 < cut.duration  # shorter than the session: not cut to it
    assert np.max(np.abs(voice - want)) < 2 / 32768
    nemo = cut.context_audio.resample(nemo_rate).load_audio()
    assert nemo.shape[0] == 1 and abs(nemo.shape[1] - len(want) * nemo_rate / cut.sampling_rate) <= 1


def test_lhotse_manifest_moved_loads_with_relative_paths(run_dir, tmp_path_factory, sessions):
    out = moved(run_dir, tmp_path_factory, "lhotse")
    meta = json.loads((out / "export.json").read_text())
    assert meta["sessions"] == len(sessions) and meta["target_sample_rate"] == 22050
    cuts = lhotse.CutSet.from_file(out / "cuts.jsonl.gz")
    assert all(not c.recording.sources[0].source.startswith("/") for c in cuts)
    cuts = [_prefixed(c, out) for c in cuts]
    assert sorted(c.id for c in cuts) == sorted(sessions)
    for cut in cuts:
        _check_cut(cut, sessions[cut.id], 22050)
        _check_voice(cut, sessions[cut.id], 22050)
    assert any(e.completion == "interrupted" for s in sessions.values() for e in s.record.events
               if e.speaker == "system")


def test_lhotse_shar_moved_loads_and_collates_as_nemo_does(run_dir, tmp_path_factory, sessions):
    from lhotse.dataset.collation import collate_audio

    out = moved(run_dir, tmp_path_factory, "lhotse", shar=True, target_sample_rate=24000)
    cuts = lhotse.CutSet.from_shar(in_dir=out / "shar")
    got = list(cuts)
    assert sorted(c.id for c in got) == sorted(sessions)
    for cut in got:
        _check_cut(cut, sessions[cut.id], 24000)
        _check_voice(cut, sessions[cut.id], 24000)
    # NeMo's DuplexS2SDataset: source audio resampled, target audio collated from the custom field
    batch = lhotse.CutSet(got[:2])
    _, source_lens = collate_audio(batch.resample(16000))
    target, target_lens = collate_audio(batch, recording_field="target_audio")
    assert [int(x) for x in source_lens] == [c.num_samples for c in got[:2]]
    assert [abs(int(n) - c.duration * 24000) <= 1 for n, c in zip(target_lens, got[:2])] == [True, True]
    assert target.shape == (2, int(max(target_lens)))


class _Run:
    """A run's sessions, the first without a voice prompt (a record written before them)."""

    def __init__(self, run_dir):
        import dataclasses

        self.path = run_dir
        self._sessions = list(RunFolder(run_dir).sessions())
        self._sessions[0] = dataclasses.replace(self._sessions[0], voice_flac=b"")

    def sessions(self):
        return iter(self._sessions)


def test_lhotse_shar_voice_prompts_line_up_across_shards(run_dir, tmp_path, sessions, monkeypatch):
    """Several shards, one session without a clip: its placeholder keeps every later clip on its cut."""
    from synth.export import lhotse_cuts

    monkeypatch.setattr(lhotse_cuts, "SHAR_SHARD_SIZE", 2)
    run = _Run(run_dir)
    meta = lhotse_cuts.export(run, tmp_path, shar=True)
    assert meta["voice_prompts"] == len(sessions) - 1
    assert len(list((tmp_path / "shar").glob("context_audio.*.tar"))) == -(-len(sessions) // 2) >= 3
    got = list(lhotse.CutSet.from_shar(in_dir=tmp_path / "shar"))
    assert [c.id for c in got] == [s.record.session_id for s in run.sessions()]
    assert not got[0].has_custom("context_audio")
    for cut in got[1:]:
        _check_voice(cut, sessions[cut.id], 22050)
    from synth.export.check import check_lhotse

    read = check_lhotse(tmp_path, meta)
    assert read["voice_prompts"] == len(sessions) - 1
    assert abs(read["voice_prompt_seconds"] - sum(len(_voice(sessions[c.id])) / c.sampling_rate
                                                  for c in got[1:])) < 0.01


def test_check_catches_a_voice_prompt_cut_to_its_session(run_dir, tmp_path):
    """Why the voice prompt has its own writer: lhotse 1.33's SharWriter, given context_audio as a
    field, declares the cut's length for the clip; the check then fails in one line, naming the cut."""
    from lhotse.shar import SharWriter

    from synth.export.check import check_lhotse
    from synth.export.lhotse_cuts import session_cut

    (tmp_path / "shar").mkdir()
    s = next(RunFolder(run_dir).sessions())
    with SharWriter(tmp_path / "shar", fields={"recording": "flac", "target_audio": "flac",
                                               "context_audio": "flac"}) as w:
        w.write(session_cut(s, 22050, "drop", True, None))
    meta = {"layout": "shar", "target_sample_rate": 22050, "voice_prompts": 1}
    with pytest.raises(ValueError, match=f"^{s.record.session_id}: The number of declared samples"):
        check_lhotse(tmp_path, meta)


def test_moshi_voice_prompts_moved_load_as_personaplex_reads_them(run_dir, tmp_path_factory, sessions):
    """voices/<session>.wav: the folder PersonaPlex's --voice-prompt-dir names, each file read as its
    LMGen.load_voice_prompt does (sphn.read, resampled to 24 kHz); data.jsonl names each clip."""
    out = moved(run_dir, tmp_path_factory, "moshi", voice_prompts=True)
    lines = [json.loads(x) for x in (out / "data.jsonl").read_text().splitlines()]
    assert sorted(x["voice_prompt"] for x in lines) == sorted(f"voices/{sid}.wav" for sid in sessions)
    for x in lines:
        sid = x["voice_prompt"][len("voices/"):-4]
        assert x["path"] == f"audio/{sid}.wav"
        pcm, sr = sphn.read(str(out / "voices" / f"{sid}.wav"))  # --voice-prompt-dir out/voices
        pcm = sphn.resample(pcm, src_sample_rate=sr, dst_sample_rate=24000)
        want = resample(_voice(sessions[sid]), sessions[sid].record.sample_rate, 24000)
        assert pcm.shape == (1, len(want)) and np.max(np.abs(pcm[0] - want)) < 2 / 32768
    # sphn's loader, moshi-finetune's, reads the manifest with the extra key as before
    ds = sphn.dataset_jsonl(str(out / "data.jsonl"), duration_sec=10.0, num_threads=1, sample_rate=24000,
                            pad_last_segment=True)
    assert {p.rsplit("/", 1)[1][:-4] for p in (x["path"] for x in ds.seq(skip=0, step_by=1))} == set(sessions)
    meta = json.loads((out / "export.json").read_text())
    assert meta["voice_prompts"] == len(sessions)


def test_moshi_export_moved_loads_with_sphn(run_dir, tmp_path_factory, sessions):
    out = moved(run_dir, tmp_path_factory, "moshi")
    ds = sphn.dataset_jsonl(str(out / "data.jsonl"), duration_sec=10.0, num_threads=1, sample_rate=24000,
                            pad_last_segment=True)
    seen = {}
    for sample in ds.seq(skip=0, step_by=1):
        assert sample["data"].shape[0] == 2
        seen[sample["path"]] = seen.get(sample["path"], 0) + sample["unpadded_len"]
    assert sorted(p.rsplit("/", 1)[1][:-4] for p in seen) == sorted(sessions)
    for path, n in seen.items():
        assert path.startswith(str(out))
        sid = path.rsplit("/", 1)[1][:-4]
        assert abs(n / 24000 - sessions[sid].record.duration_s) < 0.01
        with open(path[:-4] + ".json", encoding="utf-8") as f:  # as moshi-finetune's interleaver opens it
            info = json.load(f)
        assert info["alignments"] and "text_conditions" not in info  # off by default: it needs a fork


def test_moshi_text_conditions_hold_the_system_prompt_when_asked(run_dir, tmp_path, sessions):
    export_run(run_dir, "moshi", tmp_path / "m", text_conditions="description")
    for sid, s in sessions.items():
        info = json.loads((tmp_path / "m" / "audio" / f"{sid}.json").read_text(encoding="utf-8"))
        assert info["text_conditions"] == {"description": s.record.system_prompt} and s.record.system_prompt
        assert info.get("text_conditions", None) is not None  # what interleaver.py passes on as the condition
    assert json.loads((tmp_path / "m" / "export.json").read_text())["text_conditions"] == "description"


def test_check_reads_every_format_back(run_dir, tmp_path):
    r = synth("export", run_dir, "--format", "lhotse", "--shar", "-o", tmp_path / "l", "--check")
    n = len(list(RunFolder(run_dir).sessions(with_audio=False)))
    said = " ".join(r.stderr.split())
    assert f"read back with lhotse {lhotse.__version__}: {n} sessions" in said
    assert f"; {n} voice-prompt clips, " in said
    for fmt, options in (("moshi", {"voice_prompts": True}), ("moshi", {}), ("textgrid", {}), ("rttm", {})):
        meta = export_run(run_dir, fmt, tmp_path / f"{fmt}{len(options)}", check=True, **options)
        c = meta["check"]
        assert c["sessions"] == n and c["words"] > 100 and c["seconds"] > 60
        assert 0 <= c["colliding_words"] < c["words"] / 10
        if options:
            assert c["voice_prompts"] == n and 2 * n < c["voice_prompt_seconds"] < 12 * n
        else:
            assert "voice_prompts" not in c


@pytest.mark.parametrize("args, field", [
    (["--format", "lhotse", "--target-sample-rate", "12345"], "--target-sample-rate"),
    (["--format", "moshi", "--sound-tags", "sometimes"], "--sound-tags"),
    (["--format", "minicpm", "--check"], "--check"),
    (["--format", "nemo"], "--format"),
    # an option the format would ignore is refused (the user meant something it does not do)
    (["--format", "moshi", "--decision-lag", "3"], "--decision-lag"),
    (["--format", "textgrid", "--sound-tags", "keep"], "--sound-tags"),
    (["--format", "minicpm", "--shar"], "--shar"),
    (["--format", "lhotse", "--voice-prompts"], "--voice-prompts"),
    (["--format", "fdb", "--sample-rate", "16000"], "--sample-rate"),
])
def test_bad_export_options_are_one_line_exit_2(run_dir, tmp_path, args, field):
    r = synth("export", run_dir, *args, "-o", tmp_path / "o", check=False)
    assert r.returncode == 2 and field in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_export_refuses_a_foreign_non_empty_folder(run_dir, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    r = synth("export", run_dir, "--format", "lhotse", "-o", tmp_path, check=False)
    assert r.returncode == 2 and "not empty" in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine" and not (tmp_path / "cuts.jsonl.gz").exists()
    moshi = tmp_path / "m"
    export_run(run_dir, "moshi", moshi)
    r = synth("export", run_dir, "--format", "lhotse", "-o", moshi, check=False)
    assert r.returncode == 2 and "moshi export" in r.stderr
    export_run(run_dir, "moshi", moshi)  # over an earlier export of the same format: allowed
