"""User errors: one line naming file, field and value; non-zero exit; no traceback."""


import yaml

from helpers import ROOT
from helpers import synth as run_synth


def synth(*args):
    return run_synth(*args, check=False)


def one_line(r) -> str:
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def good_seed() -> dict:
    return yaml.safe_load(sorted((ROOT / "scenario_seeds").glob("*.yaml"))[0].read_text())


def test_bad_seed_field(tmp_path):
    seed = good_seed()
    seed["language"] = "fr"
    p = tmp_path / f"{seed['id']}.yaml"
    p.write_text(yaml.safe_dump(seed, allow_unicode=True))
    line = one_line(synth("plan", p))
    assert str(p) in line and "language" in line and "'fr'" in line


def test_bad_nested_distribution(tmp_path):
    seed = good_seed()
    seed["exchanges"] = {"dist": "uniform", "a": 5, "b": 1}
    p = tmp_path / f"{seed['id']}.yaml"
    p.write_text(yaml.safe_dump(seed, allow_unicode=True))
    line = one_line(synth("plan", p))
    assert "exchanges" in line and str(p) in line


def test_unknown_phenomenon(tmp_path):
    seed = good_seed()
    seed["phenomena"]["teleportation"] = 0.5
    p = tmp_path / f"{seed['id']}.yaml"
    p.write_text(yaml.safe_dump(seed, allow_unicode=True))
    line = one_line(synth("plan", p))
    assert "phenomena" in line and "teleportation" in line


def test_bad_pipeline_config(tmp_path):
    p = tmp_path / "pipe.yaml"
    p.write_text(yaml.safe_dump({"name": "x", "seeds": [str(ROOT / "scenario_seeds/*.yaml")],
                                 "labels": {"frame_period_ms": 33}}))
    line = one_line(synth("run", p, "--out", tmp_path / "o"))
    assert str(p) in line and "labels.frame_period_ms" in line and "33" in line


def test_seeds_glob_matching_nothing(tmp_path):
    p = tmp_path / "pipe.yaml"
    p.write_text(yaml.safe_dump({"name": "x", "seeds": ["nowhere/*.yaml"]}))
    line = one_line(synth("run", p))
    assert "seeds[0]" in line and "nowhere" in line


def test_broken_yaml(tmp_path):
    p = tmp_path / "pipe.yaml"
    p.write_text("name: [unclosed\n")
    line = one_line(synth("run", p))
    assert str(p) in line and "line" in line


def test_run_with_every_session_rejected_fails_with_the_reasons(tmp_path):
    """A VAD threshold at the top of its range (-10 dBFS, above levelled speech) hears no system
    speech: QA rejects every session."""
    p = tmp_path / "pipe.yaml"
    p.write_text(yaml.safe_dump({
        "name": "x", "seeds": [str(ROOT / "scenario_seeds/*.yaml")], "sessions": 2,
        "labels": {"vad_threshold_dbfs": -10.0},
        "acoustics": {"room": False, "banks": [{"path": str(ROOT / "noise_banks/generated"), "generate": True}]}}))
    r = synth("run", p, "--out", tmp_path / "o")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "all 2 sessions were rejected" in r.stderr
    assert "nothing written: 0 sessions" in r.stderr and "done" not in r.stderr.split()  # no green done line
    reasons = [l for l in r.stderr.splitlines() if l.startswith("  qa:")]
    assert reasons and all(" x" in l and "(first: x-0000" in l for l in reasons), r.stderr
