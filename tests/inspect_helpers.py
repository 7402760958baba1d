"""One small run shared by the inspect/export/publish/viewer tests (made once per pytest session)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from helpers import ROOT, synth  # noqa: F401  (synth: the tests of inspect commands import it from here)

SESSIONS = 5


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


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The shared small run (a test module imports this fixture by name)."""
    return small_run(tmp_path_factory)


@pytest.fixture(scope="module")
def sessions(run_dir):
    """Its sessions by id."""
    from synth.inspection.runfolder import RunFolder

    return {s.record.session_id: s for s in RunFolder(run_dir).sessions()}
