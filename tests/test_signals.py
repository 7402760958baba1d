"""SIGTERM and SIGINT to the driver: workers stopped, no process left behind, a resume gives the same bytes."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.test_damaged import digest, make_run, pipeline

ROOT = Path(__file__).resolve().parents[1]


def processes_with(token: str) -> list[int]:
    me, found = os.getpid(), []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != me:
            try:
                if f"DS_SIGNAL_TEST={token}".encode() in (d / "environ").read_bytes():
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def _gone(token: str, wait_s: float = 20.0) -> list[int]:
    deadline = time.time() + wait_s
    while (left := processes_with(token)) and time.time() < deadline:
        time.sleep(0.5)
    return left


@pytest.mark.parametrize("sig, executor", [
    (signal.SIGTERM, "local"), (signal.SIGINT, "local"),
    pytest.param(signal.SIGTERM, "ray", marks=pytest.mark.ray),  # ray.init installs its own SIGTERM handler
])
def test_signal_stops_workers_and_resume_gives_the_same_bytes(sig, executor, tmp_path):
    ref = make_run(tmp_path / "ref", sessions=3)
    out = tmp_path / "out"
    token = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DS_SIGNAL_TEST": token, "RAY_AUTH_MODE": "disabled"}
    p = subprocess.Popen([sys.executable, "-m", "synth.cli", "run", str(pipeline(tmp_path, 3)), "--out", str(out),
                          "--workers", "2", "--executor", executor], cwd=ROOT, env=env, stderr=subprocess.PIPE,
                         text=True)
    while not list((out / "tasks").glob("*.done.json")) and p.poll() is None:
        time.sleep(0.1)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    if p.returncode == 0:
        pytest.skip("the run finished before the signal arrived")
    assert p.returncode == 130 and "Traceback" not in err and "interrupted" in err, err[-3000:]
    assert _gone(token) == []  # (Ray's raylet and workers take a moment to go after the driver)
    assert not [f for f in (out / "shards").rglob(".*")]  # no temporaries left
    r = subprocess.run([sys.executable, "-m", "synth.cli", "run", str(pipeline(tmp_path, 3)), "--out", str(out),
                        "--workers", "1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert digest(out) == digest(ref)


def test_a_stopped_ray_run_removes_the_temporaries_of_its_dead_workers(tmp_path):
    """Ray kills workers mid-write when the cluster goes down with a stopped driver: the driver
    removes their shard temporaries once their processes are gone, and leaves a live writer's."""
    from types import SimpleNamespace

    from synth.executor.ray_executor import _remove_temporaries_of_dead_workers

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    shards = tmp_path / "shards"
    for sub in ("parquet", "webdataset"):
        (shards / sub).mkdir(parents=True)
    gone = [shards / "parquet" / f".part-00001.parquet.tmp-{dead.pid}",
            shards / "webdataset" / f".part-00001.tar.tmp-{dead.pid}"]
    alive = shards / "parquet" / f".part-00002.parquet.tmp-{os.getpid()}"
    other_rank = shards / "parquet" / f".part-00007.parquet.tmp-{dead.pid}"
    for p in (*gone, alive, other_rank):
        p.write_bytes(b"partial")
    _remove_temporaries_of_dead_workers(SimpleNamespace(out_dir=str(tmp_path)), [1, 2], wait_s=0.3)
    assert not any(p.exists() for p in gone)
    assert alive.exists() and other_rank.exists()
