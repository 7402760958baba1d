"""synth publish --dry-run: the folder loads with datasets and webdataset, the card parses."""

import glob
import io
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from inspect_helpers import run_dir, small_run, synth  # noqa: F401  (run_dir, sessions: shared fixtures)
from synth.inspection.runfolder import RunFolder


@pytest.fixture(scope="module")
def folder(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("hub")
    r = synth("publish", run_dir, "--repo-id", "duplexsynth/insp-test", "--dry-run", "-o", out)
    assert "nothing uploaded" in r.stderr
    return out


def test_dry_run_folder_is_what_would_be_uploaded(folder, run_dir):
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    shards = sorted(p.name for p in (run_dir / "shards" / "parquet").glob("*.parquet"))
    assert [n for n in names if n.startswith("data/")] == [f"data/{s}" for s in shards]
    assert "README.md" in names and "meta/run.json" in names
    assert len([n for n in names if n.startswith("webdataset/")]) == len(shards)


def test_load_dataset_reads_audio_features(folder, tmp_path, run_dir):
    from datasets import Audio, load_dataset

    ds = load_dataset(str(folder), split="train", cache_dir=str(tmp_path / "cache"))
    audio = ("user_audio", "system_audio", "voice_prompt_audio")
    assert all(isinstance(ds.features[c], Audio) for c in audio)
    for c in audio:  # as the card says: FLAC bytes, no torchcodec needed
        ds = ds.cast_column(c, Audio(decode=False))
    recs = {r.session_id: r for r in RunFolder(run_dir).records}
    assert sorted(ds["session_id"]) == sorted(recs)
    row = ds[0]
    rec = recs[row["session_id"]]
    for col in ("user_audio", "system_audio"):
        x, sr = sf.read(io.BytesIO(row[col]["bytes"]), dtype="int16")
        assert sr == rec.sample_rate and len(x) == rec.num_samples
    v, sr = sf.read(io.BytesIO(row["voice_prompt_audio"]["bytes"]), dtype="int16")
    assert sr == rec.sample_rate and 2 * sr < len(v) < 12 * sr
    assert row["sys_action"] == rec.sys_action
    # the seconds-based word column beside the sample-based events
    for row in ds.select_columns(["session_id", "alignments"]):
        rec = recs[row["session_id"]]
        sr = rec.sample_rate
        want = sorted(((w.on_sample / sr, w.off_sample / sr), e.speaker, w.word) for e in rec.events
                      if e.speaker != "backend" for w in e.words if w.off_sample > w.on_sample)
        got = [((a["start_s"], a["end_s"]), a["speaker"], a["word"]) for a in row["alignments"]]
        assert sorted(got) == want and [g[0] for g in got] == sorted(g[0] for g in got) and got


def test_webdataset_with_a_torch_dataloader(folder, run_dir):
    import torch
    import webdataset as wds

    def decode(s):
        x, sr = sf.read(io.BytesIO(s["user.flac"]), dtype="float32")
        meta = json.loads(s["json"])
        return {"key": s["__key__"], "samples": len(x), "frames": len(meta["sys_action"]),
                "sys_action": torch.tensor(meta["sys_action"][:10])}

    urls = sorted(glob.glob(str(folder / "webdataset" / "*.tar")))
    loader = torch.utils.data.DataLoader(wds.WebDataset(urls, shardshuffle=False).map(decode), batch_size=2)
    keys, recs = [], {r.session_id: r for r in RunFolder(run_dir).records}
    for batch in loader:
        assert batch["sys_action"].shape[1] == 10
        for k, n, f in zip(batch["key"], batch["samples"].tolist(), batch["frames"].tolist()):
            assert n == recs[k].num_samples and f == len(recs[k].sys_action)
            keys.append(k)
    assert sorted(keys) == sorted(recs)


def test_card_parses_with_huggingface_hub(folder, run_dir):
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(folder / "README.md")
    d = card.data.to_dict()
    langs = {p for r in RunFolder(run_dir).records for p in r.language.split("-")}
    assert set(d["language"]) == langs and d["license"] == "cc-by-4.0"
    assert d["configs"][0]["data_files"][0]["path"] == "data/*.parquet"
    feats = {f["name"]: f for f in d["dataset_info"]["features"]}
    assert feats["user_audio"]["dtype"] == "audio" and feats["system_audio"]["dtype"] == "audio"
    assert set(d["task_categories"]) <= {"audio-to-audio", "voice-activity-detection", "automatic-speech-recognition"}
    text = card.text
    for needle in ("sys_action", "turn_eos", "Channel order", "Generation settings", "frame_period_ms",
                   "Noise-bank sources and licences"):
        assert needle in text, needle
    from synth.publish import noise_licences

    lics = noise_licences(RunFolder(run_dir).records)  # runs with rooms/noise name their banks
    assert ("No noise-bank audio" in text) == (not lics)
    for e in lics:
        assert f"| {e['source']} | {e['licence']} |" in text


def test_noise_bank_licences_reach_the_card(run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    pf = sorted((run / "shards" / "parquet").glob("*.parquet"))[0]
    t = pq.read_table(pf)
    rows = t.to_pylist()
    scene = json.loads(rows[0]["scene"])
    scene["extra_noise"] = [
        {"bank": "demand", "path": "cafe/ch01.wav", "licence": "CC-BY-SA-3.0", "source": "DEMAND corpus"},
        {"bank": "demand", "path": "cafe/ch02.wav", "licence": "CC-BY-SA-3.0", "source": "DEMAND corpus"},
        {"id": "fan", "source": "local-recordings", "license": "CC0-1.0", "url": "https://example.org/fan"}]
    scene["room"] = {"rt60_s": 0.35}
    rows[0]["scene"] = json.dumps(scene)
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), pf)
    out = tmp_path / "hub"
    synth("publish", run, "--repo-id", "o/n", "--dry-run", "-o", out)
    text = (out / "README.md").read_text()
    assert "| demand | CC-BY-SA-3.0 | DEMAND corpus | 2 | 1 |" in text
    assert "| local-recordings | CC0-1.0 | https://example.org/fan | 1 | 1 |" in text
    assert "No noise-bank audio" not in text


