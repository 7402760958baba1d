"""synth preview and synth report on a small real run."""

import base64
import json
import re
import struct

import numpy as np
import pytest

from inspect_helpers import SESSIONS, run_dir, small_run, synth  # noqa: F401  (run_dir, sessions: shared fixtures)
from synth.inspection import measures
from synth.inspection.preview import DPI, HEIGHT_IN, WIDTH_IN
from synth.inspection.runfolder import RunFolder


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_preview_png_has_the_expected_size_and_content(run_dir, tmp_path):
    sid = RunFolder(run_dir).records[0].session_id
    out = tmp_path / "p.png"
    r = synth("preview", run_dir, sid, "-o", out)
    assert "wrote" in r.stderr
    data = out.read_bytes()
    assert png_size(data) == (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))
    assert len(data) > 60_000  # a blank figure of that size is ~15 kB
    spec = tmp_path / "s.png"
    synth("preview", run_dir, sid, "-o", spec, "--spectrogram", "--start", "2", "--end", "12")
    assert png_size(spec.read_bytes()) == png_size(data) and spec.read_bytes() != data


def test_preview_errors_are_one_line(run_dir, tmp_path):
    r = synth("preview", run_dir, "no-such-session", "-o", tmp_path / "x.png", check=False)
    assert r.returncode == 2 and "no session 'no-such-session'" in r.stderr and "Traceback" not in r.stderr
    r = synth("preview", tmp_path, "x", "-o", tmp_path / "x.png", check=False)
    assert r.returncode == 2 and "not a run folder" in r.stderr
    r = synth("preview", run_dir, "x", "-o", tmp_path / "x.jpg", check=False)
    assert r.returncode == 2 and "PNG" in r.stderr


