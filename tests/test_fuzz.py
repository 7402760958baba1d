"""Fuzz suite: mutated seeds and pipelines through ``synth plan`` and a 1-session ``synth run``.

Every outcome is exit 0 (and then what was planned or written keeps the config's own bounds),
or exit 2 with exactly one line ``FILE: FIELD: message (got VALUE)``; never a traceback or a hang.
The CLI runs in-process (``synth.cli.main``) under an alarm; a few cases also run as subprocesses
with a timeout. Mutations: wrong types, flipped signs, NaN/inf, huge values, missing, unknown and
duplicate keys, unknown ids, bad encodings. Derandomized, so CI sees the same examples every time.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from synth import cli
from synth.schema.seed import MAX_EXCHANGES

ROOT = Path(__file__).resolve().parents[1]
HANG_S = 120

# A small, valid base: two exchanges, no bank sounds, no room and no noise (no bank is built).
BASE_SEED = yaml.safe_load((ROOT / "scenario_seeds" / "smart-home-en.yaml").read_text("utf-8"))
BASE_SEED["exchanges"] = {"dist": "fixed", "value": 2}
BASE_SEED["phenomena"]["nonverbal"] = 0.0
BASE_PIPELINE = {
    "name": "fuzz", "seeds": ["seeds/*.yaml"], "sessions": 1, "seed": 7,
    "acoustics": {"room": False, "noise": False, "banks": []},
    "paralinguistics": {"laughter_per_min": {"dist": "fixed", "value": 0}, "cough_per_min": {"dist": "fixed", "value": 0},
                        "breath_per_turn": 0, "sigh_per_turn": 0, "thinking_sound_per_turn": 0, "media_per_session": 0},
    "timing": {"tool_latency_ms": {"dist": "lognormal", "median": 2000, "sigma": 0.5, "low": 500, "high": 6000}},
    "output": {"sessions_per_shard": 1},
}


def _paths(node, prefix=()):
    """Every key path of a parsed YAML tree (mappings and list items), parents before children."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield (*prefix, k)
        yield from _paths(v, (*prefix, k))


SEED_PATHS = sorted(_paths(BASE_SEED), key=repr)
PIPELINE_PATHS = sorted(_paths(BASE_PIPELINE), key=repr)


def _leaf(tree, path):
    for k in path:
        tree = tree[k]
    return tree


NUMERIC_PIPELINE_PATHS = [p for p in PIPELINE_PATHS if isinstance(_leaf(BASE_PIPELINE, p), (int, float))
                          and not isinstance(_leaf(BASE_PIPELINE, p), bool)]

VALUES = st.one_of(
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e9, -1e9, 10**30, -1, 0, 2.5, -0.5, True, None,
                     "", "nosuch_id", "1e9", [], {}, ["nosuch_id"], {"dist": "fixed", "value": -3},
                     {"dist": "uniform", "a": 5, "b": -5}, {"dist": "normal", "mean": 1, "std": 1},
                     {"dist": "nosuch"}, "日本語 🤖\x07"]),
    st.integers(-10**6, 10**6),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
)


HOSTILE = ("replace", "replace", "negate", "delete", "unknown_key", "scale")
TEXT_TAILS = ("", "", "", "dup", "bytes", "nul", "tab")
# YAML's own space: anchors and aliases (a node reused elsewhere, a node that contains itself, an
# alias bomb), and the spellings YAML 1.1 (PyYAML) reads as numbers, specials, tags or nothing
YAML_KINDS = ("alias", "alias", "self_alias", "spelling", "spelling", "spelling")
YAML_TAILS = ("", "", "", "", "", "", "", "bomb")
SPELLINGS = ("0x10", "0o17", "017", "1_000", "1:30", "+5", "0b101", ".inf", "-.inf", ".NaN", "1e400", "~", "null",
             "!!float 2", "!!str 5", "!!int '3'", "!!binary aGk=", "!!python/object/apply:os.system ['true']",
             "*nosuch", "&n 5", "[1, 2]", "{a: 1}", "yes", "off", "2026-12-06", "'5'")