def test_bad_repo_id_and_upload_without_network_are_one_line(run_dir, tmp_path, monkeypatch):
    r = synth("publish", run_dir, "--repo-id", "nameonly", "--dry-run", "-o", tmp_path / "h", check=False)
    assert r.returncode == 2 and "--repo-id" in r.stderr and "Traceback" not in r.stderr
    foreign = tmp_path / "mine"
    (foreign / "data").mkdir(parents=True)
    (foreign / "data" / "keep.txt").write_text("not ours")
    r = synth("publish", run_dir, "--repo-id", "o/n", "--dry-run", "-o", foreign, check=False)
    assert r.returncode == 2 and "not made by synth publish" in r.stderr
    assert (foreign / "data" / "keep.txt").read_text() == "not ours"
    for licence in ("free", "CC-BY-4", "cc by"):  # no Hub licence id: refused before anything is built
        r = synth("publish", run_dir, "--repo-id", "o/n", "--dry-run", "-o", tmp_path / "h3", "--license", licence,
                  check=False)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert r.returncode == 2 and len(lines) == 1 and "--license" in lines[0] and repr(licence) in lines[0], r.stderr
        assert not (tmp_path / "h3").exists()
    r = synth("publish", run_dir, "--repo-id", "o/n", "--dry-run", "-o", tmp_path / "h3", "--license", "CC-BY-SA-4.0",
              check=False)
    assert r.returncode == 0 and "\nlicense: cc-by-sa-4.0\n" in (tmp_path / "h3" / "README.md").read_text()
    # a real upload attempt against a closed local port: the folder is built, the error is one line
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_token")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    r = synth("publish", run_dir, "--repo-id", "o/n", "-o", tmp_path / "h2", check=False, timeout=300)
    assert r.returncode == 2 and "cannot reach the Hub" in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / "h2" / "README.md").exists()


def test_upload_creates_a_dataset_repo_and_uploads_the_built_folder(folder, monkeypatch):
    import huggingface_hub

    from synth.publish import upload

    calls = []

    class FakeApi:
        def __init__(self, **kw):
            calls.append(("init", kw))

        def create_repo(self, repo_id, **kw):
            calls.append(("create_repo", repo_id, kw))

        def upload_folder(self, **kw):
            calls.append(("upload_folder", kw))

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    url = upload(folder, "org/name", private=True)
    assert url == "https://huggingface.co/datasets/org/name"
    assert calls[0] == ("init", {})  # no token handed over: HF_TOKEN or the saved login only
    assert calls[1] == ("create_repo", "org/name", {"repo_type": "dataset", "private": True, "exist_ok": True})
    kind, kw = calls[2]
    assert kind == "upload_folder" and kw["folder_path"] == str(folder) and kw["repo_type"] == "dataset"
    assert "token" not in kw

    # where the installed huggingface_hub has upload_large_folder, that one is used
    class LargeApi(FakeApi):
        def upload_large_folder(self, **kw):
            calls.append(("upload_large_folder", kw))

    calls.clear()
    monkeypatch.setattr(huggingface_hub, "HfApi", LargeApi)
    upload(folder, "org/name")
    assert [c[0] for c in calls] == ["init", "create_repo", "upload_large_folder"]
