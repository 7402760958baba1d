"""The run fingerprint holds only what decides the data; a refused resume names what differs."""

import json

import pytest

from synth.errors import UserError
from synth.executor.run import fingerprint, pending_ranks, prepare_folder, settings_diff
from synth.executor.task import RunSpec, marker_name
from synth.io.store import Store
from synth.schema.config import PipelineConfig
from synth.schema.record import TaskStats
from synth.io.config_files import load_seed
from tests.conftest import ROOT


def spec(tmp_path, **over) -> RunSpec:
    cfg = {"name": "fp", "seeds": ["x"], "sessions": 4, "seed": 3, **over}
    seed = load_seed(ROOT / "scenario_seeds" / sorted(p.name for p in (ROOT / "scenario_seeds").glob("*.yaml"))[0])
    return RunSpec(PipelineConfig.model_validate(cfg), (seed,), str(tmp_path / "run"))


def test_operational_settings_are_not_in_the_fingerprint(tmp_path):
    base = fingerprint(spec(tmp_path))
    kokoro = {"engine": "kokoro", "threads": 1}
    assert fingerprint(spec(tmp_path, sessions=400, executor={"kind": "ray", "workers": 8},
                            output={"dir": "/elsewhere"})) == base
    k1 = fingerprint(spec(tmp_path, tts=kokoro))
    assert fingerprint(spec(tmp_path, tts={**kokoro, "threads": 4, "cache_dir": "/c", "device": "cpu"})) == k1
    routed = lambda threads: {"engine": "routed", "default": "k", "engines": {"k": {**kokoro, "threads": threads}}}  # noqa: E731
    assert fingerprint(spec(tmp_path, tts=routed(1))) == fingerprint(spec(tmp_path, tts=routed(3)))
    assert fingerprint(spec(tmp_path, seed=4)) != base
    assert fingerprint(spec(tmp_path, timing={"gate_base_ms": 700})) != base


def test_refused_resume_names_the_settings_that_differ(tmp_path):
    prepare_folder(spec(tmp_path))
    assert "data_settings" in json.loads((tmp_path / "run" / "run.json").read_text())
    prepare_folder(spec(tmp_path, tts={"engine": "espeak"}, executor={"workers": 2}))  # same data: accepted
    with pytest.raises(UserError) as e:
        prepare_folder(spec(tmp_path, timing={"system_gap_ms": {"dist": "gamma", "k": 3, "theta": 120}}))
    assert "timing.system_gap_ms.theta: 100.0 -> 120.0" in str(e.value)
    with pytest.raises(UserError, match="sessions: 4 -> 2"):
        prepare_folder(spec(tmp_path, sessions=2))


def test_extended_run_redoes_its_short_last_task(tmp_path):
    s = spec(tmp_path, sessions=3, output={"sessions_per_shard": 2})
    store = prepare_folder(s)
    for rank, n in ((0, 2), (1, 1)):
        store.write_text(marker_name(rank), TaskStats(rank=rank, sessions=n).model_dump_json())
    assert pending_ranks(s) == []
    bigger = spec(tmp_path, sessions=5, output={"sessions_per_shard": 2})
    prepare_folder(bigger)
    assert pending_ranks(bigger) == [1, 2]
    assert json.loads(Store(s.out_dir).read_text("run.json"))["config"]["sessions"] == 5


def test_settings_diff_lists_leaves():
    assert settings_diff({"a": {"b": 1, "c": [1]}}, {"a": {"b": 2, "c": [1]}, "d": 0}) == ["a.b: 1 -> 2", 'd: "(unset)" -> 0']
