"""The learnability report: terminal tables, the HTML page, the JSON file (synth/learn/report.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from synth.errors import UserError
from synth.learn import report as rp

WARNING = "user and system sides never share a voice: <script>alert(1)</script> & co"


def ci(value, lo=None, hi=None) -> dict:
    return {"value": value, "lo": lo, "hi": hi}


def system(shift: float, **extra) -> dict:
    """A system whose scores are the model's moved by ``shift`` (intervals ±0.04)."""
    def s(v):
        return ci(round(v + shift, 3), round(v + shift - 0.04, 3), round(v + shift + 0.04, 3))

    out = {
        "metrics": {
            "start_speaking_f1": s(0.81), "start_listening_f1": s(0.74),
            "start_speaking_latency_ms": ci(-120.0 - 100 * shift, -180.0 - 100 * shift, -60.0 - 100 * shift),
            "start_listening_latency_ms": ci(None),
            "floor_macro_f1": s(0.66), "shift_hold_bacc": s(0.70),
            "takeover_user_pause": ci(0.12 - shift / 4, 0.08 - shift / 4, 0.16 - shift / 4),
            "takeover_background": ci(0.03, None, None),
            "made_up_metric": s(0.5),
        },
        "per_language": {"en": {"start_speaking_f1": s(0.84), "start_listening_f1": s(0.78)},
                         "zh": {"start_speaking_f1": s(0.77), "start_listening_f1": ci(None)}},
        "per_family": {"backchannels": {"start_speaking_f1": s(0.72)},
                       "interruptions": {"start_speaking_f1": s(0.69)}},
    }
    out.update(extra)
    return out


def make_report() -> dict:
    """Two evals (six systems and three), a learning curve, two ablations, warnings with markup."""
    full = {n: system(d) for n, d in [("model", 0.0), ("prior", -0.5), ("silence_rule", -0.2),
                                       ("vad_only", -0.15), ("shuffled_labels", -0.45), ("channel_swap", -0.3)]}
    full["channel_swap"]["note"] = "channels swapped at test time <b>"
    full["model"]["seeds"] = 3
    few = {n: system(d) for n, d in [("silence_rule", -0.02), ("model", 0.0), ("prior", -0.5)]}
    effects = {"start_speaking_f1": ci(-0.06, -0.09, -0.03), "start_listening_f1": ci(0.01, -0.02, 0.04),
               "floor_macro_f1": ci(None)}
    return {
        "kind": "synth-learn-report", "version": 1,
        "created_by": "synth learn runs/train --eval runs/kokoro",
        "machine": {"cpu": "Xeon", "flags": "avx2 avx512_vnni", "torch": "2.9.1", "device": "cpu"},
        "config": {"seeds": 3, "epochs": 8, "tolerance_s": 0.4, "frame_period_s": 0.08, "bootstrap": 1000},
        "train": {"runs": ["runs/train"], "sessions": 120, "hours": 4.1,
                  "languages": {"en": 40, "zh": 40, "en-zh": 40}},
        "model": {"parameters": 231000, "train_seconds_per_seed": 61.2},
        "warnings": [WARNING, "only 30 held-out sessions"],
        "evals": {
            "held-out engine (kokoro)": {"runs": ["runs/kokoro"], "sessions": 30, "hours": 1.0, "systems": full,
                                         "languages": {"en": 20, "zh": 10}},
            "real & <noisy>": {"runs": ["runs/real"], "sessions": 12, "hours": 0.5, "systems": few,
                               "trained_on": {"note": "the en + zh sessions", "sessions": 80, "hours": 2.5}},
        },
        "raw": {"held-out engine (kokoro)": {"model": {"session_ids": ["secret-raw-id"], "stats": []}}},
        "learning_curve": [{"hours": h, "train_hours": h - 0.01, "seeds": 3, "metrics": {"start_speaking_f1": ci(f, f - 0.05, f + 0.05),
                                                                 "start_listening_f1": ci(f - 0.1, None, None),
                                                                 "floor_macro_f1": ci(None)}}
                           for h, f in [(0.25, 0.5), (1.0, 0.7), (4.0, 0.81)]],
        "ablations": [{"name": "no rooms and noise", "hours": 1.0, "seeds": 3, "effects": effects},
                      {"name": "no backchannels", "hours": 1.0, "seeds": 3,
                       "effects": {"start_speaking_f1": ci(0.02, -0.01, 0.05)}}],
        "ablation_reference": {"name": "reference (everything on)", "hours": 1.0, "train_hours": 0.98,
                               "metrics": {"start_speaking_f1": ci(0.79, 0.75, 0.83)}},
    }


