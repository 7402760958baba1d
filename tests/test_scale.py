"""Fault tolerance at scale (issue 6): killed drivers and Ray workers, failed and all-rejected
tasks, and a real `ray start --head` + `ray job submit` exactly as the README says."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from helpers import ROOT
from helpers import synth as run_synth
BIN = Path(sys.executable).parent
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}


def pipeline(tmp: Path, name="k", sessions=6, per_shard=2, seeds=None, **extra) -> Path:
    cfg = {"name": name, "seeds": seeds or [str(ROOT / "scenario_seeds" / "*.yaml")], "sessions": sessions,
           "seed": 11, "output": {"sessions_per_shard": per_shard}, **extra}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def synth(*args, check=True, **kw):
    return run_synth(*args, check=check, env=ENV, **kw)


def listing(out: Path) -> dict:
    """Every file under shards/, hidden ones included: a left-over temp file counts."""
    import hashlib

    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((out / "shards").rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    out = tmp / "out"
    synth("run", pipeline(tmp), "--out", out, "--workers", "1")
    return tmp, out


def _wait_for(pred, timeout=180.0, step=0.05):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(step)
    return False


def _pids(out: Path) -> list[int]:
    return [json.loads(m.read_text())["pid"] for m in sorted((out / "tasks").glob("*.done.json"))]


def test_process_per_task_and_start_methods_give_the_same_bytes(reference, tmp_path):
    """``process_per_task`` runs every task in a new process, even with one worker (its memory
    goes back when the task ends); forkserver workers write the same bytes as the driver."""
    _, ref = reference
    assert len(set(_pids(ref))) == 1  # one worker: the driver made every task
    fresh = tmp_path / "fresh"
    synth("run", pipeline(tmp_path, name="k", executor={"workers": 1, "process_per_task": True}), "--out", fresh)
    pids = _pids(fresh)
    assert len(pids) == 3 and len(set(pids)) == 3, pids
    assert listing(fresh) == listing(ref)
    served = tmp_path / "served"
    synth("run", pipeline(tmp_path, name="k", executor={"workers": 2, "start_method": "forkserver"}), "--out", served)
    assert len(set(_pids(served))) <= 2 and listing(served) == listing(ref)


def test_driver_sigkill_then_rerun_gives_the_same_bytes(reference, tmp_path):
    tmp, ref = reference
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "synth.cli", "run", str(pipeline(tmp)), "--out", str(out),
                          "--workers", "1"], env=ENV, cwd=ROOT, start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # kill while task 1 is being made: task 0 is final, task 1 half done
    assert _wait_for(lambda: (out / "tasks" / "00000.done.json").exists())
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert not (out / "tasks" / "00002.done.json").exists()
    r = synth("run", pipeline(tmp), "--out", out, "--workers", "1")
    stats = json.loads((out / "stats.json").read_text())
    assert stats["sessions"] + stats["rejects"] == 6
    assert listing(out) == listing(ref)  # same files, same bytes, no temp file, no duplicate
    assert "done" in r.stderr


@pytest.mark.ray
def test_sigkill_of_a_ray_worker_is_retried_with_the_same_bytes(reference, tmp_path):
    tmp, ref = reference
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "synth.cli", "run", str(pipeline(tmp)), "--out", str(out),
                          "--executor", "ray", "--workers", "2"], env=ENV, cwd=ROOT, start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def worker_pid():
        r = subprocess.run(["pgrep", "-f", "-s", str(p.pid), "ray::run_task"], capture_output=True, text=True)
        pids = [int(x) for x in r.stdout.split()]
        return pids[0] if pids else None

    try:
        assert _wait_for(lambda: worker_pid() is not None, timeout=120)
        os.kill(worker_pid(), signal.SIGKILL)
        _, err = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 0, err[-2000:]
    assert listing(out) == listing(ref)


def test_a_task_whose_sessions_all_fail_is_reported_and_the_rest_finish(tmp_path):
    bad = yaml.safe_load((ROOT / "scenario_seeds" / "smart-home-en.yaml").read_text())
    bad["id"] = "zz-unplaceable"
    bad["environment"]["user_distance_m"] = {"dist": "fixed", "value": 50.0}  # no room is that big
    (tmp_path / "zz-unplaceable.yaml").write_text(yaml.safe_dump(bad))
    shutil.copy(ROOT / "scenario_seeds" / "cooking-help-en.yaml", tmp_path)  # sorts first: ranks 0, 2
    seeds = [str(tmp_path / "*.yaml")]
    out = tmp_path / "out"
    r = synth("run", pipeline(tmp_path / "..", name="allfail", sessions=4, per_shard=1, seeds=seeds), "--out", out)
    assert "task 00001: all 1 sessions rejected (source_unplaceable 1)" in r.stderr
    stats = json.loads((out / "stats.json").read_text())
    assert stats["tasks_all_rejected"] == [1, 3] and stats["sessions"] == 2
    assert stats["rejects_by_reason"] == {"source_unplaceable": 2}
    assert len(list((out / "shards" / "parquet").glob("*.parquet"))) == 2  # no empty shards


def test_a_failing_task_is_reported_the_others_finish_and_a_rerun_completes(tmp_path):
    out = tmp_path / "out"
    p = pipeline(tmp_path, sessions=6, per_shard=2)
    synth("run", p, "--out", out, "--sessions", "2")  # a run folder (a foreign folder is refused), then extended
    blocker = out / "shards" / "parquet" / "part-00001.parquet"
    blocker.mkdir(parents=True)  # storage trouble: the shard's name is taken by a folder
    r = synth("run", p, "--out", out, "--workers", "2", check=False)
    assert r.returncode == 1
    assert "task 00001 failed:" in r.stderr and "1 of 3 tasks failed" in r.stderr
    assert "Traceback" not in r.stderr
    assert sorted(x.name for x in (out / "tasks").glob("*.done.json")) == ["00000.done.json", "00002.done.json"]
    blocker.rmdir()
    synth("run", p, "--out", out, "--workers", "2")
    assert (out / "tasks" / "00001.done.json").exists()
    assert not [x for x in (out / "shards").rglob(".*")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.ray
def test_ray_job_submit_to_a_real_head_as_the_readme_says(reference, tmp_path):
    tmp, ref = reference
    port, dash = _free_port(), _free_port()
    ray_tmp = tempfile.mkdtemp(prefix="r", dir="/tmp")  # unix socket paths must stay short
    head = subprocess.Popen([str(BIN / "ray"), "start", "--head", "--block", f"--port={port}",
                             "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", "--num-cpus=2",
                             "--include-dashboard=true", "--disable-usage-stats", "--node-ip-address=127.0.0.1",
                             f"--temp-dir={ray_tmp}"], env=ENV, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = tmp_path / "out"
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    shutil.copy(pipeline(tmp), job_dir / "k.yaml")
    try:
        def up():
            try:
                with socket.create_connection(("127.0.0.1", dash), timeout=1):
                    return True
            except OSError:
                return False

        assert _wait_for(up, timeout=120, step=0.5)
        cmd = [str(BIN / "ray"), "job", "submit", f"--address=http://127.0.0.1:{dash}", f"--working-dir={job_dir}",
               "--runtime-env-json", json.dumps({"env_vars": {"RAY_AUTH_MODE": "disabled"}}),
               "--", "python", "-m", "synth.cli", "run", "k.yaml", "--executor", "ray", "--out", str(out)]
        for _ in range(40):  # the job agent comes up a little after the dashboard's port
            r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600)
            if "No available agent" not in r.stdout + r.stderr:
                break
            time.sleep(2)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
        assert "succeeded" in r.stdout + r.stderr
        assert "progress: 6/6 sessions" in r.stdout + r.stderr  # progress lines reach the job log
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert listing(out) == listing(ref)
