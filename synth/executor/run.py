"""Run folders and executors: resolve, refuse mismatched configs, run pending ranks, merge stats."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from concurrent.futures import ProcessPoolExecutor
from typing import Callable

from .. import __version__
from ..errors import UserError
from ..io.store import Store
from ..schema.record import TaskStats
from .task import RunSpec, marker_name, marker_problems, read_marker, run_task
from .odd_settings import odd_settings
from .stop import quiet_swallowed_interrupts, request_stop


def data_settings(spec: RunSpec) -> dict:
    """Everything that decides the data, and nothing else: the fingerprint input, kept in
    ``run.json`` so that a refused resume can name what changed. The content folders count by the
    digest of their files (``content``, only when the pipeline has some: runs without keep their
    fingerprint)."""
    out = {
        "config": spec.config.generation_part(),
        "seeds": [s.model_dump(mode="json") for s in spec.seeds],
        "version": __version__,
        "bank": spec.bank.digest if spec.bank is not None else None,
        "plans": None if spec.plans is None else hashlib.blake2b(
            json.dumps(spec.plans).encode(), digest_size=16).hexdigest(),
    }
    if spec.content is not None and spec.content.digest is not None:
        out["content"] = spec.content.digest
    return out


def fingerprint(spec: RunSpec) -> str:
    payload = data_settings(spec)
    return hashlib.blake2b(json.dumps(payload, sort_keys=True).encode(), digest_size=16).hexdigest()


def settings_diff(old, new, path: str = "") -> list[str]:
    """``"timing.gap_ms.mean: 200 -> 250"`` for every leaf that differs (lists compared whole,
    seeds by id)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            out += settings_diff(old.get(k, "(unset)"), new.get(k, "(unset)"), f"{path}.{k}" if path else str(k))
        return out
    if old == new:
        return []
    return [f"{path}: {json.dumps(old, sort_keys=True)[:80]} -> {json.dumps(new, sort_keys=True)[:80]}"]


def _refusal(store: Store, old_info: dict, spec: RunSpec, fp: str) -> str:
    old = old_info.get("data_settings")
    if old is None:  # a folder written before run.json kept its data settings
        return (f"{store}: made with a different generation config (fingerprint "
                f"{old_info.get('fingerprint')} != {fp}); use another --out folder")
    def flat(d: dict) -> dict:  # config keys at the top, as a pipeline file spells them
        seeds = {s.get("id", i): s for i, s in enumerate(d.get("seeds", []))}
        return {**d.get("config", {}), "scenario_seeds": seeds, "version": d.get("version"), "bank": d.get("bank"),
                "plans": d.get("plans"), "content (digest of the folders' files)": d.get("content")}

    diffs = settings_diff(flat(old), flat(data_settings(spec)))
    shown = "; ".join(diffs[:6]) + (f"; and {len(diffs) - 6} more" if len(diffs) > 6 else "")
    return f"{store}: made with different data settings ({shown}); use another --out folder"


LOCK_NAME = ".synth-run.lock"
_HELD: dict[str, int] = {}  # folder -> the open lock file descriptor, held until the process exits


def lock_folder(folder: Path) -> None:
    """Hold an exclusive ``flock`` on ``FOLDER/.synth-run.lock`` for the rest of this process (and
    of the pool workers it forks, which inherit it), so that a second ``synth run`` on the same
    folder stops with one line instead of mixing its sessions in. The kernel drops the lock when
    its holders die, so a killed run leaves no stale lock to clean up. Local folders only: object
    stores have no such lock (use one --out per run there)."""
    import fcntl
    import socket

    key = str(folder.resolve())
    if key in _HELD:
        return
    path = folder / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 300, 0).decode("utf-8", "replace").strip() or "another process"
        os.close(fd)
        raise UserError(f"output.dir: {folder} is in use by another synth run ({holder}); "
                        "wait for it to finish or use another --out folder") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, since "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), 0)
    _HELD[key] = fd


