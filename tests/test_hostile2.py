"""Second hostile pass (issue 31): each case ends with one line naming the file/field/value and
exit 2, quickly, never a hang or a traceback."""

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from inspect_helpers import ROOT, small_run, synth

SEED = ROOT / "scenario_seeds" / "banking-en.yaml"


def _seed_with(tmp_path: Path, name: str, extra: str) -> Path:
    text = SEED.read_text(encoding="utf-8").replace("id: banking-en", f"id: {name}")
    p = tmp_path / f"{name}.yaml"
    p.write_text(text + extra, encoding="utf-8")
    return p


def _one_line_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    # 9 levels of 9 references: 9^10 values once expanded, 1.3 KB on disk
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(9)]
    seed = _seed_with(tmp_path, "bomb", "bomb:\n" + "".join(f"  {x}\n" for x in levels))
    r = synth("plan", seed, "-n", "1", check=False, timeout=60)
    _one_line_error(r, str(seed), "aliases expand to more than")


def test_a_self_referencing_alias_is_one_line_not_a_recursion_error(tmp_path):
    seed = _seed_with(tmp_path, "loop", "loop: &r [1, *r]\n")
    r = synth("plan", seed, "-n", "1", check=False, timeout=60)
    line = _one_line_error(r, str(seed), "refers to a node that contains it")
    assert re.search(r"line \d+", line)


def test_ordinary_aliases_still_load(tmp_path):
    from synth.io.config_files import load_yaml_mapping

    p = tmp_path / "p.yaml"
    p.write_text("pool: &v [a, b, c]\nfirst: *v\nsecond: *v\nnested: {x: *v, y: [*v, *v]}\n", encoding="utf-8")
    data = load_yaml_mapping(p)
    assert data["second"] == ["a", "b", "c"] and data["nested"]["y"] == [["a", "b", "c"]] * 2
    assert data == yaml.safe_load(p.read_text())


@pytest.mark.parametrize("field, value, bound", [
    ("acoustics.room_rays", 100_000_000, "50000"),
    ("acoustics.room_max_order", 40, "12"),
    ("sessions", 1_000_000_000, "1000000"),
    ("labels.vad_window_ms", 0, "5"),
])
def test_unbounded_numbers_are_refused_at_load(tmp_path, field, value, bound):
    cfg = yaml.safe_load((ROOT / "pipelines" / "demo-espeak.yaml").read_text())
    cfg["seeds"] = [str(ROOT / "scenario_seeds" / "*.yaml")]
    node = cfg
    *parents, last = field.split(".")
    for k in parents:
        node = node.setdefault(k, {})
    node[last] = value
    pipe = tmp_path / "pipe.yaml"
    pipe.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    out = tmp_path / "out"
    r = synth("run", pipe, "--out", out, check=False, timeout=120)
    _one_line_error(r, str(pipe), field, bound)
    assert not out.exists()  # refused before the run folder was made: the intended run is not blocked


def test_sessions_on_the_command_line_are_bounded(tmp_path):
    r = synth("run", ROOT / "pipelines" / "demo-espeak.yaml", "--sessions", "1000000000", "--out", tmp_path / "o",
              check=False, timeout=60)
    assert r.returncode == 2 and "1000000" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()


BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
sys.argv = ["synth", *sys.argv[1:]]
from synth.cli import main
main()
"""


@pytest.mark.parametrize("command, blocked, extra", [
    (["report", "RUN", "-o", "r.html"], {"matplotlib"}, "inspect"),
    (["preview", "RUN", "SESSION", "-o", "x.png"], {"matplotlib"}, "inspect"),
    (["publish", "RUN", "--repo-id", "a/b", "--dry-run", "-o", "hub"], {"huggingface_hub", "datasets"}, "inspect"),
])
def test_a_missing_extra_is_one_line_naming_it(tmp_path, tmp_path_factory, command, blocked, extra):
    import subprocess

    run = small_run(tmp_path_factory)
    session = "insp-000000"
    command = [str(run) if c == "RUN" else session if c == "SESSION" else c for c in command]
    code = BLOCK.format(BLOCKED=blocked)
    r = subprocess.run([sys.executable, "-c", code, *command], capture_output=True, text=True, cwd=tmp_path,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    line = _one_line_error(r, f"synth {command[0]} needs the package", f"duplexsynth[{extra}]")
    assert any(b in line for b in blocked)


def _start_run(out: Path, *extra):
    import os
    import subprocess

    return subprocess.Popen([sys.executable, "-m", "synth.cli", "run", ROOT / "pipelines" / "demo-espeak.yaml",
                             "--out", out, "--workers", "1", *extra], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "RAY_AUTH_MODE": "disabled"})


def _wait_for_lock(out: Path, proc, timeout=60):
    import time

    t0 = time.time()
    while not (out / ".synth-run.lock").exists() or not (out / ".synth-run.lock").read_text():
        assert proc.poll() is None and time.time() - t0 < timeout, "the first run ended before taking its lock"
        time.sleep(0.1)


def test_a_second_run_on_a_busy_folder_stops_and_mixes_nothing(tmp_path):
    import json

    out = tmp_path / "cc"
    first = _start_run(out, "--sessions", "12")
    _wait_for_lock(out, first)
    second = synth("run", ROOT / "pipelines" / "demo-espeak.yaml", "--sessions", "6", "--seed", "8", "--out", out,
                   check=False, timeout=120)
    _one_line_error(second, str(out), "in use by another synth run", f"pid {first.pid}")
    assert first.wait(timeout=300) == 0, first.stderr.read()[-2000:]
    import pyarrow.parquet as pq

    seeds = set(pq.read_table(out / "shards" / "parquet", columns=["seed"]).column("seed").to_pylist())
    assert seeds == {json.loads((out / "run.json").read_text())["config"]["seed"]} and 8 not in seeds
    assert pq.read_table(out / "shards" / "parquet").num_rows == 12
    synth("validate", out)
    again = synth("run", ROOT / "pipelines" / "demo-espeak.yaml", "--sessions", "12", "--out", out, timeout=300)
    assert again.returncode == 0 and "done 12 sessions" in again.stdout + again.stderr  # the lock is gone with the process that held it


def test_a_killed_run_leaves_no_lock_behind(tmp_path):
    import signal

    out = tmp_path / "killed"
    first = _start_run(out, "--sessions", "24")
    _wait_for_lock(out, first)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    r = synth("run", ROOT / "pipelines" / "demo-espeak.yaml", "--sessions", "24", "--out", out, timeout=300)
    assert r.returncode == 0 and "done 24 sessions" in r.stdout + r.stderr
    synth("validate", out)


def test_validate_finds_sessions_another_run_wrote_and_refuses_an_empty_run(tmp_path):
    import shutil

    pipe = ROOT / "pipelines" / "demo-espeak.yaml"
    a, b = tmp_path / "a", tmp_path / "b"
    synth("run", pipe, "--sessions", "2", "--out", a, timeout=300)
    synth("run", pipe, "--sessions", "2", "--seed", "8", "--out", b, timeout=300)
    assert "ok 2 sessions pass" in synth("validate", a).stdout + synth("validate", a).stderr
    shutil.copy(b / "shards" / "parquet" / "part-00000.parquet", a / "shards" / "parquet" / "part-00099.parquet")
    r = synth("validate", a, check=False)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "duplicate session" in out and "seed 8 but run.json's is" in out, out
    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(a / "run.json", empty / "run.json")
    r = synth("validate", empty, check=False)
    assert r.returncode == 1 and "an empty run is not a pass" in r.stdout + r.stderr


def test_banks_build_never_replaces_a_users_bank_or_writes_into_a_run(tmp_path):
    bank = tmp_path / "mine"
    (bank / "noise").mkdir(parents=True)
    (bank / "noise" / "fan.flac").write_bytes(b"not really audio")
    manifest = '{"path": "noise/fan.flac", "category": "stationary", "licence": "mine", "source": "my recorder"}\n'
    (bank / "manifest.jsonl").write_text(manifest)
    r = synth("banks", "build", "--out", bank, check=False, timeout=120)
    _one_line_error(r, str(bank), "not a generated bank")
    assert (bank / "manifest.jsonl").read_text() == manifest and sorted(p.name for p in bank.rglob("*")) == [
        "fan.flac", "manifest.jsonl", "noise"]
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    r = synth("banks", "build", "--out", run, check=False, timeout=120)
    _one_line_error(r, str(run), "is a run folder")
    assert sorted(p.name for p in run.iterdir()) == ["run.json"]


@pytest.mark.parametrize("value, needle", [
    ("runs/{nme}", "the only placeholder is {name} (got {nme})"),
    ("runs/{0}", "the only placeholder is {name} (got {0})"),
    ("runs/{name", "a malformed placeholder"),
])
def test_an_output_dir_with_a_bad_placeholder_is_one_line(tmp_path, value, needle):
    pipe = tmp_path / "p.yaml"
    pipe.write_text(yaml.safe_dump({"name": "t", "seeds": [str(ROOT / "scenario_seeds" / "*.yaml")],
                                    "output": {"dir": value}}))
    r = synth("plan", pipe, "-n", "1", "-o", tmp_path / "p.jsonl", check=False, timeout=60)
    _one_line_error(r, str(pipe), "output.dir", needle)


@pytest.mark.parametrize("field, value", [("executor.workers", 100_000), ("executor.max_retries", 10_000),
                                          ("output.sessions_per_shard", 10**9)])
def test_executor_and_output_numbers_are_bounded(tmp_path, field, value):
    from synth.errors import UserError
    from synth.io.config_files import load_yaml_model
    from synth.schema.config import PipelineConfig

    section, key = field.split(".")
    pipe = tmp_path / "p.yaml"
    pipe.write_text(yaml.safe_dump({"name": "t", "seeds": ["x"], section: {key: value}}))
    with pytest.raises(UserError, match=rf"{field}: Input should be less than or equal to"):
        load_yaml_model(pipe, PipelineConfig)


def test_report_refuses_an_output_that_is_not_html(tmp_path, tmp_path_factory):
    run = small_run(tmp_path_factory)
    target = tmp_path / "r.json"
    r = synth("report", run, "-o", target, check=False, timeout=120)
    _one_line_error(r, "-o", "HTML file", "r.json")
    assert not target.exists()


def test_export_and_publish_refuse_repeated_session_ids_and_report_warns(tmp_path, tmp_path_factory):
    import shutil

    run = small_run(tmp_path_factory)
    merged = tmp_path / "merged"
    shutil.copytree(run, merged)
    shutil.copy(merged / "shards" / "parquet" / "part-00000.parquet", merged / "shards" / "parquet" / "part-00090.parquet")
    for args, needle in [(["export", merged, "--format", "textgrid", "-o", tmp_path / "tg"], "export would overwrite"),
                         (["publish", merged, "--repo-id", "a/b", "--dry-run", "-o", tmp_path / "hub"],
                          "publish would overwrite")]:
        r = synth(*args, check=False, timeout=300)
        _one_line_error(r, str(merged), "written more than once", "insp-000000 x2", needle)
    assert not (tmp_path / "tg").exists() or not any((tmp_path / "tg").iterdir())
    r = synth("report", merged, "-o", tmp_path / "r.html", timeout=300)
    assert "written more than once" in r.stdout + r.stderr
    r = synth("export", run, "--format", "textgrid", "-o", run, check=False, timeout=300)
    _one_line_error(r, "is a run folder")


def test_minicpm_decision_lag_loses_no_system_word_and_is_bounded(tmp_path, tmp_path_factory):
    from synth.export.minicpm import SPEAK, TURN_EOS, session_units
    from synth.inspection.runfolder import RunFolder

    run = RunFolder(small_run(tmp_path_factory))
    session = next(iter(run.sessions()))

    def spoken(units):
        text = "".join(u["output"].split(SPEAK, 1)[1] for u in units if SPEAK in u["output"])
        return len(text.replace(TURN_EOS, "").replace("<|chunk_eos|>", "")), text.count(TURN_EOS)

    base = spoken(session_units(session, 0))
    assert base[0] > 100 and base[1] >= 1
    for lag in (1, 3, 5):
        units = session_units(session, lag)
        chars, ends = spoken(units)
        assert ends == base[1] and abs(chars - base[0]) <= 8 * lag, (lag, chars, base)  # only joining spaces move
    r = synth("export", run.path, "--format", "minicpm", "--decision-lag", "20", "-o", tmp_path / "m", check=False)
    _one_line_error(r, "--decision-lag", "0..5", "got 20")


@pytest.mark.parametrize("sid", ["a/b", "/etc/passwd", "esc\x1b[31mred", "new\nline", "x" * 10_000, "dotted.id", ""])
def test_plan_session_ids_that_cannot_name_a_file_are_refused_at_load(tmp_path, sid):
    import json

    plans = tmp_path / "plans.jsonl"
    plans.write_text(json.dumps({"session_id": sid, "seed_id": "banking-en", "plan": {}}) + "\n")
    r = synth("run", ROOT / "pipelines" / "demo-espeak.yaml", "--plans", plans, "--out", tmp_path / "o",
              check=False, timeout=120)
    line = _one_line_error(r, str(plans), "line 1: session_id", "letters, digits")
    assert "\x1b" not in r.stderr and len(line) < 400
    assert not (tmp_path / "o").exists()


def _proc_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()  # state, ppid, ...
    except OSError:
        return None


def test_killing_the_driver_leaves_no_pool_worker_behind(tmp_path):
    import os
    import signal
    import time

    out = tmp_path / "orphans"
    first = _start_run(out, "--sessions", "48", "--workers", "2")  # the last --workers wins
    _wait_for_lock(out, first)

    def children():
        return [int(d) for d in os.listdir("/proc") if d.isdigit()
                and (st := _proc_stat(int(d))) is not None and int(st[1]) == first.pid]

    t0 = time.time()
    while len(children()) < 2 and time.time() - t0 < 60:
        time.sleep(0.2)
    workers = children()
    assert workers, "the run started no pool worker"
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)

    def alive():
        return [w for w in workers if (st := _proc_stat(w)) is not None and st[0] != "Z"]

    t0 = time.time()
    while alive() and time.time() - t0 < 30:
        time.sleep(0.2)
    assert not alive(), f"pool workers {alive()} outlived their killed driver"


def test_a_long_pipeline_name_is_one_short_line(tmp_path):
    pipe = tmp_path / "p.yaml"
    pipe.write_text(yaml.safe_dump({"name": "a" * 120, "seeds": [str(ROOT / "scenario_seeds" / "*.yaml")]}))
    r = synth("plan", pipe, "-n", "1", "-o", tmp_path / "p.jsonl", check=False, timeout=60)
    line = _one_line_error(r, str(pipe), "name: String should have at most 64 characters", "(120 long)")
    assert len(line) < len(str(pipe)) + 160


def test_a_path_that_is_not_utf8_is_one_line(tmp_path):
    import os
    import subprocess

    bad = os.fsencode(tmp_path) + b"/bad\xffdir"
    for args in ([b"run", str(ROOT / "pipelines" / "demo-espeak.yaml").encode(), b"--out", bad],
                 [b"validate", bad], [b"export", bad, b"--format", b"rttm", b"-o", bad + b"x"]):
        r = subprocess.run([os.fsencode(sys.executable), b"-m", b"synth.cli", *args], cwd=ROOT, capture_output=True,
                           timeout=120)
        err = r.stderr.decode("utf-8", "replace")
        assert r.returncode == 2 and "not UTF-8" in err and "\\xff" in err and "Traceback" not in err, err[-1500:]
        assert len([x for x in err.splitlines() if x.strip()]) == 1
    assert not os.path.exists(bad)


@pytest.mark.parametrize("kind", ["loop", "dangling"])
def test_a_bad_symlink_among_seed_files_is_one_line(tmp_path, kind):
    import os
    import shutil

    seeds = tmp_path / "seeds"
    seeds.mkdir()
    shutil.copy(SEED, seeds / SEED.name)
    if kind == "loop":
        os.symlink("b.yaml", seeds / "a.yaml")
        os.symlink("a.yaml", seeds / "b.yaml")
    else:
        os.symlink(tmp_path / "missing.yaml", seeds / "gone.yaml")
    pipe = tmp_path / "p.yaml"
    pipe.write_text(yaml.safe_dump({"name": "t", "seeds": ["seeds/*.yaml"]}))
    r = synth("plan", pipe, "-n", "1", "-o", tmp_path / "o.jsonl", check=False, timeout=60)
    _one_line_error(r, str(pipe), "seeds[0]", "cannot be read", "symlink loop" if kind == "loop" else "No such file")


def test_validate_reports_a_huge_num_samples_instead_of_running_out_of_memory(tmp_path, tmp_path_factory):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    run = tmp_path / "edited"
    shutil.copytree(small_run(tmp_path_factory), run)
    pf = run / "shards" / "parquet" / "part-00000.parquet"
    table = pq.read_table(pf)
    n = table.column("num_samples").to_pylist()
    n[0] = 10**15
    table = table.set_column(table.column_names.index("num_samples"), "num_samples", pa.array(n, pa.int64()))
    pq.write_table(table, pf)
    r = synth("validate", run, check=False, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "record_shape" in out and "num_samples 1000000000000000" in out and "Traceback" not in out


def test_a_renamed_parquet_column_is_one_line_in_every_reader(tmp_path, tmp_path_factory):
    import shutil

    import pyarrow.parquet as pq

    run = tmp_path / "renamed"
    shutil.copytree(small_run(tmp_path_factory), run)
    for pf in (run / "shards" / "parquet").glob("*.parquet"):
        t = pq.read_table(pf)
        pq.write_table(t.rename_columns(["lang_x" if n == "language" else n for n in t.column_names]), pf)
    for args in (["report", run, "-o", tmp_path / "r.html"], ["export", run, "--format", "rttm", "-o", tmp_path / "x"],
                 ["preview", run, "insp-000000", "-o", tmp_path / "p.png"],
                 ["publish", run, "--repo-id", "a/b", "--dry-run", "-o", tmp_path / "hub"]):
        r = synth(*args, check=False, timeout=300)
        _one_line_error(r, "part-0000", "language", "field required")


@pytest.mark.parametrize("field, value", [
    ("timing.user_gap_ms", {"dist": "normal", "mean": 1.0e12, "std": 10}),
    ("timing.gate_base_ms", 1.0e9),
    ("timing.zh_gap_offset_ms", -1.0e6),
    ("audio.speaker_rms_dbfs", -500),
    ("qa.asr.retry_rate_factors", [0.88, 50.0]),
    ("planner.llm.timeout_s", 1.0e9),
])
def test_every_remaining_number_is_bounded_at_load(tmp_path, field, value):
    """A number past its bound is one line naming the file and the field, before anything runs."""
    import yaml

    cfg = {"name": "b", "seeds": [str(ROOT / "scenario_seeds" / "banking-en.yaml")]}
    node = cfg
    *parents, leaf = field.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    pipe = tmp_path / "pipe.yaml"
    pipe.write_text(yaml.safe_dump(cfg))
    r = synth("plan", pipe, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and str(pipe) in line and field in line, line


def test_running_out_of_memory_names_the_limit_instead_of_hanging_or_advising_a_rerun(tmp_path):
    """Case 10: under an address-space limit too small to load the libraries (``ulimit -v``), the
    run ends at once with one line that says it ran out of memory under that limit."""
    import os
    import subprocess

    pipe, out = ROOT / "pipelines" / "demo-espeak.yaml", tmp_path / "lowmem"
    cmd = f'ulimit -v 400000 && exec "{sys.executable}" -m synth.cli run "{pipe}" --sessions 1 --out "{out}"'
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300", "RAY_AUTH_MODE": "disabled"}
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    said = [x for x in (r.stdout + r.stderr).splitlines() if "out of memory" in x]
    assert said and "ulimit -v" in said[-1] and "390 MB" in said[-1], r.stdout[-1000:] + r.stderr[-1000:]
    assert "rerun the same command" not in r.stdout + r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("failure, is_memory", [
    ("RuntimeError: session s-1 (banking-en): MemoryError:", True),
    ("RuntimeError: session s-1 (banking-en): OSError: /tmp/x/libespeak-ng.so: failed to map segment from shared object",
     True),
    ("RuntimeError: session s-1 (banking-en): OSError: [Errno 12] Cannot allocate memory", True),
    ("RuntimeError: session s-1 (banking-en): OSError: [Errno 28] No space left on device", False),
    ("RuntimeError: session s-1 (banking-en): ValueError: bad", False),
])
def test_a_task_failure_is_told_apart_as_out_of_memory(failure, is_memory):
    from synth.executor.limits import memory_advice, out_of_memory

    assert out_of_memory(failure) is is_memory
    assert "out of memory" in memory_advice() and "rerun" in memory_advice()  # says a rerun cannot help


@pytest.mark.parametrize("text, lang, script", [
    ("مرحبا", "en", "Arabic"), ("Привет", "en", "Cyrillic"), ("hello", "zh", "Latin"), ("こんにちは", "zh", "Hiragana"),
])
def test_a_word_written_in_a_script_its_voice_cannot_read_is_a_plan_reject(text, lang, script):
    """Text in and out: a plans-file word whose letters do not fit its declared language (what the
    voice of that language reads) makes the plan a reject naming the word and the script."""
    from synth.errors import SessionReject
    from synth.schema.seed import ScenarioSeed
    from synth.session import given_plan

    seed = ScenarioSeed.model_validate(yaml.safe_load(SEED.read_text(encoding="utf-8")))
    plan = {"session_id": "s-1", "scenario_id": seed.id, "language": "en", "planner": "file",
            "events": [{"id": "e1", "speaker": "user", "act": "request", "floor_intent": "take",
                        "words": [{"text": "well", "lang": "en"}, {"text": text, "lang": lang}]}]}
    with pytest.raises(SessionReject) as e:
        given_plan(json.dumps(plan, ensure_ascii=False), seed, "s-1")
    assert e.value.reason == "plan_invalid" and "events.0.words.1" in e.value.detail
    assert text in e.value.detail and script in e.value.detail and f"declared {lang}" in e.value.detail
    for fine in ({"text": "café", "lang": "en"}, {"text": "3点", "lang": "zh"}, {"text": "[laughter]", "lang": "zh"}):
        plan["events"][0]["words"][1] = fine  # accents, digits and sound tags are fine
        assert given_plan(json.dumps(plan, ensure_ascii=False), seed, "s-1").events[0].words[1].text == fine["text"]


def test_a_validation_error_is_shortened_to_its_field_and_message_not_its_link():
    """What the LLM planner sends back to the model in a repair (and writes in a reject) is what went
    wrong, not the last line of pydantic's text (a documentation link)."""
    from pydantic import ValidationError

    from synth.errors import short_error
    from synth.schema.plan import PlannedWord

    with pytest.raises(ValidationError) as e:
        PlannedWord(text="Привет", lang="en")
    line = short_error(e.value)
    assert "Привет" in line and "Cyrillic" in line and "http" not in line
    assert short_error(ValueError("first\nsecond")) == "second"


