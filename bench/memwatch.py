"""Peak resident memory of every process of a ``synth run``: the driver, its pool workers (or
the in-process executor, where the driver is the worker), Ray's workers and daemons.

    .venv/bin/python bench/memwatch.py pipelines/demo.yaml [--sessions 4] [--workers 2]
        [--executor local|ray] [--set tts.precision=int8 ...] [--keep-cache] [--hashes FILE]

The run goes into a fresh folder from a copy of the pipeline written beside it (so its relative
paths hold) with ``--set`` overrides applied and, unless ``--keep-cache``, ``tts.cache_dir``
removed: a cached line costs no synthesis, hence no memory. Every ``--interval`` seconds the
process tree under the driver is read from ``/proc``: ``VmRSS`` (sampled peak) and ``VmHWM`` (the
kernel's own high-water mark, exact, kept as last read before the process ended). Each task's
``peak_rss_mb`` (``getrusage`` inside the worker) is printed beside them. Then the CPU flags, and
one sha256 over every shard file, to compare runs byte for byte (``--hashes`` lists each file).

Not a test: Linux only (``/proc``); RSS does not depend on load, wall time does and is not printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def pipeline_copy(pipeline: Path, sets: list[str], keep_cache: bool) -> Path:
    """The pipeline with ``key.sub=value`` overrides (values read as YAML), written beside it."""
    data = yaml.safe_load(pipeline.read_text(encoding="utf-8"))
    if not keep_cache and isinstance(data.get("tts"), dict):
        data["tts"].pop("cache_dir", None)
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep:
            sys.exit(f"--set {item!r}: expected key.sub=value")
        node = data
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(value)
    fd, name = tempfile.mkstemp(prefix=".memwatch-", suffix=".yaml", dir=pipeline.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        yaml.safe_dump(data, f, sort_keys=False)
    return Path(name)


def _status(pid: int) -> dict[str, int] | None:
    """``VmRSS`` and ``VmHWM`` of a process in MB (None: it has ended or is a zombie)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) / 1024
    except (OSError, ValueError):
        return None
    return out if len(out) == 2 else None


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, for every process now visible."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _tree(root: int) -> list[int]:
    kids, todo, seen = _children(), [root], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo.extend(kids.get(pid, []))
    return seen


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def role(pid: int, parent_cmd: str, driver: int, cmd: str) -> str:
    """What a process of the run is: the driver, a pool worker (a fork of the driver: same
    command line; or a child of the fork server), a Ray worker, or something else (Ray's daemons, multiprocessing's helpers)."""
    if pid == driver:
        return "driver"
    if cmd.startswith("ray::") or "default_worker.py" in cmd:
        return "ray-worker"
    if cmd == parent_cmd:
        return "pool-worker"
    if "multiprocessing.forkserver" in cmd:  # start_method forkserver: the server, and the workers it forks
        from synth.executor.run import parent_pid

        return "forkserver" if parent_pid(pid) == driver else "pool-worker"
    name = os.path.basename(cmd.split(" ", 1)[0]) if cmd else "?"
    for known in ("raylet", "gcs_server", "dashboard", "log_monitor", "monitor.py", "resource_tracker"):
        if known in cmd:
            return known
    return name


def watch(cmd: list[str], interval: float) -> tuple[int, dict[int, dict]]:
    """Run ``cmd`` and sample its process tree; returns its exit code and, per pid, its role,
    sampled peak RSS and last high-water mark."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    driver_cmd, seen = "", {}
    while True:
        done = proc.poll() is not None
        if not driver_cmd:
            driver_cmd = _cmdline(proc.pid)
        for pid in _tree(proc.pid):
            st = _status(pid)
            if st is None:
                continue
            rec = seen.get(pid)
            if rec is None:
                cmd_now = _cmdline(pid)
                rec = seen[pid] = {"role": role(pid, driver_cmd, proc.pid, cmd_now), "rss": 0.0, "hwm": 0.0}
            elif rec["role"] != "driver" and not rec["role"].startswith(("ray", "pool")):
                rec["role"] = role(pid, driver_cmd, proc.pid, _cmdline(pid))  # a fresh fork renames itself
            rec["rss"] = max(rec["rss"], st["VmRSS"])
            rec["hwm"] = max(rec["hwm"], st["VmHWM"])
        if done:
            return proc.returncode, seen
        time.sleep(interval)


def shard_digest(out: Path, listing: Path | None) -> str:
    """One sha256 over ``(path, sha256)`` of every file under ``shards/``, sorted by path."""
    rows = []
    for p in sorted((out / "shards").rglob("*")):
        if p.is_file():
            rows.append(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(out)}")
    if listing is not None:
        listing.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    return hashlib.sha256("\n".join(rows).encode()).hexdigest() + f" ({len(rows)} files)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pipeline", type=Path)
    ap.add_argument("--sessions", type=int)
    ap.add_argument("--workers", type=int)
    ap.add_argument("--executor", choices=["local", "ray"])
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="override a pipeline setting, e.g. tts.precision=int8 (repeatable)")
    ap.add_argument("--keep-cache", action="store_true", help="keep tts.cache_dir (default: synthesise every line)")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between samples (0.01-5)")
    ap.add_argument("--out", type=Path, help="run folder (default: a fresh temporary one, removed after)")
    ap.add_argument("--hashes", type=Path, help="write sha256 of every shard file here")
    a = ap.parse_args()
    if not 0.01 <= a.interval <= 5:
        sys.exit(f"--interval: must be 0.01-5 s (got {a.interval})")
    sys.path.insert(0, str(ROOT))
    from synth.backends.cpu import describe

    copy = pipeline_copy(a.pipeline.resolve(), a.sets, a.keep_cache)
    out = a.out or Path(tempfile.mkdtemp(prefix="memwatch-")) / "out"
    cmd = [sys.executable, "-m", "synth.cli", "run", str(copy), "--out", str(out)]
    for flag, value in (("--sessions", a.sessions), ("--workers", a.workers), ("--executor", a.executor)):
        if value is not None:
            cmd += [flag, str(value)]
    try:
        rc, seen = watch(cmd, a.interval)
    finally:
        copy.unlink(missing_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"cpu: {describe()}")
    print(f"run: {a.pipeline} {' '.join(cmd[5:])} set: {' '.join(a.sets) or '-'}"
          f"{' (tts cache kept)' if a.keep_cache else ''}; exit {rc}")
    for pid, r in sorted(seen.items(), key=lambda kv: (kv[1]["role"], kv[0])):
        print(f"  {r['role']:<12} pid {pid:>7}: peak RSS sampled {r['rss']:7.0f} MB, high-water {r['hwm']:7.0f} MB")
    workers = [r for r in seen.values() if r["role"] in ("pool-worker", "ray-worker")]
    if not workers:  # the in-process executor: the driver made the sessions
        workers = [r for r in seen.values() if r["role"] == "driver"]
    tasks = []
    for marker in sorted((out / "tasks").glob("*.done.json")):
        t = json.loads(marker.read_text())
        tasks.append(f"{t['rank']}: {t['peak_rss_mb']:.0f} MB")
    print(f"tasks' own peak_rss_mb (getrusage): {', '.join(tasks) or 'none'}")
    if workers:
        print(f"PEAK RSS PER WORKER: {max(r['hwm'] for r in workers):.0f} MB (high-water), "
              f"{max(r['rss'] for r in workers):.0f} MB (sampled)")
    if (out / "shards").is_dir():
        print(f"shards sha256: {shard_digest(out, a.hashes)}")
    if a.out is None:
        shutil.rmtree(out.parent, ignore_errors=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