def prepare_folder(spec: RunSpec) -> Store:
    """Create the run folder or check that it was made by the same data settings.

    A run may be resumed with more sessions (it is extended) but not fewer. A non-empty local
    folder without ``run.json`` is refused: it is someone's data, not a run.
    """
    if not str(spec.out_dir).strip():
        raise UserError("--out: an empty path (give a folder, e.g. --out outputs/myrun)")
    store = Store(spec.out_dir)
    if store.local and store.local_path().exists():
        where = store.local_path()
        if not where.is_dir():
            raise UserError(f"output.dir: {store} is a file, not a folder")
        if not (where / "run.json").exists() and any(p.name != LOCK_NAME for p in where.iterdir()):
            raise UserError(f"output.dir: {store} is not empty and not a run folder (no run.json); "
                            "use a new or empty folder")
    try:
        store.makedirs()
    except OSError as e:
        raise UserError(f"output.dir: cannot create {store} ({e.strerror or e})") from None
    if store.local and not os.access(store.local_path(), os.W_OK):
        raise UserError(f"output.dir: {store} is not writable")
    if store.local:
        lock_folder(store.local_path())
    fp = fingerprint(spec)
    if store.exists("run.json"):
        info = _run_info(store)
        if info.get("fingerprint") != fp:
            raise UserError(_refusal(store, info, spec, fp))
        before = info.get("config", {}).get("sessions", spec.config.sessions)
        if spec.config.sessions < before:
            raise UserError(f"{store}: sessions: {before} -> {spec.config.sessions}: a run can be extended, "
                            "not shrunk; use another --out folder")
        if spec.config.sessions > before:
            info["config"]["sessions"] = spec.config.sessions
            store.write_text("run.json", json.dumps(info, indent=1, sort_keys=True))
        return store
    import numpy, pyarrow, pydantic  # noqa: E401 - versions for run.json

    info = {
        "fingerprint": fp,
        "data_settings": data_settings(spec),
        "config": spec.config.model_dump(mode="json"),
        "seeds": [s.id for s in spec.seeds],
        "channels": ["user", "system"],
        "bank": None if spec.bank is None else {
            "digest": spec.bank.digest, "files": len(spec.bank.files), "categories": spec.bank.categories(),
            "skipped": [{"file": f, "reason": r} for f, r in spec.bank.skipped],
            "folders": bank_folders(spec.bank),
            "licences": sorted({f.entry.licence for f in spec.bank.files})},
        "versions": {"duplexsynth": __version__, "numpy": numpy.__version__,
                     "pyarrow": pyarrow.__version__, "pydantic": pydantic.__version__},
    }
    store.write_text("run.json", json.dumps(info, indent=1, sort_keys=True))
    return store


def bank_folders(bank) -> list[str]:
    """The bank's folders as absolute paths, for ``synth render`` to load the same files."""
    from pathlib import Path

    return sorted({str(Path(f.file).parents[len(Path(f.entry.path).parts) - 1]) for f in bank.files})


def _run_info(store: Store) -> dict:
    """``run.json`` of an existing run folder; a damaged one is a one-line error."""
    try:
        info = json.loads(store.read_text("run.json"))
    except (ValueError, UnicodeDecodeError) as e:
        raise UserError(f"{store.path('run.json')}: damaged run.json ({str(e).splitlines()[0]}); "
                        "the run cannot be resumed: use another --out folder") from None
    if not isinstance(info, dict):
        raise UserError(f"{store.path('run.json')}: damaged run.json (not a JSON object)")
    return info


def drop_broken_markers(spec: RunSpec) -> list[str]:
    """Remove the markers whose files are gone, resized or (local folders) changed, so that a rerun
    redoes those tasks; one line per task saying why."""
    store = Store(spec.out_dir)
    done = set(store.list("tasks", "*.done.json"))
    lines = []
    for r in range(spec.num_tasks):
        if marker_name(r) not in done:
            continue
        bad = marker_problems(store, r, deep=store.local)
        if bad:
            store.delete(marker_name(r))
            lines.append(f"task {r:05d}: {'; '.join(bad)}; making it again")
    return lines


def pending_ranks(spec: RunSpec) -> list[int]:
    store = Store(spec.out_dir)
    done = set(store.list("tasks", "*.done.json"))
    return [r for r in range(spec.num_tasks) if marker_name(r) not in done or not _covers(store, spec, r)]


def _covers(store: Store, spec: RunSpec, rank: int) -> bool:
    """A marker of a task that made all its sessions (the last task of a run since extended did not)."""
    s = read_marker(store, rank)[0]
    return s.sessions + s.rejects == len(spec.session_ids(rank))