def test_settings_that_make_odd_data_are_warned_and_counted(tmp_path, tmp_path_factory):
    """Valid but odd: one voice for three speakers, a media-length law that mostly outruns the
    bank's clips. Each is one warning line naming the pipeline and field, and is listed in
    stats.json; the default settings (the small run) warn about nothing."""
    import json

    clean = small_run(tmp_path_factory)
    assert json.loads((clean / "stats.json").read_text())["config_warnings"] == []
    pipe = tmp_path / "odd.yaml"
    pipe.write_text(yaml.safe_dump({
        "name": "odd", "seeds": [str(ROOT / "scenario_seeds" / "banking-en.yaml")], "sessions": 1,
        "tts": {"engine": "espeak", "variants": ["m1", "m1"]},
        "paralinguistics": {"media_s": {"dist": "uniform", "a": 3, "b": 60}},
        "acoustics": {"banks": [{"path": str(ROOT / "noise_banks" / "generated"), "generate": True}]}}))
    r = synth("run", pipe, "--out", tmp_path / "out")
    warned = [x for x in (r.stdout + r.stderr).splitlines() if x.startswith("warning:")]
    assert [w.split(": ")[2] for w in warned] == ["tts.variants", "paralinguistics.media_s"], warned
    assert all(w.startswith(f"warning: {pipe}: ") for w in warned)
    assert "1 distinct voice for 3 speakers" in warned[0] and "12.0 s" in warned[1]
    counted = json.loads((tmp_path / "out" / "stats.json").read_text())["config_warnings"]
    assert counted == [w.removeprefix(f"warning: {pipe}: ") for w in warned]


