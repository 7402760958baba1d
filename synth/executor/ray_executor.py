"""Ray executor: one Ray task per rank; a local cluster is started on demand."""

from __future__ import annotations

import os


def run_ray(spec, ranks, workers, address, resources, on_done) -> dict[int, str]:
    """Run ``ranks`` as Ray tasks (retried by Ray on worker death); ``{rank: error}`` of failures."""
    try:
        import ray
    except ImportError:
        from ..errors import UserError

        raise UserError("executor.kind: ray needs the ray extra: pip install 'duplexsynth[ray]'") from None
    from .task import run_task

    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        check_reachable(address)
    started = False
    handlers = _stop_handlers()
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            # "local": a fresh cluster, never one that some other `ray start` left on this machine
            ray.init(address="local", num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        started = True
        _restore(handlers)
    try:
        remote = ray.remote(num_cpus=resources.cpus_per_task, num_gpus=resources.gpus_per_task,
                            max_retries=resources.max_retries)(run_task)
        spec_ref = ray.put(spec)
        refs = {remote.remote(spec_ref, r): r for r in ranks}
        pending, failed = list(refs), {}
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                try:
                    on_done(ray.get(ref))
                except Exception as e:  # noqa: BLE001 - reported per task, the others still run
                    from .run import _one_line

                    failed[refs[ref]] = _one_line(getattr(e, "cause", None) or e)
        return failed
    except BaseException:
        # a stop (Ctrl-C, SIGTERM): the cluster goes down with the driver, killing workers that
        # may be mid-write; their temporaries are removed once their processes are gone
        if started:
            ray.shutdown()
            started = False
        _remove_temporaries_of_dead_workers(spec, ranks)
        raise
    finally:
        if started:
            ray.shutdown()


def _remove_temporaries_of_dead_workers(spec, ranks, wait_s: float = 15.0) -> None:
    """Delete the shard temporaries (``.part-RRRRR.<ext>.tmp-PID``) of ``ranks`` on a local output
    folder, each once its writer process has exited (up to ``wait_s``; a live one keeps its file)."""
    import re
    import time
    from pathlib import Path

    from ..io.shards import shard_name, shard_temporaries
    from ..io.store import Store

    store = Store(spec.out_dir)
    if not store.local:
        return
    deadline = time.monotonic() + wait_s
    for rel in (rel for r in ranks for rel in shard_temporaries(store, shard_name(r))):
        m = re.search(r"\.tmp-(\d+)$", rel)
        pid = int(m.group(1)) if m else None
        while pid is not None and Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid is None or not Path(f"/proc/{pid}").exists():
            store.delete(rel)


def _stop_handlers() -> dict:
    """The SIGTERM/SIGINT handlers the CLI installed (main thread only; elsewhere none)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}


def _restore(handlers: dict) -> None:
    """``ray.init`` installs its own SIGTERM handler (exit by the signal, no "interrupted" line):
    put back the CLI's, so SIGTERM stops a Ray run as Ctrl-C does (cluster shut down, exit 130)."""
    import signal

    for sig, handler in handlers.items():
        if callable(handler):
            signal.signal(sig, handler)


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A ``host:port`` (or ``ray://host:port``) that takes no connection is one error line now;
    ``ray.init`` would retry it for minutes. ``auto`` and other forms are left to Ray."""
    import socket

    from ..errors import UserError

    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise UserError(f"--ray-address: no Ray cluster at {address} ({e.strerror or e}); "
                        "start one with `ray start --head` or omit the address for a local cluster") from None
