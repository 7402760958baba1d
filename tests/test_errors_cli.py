"""Command-line usage errors and refused outputs: the usage line + one error line, exit 2, no traceback.

Usage errors are matched by class name in ``cli.main``, so they hold for typer's vendored click
(typer >= 0.20) and for click itself (older typer); the test runs against the installed typer.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from helpers import ROOT
from helpers import synth as run_synth
PIPE = ROOT / "pipelines" / "demo-espeak.yaml"


def synth(*args, cwd=ROOT, path: str = ""):
    """``synth ARGS``, not checked; ``path`` goes before the venv's site-packages (the lowest typer
    of the test below)."""
    return run_synth(*args, check=False, cwd=cwd, pythonpath=path, timeout=120)


def lowest_typer() -> str:
    """The lowest typer the pyproject admits (with the click of its day), installed into a folder."""
    import re

    spec = re.search(r'"typer>=([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    return f"typer=={spec}.5" if spec.count(".") == 1 else f"typer=={spec}"


@pytest.fixture(scope="module")
def old_typer(tmp_path_factory):
    where = tmp_path_factory.mktemp("typer-lowest")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(where),
                        lowest_typer(), "click==8.1.8"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-1500:]
    probe = synth("--help", path=str(where))
    assert probe.returncode == 0, probe.stderr[-1500:]
    return str(where)


@pytest.mark.parametrize("args, says", [
    (["nosuch"], "No such command 'nosuch'"),
    (["run", "--sesions", "3", PIPE], "No such option: --sesions"),
    (["run"], "Missing argument"),
    (["run", PIPE, "--sessions", "0"], "'--sessions'"),
    (["run", PIPE, "--workers", "0"], "'--workers'"),
    (["plan", PIPE, "-n", "0"], "'--count'"),
    (["plan", PIPE, "--session", "-3"], "'--session'"),
    (["run", PIPE, "--seed", "abc"], "'--seed'"),
    (["view", ROOT, "--port", "70000"], "'--port'"),
])
def test_usage_errors_are_the_usage_line_and_exit_2(args, says):
    r = synth(*args)
    _usage_error(r, says)


def test_usage_errors_with_the_lowest_typer_the_pyproject_admits(old_typer):
    import json

    version = subprocess.run([sys.executable, "-c", "import typer, click; print(typer.__version__, click.__version__)"],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": old_typer}).stdout.split()
    assert version[0] == lowest_typer().split("==")[1] and version[1] == "8.1.8", version
    for args, says in [(["nosuch"], "No such command 'nosuch'"), (["run", "--sesions", "3", PIPE], "--sesions"),
                       (["run"], "Missing argument"), (["run", PIPE, "--sessions", "0"], "'--sessions'"),
                       (["run", PIPE, "--seed", "abc"], "'--seed'")]:
        _usage_error(synth(*args, path=old_typer), says)
    r = synth("plan", PIPE, "--session", "1", path=old_typer)  # and a command works under it
    assert r.returncode == 0 and json.loads(r.stdout)["session_id"], r.stderr[-1500:]


def _usage_error(r, says):
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "─" not in r.stderr  # no (rich) traceback
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert lines[0].startswith("Usage: ") and lines[-1].startswith("Error: ") and says in lines[-1], r.stderr
    assert len(lines) <= 4, r.stderr


def one_line(r, code=2) -> str:
    assert r.returncode == code, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def small_pipeline(tmp: Path) -> Path:
    p = tmp / "pipe.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "seeds": [str(ROOT / "scenario_seeds" / "*.yaml")], "sessions": 1,
                                 "acoustics": {"room": False, "noise": False}}))
    return p


def test_out_into_a_non_empty_folder_that_is_no_run_is_refused(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "stats.json").write_text("my own file")
    r = synth("run", small_pipeline(tmp_path), "--out", mine)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = r.stderr.strip().splitlines()[-1]  # (a first line may say the default bank was built)
    assert str(mine) in line and "not a run folder" in line
    assert (mine / "stats.json").read_text() == "my own file" and sorted(os.listdir(mine)) == ["stats.json"]


def test_empty_out_is_refused(tmp_path):
    line = one_line(synth("run", small_pipeline(tmp_path), "--out", "", cwd=tmp_path))
    assert "--out" in line and "empty" in line
    assert not (tmp_path / "outputs").exists()


def test_unreachable_ray_address_fails_fast_with_one_line(tmp_path):
    r = synth("run", small_pipeline(tmp_path), "--out", tmp_path / "o", "--executor", "ray",
              "--ray-address", "127.0.0.1:1")
    line = one_line(r)
    assert "--ray-address" in line and "127.0.0.1:1" in line
    assert not (tmp_path / "o").exists()


def test_unwritable_report_output_is_one_line(tmp_path):
    from tests.test_damaged import make_run

    out = make_run(tmp_path / "run")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for args in (["report", out, "-o", blocker / "r.html"], ["publish", out, "--repo-id", "o/n", "--dry-run",
                                                            "-o", blocker / "hub"],
                 ["banks", "build", "--out", blocker / "bank"]):
        line = one_line(synth(*args), code=1)
        assert str(blocker) in line, (args, line)


def test_preview_window_outside_the_session_is_refused():
    from synth.errors import UserError
    from synth.inspection.preview import window

    assert window(20.0, None, None) == (0.0, 20.0)
    assert window(20.0, 5.0, 50.0) == (5.0, 20.0)
    for start, end in ((50.0, 10.0), (30.0, None), (-1.0, 5.0), (3.0, 3.0)):
        with pytest.raises(UserError, match="--start/--end"):
            window(20.0, start, end)


def test_io_error_names_the_path():
    from synth.io.store import io_error

    e = io_error(OSError("[Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device"),
                 "/data/run/shards/parquet/part-00000.parquet")
    assert e.errno == 28 and e.filename.endswith("part-00000.parquet") and "No space left" in e.strerror


@pytest.fixture
def read_only(tmp_path):
    """A folder nothing can be written in: a read-only tmpfs mount when root (root ignores modes),
    else a folder of mode 0555."""
    where = tmp_path / "ro"
    where.mkdir()
    if os.geteuid() != 0:
        where.chmod(0o555)
        yield where
        where.chmod(0o755)
        return
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(where)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs ({r.stderr.decode().strip()})")
    yield where
    subprocess.run(["umount", str(where)], check=True)


def test_outputs_on_a_read_only_folder_are_one_line_naming_the_file(tmp_path, read_only):
    from tests.test_damaged import make_run

    out = make_run(tmp_path / "run", sessions=1)
    sid = "t-000000"
    for args, target in [
        (["preview", out, sid, "-o", read_only / "s.png"], "s.png"),
        (["report", out, "-o", read_only / "r.html"], "r.html"),
        (["publish", out, "--repo-id", "o/n", "--dry-run", "-o", read_only / "hub"], "hub"),
        (["banks", "build", "--out", read_only / "bank"], "bank"),
        (["export", out, "--format", "textgrid", "-o", read_only / "tg"], "tg"),
        (["render", out, "--session", sid, "-o", read_only / "again"], "again"),
        (["plan", PIPE, "-o", read_only / "plans.jsonl"], "plans.jsonl"),  # not its temporary
    ]:
        r = synth(*args)
        assert r.returncode != 0, args
        line = one_line(r, code=r.returncode)
        assert f"{read_only / target}:" in line or f"{read_only / target} " in line, (args, line)
        assert not list(read_only.iterdir())


def test_workers_beyond_the_tasks_are_capped(tmp_path):
    """--workers 99 for 2 sessions (2 tasks) starts 2 worker processes, not 99, and says so."""
    import threading
    import uuid

    from tests.test_signals import processes_with

    token = uuid.uuid4().hex
    pipe = small_pipeline(tmp_path)
    pipe.write_text(pipe.read_text().replace("sessions: 1", "sessions: 2") + "output: {sessions_per_shard: 1}\n")
    peak, stop = [0], threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], len(processes_with(token)))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    env = {**os.environ, "COLUMNS": "300", "PYTHONPATH": str(ROOT), "DS_SIGNAL_TEST": token}
    try:
        r = subprocess.run([sys.executable, "-m", "synth.cli", "run", str(pipe), "--out", str(tmp_path / "o"),
                            "--workers", "99"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    finally:
        stop.set()
        watcher.join()
    assert r.returncode == 0, r.stderr[-2000:]
    assert "workers: 99 capped at 2" in r.stderr
    assert 2 <= peak[0] <= 4, peak  # the driver, 2 workers (and the pool's resource tracker at most)
