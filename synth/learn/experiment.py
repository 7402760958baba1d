"""One learnability comparison: train on some sessions, score on named eval sets, build the report.

>>> report = evaluate(train=load_runs(["outputs/a"]), evals={"held-out": load_runs(["outputs/b"])},
...                   cfg=LearnConfig(seeds=3))

Model seeds (and the two trained controls) run in parallel processes with one torch thread
each (two threads in one process were 6-20x slower on these 2-core machines); every process is
deterministic for its seed, so the report's numbers are reproducible.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import platform
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from ..errors import UserError
from .baselines import prior_prediction, silence_rule, tune_silence_rule
from .data import RELEASE, TAKE, LearnSession, RunSource, default_cache_dir, take_hours
from .metrics import Prediction, events, match, paired_difference, session_stats, summarize

SYSTEMS = ("model", "prior", "silence_rule", "vad_only", "shuffled_labels", "channel_swap")
MAIN_FAMILIES = ("turn_transitions", "pauses", "overlaps", "backchannels", "disfluencies", "nonverbal",
                 "other_directed", "delegation", "code_switching", "barge_in_yield")


@dataclass(frozen=True)
class LearnConfig:
    """Everything that decides a report's numbers besides the data."""

    seeds: int = 3
    epochs: int = 12
    hidden: int = 128
    device: str = "cpu"
    tolerance_s: float = 0.4
    bootstrap: int = 1000
    controls: bool = True
    workers: int = 2
    val_share: float = 0.1

    def check(self) -> "LearnConfig":
        bounds = {"seeds": (1, 20), "epochs": (1, 200), "hidden": (8, 1024), "bootstrap": (100, 100000),
                  "workers": (1, 64)}
        for name, (lo, hi) in bounds.items():
            v = getattr(self, name)
            if not lo <= v <= hi:
                raise UserError(f"--{name}: must be between {lo} and {hi} (got {v})")
        if not 0.04 <= self.tolerance_s <= 2.0:
            raise UserError(f"--tolerance: must be between 0.04 and 2 s (got {self.tolerance_s})")
        if self.device not in ("cpu", "cuda"):
            raise UserError(f"--device: must be cpu or cuda (got {self.device!r})")
        return self


def load_runs(runs: Sequence[str | Path], hours: float | None = None, cache_dir: Path | None = None,
              keep: Callable[[LearnSession], bool] | None = None) -> list[LearnSession]:
    """Sessions of ``runs`` in order (features cached per run), filtered by ``keep``, up to ``hours``."""
    cache = default_cache_dir() if cache_dir is None else Path(cache_dir)
    sources = [RunSource.open(r) for r in runs]
    periods = {src.frame_period_s() for src in sources}
    if len(periods) > 1:
        raise UserError(f"{', '.join(map(str, runs))}: runs with different frame periods "
                        f"({', '.join(f'{p * 1000:g} ms' for p in sorted(periods))}); learn from one frame rate")

    def stream() -> Iterable[LearnSession]:
        for src in sources:
            for s in src.sessions(cache):
                if keep is None or keep(s):
                    yield s

    return take_hours(iter(stream()), hours)


def _split_val(sessions: list[LearnSession], share: float) -> tuple[list[LearnSession], list[LearnSession]]:
    """Hold back ~``share`` of the training sessions (by a hash of their ids) to tune thresholds."""
    if len(sessions) < 4:
        return sessions, sessions
    key = lambda s: hashlib.blake2b(f"{s.run}/{s.session_id}".encode(), digest_size=8).digest()  # noqa: E731
    order = sorted(range(len(sessions)), key=lambda i: key(sessions[i]))
    n_val = max(1, int(round(share * len(sessions))))
    val = set(order[:n_val])
    return [s for i, s in enumerate(sessions) if i not in val], [s for i, s in enumerate(sessions) if i in val]


_SHARED: dict = {}


