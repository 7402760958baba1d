"""One small run shared by the inspect/export/publish/viewer tests (made once per pytest session)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = 5


def synth(*args, check=True, timeout=600):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    r = subprocess.run([sys.executable, "-m", "synth.cli", *map(str, args)], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(r.stderr[-3000:])
    return r


def small_run(tmp_path_factory) -> Path:
    """5 sessions (en, zh, en-zh), 2 per shard; built on first use, reused by later modules."""
    base = tmp_path_factory.getbasetemp() / "inspect-run"
    out = base / "out"
    if (out / "stats.json").exists():
        return out
    base.mkdir(parents=True, exist_ok=True)
    cfg = {"name": "insp", "seeds": [str(ROOT / "scenario_seeds" / "*.yaml")], "sessions": SESSIONS, "seed": 11,
           "output": {"sessions_per_shard": 2}}
    pipe = base / "pipe.yaml"
    pipe.write_text(yaml.safe_dump(cfg))
    synth("run", pipe, "--out", out, "--workers", "1")
    return out
