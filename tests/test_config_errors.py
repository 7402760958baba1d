"""Bad configs, seeds, bank files and LLM replies: refused at load with one line naming file,
field and value (exit 2), or turned into a reject; never a traceback or nonsense accepted.

The CLI runs in-process (``synth.cli.main``), so these stay fast.
"""

from __future__ import annotations

import copy
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import yaml

from synth import cli
from synth.errors import SessionReject

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "scenario_seeds" / "smart-home-en.yaml"


def run_cli(capsys, *args) -> tuple[int, str, str]:
    """``synth ARGS`` in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    argv = sys.argv
    sys.argv = ["synth", *map(str, args)]
    try:
        cli.main()
        rc = 0
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    finally:
        sys.argv = argv
    out, err = capsys.readouterr()
    return rc, out, err


def refused(capsys, *args) -> str:
    """The one error line of a command that must exit 2."""
    rc, _, err = run_cli(capsys, *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, err
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


def seed_file(tmp_path: Path, change) -> Path:
    data = yaml.safe_load(SEED.read_text("utf-8"))
    change(data)
    path = tmp_path / "seeds" / f"{data['id']}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(data, allow_unicode=True), "utf-8")
    return path


def pipeline_file(tmp_path: Path, extra: dict, seed_change=lambda d: None) -> Path:
    seed_file(tmp_path, seed_change)
    data = {"name": "t", "seeds": ["seeds/*.yaml"], "sessions": 1, "acoustics": {"room": False, "noise": False, "banks": []},
            **copy.deepcopy(extra)}
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), "utf-8")
    return path


# --- the YAML loader (plan and run share it) ---------------------------------------------------

@pytest.mark.parametrize("content, expect", [
    (b"id: a\nid: b\n", "given twice"),
    (b"id: x\nenvironment:\n\tkind: home\n", "line 3"),
    (b"\x00\x01\x02binary", "NUL"),
    (b"id: caf\xe9\n", "not UTF-8"),
    (b"- a list\n", "expected a mapping"),
])
def test_plan_uses_the_loader(capsys, tmp_path, content, expect):
    path = tmp_path / "smart-home-en.yaml"
    path.write_bytes(content)
    line = refused(capsys, "plan", path)
    assert str(path) in line and expect in line


def test_plan_on_a_folder(capsys, tmp_path):
    folder = tmp_path / "smart-home-en.yaml"
    folder.mkdir()
    line = refused(capsys, "plan", folder)
    assert str(folder) in line and "directory" in line.lower()


@pytest.mark.parametrize("literal", [".nan", ".inf", "-.inf"])
def test_non_finite_number_in_a_seed(capsys, tmp_path, literal):
    path = seed_file(tmp_path, lambda d: None)
    text = path.read_text("utf-8") + f"weight: {literal}\n"
    path.write_text(text.replace("weight: 1.0\n", "", 1), "utf-8")
    line = refused(capsys, "plan", path)
    assert str(path) in line and "weight" in line and "finite" in line


def test_nan_snr_refused(capsys, tmp_path):
    path = seed_file(tmp_path, lambda d: d["environment"].update(snr_db={"dist": "fixed", "value": float("nan")}))
    line = refused(capsys, "plan", path)
    assert "environment.snr_db.value" in line and "nan" in line


# --- seed bounds ---------------------------------------------------------------------------------

def _env(**kw):
    return lambda d: d["environment"].update(kw)


def _room(**kw):
    return lambda d: d["environment"]["room"].update(kw)


@pytest.mark.parametrize("change, field, shown", [
    (lambda d: d.update(exchanges={"dist": "fixed", "value": 1e9}), "exchanges", "1000000000"),
    (lambda d: d.update(exchanges={"dist": "fixed", "value": 0}), "exchanges", "0"),
    (lambda d: d.update(exchanges={"dist": "fixed", "value": 2.5}), "exchanges", "2.5"),
    (lambda d: d.update(exchanges={"dist": "normal", "mean": 5, "std": 1}), "exchanges", "-inf"),
    (_room(length_m={"dist": "uniform", "a": -3, "b": 4}), "environment.room.length_m", "-3"),
    (_room(rt60_s={"dist": "fixed", "value": -0.3}), "environment.room.rt60_s", "-0.3"),
    (_env(user_distance_m={"dist": "fixed", "value": -1}), "environment.user_distance_m", "-1"),
    (lambda d: d.update(tools=d["tools"] + d["tools"][:1]), "tools", "device_control"),
])
def test_seed_out_of_bounds(capsys, tmp_path, change, field, shown):
    path = seed_file(tmp_path, change)
    line = refused(capsys, "plan", path)
    assert str(path) in line and f" {field}:" in line and shown in line


def test_third_party_phenomena_need_a_third_party(capsys, tmp_path):
    path = seed_file(tmp_path, lambda d: d["personas"].pop("third_party"))
    line = refused(capsys, "plan", path)
    assert str(path) in line and "third_party" in line and "user_to_third_party" in line


def test_a_valid_fractional_law_for_exchanges_is_kept(capsys, tmp_path):
    path = seed_file(tmp_path, lambda d: d.update(exchanges={"dist": "uniform", "a": 3, "b": 4.5}))
    rc, out, err = run_cli(capsys, "plan", path)
    assert rc == 0, err
    assert json.loads(out)["events"]


# --- pipeline bounds -----------------------------------------------------------------------------

@pytest.mark.parametrize("extra, field, shown", [
    ({"paralinguistics": {"fillers": {"en": {}, "zh": {"嗯": 1}}}}, "paralinguistics.fillers", "en"),
    ({"paralinguistics": {"fillers": {"en": {"um": -1}, "zh": {"嗯": 1}}}}, "paralinguistics.fillers", "-1"),
    ({"paralinguistics": {"filler_per_100_words": {"en": {"dist": "fixed", "value": -2},
                                                   "zh": {"dist": "fixed", "value": 1}}}},
     "paralinguistics.filler_per_100_words.en", "-2"),
    ({"timing": {"tool_latency_ms": {"dist": "normal", "mean": 100, "std": 50}}}, "timing.tool_latency_ms", "-inf"),
    ({"timing": {"gate_min_ms": -5}}, "timing.gate_min_ms", "-5"),
    ({"timing": {"result_ttl_ms": -1}}, "timing.result_ttl_ms", "-1"),
    ({"timing": {"within_turn_pause_ms": {"dist": "fixed", "value": -10}}}, "timing.within_turn_pause_ms", "-10"),
    ({"seed": 1, "audio": {"peak_limit": float("inf")}}, "audio.peak_limit", "inf"),
])
def test_pipeline_out_of_bounds(capsys, tmp_path, extra, field, shown):
    path = pipeline_file(tmp_path, extra)
    line = refused(capsys, "run", path, "--out", tmp_path / "out")
    assert str(path) in line and f" {field}" in line and shown in line
    assert not (tmp_path / "out").exists()


def test_unknown_espeak_variant_names_the_known_ones(capsys, tmp_path):
    path = pipeline_file(tmp_path, {"tts": {"variants": ["nosuchvariant"]}})
    line = refused(capsys, "run", path, "--out", tmp_path / "out")
    assert str(path) in line and "tts.variants" in line and "'nosuchvariant'" in line and "m3" in line


def test_unknown_espeak_voice_names_the_file(capsys, tmp_path):
    path = pipeline_file(tmp_path, {"tts": {"voices": {"en": "xx-nosuch", "zh": "cmn"}}})
    line = refused(capsys, "run", path, "--out", tmp_path / "out")
    assert str(path) in line and "'xx-nosuch" in line


def test_unknown_domain_names_the_seed(capsys, tmp_path):
    path = seed_file(tmp_path, lambda d: d.update(domain="underwater_basket_weaving"))
    line = refused(capsys, "plan", path)
    assert str(path) in line and "underwater_basket_weaving" in line


# --- text that TTS cannot speak ------------------------------------------------------------------

def test_control_characters_and_emoji_are_not_said():
    from synth.schema.plan import PlannedWord
    from synth.text import tokenize

    assert [w.text for w in tokenize("Hi 🤖 there\x07, 你好😀吗")] == ["Hi", "there,", "你好", "吗"]
    assert PlannedWord(text="ok\u200b\x1b👍🏽", lang="en").text == "ok"
    with pytest.raises(ValueError, match="nothing a voice can say"):
        PlannedWord(text="🤖\x07", lang="en")


def test_emoji_in_a_seed_never_reach_the_plan(capsys, tmp_path):
    path = seed_file(tmp_path, lambda d: d["personas"]["user"].update(name="Laura 🤖\x07"))
    rc, out, err = run_cli(capsys, "plan", path, "-n", "3")
    assert rc == 0, err
    words = [w["text"] for p in json.loads(out) for e in p["events"] for w in e["words"]]
    assert words and not any(c in w for w in words for c in "🤖\x07")


# --- QA ------------------------------------------------------------------------------------------

def test_qa_rejects_a_silent_channel():
    from synth.stages.qa import check_silent

    voice = 0.3 * np.sin(np.arange(16000) / 5)
    assert check_silent({"user_side": voice, "system": voice}) == []
    assert check_silent({"user_side": np.zeros(16000), "system": voice}) == ["silent_channel:user_side"]
    assert check_silent({"user_side": voice, "system": np.full(10, np.nan)}) == ["silent_channel:system"]


# --- banks ---------------------------------------------------------------------------------------

def _bank(folder: Path, names: list[str], truncate: set[str] = frozenset(), paths=None,
          licence: str = "CC0-1.0") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tone = (0.3 * np.sin(np.arange(48000) / 7)).astype("float32")
    lines = []
    for name in names:
        sf.write(folder / name, tone, 16000)
        if name in truncate:
            raw = (folder / name).read_bytes()
            (folder / name).write_bytes(raw[: len(raw) // 2])
        lines.append(json.dumps({"path": (paths or {}).get(name, name), "category": "hum", "licence": licence,
                                 "duration_s": 3.0, "sample_rate": 16000}))
    (folder / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_truncated_flac_is_skipped_and_reported_once(capsys, tmp_path):
    bank = _bank(tmp_path / "b", ["good.flac", "cut.flac"], truncate={"cut.flac"})
    rc, out, err = run_cli(capsys, "banks", "check", bank)
    assert rc == 0, err
    assert err.count("cut.flac") == 1 and "good.flac" not in err
    assert "1 files usable, 1 skipped" in err


def test_a_bank_with_no_readable_file_is_one_error(capsys, tmp_path):
    bank = _bank(tmp_path / "b", ["a.flac", "b.flac"], truncate={"a.flac", "b.flac"})
    line = refused(capsys, "banks", "check", bank)
    assert str(bank) in line and "no readable audio file" in line


def test_manifest_path_outside_the_bank_is_refused(capsys, tmp_path):
    bank = _bank(tmp_path / "b", ["a.flac"], paths={"a.flac": "../../../../etc/hostname.wav"})
    line = refused(capsys, "banks", "check", bank)
    assert "manifest.jsonl" in line and "outside the bank" in line and "hostname" in line


@pytest.mark.parametrize("licence, ok", [
    ("free", False), ("CC-BY-4", False), ("cc by", False), ("", False),
    ("CC-BY-SA-3.0", True), ("MIT OR CC0-1.0", True), ("LicenseRef-my-terms", True), ("cc-by-nc-4.0", True),
])
def test_a_bank_licence_is_an_spdx_expression_or_a_hub_id(capsys, tmp_path, licence, ok):
    bank = _bank(tmp_path / "b", ["a.flac"], licence=licence)
    if ok:
        rc, out, err = run_cli(capsys, "banks", "check", bank)
        assert rc == 0 and "1 files usable" in err, err
        return
    line = refused(capsys, "banks", "check", bank)
    assert "manifest.jsonl:1: licence:" in line and repr(licence) in line, line


def test_noise_category_no_bank_has(capsys, tmp_path):
    bank = _bank(tmp_path / "b", ["a.flac"])
    path = pipeline_file(tmp_path, {"acoustics": {"room": False, "noise": True, "banks": [{"path": str(bank)}]}},
                         _env(noise_beds=["hum", "thunder"], noise_event_prob=0.0))
    line = refused(capsys, "run", path, "--out", tmp_path / "out")
    assert "smart-home-en.yaml" in line and "environment.noise_beds" in line and "'thunder'" in line


# --- LLM replies ---------------------------------------------------------------------------------

class RawServer:
    """A real HTTP server on 127.0.0.1 answering every request with one fixed body."""

    def __init__(self, body: bytes, content_type: str, models_status: int = 200):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "GET" and models_status != 200:  # GET /models: the endpoint check
                    self.send_response(models_status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


NO_CHOICES = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}).encode()


@pytest.mark.parametrize("body, content_type, reason", [
    (b"<html><body>Welcome to nginx</body></html>", "text/html", "llm_bad_response"),
    (b'{"id": "x", "object": "chat.comp', "application/json", "llm_bad_response"),
    (NO_CHOICES, "application/json", "llm_no_choices"),
])
def test_bad_llm_replies_are_rejects_and_never_cached(tmp_path, body, content_type, reason):
    from synth.backends.llm.client import ChatClient
    from synth.schema.config import LLMConfig

    with RawServer(body, content_type) as srv:
        cfg = LLMConfig(base_url=srv.url, model="m", max_retries=0, response_format="plain")
        client = ChatClient(cfg, cache_dir=tmp_path / "cache")
        with pytest.raises(SessionReject) as got:
            client.complete(lambda mode: [{"role": "user", "content": "hi"}], {}, 0, 256)
    assert got.value.reason == reason
    assert not list((tmp_path / "cache").rglob("*.json"))


def test_html_replies_during_a_run_are_rejects_and_the_run_finishes(capsys, tmp_path):
    """A server that passes the endpoint check (no /models: 404) and then answers every chat
    request with an HTML page: each session is an llm_bad_response reject, no task fails."""
    path = pipeline_file(tmp_path, {"sessions": 2, "output": {"sessions_per_shard": 1}})
    out = tmp_path / "out"
    with RawServer(b"<html><body>Welcome to nginx</body></html>", "text/html", models_status=404) as srv:
        rc, _, err = run_cli(capsys, "run", path, "--out", out, "--workers", "1", "--llm-base-url", srv.url,
                             "--llm-model", "m", "--llm-cache-dir", tmp_path / "cache")
    assert rc == 1 and "Traceback" not in err, err
    assert "failed" not in err and "all 2 sessions were rejected" in err, err
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in rejects] == ["llm_bad_response"] * 2
    assert sorted(p.name for p in (out / "tasks").glob("*.done.json")) == ["00000.done.json", "00001.done.json"]
    assert not list((tmp_path / "cache").rglob("*.json"))


def test_html_endpoint_is_one_line(capsys, tmp_path):
    with RawServer(b"<html>hello</html>", "text/html") as srv:
        line = refused(capsys, "plan", SEED, "--llm-base-url", srv.url, "--llm-model", "m",
                       "--llm-cache-dir", tmp_path / "cache")
    assert "planner.llm.base_url" in line and srv.url in line
    assert "text/html, '<html>hello</html>'" in line and "attribute" not in line  # not openai's internal error


def test_unwritable_llm_cache_dir_found_before_the_run(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    path = pipeline_file(tmp_path, {})
    line = refused(capsys, "run", path, "--out", tmp_path / "out", "--llm-base-url", "http://127.0.0.1:9/v1",
                   "--llm-model", "m", "--llm-cache-dir", blocker / "cache")
    assert "cache_dir" in line and str(blocker) in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("tts, field, shown", [
    ({"engine": "piper", "models": {"en": "/nope/x.onnx"}}, "tts.models.en", "/nope/"),
    ({"engine": "piper", "variants": ["speaker-7"]}, "tts.variants", "'speaker-7'"),
    ({"engine": "coqui", "model_path": "/nope/folder"}, "tts.model_path", "/nope/"),
    ({"engine": "kokoro", "voices_path": "/nope/v.bin"}, "tts.voices_path", "/nope/"),
])
def test_engine_file_errors_name_the_pipeline(capsys, tmp_path, tts, field, shown):
    import importlib.util

    if tts["engine"] == "coqui" and importlib.util.find_spec("TTS") is None:  # not in the test extra
        field, shown = "tts.engine", "pip install 'duplexsynth[coqui]'"  # the missing package is said first
    path = pipeline_file(tmp_path, {"tts": tts})
    line = refused(capsys, "run", path, "--out", tmp_path / "out")
    assert line.startswith(f"error: {path}: {field}:") and shown in line
