"""Run folders and executors: resolve, refuse mismatched configs, run pending ranks, merge stats."""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable

from .. import __version__
from ..errors import UserError
from ..io.files import write_text_atomic
from ..schema.record import TaskStats
from .task import RunSpec, marker_path, run_task


def fingerprint(spec: RunSpec) -> str:
    payload = {
        "config": spec.config.generation_part(),
        "seeds": [s.model_dump(mode="json") for s in spec.seeds],
        "version": __version__,
    }
    return hashlib.blake2b(json.dumps(payload, sort_keys=True).encode(), digest_size=16).hexdigest()


def prepare_folder(spec: RunSpec) -> Path:
    """Create the run folder or check that it was made by the same generation config."""
    out = Path(spec.out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"output.dir: cannot create {out} ({e.strerror})") from None
    if not os.access(out, os.W_OK):
        raise UserError(f"output.dir: {out} is not writable")
    run_json = out / "run.json"
    fp = fingerprint(spec)
    if run_json.exists():
        old = json.loads(run_json.read_text()).get("fingerprint")
        if old != fp:
            raise UserError(
                f"{out}: made with a different generation config (fingerprint {old} != {fp}); "
                "use another --out folder"
            )
        return out
    import numpy, pyarrow, pydantic  # noqa: E401 - versions for run.json

    info = {
        "fingerprint": fp,
        "config": spec.config.model_dump(mode="json"),
        "seeds": [s.id for s in spec.seeds],
        "channels": ["user", "system"],
        "versions": {"duplexsynth": __version__, "numpy": numpy.__version__,
                     "pyarrow": pyarrow.__version__, "pydantic": pydantic.__version__},
    }
    write_text_atomic(run_json, json.dumps(info, indent=1, sort_keys=True))
    return out


def pending_ranks(spec: RunSpec) -> list[int]:
    return [r for r in range(spec.num_tasks) if not marker_path(spec.out_dir, r).exists()]


def execute(spec: RunSpec, kind: str, workers: int, ray_address: str | None = None,
            on_done: Callable[[TaskStats], None] | None = None) -> None:
    ranks = pending_ranks(spec)
    done = on_done or (lambda s: None)
    if not ranks:
        return
    if kind == "ray":
        from .ray_executor import run_ray

        run_ray(spec, ranks, workers, ray_address, spec.config.executor.cpus_per_task, done)
    elif workers <= 1:
        for r in ranks:
            done(run_task(spec, r))
    else:
        from concurrent.futures import as_completed

        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run_task, spec, r) for r in ranks]
            for f in as_completed(futures):
                done(f.result())


def merge(spec: RunSpec) -> dict:
    """Write ``rejects.jsonl`` and ``stats.json`` from the per-task files, in rank order."""
    out = Path(spec.out_dir)
    totals: dict = {"sessions": 0, "rejects": 0, "audio_s": 0.0, "cpu_s": 0.0, "stage_s": {},
                    "rejects_by_reason": {}, "phenomena": {}, "languages": {}, "llm_usage": {},
                    "tasks": spec.num_tasks}
    lines = []
    for r in range(spec.num_tasks):
        m = marker_path(out, r)
        if not m.exists():
            continue
        s = TaskStats.model_validate_json(m.read_text())
        totals["sessions"] += s.sessions
        totals["rejects"] += s.rejects
        totals["audio_s"] += s.audio_s
        totals["cpu_s"] += s.wall_s
        for key in ("stage_s", "rejects_by_reason", "phenomena", "languages", "llm_usage"):
            for k, v in getattr(s, key).items():
                totals[key][k] = totals[key].get(k, 0) + v
        rej = out / "tasks" / f"{r:05d}.rejects.jsonl"
        if rej.exists():
            lines.append(rej.read_text())
    totals["audio_s"] = round(totals["audio_s"], 3)
    totals["cpu_s"] = round(totals["cpu_s"], 3)
    totals["stage_s"] = {k: round(v, 3) for k, v in sorted(totals["stage_s"].items())}
    for key in ("rejects_by_reason", "phenomena", "languages", "llm_usage"):
        totals[key] = dict(sorted(totals[key].items()))
    write_text_atomic(out / "rejects.jsonl", "".join(lines))
    write_text_atomic(out / "stats.json", json.dumps(totals, indent=1, sort_keys=True))
    return totals
