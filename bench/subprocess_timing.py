"""Run one command as a child process and time it: wall seconds and the CPU seconds of the child
and every process it waited for (``RUSAGE_CHILDREN`` before and after), as the benches report."""

from __future__ import annotations

import resource
import subprocess
import time
from pathlib import Path


def run_timed(cmd: list[str], cwd: Path, env: dict | None = None) -> tuple[float, float, str]:
    """``(wall_s, cpu_s, stderr)`` of ``cmd``; a non-zero exit ends the bench with the end of stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(p.stderr[-2000:])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stderr