@pytest.fixture
def report() -> dict:
    return make_report()


def _terminal(report: dict) -> str:
    console = Console(record=True, width=100, color_system=None)
    rp.print_summary(report, console)
    return console.export_text()


def test_formatting_and_nulls():
    assert rp.fmt_ci("start_speaking_f1", ci(0.812, 0.771, 0.853)) == "0.81 [0.77, 0.85]"
    assert rp.fmt_ci("start_speaking_latency_ms", ci(-120.4, -181.0, -59.6)) == "-120 [-181, -60]"
    assert rp.fmt_ci("floor_macro_f1", ci(0.5)) == "0.50"
    assert rp.fmt_ci("floor_macro_f1", ci(None)) == "–"
    assert rp.fmt_ci("floor_macro_f1", None) == "–"
    assert rp.ordered_metrics(["zz", "takeover_background", "start_speaking_f1"]) == \
        ["start_speaking_f1", "takeover_background", "zz"]
    assert rp.ordered_systems(["prior", "other", "model"]) == ["model", "prior", "other"]


def test_directions_best_baseline_and_compare(report):
    systems = report["evals"]["held-out engine (kokoro)"]["systems"]
    assert rp.best_baseline(systems, "start_speaking_f1")[0] == "vad_only"
    # lower is better: the baseline with the least latency / take-over wins
    two = {"model": {"metrics": {}}, "a": {"metrics": {"start_speaking_latency_ms": ci(100.0), "takeover_side_talk": ci(0.1),
                                                       "floor_precision": ci(0.1)}},
           "b": {"metrics": {"start_speaking_latency_ms": ci(300.0), "takeover_side_talk": ci(0.3),
                             "floor_precision": ci(0.3)}}}
    assert rp.best_baseline(two, "start_speaking_latency_ms")[0] == "a"
    assert rp.best_baseline(two, "takeover_side_talk")[0] == "a"
    assert rp.best_baseline(two, "floor_precision")[0] == "b"
    assert rp.best_baseline(systems, "start_listening_latency_ms") is None
    assert rp.compare("start_speaking_f1", ci(0.8, 0.75, 0.85), ci(0.6, 0.55, 0.65)) == "better"
    assert rp.compare("takeover_user_pause", ci(0.3, 0.25, 0.35), ci(0.1, 0.05, 0.15)) == "worse"
    assert rp.compare("start_speaking_f1", ci(0.8, 0.7, 0.9), ci(0.75, 0.6, 0.8)) == "overlap"
    assert rp.compare("start_speaking_f1", ci(0.8), ci(0.1)) == "overlap"  # no intervals: no claim
    assert rp.excludes_zero(ci(-0.06, -0.09, -0.03)) and not rp.excludes_zero(ci(0.01, -0.02, 0.04))
    assert not rp.excludes_zero(ci(None))


def test_terminal_tables_fit_and_show_the_cells(report):
    tables = rp.summary_table(report)
    assert len(tables) == 2
    text = _terminal(report)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "held-out engine (kokoro): 30 sessions, 1.00 h (en 20, zh 10)" in text
    assert "scored by a model trained on the en + zh sessions (80 sessions, 2.50 h)" in text
    assert "reference (everything on), 0.98 h: start speaking F1 0.79 [0.75, 0.83]" in text
    assert "real & <noisy>: 12 sessions" in text
    # three systems fit on one line per cell
    assert "0.81 [0.77, 0.85]" in text and "-120 [-180, -60]" in text
    # six systems: value and interval on two lines, both there
    assert "[0.77, 0.85]" in text and "[0.62, 0.70]" in text
    assert [str(c.header) for c in tables[0].columns] == \
        ["metric", "model", "prior", "silence rule", "VAD only", "shuffled labels", "channel swap"]
    assert [str(c.header) for c in tables[1].columns] == ["metric", "model", "prior", "silence rule"]
    assert not re.search(r"\[[^\]]*$", text, re.M)  # no interval broken over lines
    assert "–" in text  # start_listening_latency_ms has no value
    assert "0.03" in text  # a value without an interval
    assert "made up metric" in text  # unknown metrics are shown after the known ones
    assert text.index("start-spk F1") < text.index("made up metric")  # six systems: short labels
    assert "warning: user and system sides never share a voice: <script>" in text
    assert "learning curve" in text and "no rooms and noise" in text and "-0.06 [-0.09, -0.03] *" in text
    assert "trained on 120 sessions, 4.10 h (en 40, zh 40, en-zh 40); 231k parameters; 3 seeds" in text