def _job(kind: str, seed: int) -> dict:
    """Train one model and predict the validation and eval sessions (runs in a worker process)."""
    import torch

    from .model import TrainSettings, parameter_count, predict, train

    torch.set_num_threads(1)
    cfg: LearnConfig = _SHARED["cfg"]
    inputs = "vad" if kind == "vad_only" else "audio"
    settings = TrainSettings(inputs=inputs, hidden=cfg.hidden, epochs=cfg.epochs, seed=seed,
                             shuffle_labels=kind == "shuffled_labels", device=cfg.device)
    t0 = time.process_time()
    model = train(_SHARED["train"], settings)
    seconds = time.process_time() - t0
    out = {"kind": kind, "seed": seed, "parameters": parameter_count(model), "train_cpu_s": seconds,
           "val": [predict(model, s, inputs, device=cfg.device) for s in _SHARED["val"]], "evals": {}}
    for name, sessions in _SHARED["evals"].items():
        out["evals"][name] = [predict(model, s, inputs, device=cfg.device) for s in sessions]
        if kind == "model" and cfg.controls:
            out["evals"][f"{name}\0swap"] = [predict(model, s, inputs, swap=True, device=cfg.device)
                                              for s in sessions]
    return out


def _run_jobs(jobs: list[tuple[str, int]], workers: int) -> list[dict]:
    if workers <= 1 or len(jobs) == 1:
        return [_job(k, s) for k, s in jobs]
    ctx = multiprocessing.get_context("fork")  # workers inherit the loaded features (copy on write)
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx) as pool:
        futures = [pool.submit(_job, k, s) for k, s in jobs]
        return [f.result() for f in futures]


def _as_prediction(p: dict) -> Prediction:
    """Events from the event heads ("a TAKE / RELEASE within 0.24 s"), floor and VAP from theirs."""
    return Prediction(take=p["soon"][:, 0], release=p["soon"][:, 1], floor=p["floor"], near=p["near"])


def tune_thresholds(sessions: list[LearnSession], preds: list[Prediction], tol: int) -> tuple[float, float]:
    """Per event type, the score threshold with the best F1 on the held-back sessions."""
    grid = np.round(np.arange(0.05, 0.96, 0.05), 2)
    best = []
    for attr, cls in (("take", TAKE), ("release", RELEASE)):
        def f1(t: float) -> float:
            tp = fp = fn = 0
            for s, p in zip(sessions, preds):
                a, b, c, _ = match(np.flatnonzero(s.sys_floor == cls), events(s, getattr(p, attr), attr, t, tol), tol)
                tp, fp, fn = tp + a, fp + b, fn + c
            return 2 * tp / max(1, 2 * tp + fp + fn)
        best.append(float(max(grid, key=lambda t: (f1(t), -abs(t - 0.5)))))
    return best[0], best[1]


def _stats_for(sessions: list[LearnSession], preds: list[Prediction], thresholds, tol: int) -> list[dict]:
    return [session_stats(s, p, thresholds, tol, MAIN_FAMILIES) for s, p in zip(sessions, preds)]


def _summaries(stats: list[list[dict]], sessions: list[LearnSession], cfg: LearnConfig) -> dict:
    langs = sorted({s.language for s in sessions})
    per_lang = {lang: summarize(stats, np.array([i for i, s in enumerate(sessions) if s.language == lang]),
                                cfg.bootstrap) for lang in langs} if len(langs) > 1 else {}
    everything = summarize(stats, n_boot=cfg.bootstrap)  # the per-family F1s ride along as "metric@family"
    per_family = {}
    for f in MAIN_FAMILIES:
        vals = {m: everything.get(f"{m}@{f}") for m in ("start_speaking_f1", "start_listening_f1")}
        if any(v and v["value"] is not None for v in vals.values()):
            per_family[f] = {m: v for m, v in vals.items() if v}
    overall = {k: v for k, v in everything.items() if "@" not in k}
    return {"metrics": overall, "per_language": {k: {m: v for m, v in d.items() if "@" not in m}
                                                  for k, d in per_lang.items()}, "per_family": per_family}


def _round_stats(stats: list[dict]) -> list[dict]:
    return [{k: ([round(float(x), 4) for x in v] if isinstance(v, list) else int(v)) for k, v in st.items()}
            for st in stats]


