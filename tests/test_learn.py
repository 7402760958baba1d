"""synth learn: features, the causal model, metrics, and the command end to end on eSpeak runs."""

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from synth.learn.data import RELEASE, TAKE, LearnSession, RunSource, _parquet_rows, _webdataset_rows, \
    session_from_row
from synth.learn.features import frame_features, log_mel
from synth.learn.metrics import events, match, onsets, paired_difference, session_stats, summarize, Prediction

from inspect_helpers import ROOT, synth


def make_run(tmp: Path, name: str, sessions: int, seed: int, frame_ms: int = 80) -> Path:
    cfg = {"name": name, "seeds": [str(ROOT / "scenario_seeds" / "*-en.yaml")], "sessions": sessions, "seed": seed,
           "tts": {"engine": "espeak"}, "labels": {"frame_period_ms": frame_ms},
           "acoustics": {"room": True, "noise": True,
                         "banks": [{"path": str(ROOT / "noise_banks" / "generated"), "generate": True}]},
           "output": {"sessions_per_shard": 4}}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    out = tmp / name
    synth("run", p, "--out", out, "--workers", "2")
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("learn")
    return {"train": make_run(tmp, "train", 10, 3), "eval": make_run(tmp, "heldout", 4, 11),
            "fast": make_run(tmp, "fast", 2, 5, frame_ms=40), "tmp": tmp}


# ---- units -------------------------------------------------------------------------------------

def test_log_mel_is_causal():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(16000).astype(np.float32)
    y = x.copy()
    y[8000:] = rng.standard_normal(8000)
    a, b = log_mel(x, 100), log_mel(y, 100)
    assert np.array_equal(a[:50], b[:50])       # hop 49 ends at sample 8000
    assert not np.array_equal(a[50:], b[50:])


def test_frame_features_stack_hops_and_resample():
    x = np.sin(2 * np.pi * 440 * np.arange(24000) / 24000).astype(np.float32)
    f = frame_features(x, 24000, 13, 0.08)
    assert f.shape == (13, 8 * 40) and f.dtype == np.float16
    assert np.isfinite(f.astype(np.float32)).all()


def test_model_is_causal():
    import torch

    from synth.learn.model import TurnTakingNet

    torch.manual_seed(0)
    net = TurnTakingNet(6, hidden=16).eval()
    x = torch.randn(1, 40, 6)
    y = x.clone()
    y[0, 25:] = torch.randn(15, 6)
    with torch.no_grad():
        a, b = net(x)[0], net(y)[0]
    assert torch.equal(a[0, :25], b[0, :25])
    assert not torch.equal(a[0, 25:], b[0, 25:])


def test_onsets_refractory_and_match_nearest_first():
    score = np.array([0, .9, .9, 0, .8, 0, 0, 0, 0, 0, .7, 0])
    assert onsets(score, 0.5, 5).tolist() == [1, 10]
    assert onsets(score, 0.5, 1).tolist() == [1, 4, 10]
    tp, fp, fn, lags = match(np.array([2, 20]), np.array([1, 4, 10]), 3)
    assert (tp, fp, fn, lags) == (1, 2, 1, [-1])


def _session(floor, sys_vad, usr_vad):
    n = len(floor)
    return LearnSession("s", "r", "en", "x", 0.08, np.zeros((n, 1), np.float16), np.zeros((n, 1), np.float16),
                        np.array(floor, np.int8), np.array(sys_vad, np.int8), np.array(usr_vad, np.int8))


def test_events_only_while_the_decision_is_open():
    # system speaks frames 4..7 (TAKE 4, RELEASE 7); it hears itself one frame late
    floor = [0, 0, 0, 0, TAKE, 2, 2, RELEASE, 0, 0]
    s = _session(floor, [0, 0, 0, 0, 1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0, 0, 0])
    late_take = np.zeros(10)
    late_take[5] = 1.0   # fires after hearing its own onset: an observation, not a decision
    assert events(s, late_take, "take", 0.5, 3).size == 0
    early = np.zeros(10)
    early[3] = 1.0
    assert events(s, early, "take", 0.5, 3).tolist() == [3]
    stop = np.zeros(10)
    stop[8] = 1.0        # frame 8 still hears frame 7's speech: the stop decision is open
    assert events(s, stop, "release", 0.5, 3).tolist() == [8]
    st = session_stats(s, Prediction(take=early, release=stop), (0.5, 0.5), 3)
    assert (st["ss_tp"], st["sl_tp"], st["ss_lat"], st["sl_lat"]) == (1, 1, [-80.0], [80.0])


def test_bootstrap_interval_and_paired_difference():
    rng = np.random.default_rng(1)

    def stats(p_hit):
        out = []
        for _ in range(40):
            hits = int(rng.binomial(10, p_hit))
            st = {"ss_tp": hits, "ss_fp": 10 - hits, "ss_fn": 10 - hits, "sl_tp": 0, "sl_fp": 0, "sl_fn": 0,
                  "shift_ok": 0, "shift_n": 0, "hold_ok": 0, "hold_n": 0, "_no_floor": 1, "_no_vap": 1}
            st.update({f"cm{i}{j}": 0 for i in range(4) for j in range(4)})
            st.update({f"to_{c}_{k}": 0 for c in ("user_pause", "backchannel", "side_talk", "background")
                       for k in ("hit", "n")})
            st.update({k: [] for k in ("ss_lat", "sl_lat", "spred_pos", "spred_neg", "bc_pos", "bc_neg")})
            out.append(st)
        return [out]

    good, bad = stats(0.8), stats(0.3)
    ci = summarize(good, n_boot=300, lists=False)["start_speaking_f1"]
    assert 0.7 < ci["value"] < 0.9 and ci["lo"] < ci["value"] < ci["hi"]
    d = paired_difference(bad, good, "start_speaking_f1", n_boot=300)
    assert d["hi"] < 0 and -0.6 < d["value"] < -0.4