def test_report_html_embeds_its_plots_and_matches_the_run(run_dir, tmp_path):
    html_path = tmp_path / "rep" / "report.html"
    r = synth("report", run_dir, "-o", html_path)
    assert "timing" in r.stdout and "system_gap" in r.stdout
    html = html_path.read_text()
    imgs = re.findall(r'<img alt="(\w+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    names = {n for n, _ in imgs}
    assert set(measures.QUANTITIES) | {"hours", "actions", "phenomena"} <= names
    for _, b64 in imgs:
        w, h = png_size(base64.b64decode(b64))
        assert w > 300 and h > 200
    assert "http" not in re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", html)  # self-contained
    rep = json.loads(html_path.with_suffix(".json").read_text())
    stats = json.loads((run_dir / "stats.json").read_text())
    assert rep["sessions"] == stats["sessions"] and rep["rejects"] == stats["rejects"]
    assert rep["sessions"] + rep["rejects"] == SESSIONS
    assert abs(sum(rep["hours_by_language"].values()) * 3600 - stats["audio_s"]) < 1.0
    assert abs(sum(rep["action_balance"].values()) - 1) < 1e-9
    assert rep["target_median_ms"][next(iter(rep["timing"]))]["stop_latency"] == pytest.approx(350, abs=2)
    assert "target median ms" in html
    assert "group" not in rep and "whom the user side speaks to" not in html  # a dyadic run: no group section
    assert "group sessions" not in r.stdout
    flat = {p: n for fam in rep["phenomena"].values() for p, n in fam.items()}
    assert {p: n for p, n in flat.items() if n} == stats["phenomena"]
    div = rep["diversity"]["all"]  # the content figures, read back from the records
    assert "content diversity" in r.stdout and "distinct system bigrams" in html
    assert div["sessions"] == rep["sessions"] and div["system_utterances"] >= 2 * rep["sessions"]
    assert 0 < div["distinct_system_bigrams"] <= 1 and 0 < div["distinct_system_utterances"] <= 1
    # the scale-aware figures: no fixed-size sample in 5 sessions, templates from the records' planner_meta
    assert div["sample_sessions"] == 1000 and div["sample_distinct_system_utterances"] is None
    assert 0 < div["top_template_share"] <= 1 and div["system_templates"] <= div["system_utterances"]
    assert div["new_bigrams_per_block"] == [] and "{" in "".join(t["template"] for t in div["top_templates"])
    assert "most used de-slotted system template" in r.stdout and "de-slotted template" in html


def test_measured_gaps_follow_the_clock_rules(run_dir):
    recs = RunFolder(run_dir).records
    t = measures.timings_by_language(recs)
    sys_gaps = [x for d in t.values() for x in d["system_gap"]]
    stops = [x for d in t.values() for x in d["stop_latency"]]
    tools = [x for d in t.values() for x in d["tool_latency"]]
    assert len(sys_gaps) >= 10 and stops and tools
    # early starts are at most 200 ms, stop latency and tool latency stay inside their truncation
    assert min(sys_gaps) >= -200 - 1 and 0 < np.median(sys_gaps) < 800
    assert all(100 <= x <= 1200 + 40 for x in stops)  # trimmed after the fade: a little under the law's low
    assert all(500 <= x <= 60000 for x in tools)


def test_target_laws_come_from_run_json_and_integrate_to_one(run_dir):
    cfg = json.loads((run_dir / "run.json").read_text())["config"]
    cfg["timing"]["stop_latency_ms"] = {"dist": "lognormal", "median": 900, "sigma": 0.2, "low": None, "high": None}
    laws = measures.laws_from_config(cfg)
    assert laws["stop_latency"].median == 900
    x = np.linspace(-3000, 70000, 400_001)
    for q in measures.QUANTITIES:
        area = np.trapezoid(measures.target_pdf(q, laws, "en", x), x)
        assert abs(area - 1) < 0.01, q
    base = measures.laws_from_config({})  # absent config: the LABELS.md defaults
    assert abs(measures.target_median("stop_latency", base, "en") - 350) < 2
    assert abs(measures.target_median("tool_latency", base, "en") - 3000) < 60
    # Gamma(3, 100) has median 267; the 8 % early starts (-U(0, 200)) pull the mixture's median to ~250
    assert 245 < measures.target_median("system_gap", base, "en") < 258
    # zh gap offset shifts the gap law
    laws["zh_gap_offset_ms"] = 100.0
    g = np.linspace(0, 2000, 20001)
    m_en = np.trapezoid(g * measures.target_pdf("user_gap", laws, "en", g), g)
    m_zh = np.trapezoid(g * measures.target_pdf("user_gap", laws, "zh", g), g)
    assert m_zh > m_en


def test_run_folder_reads_records_with_extra_scene_keys_and_columns(run_dir):
    from synth.inspection.runfolder import record_from_row

    row = RunFolder(run_dir).records[0].model_dump(mode="json")
    row["scene"] = json.dumps({**row["scene"], "room": {"rt60_s": 0.4}, "noise": [{"id": "n1", "licence": "CC0"}]})
    row["future_column"] = [1, 2, 3]
    rec = record_from_row(row)
    assert rec.scene["room"]["rt60_s"] == 0.4


def test_a_webdataset_only_run_reads_the_same(run_dir, tmp_path):
    import shutil

    wds_only = tmp_path / "run"
    shutil.copytree(run_dir, wds_only)
    shutil.rmtree(wds_only / "shards" / "parquet")
    a, b = RunFolder(run_dir), RunFolder(wds_only)
    assert [r.model_dump() for r in a.records] == [r.model_dump() for r in b.records]
    sid = a.records[-1].session_id
    assert a.session(sid).user_flac == b.session(sid).user_flac
    synth("preview", wds_only, sid, "-o", tmp_path / "p.png")
    assert png_size((tmp_path / "p.png").read_bytes()) == (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))


def test_report_counts_rejects_by_reason(run_dir, tmp_path):
    import shutil

    from synth.inspection.report import build_report, figures, render_html

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    lines = [{"session_id": "x-1", "scenario_id": "s", "stage": "place", "reason": "interrupt_unplaceable"},
             {"session_id": "x-2", "scenario_id": "s", "stage": "place", "reason": "interrupt_unplaceable"},
             {"session_id": "x-3", "scenario_id": "s", "stage": "tts", "reason": "empty_audio"}]
    (run / "rejects.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rf = RunFolder(run)
    rep = build_report(rf)
    assert rep["rejects"] == 3
    assert rep["rejects_by_reason"] == {"place:interrupt_unplaceable": 2, "tts:empty_audio": 1}
    html = render_html(rep, figures(rf, rep))
    assert 'alt="rejects"' in html and "place:interrupt_unplaceable" in html
