"""Benchmark: one ~20-minute session (pipelines/long-session.yaml), rendered and checked at length.

    .venv/bin/python bench/long_session.py [--pipeline pipelines/long-session.yaml] [--keep]

Runs ``synth run`` (1 worker) into a fresh folder and prints the session's length and event
count, the worker's peak RSS (``stats.json`` ``peak_rss_mb``: ``getrusage`` max RSS of the task
process; target <= 1.5 GB), the wall time of each step, and whether ``synth validate``,
``synth preview`` and ``synth export --format textgrid`` work at that length (the TextGrid is
read back with praatio when it is installed). Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def synth(*args) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "synth.cli", *map(str, args)], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - t, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", type=Path, default=ROOT / "pipelines" / "long-session.yaml")
    ap.add_argument("--keep", action="store_true", help="keep the run folder")
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-long-"))
    out = base / "out"
    res = {"run_s": synth("run", a.pipeline, "--out", out, "--workers", "1")}
    stats = json.loads((out / "stats.json").read_text())
    from synth.inspection.runfolder import RunFolder

    sessions = list(RunFolder(out).sessions(with_audio=False))
    rec = sessions[0].record
    res.update(session=rec.session_id, duration_min=round(rec.duration_s / 60, 2), events=len(rec.events),
               frames=len(rec.sys_action), markers=len(rec.markers), peak_rss_mb=stats["peak_rss_mb"],
               rejects=stats["rejects"])
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
    print(json.dumps(res, indent=1))
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"kept {base}")


if __name__ == "__main__":
    main()