def test_plans_with_sessions_says_which_gives_the_sessions(tmp_path):
    """Commands are honest about their options: ``--sessions`` beside ``--plans`` would be ignored."""
    plans = tmp_path / "p.jsonl"
    synth("plan", ROOT / "pipelines" / "demo-espeak.yaml", "-n", "2", "-o", plans)
    r = synth("run", ROOT / "pipelines" / "demo-espeak.yaml", "--plans", plans, "--sessions", "5",
              "--out", tmp_path / "out", check=False, timeout=120)
    line = _one_line_error(r, "--sessions", "--plans", str(plans))
    assert "one per plan" in line and not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, said", [
    (["synth", "run", "p.yaml"], "finished tasks are kept: rerun the same command to resume"),
    (["synth", "--debug", "export", "r", "--format", "moshi"], "the export is incomplete"),
    (["synth", "validate", "r"], "interrupted"),
])
def test_the_interrupted_message_belongs_to_its_command(monkeypatch, capsys, argv, said):
    """Only ``run`` resumes tasks: another command interrupted does not advise a resume it cannot do."""
    import os

    from synth import cli

    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(os, "_exit", lambda code: (_ for _ in ()).throw(SystemExit(code)))
    with pytest.raises(SystemExit) as e:
        cli._interrupted()
    err = capsys.readouterr().err.strip()
    assert e.value.code == 130 and err.startswith("interrupted") and said in err
    assert ("resume" in err) == (argv[1] == "run")


