"""Benchmark: `synth export` of one run into every trainer format, with and without `--check`.

    .venv/bin/python bench/export.py RUN_DIR [--formats lhotse,lhotse-shar,moshi,textgrid,rttm,minicpm]

Runs each export as its own ``synth export`` process (into a fresh folder) and prints wall time,
CPU time (user + system of the process), audio hours exported per wall hour, the folder's size,
and, with ``--check``, what the consumer's reader read back. Not a test: numbers depend on the
machine, whose CPU flags are printed first.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from subprocess_timing import run_timed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def one(run_dir: Path, fmt: str, check: bool) -> dict:
    out = Path(tempfile.mkdtemp(prefix="bench-export-")) / "x"
    args = ["--format", "lhotse", "--shar"] if fmt == "lhotse-shar" else ["--format", fmt]
    cmd = [sys.executable, "-m", "synth.cli", "export", str(run_dir), *args, "-o", str(out)]
    cmd += ["--check"] if check else []
    wall, cpu, err = run_timed(cmd, ROOT)
    meta = json.loads((out / "export.json").read_text())
    return {"format": fmt, "check": check, "wall_s": wall, "cpu_s": cpu,
            "mb": size_mb(out), "sessions": meta.get("sessions"), "read_back": " ".join(err.split()[-30:]) if check else ""}


def main() -> None:
    from synth.backends.cpu import describe
    from synth.inspection.runfolder import RunFolder

    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--formats", default="lhotse,lhotse-shar,moshi,textgrid,rttm,minicpm")
    a = ap.parse_args()
    hours = sum(s.record.duration_s for s in RunFolder(a.run_dir).sessions(with_audio=False)) / 3600
    print(f"cpu: {describe()}")
    print(f"run: {a.run_dir} ({hours:.3f} h of audio)")
    print(f"{'format':<12} {'check':>5} {'sessions':>8} {'wall s':>8} {'cpu s':>8} {'audio-h/wall-h':>14} {'MB':>8}")
    for fmt in a.formats.split(","):
        for check in (False, True) if fmt not in ("minicpm",) else (False,):
            r = one(a.run_dir, fmt, check)
            print(f"{fmt:<12} {str(check):>5} {r['sessions']:>8} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} "
                  f"{hours * 3600 / r['wall_s']:>14.0f} {r['mb']:>8.1f}")
            if r["read_back"]:
                print(f"    {r['read_back']}")


if __name__ == "__main__":
    main()
