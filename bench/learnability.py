"""The standard experiment of issue 27: what a turn-taking model learns from our runs.

    python bench/learnability.py                         # everything: generate, splits, curve, ablations
    python bench/learnability.py --quick                 # a small version of all of it (<= 10 min on 2 cores)
    python bench/learnability.py --only generate         # just the runs (resumable: a rerun skips finished ones)
    python bench/learnability.py --only ablations --seeds 3 --device cuda

1. **Generate** every run it needs with ``synth run`` from ``pipelines/learn/*.yaml`` into
   ``WORK/runs/<name>`` (``--quick``: the same pipelines with ``--sessions N`` into
   ``WORK/runs/quick-<name>``). ``synth run`` resumes, so finished runs cost a second. The
   phenomenon-family ablations are derived from ``espeak-ablate-full.yaml``: copies of its seeds
   with the family's rates at 0 (and, for background speech, ``media_per_session: 0``) are written
   to ``WORK/ablations/<name>/``, with a pipeline that points at them. Each run's wall time and CPU
   seconds (``getrusage(RUSAGE_CHILDREN)``: the run and its workers) go to ``WORK/generation.json``,
   and what each ablation removes is counted from its records (``WORK/ablation_checks.json``).
2. **Learn** with ``synth.learn.experiment``: the held-out splits (in-distribution, held-out
   domains, voices and engine in one ``evaluate``; held-out language mode in a second one that
   trains on the en + zh sessions of the pool and tests on the en-zh sessions of the eval run),
   the learning curve (0.25 .. 8 h of the pool, on the in-distribution eval; the 8 h point is the
   splits' model), and the ablations (each against ``espeak-ablate-full`` at equal hours, a paired
   difference over the same eval sessions and seeds).
3. **Report**: ``WORK/learnability.json`` (the splits' report plus ``learning_curve``,
   ``ablations``, ``generation``), ``WORK/learnability.html``, a summary on the terminal and a
   results file ``bench/learnability_results_<date>.txt`` (``--quick``, ``--only``: in ``WORK``) with the
   command, the machine, its CPU flags and the numbers. Each step's part is kept in
   ``WORK/parts/`` so ``--only`` reruns one step and the combined report keeps the others.

Not a test: the numbers depend on the machine (the generated data do not).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# not bench/ itself: bench/coverage.py would shadow the coverage package numba looks for
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

PIPELINES = ROOT / "pipelines" / "learn"
METRICS = ("start_speaking_f1", "start_listening_f1", "floor_macro_f1")
SHORT = {"start_speaking_f1": "start-speak F1", "start_listening_f1": "start-listen F1",
         "floor_macro_f1": "floor macro-F1"}
CURVE_HOURS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
TRAIN_HOURS = 8.0
ABLATION_HOURS = 1.0

# --- what each phenomenon-family ablation switches off -----------------------------------------
# ids of synth/schema/phenomena.py; a seed's id rate overrides its family, so every id is set to 0
SIDE_TALK = ("user_to_third_party", "third_party_to_user", "user_self_talk", "readdress_after_side_talk")
BARGE_INS = ("barge_in_new_request", "correction_negation", "topic_switch", "stop_command", "repeat_request",
             "simultaneous_start")  # the overlaps items whose relation is `interrupts` (not cooperative_completion)


def _family(name: str) -> tuple[str, ...]:
    from synth.schema.phenomena import REGISTRY

    return tuple(p.id for p in REGISTRY.values() if p.family == name)


FAMILY_ABLATIONS = {
    # slug: (report name, phenomenon ids at rate 0, family keys at rate 0, pipeline overrides,
    #        drop the third party from the personas)
    "no-backchannels": ("without backchannels", lambda: _family("backchannels"), ("backchannels",), {}, False),
    # the scripted planner also realises continue_while_working as side talk when the seed has a
    # third party: without the persona it picks its other forms (a second request, a follow-up)
    "no-side-talk": ("without side talk", lambda: SIDE_TALK, (), {}, True),
    "no-background-speech": ("without background speech", lambda: ("background_media",), (),
                             {"paralinguistics": {"media_per_session": 0.0}}, False),
    "no-barge-ins": ("without barge-ins", lambda: BARGE_INS, (), {}, False),
    "no-delegation": ("without delegation", lambda: _family("delegation"), ("delegation",), {}, False),
}
FIXED_ABLATIONS = {  # committed pipelines
    "no-room-noise": ("without rooms and noise", "espeak-ablate-no-room-noise.yaml"),
    "fixed-gap": ("with one fixed gap", "espeak-ablate-fixed-gap.yaml"),
}
ABLATION_ORDER = ("no-room-noise", "fixed-gap", "no-backchannels", "no-side-talk", "no-background-speech",
                  "no-barge-ins", "no-delegation")


# --- machine ----------------------------------------------------------------------------------
def cpu_info() -> tuple[str, list[str]]:
    """CPU model name and the SIMD flags that matter for torch / onnxruntime on it."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, val = line.partition(":")
            if key.strip() == "model name" and model in ("", platform.machine(), platform.processor()):
                model = val.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(val.split())
    except OSError:
        pass
    want = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")
    return model, [f for f in want if f in flags]