def execute(spec: RunSpec, kind: str, workers: int, ray_address: str | None = None,
            on_done: Callable[[TaskStats], None] | None = None) -> dict[int, str]:
    """Run the pending ranks; returns ``{rank: error}`` for tasks that failed (after retries)."""
    ranks = pending_ranks(spec)
    done = on_done or (lambda s: None)
    failed: dict[int, str] = {}
    if not ranks:
        return failed
    from .task import release_process_tts

    in_driver = kind != "ray" and workers <= 1 and not spec.config.executor.process_per_task
    if not in_driver:
        release_process_tts()  # the driver's checked engine: workers load their own
    if kind == "ray":
        from .ray_executor import run_ray

        return run_ray(spec, ranks, workers, ray_address, spec.config.executor, done)
    if in_driver:
        for r in ranks:
            try:
                done(run_task(spec, r))
            except Exception as e:  # noqa: BLE001 - reported per task, the others still run
                failed[r] = _one_line(e)
        return failed
    todo = list(ranks)
    while todo:  # a pool broken by a killed worker: that worker's task fails, the others run again
        todo = _pool_round(spec, todo, workers, done, failed)
    return failed


def _pool_round(spec: RunSpec, ranks: list[int], workers: int, done, failed: dict[int, str]) -> list[int]:
    """Run ``ranks`` in a process pool; returns the ranks to run again in a new pool when a worker
    was killed (by a signal: SIGKILL from the OOM killer, SIGSEGV) while running its task, which
    then fails naming the signal. A pool broken with no killed worker to blame fails every rank
    it had not finished."""
    import multiprocessing
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    ex = spec.config.executor
    # fork (the default) shares the driver's pages with the workers: measured, a forkserver worker
    # peaked ~35 MB higher (it imports what a fork inherits). process_per_task: a new process for
    # every task, which Python's pool cannot do with fork, so those start from a fork server
    method = "forkserver" if ex.process_per_task and ex.start_method == "fork" else ex.start_method
    ctx = multiprocessing.get_context(method)
    started = ctx.SimpleQueue()
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_signals,
                               initargs=(os.getpid(), started),
                               max_tasks_per_child=1 if ex.process_per_task else None)
    broken: list[int] = []
    procs: dict[int, object] = {}  # every worker process the pool had, to read how each ended
    try:
        futures = {pool.submit(_pool_task, spec, r): r for r in ranks}
        procs.update(pool._processes or {})
        for f in as_completed(futures):
            procs.update(pool._processes or {})
            try:
                done(f.result())
            except BrokenProcessPool:
                broken.append(futures[f])
            except Exception as e:  # noqa: BLE001 - reported per task, the others still run
                failed[futures[f]] = _one_line(e)
    except BaseException:
        # Ctrl-C or SIGTERM of the driver: stop the workers now (each aborts its temporaries),
        # rather than waiting for their tasks as the pool's own shutdown would
        for proc in list((pool._processes or {}).values()):
            proc.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    procs.update(pool._processes or {})
    pool.shutdown(wait=True)
    if not broken:
        return []
    rank_of: dict[int, int] = {}
    while not started.empty():
        pid, rank = started.get()
        rank_of[pid] = rank  # a worker's last task
    killed = {rank_of[p.pid]: -p.exitcode for p in procs.values()
              if p.exitcode is not None and p.exitcode < 0 and p.pid in rank_of and rank_of[p.pid] in broken}
    if not killed:
        for r in broken:
            failed[r] = "BrokenProcessPool: a worker process ended abruptly (no signal to name)"
        return []
    for r, sig in killed.items():
        failed[r] = _killed_message(sig)
    return [r for r in broken if r not in killed]


def _killed_message(sig: int) -> str:
    import signal

    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    why = (" (the kernel's OOM killer sends it when memory runs out: see dmesg; fewer workers need less)"
           if sig == signal.SIGKILL else "")
    return f"its worker was killed by {name}{why}; the other tasks went on"


_IN_TASK = {"on": False}


