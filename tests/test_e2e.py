"""End to end: the real pipeline (eSpeak NG, clock, labels, writers) through the CLI."""

import hashlib
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml

from helpers import ROOT, synth


def pipeline(tmp: Path, sessions=4, per_shard=2, **extra) -> Path:
    cfg = {"name": "t", "seeds": [str(ROOT / "scenario_seeds" / "*.yaml")], "sessions": sessions, "seed": 7,
           "output": {"sessions_per_shard": per_shard}, **extra}
    p = tmp / "pipe.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def digest(out: Path) -> dict:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((out / "shards").rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run")
    out = tmp / "out"
    synth("run", pipeline(tmp), "--out", out, "--workers", "1")
    return tmp, out


def test_output_contract(local_run):
    _, out = local_run
    assert {"run.json", "stats.json", "rejects.jsonl", "shards", "tasks"} <= {p.name for p in out.iterdir()}
    rows = pq.read_table(sorted((out / "shards" / "parquet").glob("*.parquet"))).to_pylist()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["rejects"] == 0, stats["rejects_by_reason"]
    assert len(rows) == stats["sessions"] == 4
    # CPU seconds per stage beside wall seconds; a task's CPU covers its stages (and loading)
    assert set(stats["stage_cpu_s"]) == set(stats["stage_s"]) and stats["stage_cpu_s"]["tts"] > 0
    assert sum(stats["stage_cpu_s"].values()) <= stats["cpu_s"] <= stats["task_wall_s"] * 1.5 + 1
    for row in rows:
        n = len(row["sys_action"])
        assert all(len(row[k]) == n for k in ("sys_floor", "usr_floor", "sys_vad", "usr_vad"))
        assert n == -(-row["num_samples"] // (row["sample_rate"] * 80 // 1000))
        assert row["language"] in ("en", "zh", "en-zh") and "." not in row["session_id"]
        u, sr = sf.read(io.BytesIO(row["user_audio"]["bytes"]), dtype="int16")
        s, _ = sf.read(io.BytesIO(row["system_audio"]["bytes"]), dtype="int16")
        assert sr == 16000 and len(u) == len(s) == row["num_samples"]
        P = 1280
        sys_vad = np.array(row["sys_vad"], bool)
        x = s.astype(np.float64) / 32768
        rms_db = np.array([10 * np.log10(np.mean(x[k * P:(k + 1) * P] ** 2) + 1e-12) for k in range(n)])
        # speech where sys_vad says so, nothing speech-like (> -40 dBFS) where it says silence
        assert np.median(rms_db[sys_vad]) > -35 and (rms_db[~sys_vad] < -40).all()
        words = [w for e in row["events"] for w in e["words"]]
        assert words and all(w["lang"] in ("en", "zh") for w in words)
        assert any(m["type"] == "delegate_open" for m in row["markers"])
        assert json.loads(row["scene"])["channel_order"] == ["user", "system"]
    # WebDataset holds the same sessions, keys without dots
    names = []
    for tf in sorted((out / "shards" / "webdataset").glob("*.tar")):
        with tarfile.open(tf) as tar:
            names += tar.getnames()
    keys = sorted({n.split(".", 1)[0] for n in names})
    assert keys == sorted(r["session_id"] for r in rows)
    assert sorted(n.split(".", 1)[1] for n in names) == sorted(["json", "system.flac", "user.flac", "voice.flac"]
                                                                * len(keys))


def test_validate_passes_and_catches_tampering(local_run, tmp_path):
    _, out = local_run
    assert "pass" in synth("validate", out).stderr
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    pf = sorted((bad / "shards" / "parquet").glob("*.parquet"))[0]
    t = pq.read_table(pf)
    rows = t.to_pylist()
    rows[0]["sys_floor"] = [0] * len(rows[0]["sys_floor"])
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), pf)
    r = synth("validate", bad, check=False)
    assert r.returncode == 1 and "labels_differ_from_timeline:sys_floor" in r.stderr
    # a written backend message whose frame is not the frame of its sample
    w = next(w for row in rows for w in row["delegations"] if w["backend"])
    w["backend"][0]["frame"] += 3
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), pf)
    r = synth("validate", bad, check=False)
    assert r.returncode == 1 and f"backend_frame:{w['work_id']}" in r.stderr


def test_same_seed_same_bytes_with_two_workers_and_resume(local_run):
    tmp, out = local_run
    out2 = tmp / "out2"
    synth("run", pipeline(tmp), "--out", out2, "--workers", "2")
    assert digest(out) == digest(out2)
    # resume: drop one task's marker and shard, rerun, same bytes
    (out2 / "tasks" / "00001.done.json").unlink()
    for p in (out2 / "shards").rglob("part-00001.*"):
        p.unlink()
    synth("run", pipeline(tmp), "--out", out2, "--workers", "1")
    assert digest(out) == digest(out2)


def test_other_config_in_same_folder_is_refused(local_run):
    tmp, out = local_run
    r = synth("run", pipeline(tmp), "--out", out, "--seed", "8", check=False)
    assert r.returncode == 2 and "different data settings (seed: 7 -> 8)" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.ray
def test_ray_executor_same_bytes(local_run):
    tmp, out = local_run
    out3 = tmp / "out3"
    synth("run", pipeline(tmp), "--out", out3, "--executor", "ray", "--workers", "2")
    assert digest(out) == digest(out3)