def test_view_answers_a_session_it_cannot_show_with_an_error_page(tmp_path, tmp_path_factory, capsys):
    """A session whose audio does not decode: its picture and mix are a 500 page naming the session
    and the cause (one line on stderr, no traceback); the index and the other sessions still work."""
    import shutil
    import threading
    import urllib.error
    import urllib.request

    from helpers import flip_flac
    from synth.inspection.viewer import make_server

    run = tmp_path / "run"
    shutil.copytree(small_run(tmp_path_factory), run)
    rows = flip_flac(sorted((run / "shards" / "parquet").glob("*.parquet"))[0])
    broken, fine = rows[0]["session_id"], rows[1]["session_id"]
    server = make_server(run)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for path in (f"/preview/{broken}.png", f"/audio/{broken}/mix.flac"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(url + path, timeout=60)
            page = e.value.read().decode()
            assert e.value.code == 500 and path in page and "cannot be shown" in page
        assert urllib.request.urlopen(url + "/", timeout=60).status == 200
        assert urllib.request.urlopen(f"{url}/preview/{fine}.png", timeout=120).status == 200
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("view: ") == 2 and broken in err


def test_a_killed_worker_fails_only_its_own_task_naming_the_signal(tmp_path):
    """Run integrity: SIGKILL of one pool worker (what the OOM killer does) fails the task it was
    running, with the signal named; the other tasks finish; a rerun completes the run."""
    import os
    import signal
    import time

    out = tmp_path / "killed-worker"
    run = _start_run(out, "--sessions", "8", "--workers", "2")  # 2 tasks (4 sessions per shard)
    _wait_for_lock(out, run)

    def workers():
        return [int(d) for d in os.listdir("/proc") if d.isdigit()
                and (st := _proc_stat(int(d))) is not None and int(st[1]) == run.pid]

    t0 = time.time()
    while len(workers()) < 2 and time.time() - t0 < 60:
        time.sleep(0.1)
    time.sleep(1.0)  # both are inside their tasks
    victim = min(workers())
    os.kill(victim, signal.SIGKILL)
    assert run.wait(timeout=300) == 1
    err = run.stderr.read()
    failed = [x for x in err.splitlines() if " failed:" in x and x.startswith("task ")]
    assert len(failed) == 1 and "killed by SIGKILL" in failed[0] and "OOM" in failed[0], err[-2000:]
    assert "1 of 2 tasks failed" in err and "Traceback" not in err
    assert len(list((out / "tasks").glob("*.done.json"))) == 1  # the other task finished
    again = synth("run", ROOT / "pipelines" / "demo-espeak.yaml", "--sessions", "8", "--out", out, timeout=300)
    assert "done 8 sessions" in again.stdout + again.stderr
    synth("validate", out)