def machine_lines(device: str) -> list[str]:
    model, flags = cpu_info()
    try:
        import torch

        tv = f"torch {torch.__version__}" + (f", CUDA {torch.cuda.get_device_name(0)}" if device == "cuda"
                                              and torch.cuda.is_available() else "")
    except ImportError:
        tv = "torch not installed"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return [f"machine: {model}, {os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}, "
            f"{tv}; load average {load:.1f} at start",
            f"CPU flags: {' '.join(flags) or '(none of avx2/avx512/vnni/amx)'}"]


def git_rev() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return rev + ("+dirty" if dirty else "") if rev else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


# --- the runs ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Run:
    key: str  # train, eval, eval-domains, eval-voices, kokoro-eval, ablate-<slug>
    pipeline: Path
    sessions: int | None  # None: the pipeline's own count

    def folder(self, work: Path, quick: bool) -> Path:
        return work / "runs" / (f"quick-{self.key}" if quick else self.key)


def runs_for(work: Path, quick: bool, ablations: list[str]) -> dict[str, Run]:
    """Every run of the experiment (quick: the same pipelines with fewer sessions)."""
    q = (lambda n: n) if quick else (lambda n: None)
    out = {
        "train": Run("train", PIPELINES / "espeak-train.yaml", q(16)),
        "eval": Run("eval", PIPELINES / "espeak-eval.yaml", q(6)),
        "eval-domains": Run("eval-domains", PIPELINES / "espeak-eval-domains.yaml", q(4)),
        "eval-voices": Run("eval-voices", PIPELINES / "espeak-eval-voices.yaml", q(4)),
        "kokoro-eval": Run("kokoro-eval", PIPELINES / "kokoro-eval.yaml", q(2)),
        "ablate-full": Run("ablate-full", PIPELINES / "espeak-ablate-full.yaml", q(10)),
    }
    for slug in ablations:
        if slug in FIXED_ABLATIONS:
            path = PIPELINES / FIXED_ABLATIONS[slug][1]
        else:
            path = write_family_ablation(work, slug)
        out[f"ablate-{slug}"] = Run(f"ablate-{slug}", path, q(10))
    return out


