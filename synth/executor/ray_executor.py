"""Ray executor: one Ray task per rank; a local cluster is started on demand."""

from __future__ import annotations

import os


def run_ray(spec, ranks, workers, address, cpus_per_task, on_done) -> None:
    try:
        import ray
    except ImportError as e:
        raise ImportError("the ray executor needs Ray: pip install 'duplexsynth[ray]'") from e
    from .task import run_task

    address = address or os.environ.get("RAY_ADDRESS")
    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(num_cpus=cpus_per_task, max_retries=3)(run_task)
        pending = [remote.remote(spec, r) for r in ranks]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                on_done(ray.get(ref))
    finally:
        if started:
            ray.shutdown()
