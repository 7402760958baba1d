"""Damaged outputs: truncated/bit-flipped shards, markers without files, a truncated run.json,
through ``validate``, ``report``, ``export`` and a rerun (which redoes exactly the damaged tasks)."""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers import ROOT, flip_flac
from helpers import synth as run_synth


def synth(*args):
    return run_synth(*args, check=False)


def pipeline(tmp: Path, sessions: int = 3) -> Path:
    p = tmp / "pipe.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "seeds": [str(ROOT / "scenario_seeds" / "*.yaml")],
                                 "sessions": sessions, "seed": 7, "output": {"sessions_per_shard": 1},
                                 "acoustics": {"room": False, "noise": False}}))
    return p


def make_run(out: Path, sessions: int = 3, workers: int = 1) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    r = synth("run", pipeline(out.parent, sessions), "--out", out, "--workers", workers)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def digest(out: Path) -> dict:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((out / "shards").rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("good") / "out")


@pytest.fixture
def damaged(good, tmp_path):
    """A copy of the run with task 0's Parquet truncated, task 1's user FLAC bit-flipped (the row
    rewritten) and task 2's tar truncated."""
    out = tmp_path / "damaged"
    shutil.copytree(good, out)
    pf0 = out / "shards/parquet/part-00000.parquet"
    pf0.write_bytes(pf0.read_bytes()[: pf0.stat().st_size // 2])
    flip_flac(out / "shards/parquet/part-00001.parquet")
    tar2 = out / "shards/webdataset/part-00002.tar"
    tar2.write_bytes(tar2.read_bytes()[: tar2.stat().st_size // 2 + 7])
    return out


def no_traceback(r):
    assert "Traceback" not in r.stderr and "─" not in r.stderr, r.stderr[-3000:]


def test_validate_lists_each_damaged_file_and_session(good, damaged):
    assert synth("validate", good).returncode == 0
    r = synth("validate", damaged)
    no_traceback(r)
    assert r.returncode == 1
    err = r.stderr
    assert "part-00000.parquet: unreadable Parquet" in err
    assert "t-000001: audio not decodable FLAC" in err
    assert "part-00002.tar: unreadable tar" in err
    assert "the markers count 3 sessions, the Parquet shards hold 2" in err
    assert "shards/parquet/part-00001.parquet" in err and "marker" in err


def test_report_and_export_on_damaged_shards_are_one_line(damaged, tmp_path):
    for args in (["report", damaged, "-o", tmp_path / "r.html"],
                 ["export", damaged, "--format", "moshi", "-o", tmp_path / "ex"]):
        r = synth(*args)
        no_traceback(r)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert r.returncode == 2 and len(lines) == 1 and "part-00000.parquet: damaged Parquet shard" in lines[0], r.stderr
    (damaged / "shards/parquet/part-00000.parquet").unlink()
    r = synth("export", damaged, "--format", "moshi", "-o", tmp_path / "ex2")
    no_traceback(r)
    assert r.returncode == 2 and "session t-000001: the user audio is not decodable FLAC" in r.stderr


def test_rerun_redoes_damaged_and_missing_tasks_to_the_same_bytes(good, damaged):
    (damaged / "shards/webdataset/part-00000.tar").unlink()  # marker kept, its file gone
    r = synth("run", pipeline(damaged.parent), "--out", damaged, "--workers", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    for rank in ("00000", "00001", "00002"):
        assert f"task {rank}:" in r.stderr and "making it again" in r.stderr
    assert digest(damaged) == digest(good)
    assert synth("validate", damaged).returncode == 0


def test_validate_counts_sessions_against_markers_when_a_tasks_files_are_gone(good, tmp_path):
    out = tmp_path / "gone"
    shutil.copytree(good, out)
    (out / "shards/parquet/part-00001.parquet").unlink()  # both shards of task 1 gone, its marker kept
    (out / "shards/webdataset/part-00001.tar").unlink()
    r = synth("validate", out)
    no_traceback(r)
    assert r.returncode == 1, r.stderr
    assert "shards/parquet/part-00001.parquet: missing" in r.stderr
    assert "shards/webdataset/part-00001.tar: missing" in r.stderr
    assert "the markers count 3 sessions, the Parquet shards hold 2" in r.stderr


def test_report_and_export_on_a_truncated_tar_and_report_on_a_flipped_flac_succeed(good, tmp_path):
    """Decided correct as is: report's figures come from the Parquet records (no audio decoded) and
    export reads Parquet only (the tar holds the same content), so a truncated tar stops neither and a
    bit-flipped FLAC does not stop report (exit 0); validate lists both; export, which decodes the
    audio, names the session in one line."""
    out = tmp_path / "quiet-damage"
    shutil.copytree(good, out)
    tar2 = out / "shards/webdataset/part-00002.tar"
    tar2.write_bytes(tar2.read_bytes()[: tar2.stat().st_size // 2 + 7])
    for args in (["report", out, "-o", tmp_path / "r.html"], ["export", out, "--format", "textgrid", "-o", tmp_path / "tg"]):
        r = synth(*args)
        no_traceback(r)
        assert r.returncode == 0, (args, r.stderr[-2000:])
    flip_flac(out / "shards/parquet/part-00001.parquet")
    r = synth("report", out, "-o", tmp_path / "r2.html")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    r = synth("export", out, "--format", "textgrid", "-o", tmp_path / "tg2")
    no_traceback(r)
    assert r.returncode == 2 and "session t-000001: the user audio is not decodable FLAC" in r.stderr
    r = synth("validate", out)
    assert r.returncode == 1 and "part-00002.tar" in r.stderr and "t-000001" in r.stderr, r.stderr


def test_truncated_run_json_is_one_line_for_validate_report_and_run(good, tmp_path):
    out = tmp_path / "cut"
    shutil.copytree(good, out)
    rj = out / "run.json"
    rj.write_bytes(rj.read_bytes()[:100])
    for args in (["validate", out], ["report", out], ["run", pipeline(good.parent), "--out", out]):
        r = synth(*args)
        no_traceback(r)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert r.returncode == 2 and len(lines) == 1 and "run.json" in lines[0] and "damaged" in lines[0], r.stderr


def test_a_damaged_marker_is_reported_not_a_crash(good, tmp_path):
    out = tmp_path / "m"
    shutil.copytree(good, out)
    (out / "tasks/00001.done.json").write_text('{"rank": 1, "sess')
    r = synth("validate", out)
    no_traceback(r)
    assert r.returncode == 1 and "tasks/00001.done.json: damaged marker" in r.stderr


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs mount (root only) whose size the test sets: ``remount(bytes)``."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a small disk needs a tmpfs mount (root)")

    def remount(size: int, first: bool = False):
        opts = f"size={size // 1024 + 1}k" if first else f"remount,size={size // 1024 + 1}k"
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs ({r.stderr.strip()})")

    remount(64 * 1024, first=True)
    yield where, remount
    subprocess.run(["umount", str(where)], check=True)


def test_disk_full_names_the_file_and_a_resume_gives_clean_bytes(good, small_disk):
    where, remount = small_disk
    first = sum(p.stat().st_size for p in [good / "run.json", *(good / "shards").rglob("part-00000.*")])
    remount(first + 256 * 1024)  # room for task 0 and the small files, not for task 1
    out = where / "out"
    r = synth("run", pipeline(good.parent), "--out", out, "--workers", "1")
    no_traceback(r)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "done" not in r.stderr.split()  # no "done N sessions" line: it says incomplete
    failed = [l for l in r.stderr.splitlines() if "failed:" in l]
    assert failed and all(str(out) in l and "No space left on device" in l for l in failed), r.stderr
    assert not [p for p in (out / "shards").rglob(".*")]  # no temporaries left
    remount(256 * 1024 * 1024)  # space freed: the same command finishes the run
    r = synth("run", pipeline(good.parent), "--out", out, "--workers", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert digest(out) == digest(good)
    assert synth("validate", out).returncode == 0