def test_terminal_wide_console_uses_long_labels_on_one_line(report):
    console = Console(record=True, width=160, color_system=None)
    for table in rp.summary_table(report, width=160):
        console.print(table)
    text = console.export_text()
    assert "0.66 [0.62, 0.70]" in text and "start listening latency ms" in text


def test_names_are_text_not_markup(report, tmp_path: Path):
    odd = {"model": {"metrics": {"x[i]y": ci(0.5, 0.4, 0.6)}}, "my[b]sys": {"metrics": {"x[i]y": ci(0.2)}}}
    report["evals"] = {"[bold]eval": {"sessions": 1, "hours": 0.1, "systems": odd}}
    report["warnings"] = ["[red]not red"]
    text = _terminal(report)
    assert "[bold]eval" in text and "x[i]y" in text and "my[b]sys" in text and "[red]not red" in text
    rp.write_html(report, tmp_path / "r.html")
    assert "x[i]y" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_html_page(report, tmp_path: Path):
    path = tmp_path / "out" / "report.html"
    rp.write_html(report, path)
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    assert "held-out engine (kokoro)" in page and "real &amp; &lt;noisy&gt;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in page
    assert "<script>" not in page and "<noisy>" not in page
    assert "channels swapped at test time &lt;b&gt;" in page and "test time <b>" not in page
    # one chart per eval, the learning curve and the ablations: all inline, nothing fetched
    assert page.count('<img alt="') == 4
    assert page.count('src="data:image/png;base64,') == 4
    assert not re.search(r'(src|href)="https?:', page)
    assert "0.81" in page and "[0.77, 0.85]" in page and "-120" in page and "[-180, -60]" in page
    assert '<span class="na">–</span>' in page
    assert "Learning curve" in page and "Ablations" in page and "no rooms and noise" in page
    assert 'class="sig worse">-0.06 [-0.09, -0.03]' in page and 'class="">+0.01 [-0.02, 0.04]' in page
    assert "Per language" in page and "Per phenomenon family" in page and "backchannels" in page
    assert "best baseline" in page and "VAD only" in page and "model ahead" in page
    assert "avx512_vnni" in page and "tolerance_s" in page
    assert "(en 20, zh 10)" in page and "scored by a model trained on the en + zh sessions" in page
    assert "3 seeds</small>" in page and "reference (everything on), 0.98 h" in page
    assert "secret-raw-id" not in page  # per-session statistics stay in the JSON file
    # the warnings come before the first eval's details, the setup last
    assert page.index("warnings</h2>") < page.index('<section class="eval">') < page.index("<footer>")
    # the embedded data is the report, and cannot close its script element
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S).group(1)
    assert json.loads(data) == {k: v for k, v in report.items() if k != "raw"}


def test_html_without_optional_sections(report, tmp_path: Path):
    del report["learning_curve"], report["ablations"], report["warnings"]
    report["evals"]["real & <noisy>"]["systems"] = {"prior": system(-0.5)}  # no model at all
    report["evals"]["empty"] = {"sessions": 0, "systems": {"model": {"metrics": {"floor_precision": None}},
                                                          "prior": {"metrics": {}}}}
    path = tmp_path / "r.html"
    rp.write_html(report, path)
    page = path.read_text(encoding="utf-8")
    assert page.count("<img ") == 3
    assert "Learning curve" not in page and "Ablations" not in page and 'class="warn"' not in page
    assert _terminal(report)


def test_json_round_trip_is_atomic_and_sorted(report, tmp_path: Path):
    path = tmp_path / "report.json"
    rp.write_json(report, path)
    assert rp.load_report(path) == report
    text = path.read_text(encoding="utf-8")
    assert text.index('"ablations"') < text.index('"config"') < text.index('"version"')
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


@pytest.mark.parametrize("content, reason", [
    ('{"kind": "synth-run", "sessions": 3}', "not a synth-learn report"),
    ("[1, 2]", "not a synth-learn report"),
    ("{not json", "not a synth-learn report"),
    ('{"kind": "synth-learn-report", "version": 99}', "version 99"),
])
def test_load_report_refuses_other_files(tmp_path: Path, content: str, reason: str):
    path = tmp_path / "other.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError) as e:
        rp.load_report(path)
    assert str(path) in str(e.value) and reason in str(e.value) and "\n" not in str(e.value)


def test_load_report_missing_file(tmp_path: Path):
    with pytest.raises(UserError, match="missing.json"):
        rp.load_report(tmp_path / "missing.json")