def _worker_signals(driver_pid: int | None = None, started=None) -> None:
    """Pool workers: the driver alone handles Ctrl-C; SIGTERM (the driver stopping them) aborts
    the running task, so its temporary files go, or exits an idle worker quietly. On Linux the
    kernel also sends SIGTERM when the driver dies (even by SIGKILL), so no worker is left to
    finish queued tasks and idle under PID 1; its task is redone by the next run."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    quiet_swallowed_interrupts()

    def on_term(signum, frame):
        if _IN_TASK["on"]:
            request_stop(signum, frame)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    _die_with(driver_pid, signal.SIGTERM)
    _STARTED["queue"] = started


def _die_with(driver_pid: int | None, sig: int) -> None:
    """``prctl(PR_SET_PDEATHSIG)``: ``sig`` to this process when its parent exits (Linux only)."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if driver_pid is not None and driver_pid not in _ancestors(2):  # the driver died before prctl
        os._exit(128 + int(sig))


def parent_pid(pid: int) -> int | None:
    """The parent of process ``pid`` as ``/proc/<pid>/stat`` says (None where it cannot be read)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])  # the field after the state
    except (OSError, ValueError, IndexError):
        return None


def _ancestors(depth: int) -> list[int]:
    """This process's parent, its parent's parent, ... (``depth`` of them): a forkserver's worker
    has the fork server between it and the driver."""
    out, pid = [os.getppid()], os.getppid()
    while len(out) < depth and (pid := parent_pid(pid)) is not None:
        out.append(pid)
    return out


_STARTED: dict = {"queue": None}  # a pool worker says which task it starts (pid, rank): the driver names a killed one's


def _pool_task(spec: RunSpec, rank: int) -> TaskStats:
    if _STARTED["queue"] is not None:
        _STARTED["queue"].put((os.getpid(), rank))
    _IN_TASK["on"] = True
    try:
        return run_task(spec, rank)
    except KeyboardInterrupt:  # stopped by the driver; run_task has removed its temporaries
        os._exit(128 + 15)  # the pool would report it and hand this worker the next task
    finally:
        _IN_TASK["on"] = False


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def merge(spec: RunSpec) -> dict:
    """Write ``rejects.jsonl`` and ``stats.json`` from the per-task files, in rank order."""
    store = Store(spec.out_dir)
    totals: dict = {"sessions": 0, "rejects": 0, "audio_s": 0.0, "task_wall_s": 0.0, "cpu_s": 0.0,
                    "stage_s": {}, "stage_cpu_s": {},
                    "rejects_by_reason": {}, "phenomena": {}, "languages": {}, "families": {},
                    "phenomena_by_language": {}, "llm_usage": {}, "tasks": spec.num_tasks,
                    "bank_files_skipped": len(spec.bank.skipped) if spec.bank is not None else 0,
                    "tasks_all_rejected": [], "peak_rss_mb": 0.0, "config_warnings": odd_settings(spec)}
    lines = []
    for r in range(spec.num_tasks):
        if not store.exists(marker_name(r)):
            continue
        s, _ = read_marker(store, r)
        totals["sessions"] += s.sessions
        totals["rejects"] += s.rejects
        totals["audio_s"] += s.audio_s
        totals["task_wall_s"] += s.wall_s
        totals["cpu_s"] += s.cpu_s
        totals["peak_rss_mb"] = max(totals["peak_rss_mb"], s.peak_rss_mb)
        if s.sessions == 0 and s.rejects:
            totals["tasks_all_rejected"].append(r)
        for key in ("stage_s", "stage_cpu_s", "rejects_by_reason", "phenomena", "languages", "families", "phenomena_by_language", "llm_usage"):
            for k, v in getattr(s, key).items():
                totals[key][k] = totals[key].get(k, 0) + v
        rej = f"tasks/{r:05d}.rejects.jsonl"
        if store.exists(rej):
            lines.append(store.read_text(rej))
    totals["audio_s"] = round(totals["audio_s"], 3)
    for key in ("task_wall_s", "cpu_s"):
        totals[key] = round(totals[key], 3)
    for key in ("stage_s", "stage_cpu_s"):
        totals[key] = {k: round(v, 3) for k, v in sorted(totals[key].items())}
    for key in ("rejects_by_reason", "phenomena", "languages", "families", "phenomena_by_language", "llm_usage"):
        totals[key] = dict(sorted(totals[key].items()))
    store.write_text("rejects.jsonl", "".join(lines))
    store.write_text("stats.json", json.dumps(totals, indent=1, sort_keys=True))
    return totals
