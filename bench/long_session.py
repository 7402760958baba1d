"""Benchmark: one ~20-minute session (pipelines/long-session.yaml), rendered and checked at length.

    .venv/bin/python bench/long_session.py [--pipeline pipelines/long-session.yaml] [--keep]
    .venv/bin/python bench/long_session.py --pipeline pipelines/long-group.yaml --sessions 1 --minutes 30

A long group pipeline (seeds with ``long_form``) also gets: ``--minutes`` fixes the seeds' target
length (copies of the pipeline and seeds in the run folder), the planner's estimate against the
rendered length, people and addressees, and each long-range reference's values with the seconds
between the event that first said them and the question that asked for them.
The run is timed under ``/usr/bin/time -v`` when it exists (peak RSS of the largest process of the
run, beside ``stats.json``'s worker peak).

Runs ``synth run`` (1 worker) into a fresh folder and prints the session's length and event
count, the worker's peak RSS (``stats.json`` ``peak_rss_mb``: ``getrusage`` max RSS of the task
process; target <= 1.5 GB), the wall time of each step, and whether ``synth validate``,
``synth preview`` and ``synth export --format textgrid`` work at that length (the TextGrid is
read back with praatio when it is installed), and what the viewer serves for it: the session
page, the stereo mix and the picture (time, size, and this process's peak RSS while serving).
Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def synth(*args, timed: Path | None = None) -> float:
    t = time.perf_counter()
    cmd = [sys.executable, "-m", "synth.cli", *map(str, args)]
    if timed is not None and Path("/usr/bin/time").exists():
        cmd = ["/usr/bin/time", "-v", "-o", str(timed), *cmd]
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - t, 1)


def fixed_minutes(pipeline: Path, minutes: float, into: Path) -> Path:
    """A copy of ``pipeline`` whose seeds (copied too) plan ``minutes`` long sessions."""
    import glob

    import yaml

    cfg = yaml.safe_load(pipeline.read_text())
    seeds = []
    (into / "seeds").mkdir()
    for pattern in cfg["seeds"]:
        for f in sorted(glob.glob(str(pipeline.parent / pattern))):
            d = yaml.safe_load(Path(f).read_text())
            d.setdefault("long_form", {})["minutes"] = {"dist": "fixed", "value": minutes}
            (into / "seeds" / Path(f).name).write_text(yaml.safe_dump(d, allow_unicode=True))
            seeds.append(str(into / "seeds" / Path(f).name))
    cfg["seeds"] = seeds
    for bank in cfg.get("acoustics", {}).get("banks", []):
        bank["path"] = str((pipeline.parent / bank["path"]).resolve())
    out = into / pipeline.name
    out.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return out


def max_rss_mb(time_v: Path) -> int | None:
    """``Maximum resident set size`` of a ``/usr/bin/time -v`` report, in MB."""
    if not time_v.exists():
        return None
    for line in time_v.read_text().splitlines():
        if "Maximum resident set size" in line:
            return round(int(line.split()[-1]) / 1024)
    return None


def group_figures(rec) -> dict:
    """A long group session's people, addressees, the plan's estimate and its long-range references
    (values, and the seconds from first saying them to the question)."""
    meta, sr = rec.planner_meta, rec.sample_rate
    by_id = {e.id: e for e in rec.events}
    people = sorted({e.person for e in rec.events if e.person})
    addressees: dict[str, int] = {}
    for e in rec.events:
        if e.addressee:
            addressees[e.addressee] = addressees.get(e.addressee, 0) + 1
    refs = []
    for r in meta.get("long_range", []):
        said = min(by_id[i].on_sample for i in r["said"].values())
        refs.append({"values": r["values"], "said_at_s": round(said / sr, 1),
                     "asked_at_s": round(by_id[r["ask"]].on_sample / sr, 1),
                     "apart_min": round((by_id[r["ask"]].on_sample - said) / sr / 60, 2),
                     "question": by_id[r["ask"]].text, "answer": by_id[r["answer"]].text})
    return {"people": people, "addressees": addressees, "target_min": meta.get("target_min"),
            "estimated_min": meta.get("estimated_min"), "chapters": len(meta.get("chapters", [])),
            "repeated_requests": meta.get("repeats"), "long_range": refs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", type=Path, default=ROOT / "pipelines" / "long-session.yaml")
    ap.add_argument("--keep", action="store_true", help="keep the run folder")
    ap.add_argument("--sessions", type=int, default=None, help="render this many sessions (default: the pipeline's)")
    ap.add_argument("--minutes", type=float, default=None, help="long group seeds: plan sessions of this length")
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-long-"))
    out = base / "out"
    pipeline = a.pipeline.resolve()
    if a.minutes is not None:
        pipeline = fixed_minutes(pipeline, a.minutes, base)
    more = ["--sessions", a.sessions] if a.sessions else []
    res = {"run_s": synth("run", pipeline, "--out", out, "--workers", "1", *more, timed=base / "time-v.txt")}
    res["run_max_rss_mb_time_v"] = max_rss_mb(base / "time-v.txt")
    stats = json.loads((out / "stats.json").read_text())
    from synth.inspection.runfolder import RunFolder

    sessions = list(RunFolder(out).sessions(with_audio=False))
    rec = sessions[0].record
    res.update(session=rec.session_id, duration_min=round(rec.duration_s / 60, 2), events=len(rec.events),
               frames=len(rec.sys_action), markers=len(rec.markers), peak_rss_mb=stats["peak_rss_mb"],
               rejects=stats["rejects"])
    if rec.planner_meta.get("long_range") is not None:
        res["group"] = {r.session_id: {"scenario": r.scenario_id, "language": r.language,
                                       "duration_min": round(r.duration_s / 60, 2), "events": len(r.events),
                                       **group_figures(r)} for r in (s.record for s in sessions)}
    res["validate_s"] = synth("validate", out)
    res["preview_s"] = synth("preview", out, rec.session_id, "-o", base / "long.png")
    res["preview_png_kb"] = round((base / "long.png").stat().st_size / 1024)
    res["export_textgrid_s"] = synth("export", out, "--format", "textgrid", "-o", base / "tg")
    try:
        from praatio import textgrid

        tg = textgrid.openTextgrid(str(base / "tg" / f"{rec.session_id}.TextGrid"), includeEmptyIntervals=False)
        res["textgrid_tiers"] = len(tg.tierNames)
        res["textgrid_max_s"] = tg.maxTimestamp
    except ImportError:
        res["textgrid_tiers"] = "praatio not installed"
    res["viewer"] = viewer(out, rec.session_id)
    from synth.backends.cpu import describe

    res["cpu"] = describe()
    flags = next((ln.split(":", 1)[1].split() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("flags")), []) if Path("/proc/cpuinfo").exists() else []
    res["cpu_flags"] = " ".join(f for f in flags if f.startswith(("avx", "fma", "sse4", "f16c", "amx")))
    print(json.dumps(res, indent=1))
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"kept {base}")


def viewer(run_dir: Path, sid: str) -> dict:
    """The viewer's session page, stereo mix and picture of one session, served on 127.0.0.1."""
    import threading
    import urllib.request

    from synth.inspection.viewer import make_server

    server = make_server(run_dir, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    got = {}
    try:
        for name, path in [("page", f"/session/{sid}"), ("mix", f"/audio/{sid}/mix.flac"),
                           ("mix_cached", f"/audio/{sid}/mix.flac"), ("picture", f"/preview/{sid}.png")]:
            t = time.perf_counter()
            with urllib.request.urlopen(url + path, timeout=600) as r:
                n = len(r.read())
            got[name] = {"s": round(time.perf_counter() - t, 2), "mb": round(n / 2**20, 2)}
    finally:
        server.shutdown()
    got["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return got


if __name__ == "__main__":
    main()