BOMB = "".join(f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n" for i in range(9))


@st.composite
def mutated(draw, base: dict, paths: list[tuple], top_keys: list[str], kinds=HOSTILE, tails=TEXT_TAILS,
            most: int = 3):
    """(bytes of a YAML file, what was done): one to ``most`` mutations of ``base``."""
    data = copy.deepcopy(base)
    done = []
    spellings: list[str] = []
    for _ in range(draw(st.integers(1, most))):
        kind = draw(st.sampled_from(kinds))
        path = draw(st.sampled_from(paths))
        parent = data
        try:
            for k in path[:-1]:
                parent = parent[k]
            old = parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue
        if kind == "negate" and isinstance(old, (int, float)) and not isinstance(old, bool):
            parent[path[-1]] = -old if old else -1
        elif kind == "scale" and isinstance(old, (int, float)) and not isinstance(old, bool):
            factor = draw(st.sampled_from([0.5, 1.5, 2, 3]))
            parent[path[-1]] = type(old)(old * factor) if isinstance(old, float) else int(old * factor)
        elif kind == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif kind == "unknown_key" and isinstance(old, dict):
            old["nosuch_field"] = 1
        elif kind == "alias":  # the node of another path, dumped as an anchor and an alias to it
            other = draw(st.sampled_from(paths))
            try:
                parent[path[-1]] = _leaf(data, other) if other[:len(path)] != path else old
            except (KeyError, IndexError, TypeError):
                continue
        elif kind == "self_alias" and isinstance(old, (dict, list)):
            if isinstance(old, dict):
                old["loop"] = old
            else:
                old.append(old)
        elif kind == "spelling" and isinstance(old, (int, float, str)) and not isinstance(old, bool):
            spellings.append(draw(st.sampled_from(SPELLINGS)))
            parent[path[-1]] = f"zzspelling{len(spellings) - 1}zz"
        else:
            parent[path[-1]] = draw(VALUES)
        done.append((kind, path))
    text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    for i, spelled in enumerate(spellings):
        text = text.replace(f"zzspelling{i}zz", spelled)
    text = text.encode("utf-8")
    tail = draw(st.sampled_from(tails))
    if tail == "bomb":
        text += BOMB.encode()
    elif tail == "dup":
        key = draw(st.sampled_from(top_keys))
        text += f"{key}: {json.dumps(data.get(key, 1), ensure_ascii=False)}\n".encode("utf-8")
    elif tail == "bytes":
        text += b"# caf\xe9\n"
    elif tail == "nul":
        text = text[: len(text) // 2] + b"\x00" + text[len(text) // 2:]
    elif tail == "tab":
        text += b"extra:\n\tkey: 1\n"
    return text, done + ([("text", tail)] if tail else [])


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang(f"no answer in {HANG_S} s")


def run_cli(capsys, *args) -> tuple[int, str, str]:
    """``synth ARGS`` in this process, under an alarm (a hang fails the example)."""
    capsys.readouterr()
    argv, old = sys.argv, signal.signal(signal.SIGALRM, _alarm)
    sys.argv = ["synth", *map(str, args)]
    signal.alarm(HANG_S)
    try:
        cli.main()
        rc = 0
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        sys.argv = argv
    out, err = capsys.readouterr()
    if os.environ.get("FUZZ_TRACE"):  # how the examples end: FUZZ_TRACE=1 pytest -s tests/test_fuzz.py
        sys.__stderr__.write(f"fuzz {args[0]} rc={rc} {err.strip().splitlines()[-1][:150] if err.strip() else ''}\n")
    return rc, out, err


ONE_LINE = re.compile(r"^error: (?P<file>\S+\.yaml): (?P<where>[^:]+): .+")


def assert_one_line(err: str, files: list[Path]) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    m = ONE_LINE.match(lines[0])
    assert m is not None, lines[0]
    assert any(m.group("file") == str(f) for f in files), lines[0]
    assert "(got " in lines[0] or re.search(r"line \d+|byte \d+|cannot read", lines[0]), lines[0]


def support(law: dict) -> tuple[float, float]:
    from pydantic import TypeAdapter

    from synth.schema.dist import Distribution

    return TypeAdapter(Distribution).validate_python(law).support()


def check_plans(plans: list[dict], seed: dict) -> None:
    """Planned sessions keep the seed's bounds: its exchange count bounds the plan's size."""
    hi = support(seed.get("exchanges", {"dist": "fixed", "value": 5}))[1]
    assert hi <= MAX_EXCHANGES
    for p in plans:
        user_turns = [e for e in p["events"] if e["speaker"] == "user" and e["floor_intent"] == "take"]
        assert 0 < len(user_turns) <= 4 * max(2, hi) + 8, len(user_turns)
        assert all(w["text"].strip() for e in p["events"] for w in e["words"])


def write_tree(folder: Path, seed_bytes: bytes, pipe_bytes: bytes | None = None) -> tuple[Path, Path]:
    (folder / "seeds").mkdir(parents=True, exist_ok=True)
    seed_path = folder / "seeds" / f"{BASE_SEED['id']}.yaml"
    seed_path.write_bytes(seed_bytes)
    pipe_path = folder / "pipe.yaml"
    pipe_path.write_bytes(pipe_bytes if pipe_bytes is not None else yaml.safe_dump(BASE_PIPELINE).encode())
    return seed_path, pipe_path


FUZZ = settings(derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SEED_BYTES = yaml.safe_dump(BASE_SEED, allow_unicode=True).encode()


@settings(FUZZ, max_examples=60)
@given(case=mutated(BASE_SEED, SEED_PATHS, ["id", "domain", "exchanges", "phenomena", "environment"]))
def test_plan_of_mutated_seeds(capsys, case):
    text, done = case
    with tempfile.TemporaryDirectory() as tmp:
        seed_path, _ = write_tree(Path(tmp), text)
        rc, out, err = run_cli(capsys, "plan", seed_path, "-n", "2")
        assert rc in (0, 2), (done, err)
        if rc == 2:
            assert_one_line(err, [seed_path])
        else:
            check_plans(json.loads(out), yaml.safe_load(text))


@settings(FUZZ, max_examples=40)
@given(case=mutated(BASE_PIPELINE, PIPELINE_PATHS, ["name", "seeds", "sessions", "timing"]))
def test_plan_of_mutated_pipelines(capsys, case):
    text, done = case
    with tempfile.TemporaryDirectory() as tmp:
        seed_path, pipe_path = write_tree(Path(tmp), SEED_BYTES, text)
        rc, out, err = run_cli(capsys, "plan", pipe_path)
        assert rc in (0, 2), (done, err)
        if rc == 2:
            assert_one_line(err, [pipe_path, seed_path])
        else:
            check_plans([json.loads(out)], BASE_SEED)


@settings(FUZZ, max_examples=60)
@given(case=st.one_of(
    mutated(BASE_SEED, SEED_PATHS, ["id"], kinds=YAML_KINDS, tails=YAML_TAILS).map(lambda c: ("seed", c)),
    mutated(BASE_PIPELINE, PIPELINE_PATHS, ["name"], kinds=YAML_KINDS, tails=YAML_TAILS).map(lambda c: ("pipe", c))))
def test_plan_of_seeds_and_pipelines_mutated_in_yamls_own_space(capsys, case):
    """Aliases, self-containing nodes, alias bombs and YAML 1.1 number spellings: a plan, or one
    line naming the file, at once."""
    which, (text, done) = case
    with tempfile.TemporaryDirectory() as tmp:
        if which == "seed":
            seed_path, pipe_path = write_tree(Path(tmp), text)
        else:
            seed_path, pipe_path = write_tree(Path(tmp), SEED_BYTES, text)
        rc, out, err = run_cli(capsys, "plan", pipe_path, "-n", "2")
        assert rc in (0, 2), (done, err)
        if rc == 2:
            assert_one_line(err, [seed_path, pipe_path])
        else:
            check_plans(json.loads(out), BASE_SEED if which == "pipe" else _loaded(text))


def _loaded(text: bytes) -> dict:
    from synth.io.config_files import load_yaml_mapping

    with tempfile.NamedTemporaryFile(suffix=".yaml") as f:
        f.write(text)
        f.flush()
        return load_yaml_mapping(f.name)


def check_run(out_dir: Path, capsys, pipe: dict) -> None:
    """A written session validates and keeps the pipeline's own bounds."""
    from synth.inspection.runfolder import RunFolder

    rc, _, err = run_cli(capsys, "validate", out_dir)
    assert rc == 0, err
    records = RunFolder(out_dir).records
    assert len(records) == 1
    rec = records[0]
    assert math.isfinite(rec.duration_s) and 0 < rec.duration_s < 60 * MAX_EXCHANGES
    law = pipe.get("timing", {}).get("tool_latency_ms") if isinstance(pipe.get("timing"), dict) else None
    lo, hi = support(law or {"dist": "lognormal", "median": 3000, "sigma": 0.8, "low": 500, "high": 60000})
    for w in rec.delegations:
        run_s = [s.sample for s in w.states if s.state == "RUNNING"]
        done_s = [s.sample for s in w.states if s.state in ("COMPLETED", "FAILED")]
        if run_s and done_s:
            assert lo - 1 <= 1000 * (done_s[0] - run_s[0]) / rec.sample_rate <= hi + 1


@settings(FUZZ, max_examples=8)
@given(case=mutated(BASE_PIPELINE, NUMERIC_PIPELINE_PATHS, ["name", "sessions", "timing"],
                    kinds=("scale", "scale", "negate", "replace"), tails=("", "", "", "", "dup"), most=1))
@example(case=(yaml.safe_dump(BASE_PIPELINE).encode(), []))  # the unmutated base writes a session
def test_run_of_mutated_pipelines(capsys, case):
    text, done = case
    with tempfile.TemporaryDirectory() as tmp:
        seed_path, pipe_path = write_tree(Path(tmp), SEED_BYTES, text)
        out_dir = Path(tmp) / "out"
        rc, out, err = run_cli(capsys, "run", pipe_path, "--out", out_dir, "--sessions", "1")
        if rc == 1:  # the documented outcome of a config whose every session is rejected
            assert "all 1 sessions were rejected" in err and "Traceback" not in err, (done, err)
            return
        assert rc in (0, 2), (done, err)
        if rc == 2:
            assert_one_line(err, [pipe_path, seed_path])
            assert not (out_dir / "shards").exists()
        else:
            check_run(out_dir, capsys, yaml.safe_load(text))


def _huge_exchanges() -> bytes:
    seed = copy.deepcopy(BASE_SEED)
    seed["exchanges"] = {"dist": "fixed", "value": 1e9}
    return yaml.safe_dump(seed, allow_unicode=True).encode()


@pytest.mark.parametrize("seed_bytes, args", [
    (_huge_exchanges(), ["plan", "{seed}"]),
    (b"\xff\xfe\x00garbage", ["run", "{pipe}", "--out", "{tmp}/out"]),
])
def test_subprocess_never_hangs_or_tracebacks(tmp_path, seed_bytes, args):
    """The same promise from a real ``synth`` process, bounded by a timeout."""
    seed_path, pipe_path = write_tree(tmp_path, seed_bytes)
    argv = [a.format(seed=seed_path, pipe=pipe_path, tmp=tmp_path) for a in args]
    r = subprocess.run([sys.executable, "-m", "synth.cli", *argv], capture_output=True, text=True, cwd=ROOT,
                       timeout=HANG_S, env={**os.environ, "COLUMNS": "300"})
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert_one_line(r.stderr, [seed_path, pipe_path])
