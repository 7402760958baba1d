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
import sys
import tempfile
from pathlib import Path

from subprocess_timing import run_timed

ROOT = Path(__file__).resolve().parents[1]


def run(pipeline: Path, sessions: int, workers: int, executor: str) -> dict:
    out = Path(tempfile.mkdtemp(prefix="bench-")) / "out"
    cmd = [sys.executable, "-m", "synth.cli", "run", str(pipeline), "--out", str(out), "--sessions", str(sessions),
           "--workers", str(workers), "--executor", executor]
    wall, cpu, _ = run_timed(cmd, ROOT, {**os.environ, "RAY_AUTH_MODE": "disabled"})  # cpu: the run and its workers
    stats = json.loads((out / "stats.json").read_text())
    shutil.rmtree(out.parent, ignore_errors=True)
    return {"wall_s": wall, "cpu_s": cpu, "stats": stats}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline", type=Path, default=ROOT / "pipelines" / "demo-espeak.yaml")
    ap.add_argument("--sessions", type=int, default=48)
    ap.add_argument("--executor", default="local", choices=["local", "ray"])
    ap.add_argument("--workers", default="1,2", help="worker counts to run, comma separated")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from synth.backends.cpu import describe

    # build the bank (and any cached model graph) once, outside the timed runs
    run(a.pipeline, 1, 1, "local")
    res = {w: run(a.pipeline, a.sessions, w, a.executor) for w in map(int, a.workers.split(","))}
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"{a.sessions} sessions of {a.pipeline.name}, executor {a.executor}")
    print(f"cpu: {describe()}")
    for w, r in res.items():
        s = r["stats"]
        hours = s["audio_s"] / 3600
        print(f"{w} worker(s): {s['sessions']} sessions, {hours:.3f} h audio, wall {r['wall_s']:.1f} s, "
              f"CPU {r['cpu_s']:.1f} s -> {hours / (r['cpu_s'] / 3600):.0f} audio-h per CPU-h "
              f"(tasks' own CPU {s.get('cpu_s', 0):.1f} s); peak RSS per worker {s['peak_rss_mb']:.0f} MB")
        print(stage_table(s))
    if len(res) > 1:
        lo, hi = min(res), max(res)
        print(f"speed-up {lo} -> {hi} workers: {res[lo]['wall_s'] / res[hi]['wall_s']:.2f}x")


def stage_table(s: dict) -> str:
    """Wall and CPU seconds per stage, with shares of the task CPU; the pipeline's own share."""
    wall, cpu = s["stage_s"], s.get("stage_cpu_s", {})
    total = sum(cpu.values()) or sum(wall.values())
    rows = [f"   {'stage':8} {'wall s':>8} {'CPU s':>8} {'CPU %':>6}"]
    for k in sorted(wall, key=lambda k: -cpu.get(k, wall[k])):
        rows.append(f"   {k:8} {wall[k]:8.1f} {cpu.get(k, float('nan')):8.1f} {100 * cpu.get(k, 0) / total:6.1f}")
    rest = s.get("cpu_s", 0) - sum(cpu.values())
    rows.append(f"   {'(other)':8} {'':8} {rest:8.1f} {'':6}  task CPU outside the stages: engine loading, shard close")
    own = sum(v for k, v in cpu.items() if k not in ("tts", "plan"))
    rows.append(f"   pipeline's own share (not tts/plan): {100 * own / total:.0f} % of stage CPU")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