def _voice_identity(v: str) -> str:
    import json

    try:
        d = json.loads(v)
    except (json.JSONDecodeError, TypeError):
        return str(v)
    if isinstance(d, dict):
        return str(d.get("variant") or d.get("voice") or d.get("name") or v)
    return str(v)


def confound_warnings(train: list[LearnSession]) -> list[str]:
    """Say so when the user side and the system side differ in voice by construction."""
    roles: dict[str, set[str]] = {"user": set(), "system": set()}
    for s in train:
        for role in roles:
            v = (s.meta.get("voices") or {}).get(role)
            if v:
                roles[role].add(_voice_identity(v))
    out = []
    if roles["user"] and roles["system"] and not roles["user"] & roles["system"]:
        out.append(f"user and system sides never share a voice in the training data (user: "
                   f"{', '.join(sorted(roles['user'])[:5])}; system: {', '.join(sorted(roles['system'])[:5])}): "
                   "a model can learn the voice instead of the turn")
    out.append("the user side is room-simulated with noise and the system side is clean speech in every session: "
               "the channel-swap control shows how much the model leans on that difference")
    return out


def _machine(cfg: LearnConfig) -> dict:
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                flags = " ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_tile") if f in have)
                break
    except OSError:
        pass
    import torch

    return {"cpu": platform.processor() or platform.machine(), "flags": flags, "torch": torch.__version__,
            "device": cfg.device, "cpus": os.cpu_count()}


def evaluate(train: list[LearnSession], evals: dict[str, list[LearnSession]], cfg: LearnConfig,
             train_runs: Sequence[str] = (), progress: Callable[[str], None] | None = None) -> dict:
    """Train ``cfg.seeds`` models (and the controls) on ``train``; score them and the baselines."""
    cfg.check()
    say = progress or (lambda _m: None)
    if not train:
        raise UserError("training runs: no sessions to learn from")
    for name, sessions in evals.items():
        if not sessions:
            raise UserError(f"eval {name!r}: no sessions")
    periods = {s.frame_period_s for s in train} | {s.frame_period_s for ss in evals.values() for s in ss}
    if len(periods) > 1:
        raise UserError(f"eval runs: frame period {', '.join(f'{p * 1000:g} ms' for p in sorted(periods))} "
                        "differ from the training runs'; learn and score at one frame rate")
    period = periods.pop()
    tol = max(1, int(round(cfg.tolerance_s / period)))
    fit, val = _split_val(train, cfg.val_share)
    _SHARED.update(cfg=cfg, train=fit, val=val, evals=evals)
    jobs = [("model", seed) for seed in range(cfg.seeds)]
    if cfg.controls:
        jobs += [("vad_only", 0), ("shuffled_labels", 0)]
    say(f"training {len(jobs)} models on {len(fit)} sessions ({sum(s.duration_s for s in fit) / 3600:.2f} h), "
        f"{cfg.workers} at a time")
    results = _run_jobs(jobs, cfg.workers if cfg.device == "cpu" else 1)
    say("scoring")
    report = _report_head(train, fit, evals, cfg, train_runs, results)
    wait, barge = tune_silence_rule(fit, tol) if cfg.controls else (0, 0)
    priors = np.bincount(np.concatenate([s.sys_floor for s in fit]).astype(np.int64), minlength=4) / sum(
        s.n_frames for s in fit)
    activity = np.array([np.mean(np.concatenate([s.usr_vad for s in fit])),
                         np.mean(np.concatenate([s.sys_vad for s in fit]))])
    report["config"]["silence_rule"] = {"wait_ms": round(wait * period * 1000), "barge_ms": round(barge * period * 1000)}
    thresholds = [tune_thresholds(val, [_as_prediction(p) for p in r["val"]], tol) for r in results]
    prior_th = tune_thresholds(val, [prior_prediction(s, priors, activity) for s in val], tol) if cfg.controls else None
    for name, sessions in evals.items():
        systems, raw = {}, {}
        per_system: dict[str, list[list[dict]]] = {}
        for r, th in zip(results, thresholds):
            preds = [_as_prediction(p) for p in r["evals"][name]]
            per_system.setdefault(r["kind"], []).append(_stats_for(sessions, preds, th, tol))
            if r["kind"] == "model" and cfg.controls:
                swapped = [_as_prediction(p) for p in r["evals"][f"{name}\0swap"]]
                per_system.setdefault("channel_swap", []).append(_stats_for(sessions, swapped, th, tol))
        if cfg.controls:
            pp = [prior_prediction(s, priors, activity) for s in sessions]
            per_system["prior"] = [_stats_for(sessions, pp, prior_th, tol)]
            per_system["silence_rule"] = [_stats_for(sessions, [silence_rule(s, wait, barge) for s in sessions],
                                                     (0.5, 0.5), tol)]
        for kind in SYSTEMS:
            if kind in per_system:
                systems[kind] = _summaries(per_system[kind], sessions, cfg)
                systems[kind]["seeds"] = len(per_system[kind])
        raw["model"] = {"session_ids": [f"{s.run}/{s.session_id}" for s in sessions],
                        "stats": [_round_stats(st) for st in per_system["model"]]}
        report["evals"][name] = {"runs": sorted({s.run for s in sessions}), "sessions": len(sessions),
                                 "hours": round(sum(s.duration_s for s in sessions) / 3600, 3),
                                 "languages": _count(s.language for s in sessions), "systems": systems}
        report["raw"][name] = raw
    report["warnings"] += _control_warnings(report)
    return report