# ---- runs ----------------------------------------------------------------------------------------

def test_parquet_and_webdataset_streams_agree(runs):
    src = RunSource.open(runs["train"])
    pq_files = sorted((runs["train"] / "shards" / "parquet").glob("*.parquet"))
    tars = sorted((runs["train"] / "shards" / "webdataset").glob("*.tar"))
    a = session_from_row(*next(_parquet_rows(pq_files[0])), "t", "p")
    b = session_from_row(*next(_webdataset_rows(tars[0])), "t", "w")
    assert a.session_id == b.session_id
    for k in ("user_feat", "system_feat", "sys_floor", "sys_vad", "usr_vad", "sys_action"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    assert a.families == b.families and a.contexts == b.contexts
    assert (a.sys_floor == TAKE).sum() >= 1 and (a.sys_floor == RELEASE).sum() >= 1
    assert a.contexts["user_pause"] and a.families
    # the user side's features are louder where the user speaks
    u = a.user_feat.astype(np.float32).mean(1)
    assert u[a.usr_vad == 1].mean() > u[(a.usr_vad == 0) & (a.sys_vad == 0)].mean()
    assert len(list(src.sessions())) == 10


def test_feature_cache_is_reused(runs, tmp_path):
    src = RunSource.open(runs["eval"])
    first = list(src.sessions(tmp_path))
    files = sorted((tmp_path / src.cache_key()).glob("*.npz"))
    assert len(files) == 4 and (tmp_path / src.cache_key() / "complete.json").exists()
    stamp = [f.stat().st_mtime_ns for f in files]
    again = list(src.sessions(tmp_path))
    assert [f.stat().st_mtime_ns for f in files] == stamp
    assert all(np.array_equal(x.user_feat, y.user_feat) and x.families == y.families for x, y in zip(first, again))


def _metric(rep, system, name, ev):
    return rep["evals"][ev]["systems"][system]["metrics"][name]["value"]


@pytest.mark.slow
def test_learn_end_to_end_beats_baselines_and_is_reproducible(runs, tmp_path):
    args = [runs["train"], "--eval", runs["train"], "--eval", runs["eval"], "--seeds", "1", "--epochs", "60",
            "--bootstrap", "200", "--cache", tmp_path / "cache"]
    r = synth("learn", *args, "-o", tmp_path / "a")
    rep = json.loads((tmp_path / "a" / "report.json").read_text())
    assert (tmp_path / "a" / "report.html").stat().st_size > 10000
    ev = "train"
    # on its own training distribution the model holds the floor where the labels do and waits
    # through the user's pauses, which the silence rule cannot; the shuffled control learns neither
    assert _metric(rep, "model", "start_speaking_f1", ev) > _metric(rep, "prior", "start_speaking_f1", ev) + 0.2
    assert _metric(rep, "model", "floor_macro_f1", ev) > _metric(rep, "silence_rule", "floor_macro_f1", ev) + 0.2
    assert _metric(rep, "model", "floor_macro_f1", ev) > _metric(rep, "prior", "floor_macro_f1", ev) + 0.2
    assert _metric(rep, "model", "takeover_user_pause", ev) < _metric(rep, "silence_rule", "takeover_user_pause", ev)
    assert _metric(rep, "shuffled_labels", "floor_macro_f1", ev) < _metric(rep, "model", "floor_macro_f1", ev) - 0.2
    assert _metric(rep, "shuffled_labels", "start_speaking_f1", ev) < _metric(rep, "model", "start_speaking_f1", ev)
    assert "heldout" in rep["evals"] and rep["evals"]["heldout"]["sessions"] == 4
    # the table at the helper's 300 columns: full metric labels (short ones only where it would not fit)
    assert "silence" in r.stdout and "start speaking F1" in r.stdout and "heldout" in r.stdout
    synth("learn", *args, "-o", tmp_path / "b")
    again = json.loads((tmp_path / "b" / "report.json").read_text())
    assert again["evals"] == rep["evals"]


def _one_line_error(r, *needles):
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.strip().splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in r.stderr and r.stderr.strip().endswith(lines[0]), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_learn_bad_inputs_are_one_line(runs, tmp_path):
    _one_line_error(synth("learn", runs["train"], check=False), "--eval")
    _one_line_error(synth("learn", runs["train"], "--eval", runs["fast"], check=False), "40 ms", "80 ms")
    # a run folder whose shards carry no labels
    bare = tmp_path / "bare"
    shutil.copytree(runs["eval"], bare)
    shutil.rmtree(bare / "shards" / "webdataset")
    for f in (bare / "shards" / "parquet").glob("*.parquet"):
        t = pq.read_table(f)
        pq.write_table(t.drop_columns(["sys_floor", "sys_action"]), f)
    _one_line_error(synth("learn", bare, "--eval", runs["eval"], "--cache", tmp_path / "c", check=False),
                    "sys_floor", "parquet")
    _one_line_error(synth("learn", tmp_path / "nothing", "--eval", runs["eval"], check=False), "not a run folder")
    _one_line_error(synth("learn", runs["train"], "--eval", runs["eval"], "--seeds", "0", check=False), "--seeds")
