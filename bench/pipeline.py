"""Benchmark: the embedded-default pipeline end to end, with 1 and with 2 workers.

    .venv/bin/python bench/pipeline.py [--sessions 48] [--pipeline pipelines/demo-espeak.yaml]

Runs ``synth run`` into fresh folders (bank already built) and prints, in one table:
audio hours per CPU-hour (user + system CPU of the run and all its workers), wall time,
the share of task time per stage (plan, tts, clock, room, mix, labels, encode, write), the
pipeline's own overhead (everything but TTS and planning), peak RSS per worker, and the
speed-up from 1 to 2 workers. Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(pipeline: Path, sessions: int, workers: int, executor: str) -> dict:
    out = Path(tempfile.mkdtemp(prefix="bench-")) / "out"
    cmd = [sys.executable, "-m", "synth.cli", "run", str(pipeline), "--out", str(out), "--sessions", str(sessions),
           "--workers", str(workers), "--executor", executor]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(err[-2000:])
    stats = json.loads((out / "stats.json").read_text())
    shutil.rmtree(out.parent, ignore_errors=True)
    cpu = usage.ru_utime + usage.ru_stime  # the run and every worker it waited for
    return {"wall_s": wall, "cpu_s": cpu, "stats": stats}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline", type=Path, default=ROOT / "pipelines" / "demo-espeak.yaml")
    ap.add_argument("--sessions", type=int, default=48)
    ap.add_argument("--executor", default="local", choices=["local", "ray"])
    a = ap.parse_args()
    # build the bank once, outside the timed runs
    run(a.pipeline, 1, 1, "local")
    res = {w: run(a.pipeline, a.sessions, w, a.executor) for w in (1, 2)}
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"{a.sessions} sessions of {a.pipeline.name}, executor {a.executor}")
    for w, r in res.items():
        s = r["stats"]
        hours = s["audio_s"] / 3600
        stage = s["stage_s"]
        total = sum(stage.values())
        own = sum(v for k, v in stage.items() if k not in ("tts", "plan"))
        shares = ", ".join(f"{k} {100 * v / total:.0f} %" for k, v in sorted(stage.items(), key=lambda kv: -kv[1]))
        print(f"{w} worker(s): {s['sessions']} sessions, {hours:.3f} h audio, wall {r['wall_s']:.1f} s, "
              f"CPU {r['cpu_s']:.1f} s -> {hours / (r['cpu_s'] / 3600):.0f} audio-h per CPU-h; "
              f"peak RSS per worker {s['peak_rss_mb']:.0f} MB")
        print(f"   stages: {shares}; pipeline's own share (not tts/plan) {100 * own / total:.0f} %")
    print(f"speed-up 1 -> 2 workers: {res[1]['wall_s'] / res[2]['wall_s']:.2f}x")


if __name__ == "__main__":
    main()