def _count(items: Iterable[str]) -> dict[str, int]:
    return dict(sorted(Counter(items).items()))


def _report_head(train, fit, evals, cfg, train_runs, results) -> dict:
    models = [r for r in results if r["kind"] == "model"]
    return {
        "kind": "synth-learn-report", "version": 1,
        "machine": _machine(cfg),
        "config": {**asdict(cfg), "frame_period_s": train[0].frame_period_s,
                   "tolerance_frames": max(1, int(round(cfg.tolerance_s / train[0].frame_period_s))),
                   "validation_sessions": len(train) - len(fit) if len(train) >= 4 else 0,
                   "controls_seeds": 1 if cfg.controls else 0},
        "train": {"runs": [str(r) for r in train_runs] or sorted({s.run for s in train}), "sessions": len(train),
                  "hours": round(sum(s.duration_s for s in train) / 3600, 3),
                  "languages": _count(s.language for s in train)},
        "model": {"parameters": models[0]["parameters"],
                  "train_cpu_seconds_per_seed": round(float(np.mean([r["train_cpu_s"] for r in models])), 1)},
        "warnings": confound_warnings(train), "evals": {}, "raw": {},
    }


def _control_warnings(report: dict) -> list[str]:
    out = []
    for name, ev in report["evals"].items():
        sys_ = ev["systems"]
        sh = (sys_.get("shuffled_labels") or {}).get("metrics", {}).get("start_speaking_f1") or {}
        rule = (sys_.get("silence_rule") or {}).get("metrics", {}).get("start_speaking_f1") or {}
        if sh.get("value") is not None and rule.get("value") is not None and sh["value"] >= rule["value"]:
            out.append(f"{name}: the shuffled-labels control reaches start-speaking F1 {sh['value']:.2f}, as high as "
                       "the silence rule: something other than the audio-label alignment carries the labels (a leak?)")
        if ev["sessions"] < 10:
            out.append(f"{name}: only {ev['sessions']} sessions; intervals are wide")
    return out


def paired_effect(report_a: dict, report_b: dict, eval_name: str, metric: str, n_boot: int = 1000) -> dict:
    """``metric`` of ``report_a``'s model minus ``report_b``'s on the same eval sessions, paired."""
    a, b = report_a["raw"][eval_name]["model"], report_b["raw"][eval_name]["model"]
    if a["session_ids"] != b["session_ids"]:
        raise UserError(f"eval {eval_name!r}: the two reports scored different sessions; a paired effect needs "
                        "the same eval set")
    return paired_difference(a["stats"], b["stats"], metric, n_boot)