def _dump(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def write_family_ablation(work: Path, slug: str) -> Path:
    """Copies of the reference seeds with the family's rates at 0, and a pipeline that points at them
    (derived from espeak-ablate-full.yaml: same name, run seed and scene). Deterministic: the same
    files for the same inputs. Returns the pipeline path."""
    from synth.io.config_files import load_pipeline, resolve_seed_paths

    title, ids, families, overrides, drop_third_party = FAMILY_ABLATIONS[slug]
    ids = ids()
    ref_path = PIPELINES / "espeak-ablate-full.yaml"
    folder = work / "ablations" / slug
    for seed_path in resolve_seed_paths(load_pipeline(ref_path), ref_path):
        seed = yaml.safe_load(seed_path.read_text(encoding="utf-8"))
        rates = dict(seed.get("phenomena") or {})
        for key in (*families, *ids):
            rates[key] = 0.0
        seed["phenomena"] = rates
        if drop_third_party:
            seed.get("personas", {}).pop("third_party", None)
        head = (f"# {seed_path.name} {title} (bench/learnability.py): rates at 0 for "
                f"{', '.join((*families, *ids))}" + ("; no third party" if drop_third_party else "") + "\n")
        _dump(folder / "seeds" / seed_path.name, head + yaml.safe_dump(seed, allow_unicode=True, sort_keys=False))
    pipe = yaml.safe_load(ref_path.read_text(encoding="utf-8"))
    pipe["seeds"] = ["seeds/*.yaml"]
    for bank in pipe.get("acoustics", {}).get("banks", []):
        bank["path"] = os.path.relpath((ref_path.parent / bank["path"]).resolve(), folder.resolve())
    pipe["output"]["dir"] = f"outputs/learn-espeak-ablate-{slug}"
    for section, values in overrides.items():
        pipe.setdefault(section, {}).update(values)
    head = (f"# {title}: derived by bench/learnability.py from pipelines/learn/espeak-ablate-full.yaml\n"
            f"# (same name, run seed, voices and scene; seeds with rates at 0 for {', '.join((*families, *ids))}"
            + ("; no third party in the personas" if drop_third_party else "")
            + ("; " + ", ".join(f"{s}: {v}" for s, v in overrides.items()) if overrides else "") + ")\n")
    out = folder / "pipeline.yaml"
    _dump(out, head + yaml.safe_dump(pipe, allow_unicode=True, sort_keys=False))
    return out


def generate(run: Run, folder: Path, workers: int, log) -> dict:
    """``synth run`` into ``folder`` (resumes); wall and CPU seconds of this call."""
    cmd = [sys.executable, "-m", "synth.cli", "run", str(run.pipeline), "--out", str(folder), "--workers", str(workers)]
    if run.sessions is not None:
        cmd += ["--sessions", str(run.sessions)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"synth run {run.pipeline.name} failed (exit {p.returncode}):\n{p.stdout[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stats = json.loads((folder / "stats.json").read_text())
    log(f"  {run.key:<24} {stats['sessions']:>4} sessions {stats['audio_s'] / 3600:6.3f} h  "
        f"wall {wall:7.1f} s  CPU {cpu:7.1f} s  ({run.pipeline.name}"
        + (f" --sessions {run.sessions})" if run.sessions is not None else ")"))
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "sessions": stats["sessions"],
            "rejects": stats.get("rejects", 0), "audio_h": round(stats["audio_s"] / 3600, 4)}


def generate_all(runs: dict[str, Run], work: Path, quick: bool, workers: int, log) -> dict:
    """Every run, resumed where it stopped; costs add up over calls in WORK/generation.json."""
    path = work / "generation.json"
    book = json.loads(path.read_text()) if path.is_file() else {}
    log(f"generating {len(runs)} runs into {work / 'runs'} (synth run --workers {workers}; finished runs are skipped)")
    for key, run in runs.items():
        folder = run.folder(work, quick)
        name = folder.name
        r = generate(run, folder, workers, log)
        prev = book.get(name, {})
        book[name] = {"pipeline": str(run.pipeline.relative_to(ROOT) if run.pipeline.is_relative_to(ROOT)
                                      else run.pipeline),
                      "sessions_arg": run.sessions, "sessions": r["sessions"], "rejects": r["rejects"],
                      "audio_h": r["audio_h"],
                      "wall_s": round(prev.get("wall_s", 0) + r["wall_s"], 2),
                      "cpu_s": round(prev.get("cpu_s", 0) + r["cpu_s"], 2)}
        book[name]["cpu_s_per_audio_s"] = round(book[name]["cpu_s"] / max(1e-9, r["audio_h"] * 3600), 4)
        _dump(path, json.dumps(book, indent=1, sort_keys=True))
    return book


# --- what the ablations remove ------------------------------------------------------------------
def count_run(folder: Path) -> dict:
    """Phenomenon families (stats.json) and event kinds (records) of one run."""
    import pyarrow.parquet as pq

    stats = json.loads((folder / "stats.json").read_text())
    ev = {"user_backchannel_events": 0, "side_talk_events": 0, "background_events": 0, "interrupt_events": 0,
          "work_items": 0}
    for f in sorted((folder / "shards" / "parquet").glob("*.parquet")):
        for row in pq.read_table(f, columns=["events", "delegations"]).to_pylist():
            events = row["events"] if not isinstance(row["events"], str) else json.loads(row["events"])
            dels = row["delegations"] if not isinstance(row["delegations"], str) else json.loads(row["delegations"])
            ev["work_items"] += len(dels or [])
            for e in events:
                spk, rel = e["speaker"], e.get("relation")
                sound = (e.get("text") or "").startswith("[")
                # a cooperative completion is attached the same way but is an overlap, not a backchannel
                ev["user_backchannel_events"] += (spk == "user" and rel == "backchannels_on" and not sound
                                                  and "cooperative_completion" not in (e.get("phenomena") or []))
                ev["side_talk_events"] += spk == "third_party" or (spk == "user" and rel == "addresses_other")
                ev["background_events"] += spk == "background"
                ev["interrupt_events"] += rel == "interrupts"
    ph = stats.get("phenomena", {})
    fam = stats.get("families", {})
    return {"sessions": stats["sessions"], "hours": round(stats["audio_s"] / 3600, 3),
            "backchannels": fam.get("backchannels", 0), "side_talk": sum(ph.get(p, 0) for p in SIDE_TALK),
            "background_media": ph.get("background_media", 0), "barge_ins": sum(ph.get(p, 0) for p in BARGE_INS),
            "delegation": fam.get("delegation", 0), **ev}


CHECK_COLUMNS = ("sessions", "hours", "backchannels", "user_backchannel_events", "side_talk", "side_talk_events",
                 "background_media", "background_events", "barge_ins", "interrupt_events", "delegation",
                 "work_items")
REMOVES = {"no-backchannels": ("backchannels", "user_backchannel_events"),
           "no-side-talk": ("side_talk", "side_talk_events"),
           "no-background-speech": ("background_media", "background_events"),
           "no-barge-ins": ("barge_ins", "interrupt_events"),
           "no-delegation": ("delegation", "work_items")}


def check_ablations(runs: dict[str, Run], work: Path, quick: bool, log) -> dict:
    rows = {k[len("ablate-"):]: count_run(r.folder(work, quick)) for k, r in runs.items() if k.startswith("ablate-")}
    log("what each ablation run holds (phenomenon tags from stats.json; events and work items from the records):")
    log("  " + f"{'run':<22}" + " ".join(f"{c[:12]:>12}" for c in CHECK_COLUMNS))
    bad = []
    for slug, row in rows.items():
        log("  " + f"{slug:<22}" + " ".join(f"{row[c]:>12}" for c in CHECK_COLUMNS))
        bad += [f"{slug}: {c} = {row[c]}" for c in REMOVES.get(slug, ()) if row[c]]
    if bad:
        log("  NOT REMOVED: " + "; ".join(bad))
    _dump(work / ("quick-ablation_checks.json" if quick else "ablation_checks.json"),
          json.dumps(rows, indent=1, sort_keys=True))
    return rows


# --- learning -----------------------------------------------------------------------------------
def _api():
    try:
        from synth.learn import experiment
    except ImportError as e:
        raise SystemExit(f"synth.learn.experiment is not importable ({e}): run with --only generate, or install the "
                         "learn extra") from None
    return experiment


def _model_metrics(report: dict, eval_name: str) -> dict:
    m = report["evals"][eval_name]["systems"]["model"]["metrics"]
    return {k: m[k] for k in METRICS if k in m}


def _load(api, folders, hours=None, keep=None, cache=None):
    return api.load_runs([str(f) for f in folders], hours=hours, cache_dir=cache, keep=keep)


def step_splits(api, cfg, runs, work, quick, train_hours, log) -> dict:
    cache = work / "features"
    f = {k: r.folder(work, quick) for k, r in runs.items()}
    t0 = time.perf_counter()
    train = _load(api, [f["train"]], hours=train_hours, cache=cache)
    evals = {
        "in-distribution": _load(api, [f["eval"]], cache=cache),
        "held-out domains": _load(api, [f["eval-domains"]], cache=cache),
        "held-out voices": _load(api, [f["eval-voices"]], cache=cache),
        "held-out engine (kokoro)": _load(api, [f["kokoro-eval"]], cache=cache),
    }
    log(f"splits: training on {len(train)} sessions ({sum(s.duration_s for s in train) / 3600:.2f} h), "
        + ", ".join(f"{k} {len(v)}" for k, v in evals.items()))
    report = api.evaluate(progress=lambda m: log(f"    {m}"), train=train, evals=evals, cfg=cfg, train_runs=[str(f["train"])])
    # held-out language mode: train on the pool's en + zh sessions, test on the eval run's en-zh sessions
    train_mono = _load(api, [f["train"]], hours=None, keep=lambda s: s.language in ("en", "zh"), cache=cache)
    cs_eval = _load(api, [f["eval"]], keep=lambda s: s.language == "en-zh", cache=cache)
    mono_h = sum(s.duration_s for s in train_mono) / 3600
    log(f"held-out language: training on {len(train_mono)} en + zh sessions ({mono_h:.2f} h), "
        f"testing on {len(cs_eval)} en-zh sessions")
    lang = api.evaluate(progress=lambda m: log(f"    {m}"), train=train_mono, evals={"held-out language (en-zh)": cs_eval}, cfg=cfg,
                        train_runs=[str(f["train"])])
    entry = dict(lang["evals"]["held-out language (en-zh)"])
    entry["trained_on"] = {"note": "the en + zh sessions of the training pool (no code-switched speech)",
                           "sessions": len(train_mono), "hours": round(mono_h, 3)}
    report["evals"]["held-out language (en-zh)"] = entry
    report.setdefault("warnings", []).append(
        f"held-out language (en-zh) is scored by a second model trained on the {len(train_mono)} en + zh sessions "
        f"({mono_h:.2f} h) of the pool; compare it with per_language['en-zh'] of the in-distribution eval")
    report["split_seconds"] = round(time.perf_counter() - t0, 1)
    return report


def step_curve(api, cfg, runs, work, quick, hours_list, splits, train_hours, log) -> list[dict]:
    cache = work / "features"
    f = {k: r.folder(work, quick) for k, r in runs.items()}
    ev = _load(api, [f["eval"]], cache=cache)
    points = []
    for h in hours_list:
        t0 = time.perf_counter()
        same = (splits is not None and abs(h - train_hours) < 1e-9
                and all(splits.get("config", {}).get(k) == getattr(cfg, k)
                        for k in ("seeds", "epochs", "hidden", "device", "tolerance_s", "val_share")))
        if same:
            metrics, actual, src = _model_metrics(splits, "in-distribution"), splits.get("train", {}).get("hours"), "splits"
        else:
            train = _load(api, [f["train"]], hours=h, cache=cache)
            actual = round(sum(s.duration_s for s in train) / 3600, 3)
            if h > actual + 0.05:
                log(f"  curve: the pool holds only {actual:.2f} h, not {h} h: point skipped")
                continue
            rep = api.evaluate(progress=lambda m: log(f"    {m}"), train=train, evals={"in-distribution": ev}, cfg=dataclasses.replace(cfg, controls=False),
                               train_runs=[str(f["train"])])
            metrics, src = _model_metrics(rep, "in-distribution"), "curve"
        points.append({"hours": h, "seeds": cfg.seeds, "metrics": metrics, "train_hours": actual, "source": src,
                       "seconds": round(time.perf_counter() - t0, 1)})
        log(f"  curve {h:>5} h: " + "  ".join(f"{SHORT[k]} {fmt(v)}" for k, v in metrics.items()))
    return points


def step_ablations(api, cfg, runs, work, quick, hours, slugs, checks, log) -> list[dict]:
    cache = work / "features"
    f = {k: r.folder(work, quick) for k, r in runs.items()}
    ev = _load(api, [f["eval"]], cache=cache)
    c = dataclasses.replace(cfg, controls=False)

    def train_on(key):
        train = _load(api, [f[key]], hours=hours, cache=cache)
        got = sum(s.duration_s for s in train) / 3600
        if got < hours * 0.97:
            log(f"  warning: {key} holds {got:.2f} h, less than the {hours} h of the comparison")
        return api.evaluate(progress=lambda m: log(f"    {m}"), train=train, evals={"in-distribution": ev}, cfg=c, train_runs=[str(f[key])]), got

    t0 = time.perf_counter()
    full, full_h = train_on("ablate-full")
    log(f"  reference (everything on, {full_h:.2f} h): " + "  ".join(
        f"{SHORT[k]} {fmt(v)}" for k, v in _model_metrics(full, "in-distribution").items()))
    out = []
    for slug in slugs:
        t1 = time.perf_counter()
        rep, got = train_on(f"ablate-{slug}")
        effects = {m: api.paired_effect(rep, full, eval_name="in-distribution", metric=m) for m in METRICS}
        name = FIXED_ABLATIONS[slug][0] if slug in FIXED_ABLATIONS else FAMILY_ABLATIONS[slug][0]
        out.append({"name": name, "slug": slug, "hours": hours, "train_hours": round(got, 3), "seeds": cfg.seeds,
                    "effects": effects, "metrics": _model_metrics(rep, "in-distribution"),
                    "per_family": rep["evals"]["in-distribution"]["systems"]["model"].get("per_family"),
                    "check": (checks or {}).get(slug), "seconds": round(time.perf_counter() - t1, 1)})
        log(f"  {name:<28} " + "  ".join(f"d {SHORT[k]} {fmt(v, signed=True)}" for k, v in effects.items()))
    ref = {"name": "reference (everything on)", "hours": hours, "train_hours": round(full_h, 3),
           "metrics": _model_metrics(full, "in-distribution"),
           "per_family": full["evals"]["in-distribution"]["systems"]["model"].get("per_family"),
           "check": (checks or {}).get("full"), "seconds": round(time.perf_counter() - t0, 1)}
    return out, ref


# --- report -------------------------------------------------------------------------------------
def fmt(ci, signed=False) -> str:
    if not isinstance(ci, dict) or ci.get("value") is None:
        return "   -   "
    s = "+.3f" if signed else ".3f"
    lo, hi = ci.get("lo"), ci.get("hi")
    return f"{ci['value']:{s}} [{lo:{s}}, {hi:{s}}]" if lo is not None and hi is not None else f"{ci['value']:{s}}"


def summary_lines(report: dict) -> list[str]:
    out = []
    for name, ev in (report.get("evals") or {}).items():
        out.append(f"{name}: {ev.get('sessions')} sessions, {ev.get('hours', 0):.2f} h")
        for sysname, s in (ev.get("systems") or {}).items():
            m = (s or {}).get("metrics") or {}
            out.append(f"  {sysname:<16} " + "  ".join(f"{SHORT[k]} {fmt(m.get(k))}" for k in METRICS))
    if report.get("learning_curve"):
        out.append("learning curve (model on the in-distribution eval):")
        for p in report["learning_curve"]:
            out.append(f"  {p['hours']:>5} h ({p.get('train_hours')} h, {p['seeds']} seeds)  "
                       + "  ".join(f"{SHORT[k]} {fmt(p['metrics'].get(k))}" for k in METRICS))
    if report.get("ablations"):
        ref = report.get("ablation_reference") or {}
        out.append(f"ablations at {report['ablations'][0]['hours']} h, paired differences (ablated - everything on), "
                   f"reference " + "  ".join(f"{SHORT[k]} {fmt((ref.get('metrics') or {}).get(k))}" for k in METRICS))
        for a in report["ablations"]:
            out.append(f"  {a['name']:<28} " + "  ".join(f"{SHORT[k]} {fmt(a['effects'].get(k), signed=True)}"
                                                       for k in METRICS))
    for w in report.get("warnings") or []:
        out.append(f"warning: {w}")
    return out


def combine(parts: dict) -> dict:
    base = dict(parts.get("splits") or {"kind": "synth-learn-report", "version": 1, "evals": {}, "warnings": []})
    if parts.get("curve"):
        base["learning_curve"] = parts["curve"]
    if parts.get("ablations"):
        base["ablations"] = parts["ablations"]["effects"]
        base["ablation_reference"] = parts["ablations"]["reference"]
    return base


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=ROOT / "outputs" / "learnability", help="runs, caches and reports")
    ap.add_argument("--quick", action="store_true", help="small runs, 1 seed, 2 curve points, 1 ablation (<= 10 min)")
    ap.add_argument("--seeds", type=int, default=None, help="model seeds per comparison (default 3; quick 1)")
    ap.add_argument("--epochs", type=int, default=None, help="training epochs (default: LearnConfig's)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--workers", type=int, default=2, help="synth run --workers")
    ap.add_argument("--learn-workers", type=int, default=2, help="training processes at a time (one torch thread each)")
    ap.add_argument("--only", choices=["generate", "curve", "splits", "ablations"], default=None)
    ap.add_argument("--ablations", default=None,
                    help=f"comma list of {','.join(ABLATION_ORDER)} (default all; quick: no-room-noise)")
    ap.add_argument("--results", type=Path, default=None,
                    help="results text file (default bench/learnability_results_<date>.txt; --quick or --only: in WORK)")
    a = ap.parse_args()
    work = a.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    seeds = a.seeds or (1 if a.quick else 3)
    slugs = a.ablations.split(",") if a.ablations else (["no-room-noise"] if a.quick else list(ABLATION_ORDER))
    unknown = [s for s in slugs if s not in ABLATION_ORDER]
    if unknown:
        raise SystemExit(f"--ablations: unknown {unknown[0]!r} (known: {', '.join(ABLATION_ORDER)})")
    train_hours = 0.5 if a.quick else TRAIN_HOURS
    curve_hours = (0.25, 0.5) if a.quick else CURVE_HOURS
    abl_hours = 0.25 if a.quick else ABLATION_HOURS
    lines: list[str] = []

    def log(s=""):
        print(s, flush=True)
        lines.append(s)

    cmd = "python bench/learnability.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    log(f"# {cmd}  ({_dt.datetime.now().isoformat(timespec='seconds')}, main at {git_rev()})")
    for line in machine_lines(a.device):
        log(line)
    t_all = time.perf_counter()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)

    # 1. the runs
    runs = runs_for(work, a.quick, slugs)
    need = {"generate": list(runs), "splits": ["train", "eval", "eval-domains", "eval-voices", "kokoro-eval"],
            "curve": ["train", "eval"], "ablations": ["eval", "ablate-full", *[f"ablate-{s}" for s in slugs]]}
    keys = need[a.only] if a.only else list(runs)
    book = generate_all({k: runs[k] for k in keys}, work, a.quick, a.workers, log)
    checks = None
    if any(k.startswith("ablate-") for k in keys):
        checks = check_ablations({k: runs[k] for k in keys}, work, a.quick, log)

    parts_dir = work / ("parts-quick" if a.quick else "parts")
    parts = {p: json.loads((parts_dir / f"{p}.json").read_text()) for p in ("splits", "curve", "ablations")
             if (parts_dir / f"{p}.json").is_file()}
    if a.only != "generate":
        api = _api()
        kw = {"seeds": seeds, "device": a.device, "workers": a.learn_workers}
        if a.epochs is not None:
            kw["epochs"] = a.epochs
        cfg = api.LearnConfig(**kw)
        steps = [a.only] if a.only else ["splits", "curve", "ablations"]
        for step in steps:
            t0 = time.perf_counter()
            log(f"{step} ({seeds} seeds, device {a.device}):")
            if step == "splits":
                parts["splits"] = step_splits(api, cfg, runs, work, a.quick, train_hours, log)
            elif step == "curve":
                parts["curve"] = step_curve(api, cfg, runs, work, a.quick, curve_hours, parts.get("splits"),
                                            train_hours, log)
            else:
                effects, ref = step_ablations(api, cfg, runs, work, a.quick, abl_hours, slugs, checks, log)
                parts["ablations"] = {"effects": effects, "reference": ref}
            _dump(parts_dir / f"{step}.json", json.dumps(parts[step], indent=1))
            log(f"  {step} took {time.perf_counter() - t0:.0f} s")

    # 3. the report
    report = combine(parts)
    report["generation"] = book
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    ruc = resource.getrusage(resource.RUSAGE_CHILDREN)
    report["bench"] = {"command": cmd, "machine": machine_lines(a.device), "wall_s": round(time.perf_counter() - t_all, 1),
                       "cpu_s_self": round(ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime, 1),
                       "cpu_s_children": round(ruc.ru_utime + ruc.ru_stime, 1),
                       "peak_rss_mb_self": round(ru1.ru_maxrss / 1024, 1)}
    _dump(work / ("learnability-quick.json" if a.quick else "learnability.json"), json.dumps(report, indent=1))
    if parts:
        try:
            from synth.learn.report import write_html

            html = work / ("learnability-quick.html" if a.quick else "learnability.html")
            write_html(report, html)
            log(f"report: {html}")
        except ImportError as e:
            log(f"no HTML report (synth.learn.report: {e})")
    log("")
    log("generation (synth run; CPU = the run and its workers, summed over every call):")
    for name, g in sorted(book.items()):
        if name.startswith("quick-") == a.quick:
            log(f"  {name:<30} {g['sessions']:>4} sessions {g['audio_h']:6.3f} h  "
                f"mean {3600 * g['audio_h'] / max(1, g['sessions']):5.1f} s/session  CPU {g['cpu_s']:7.1f} s "
                f"({g['cpu_s_per_audio_s']:.4f} CPU-s per audio-s)")
    if parts:
        try:
            from rich.console import Console

            from synth.learn.report import print_summary

            console = Console(record=True, width=140)
            print_summary(report, console)
            lines.append(console.export_text(styles=False).rstrip())
        except ImportError:
            for line in summary_lines(report):
                log(line)
    b = report["bench"]
    log(f"bench: wall {b['wall_s']:.0f} s, CPU {b['cpu_s_self']:.0f} s here + {b['cpu_s_children']:.0f} s in children, "
        f"peak RSS {b['peak_rss_mb_self']:.0f} MB (this process)")
    date = _dt.date.today().isoformat()
    # the full standard experiment goes to bench/ (to commit); --quick and --only parts stay in WORK
    tag = "-".join(x for x in ("quick" if a.quick else "", a.only or "") if x)
    results = a.results or (work / f"learnability_results_{date}-{tag}.txt" if tag
                            else ROOT / "bench" / f"learnability_results_{date}.txt")
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"results: {results}")


if __name__ == "__main__":
    main()
