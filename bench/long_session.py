"""Benchmark: one ~20-minute session (pipelines/long-session.yaml), rendered and checked at length.

    .venv/bin/python bench/long_session.py [--pipeline pipelines/long-session.yaml] [--keep]

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
    res["viewer"] = viewer(out, rec.session_id)
    from synth.backends.cpu import describe

    res["cpu"] = describe()
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
