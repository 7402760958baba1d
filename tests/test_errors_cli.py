"""Command-line usage errors and refused outputs: the usage line + one error line, exit 2, no traceback.

Usage errors are matched by class name in ``cli.main``, so they hold for typer's vendored click
(typer >= 0.20) and for click itself (older typer); the test runs against the installed typer.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PIPE = ROOT / "pipelines" / "demo-espeak.yaml"


def synth(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "synth.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "COLUMNS": "300", "PYTHONPATH": str(ROOT)}, timeout=120)


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
