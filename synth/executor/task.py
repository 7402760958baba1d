"""One task: sessions ``[rank*k, (rank+1)*k)`` of a run, written to files named by rank.

A retried or resumed task rewrites exactly its own files; a finished task leaves a
completion marker that a rerun of the same command skips.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from ..io.store import Store
from .heap import return_big_blocks
from .stop import check_stop
from ..io.shards import ShardWriter, file_proof, proof_problems, remove_stale_temporaries, shard_name
from ..banks.bank import Bank
from ..backends.content import Library
from ..schema.config import PipelineConfig
from ..schema.common import session_id
from ..schema.record import Reject, TaskStats
from ..schema.seed import ScenarioSeed


@dataclass(frozen=True)
class RunSpec:
    """Everything a worker needs, picklable: resolved config, loaded seeds, output folder, the
    probed sound bank (workers decode its files lazily) and the frames of the pipeline's content
    folders as the driver read them (None: the built-in frames only)."""

    config: PipelineConfig
    seeds: tuple[ScenarioSeed, ...]
    out_dir: str
    bank: Bank | None = None
    plans: tuple[tuple[str, str, str], ...] | None = None  # (session id, seed id, plan JSON): --plans
    content: Library | None = None

    @property
    def num_tasks(self) -> int:
        return -(-self.config.sessions // self.config.output.sessions_per_shard)

    def plan_for(self, session_id: str) -> str | None:
        """The given plan of a session (``--plans``), as JSON; None: the planner makes it."""
        return next((p for sid, _, p in self.plans or () if sid == session_id), None)

    def session_ids(self, rank: int) -> list[tuple[str, ScenarioSeed]]:
        k = self.config.output.sessions_per_shard
        lo, hi = rank * k, min(self.config.sessions, (rank + 1) * k)
        if self.plans is not None:  # the plans file's sessions, in its order
            by_id = {s.id: s for s in self.seeds}
            return [(sid, by_id[seed_id]) for sid, seed_id, _ in self.plans[lo:hi]]
        # seeds round-robin over the sorted seed list: balanced coverage, independent of workers
        return [(session_id(self.config.name, i), self.seeds[i % len(self.seeds)]) for i in range(lo, hi)]


def marker_name(rank: int) -> str:
    """The task's completion marker, relative to the run folder."""
    return f"tasks/{rank:05d}.done.json"


def run_task(spec: RunSpec, rank: int) -> TaskStats:
    """Make and write the sessions of ``rank``; rejects go to the task's rejects file.

    An unexpected exception fails the task with the session id attached; its files are not
    finalised and it gets no marker, so a rerun makes it again from scratch.
    """
    from ..backends.planner import make_planner
    from ..rng import stream
    from ..session import Timer

    return_big_blocks()  # freed tracks and model outputs go back to the kernel: peak RSS per worker
    t_start, cpu_start = time.perf_counter(), time.process_time()
    cfg = spec.config
    out = Store(spec.out_dir)
    name = shard_name(rank)
    remove_stale_temporaries(out, name)
    tts = process_tts(cfg)  # loaded once per worker process, reused by its later tasks
    planner = make_planner(cfg.planner, content=spec.content)
    timer = Timer()
    writer = ShardWriter(out, name, cfg.output.formats, group=any(s.is_group for s in spec.seeds))
    if hasattr(planner, "prefetch") and spec.plans is None:  # the LLM planner asks for a task's plans concurrently
        t0 = timer.start()
        planner.prefetch([(seed, sid, stream(cfg.seed, sid, "plan")) for sid, seed in spec.session_ids(rank)])
        timer.add("plan", t0)
    try:
        rejects, counts, audio_s = _make_sessions(spec, rank, planner, tts, timer, writer)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    by_reason: dict[str, int] = {}
    _count(by_reason, [r.reason for r in rejects])
    stats = TaskStats(
        rank=rank, sessions=writer.count, rejects=len(rejects), audio_s=round(audio_s, 3),
        wall_s=round(time.perf_counter() - t_start, 3), cpu_s=round(time.process_time() - cpu_start, 3),
        peak_rss_mb=round(peak_rss_mb(), 1),
        pid=os.getpid(),
        stage_s={k: round(v, 3) for k, v in sorted(timer.stages.items())},
        stage_cpu_s={k: round(v, 3) for k, v in sorted(timer.cpu_stages.items())},
        rejects_by_reason=dict(sorted(by_reason.items())),
        **{k: dict(sorted(v.items())) for k, v in counts.items()},
        llm_usage=planner.usage() if hasattr(planner, "usage") else {},
    )
    _finish_task(out, rank, stats, rejects, writer.files)
    return stats


def _make_sessions(spec: RunSpec, rank: int, planner, tts, timer, writer: ShardWriter
                   ) -> tuple[list[Reject], dict[str, dict], float]:
    """Make each session of ``rank`` and hand it to ``writer``: the rejects, the counts by
    language, phenomenon and family, and the seconds of audio written."""
    from ..session import SessionOutput, make_session

    cfg = spec.config
    rejects: list[Reject] = []
    counts: dict[str, dict] = {"phenomena": {}, "languages": {}, "families": {}, "phenomena_by_language": {}}
    audio_s = 0.0
    for sid, seed in spec.session_ids(rank):
        check_stop()
        try:
            result = make_session(cfg, seed, cfg.seed, sid, planner, tts, timer, spec.bank, spec.plan_for(sid))
        except Exception as e:
            raise RuntimeError(f"session {sid} ({seed.id}): {type(e).__name__}: {e}") from e
        check_stop()
        if not isinstance(result, SessionOutput):
            rejects.append(result)
            continue
        t0 = timer.start()
        writer.add(result)
        timer.add("write", t0)
        rec = result.record
        audio_s += rec.duration_s
        _count(counts["languages"], [rec.language])
        _count(counts["phenomena"], [h.id for h in rec.phenomena])
        _count(counts["families"], [h.family for h in rec.phenomena])
        _count(counts["phenomena_by_language"], [f"{rec.language}/{h.id}" for h in rec.phenomena])
    return rejects, counts, audio_s


def _finish_task(out: Store, rank: int, stats: TaskStats, rejects: list[Reject], shard_files: dict) -> None:
    """The task's rejects file, then its marker proving every file it wrote."""
    rejects_rel = f"tasks/{rank:05d}.rejects.jsonl"
    out.write_text(rejects_rel, "".join(json.dumps(r.model_dump(), sort_keys=True) + "\n" for r in rejects))
    files = {**shard_files, rejects_rel: file_proof(out, rejects_rel, len(rejects))}
    # the marker goes last: its presence means the files it lists are final, and it proves them
    out.write_text(marker_name(rank), json.dumps({**stats.model_dump(), "files": files}, indent=1, sort_keys=True))


def read_marker(store: Store, rank: int) -> tuple[TaskStats, dict[str, dict] | None]:
    """A task's marker: its stats and the proof of its files (None for a marker from before proofs).

    Raises ``ValueError`` for a marker that is not valid JSON or not a marker.
    """
    data = json.loads(store.read_text(marker_name(rank)))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    files = data.pop("files", None)
    return TaskStats.model_validate(data), files


def marker_problems(store: Store, rank: int, deep: bool = True) -> list[str]:
    """Why the marker of ``rank`` does not prove its task done (empty: it does)."""
    try:
        stats, files = read_marker(store, rank)
    except (ValueError, UnicodeDecodeError) as e:
        return [f"{marker_name(rank)}: damaged marker ({str(e).splitlines()[0][:120]})"]
    if files is None:
        return []
    bad = proof_problems(store, files, deep)
    shard_rows = {p["rows"] for rel, p in files.items() if rel.startswith("shards/")}
    if shard_rows and shard_rows != {stats.sessions}:
        bad.append(f"{marker_name(rank)}: {stats.sessions} sessions but shards of {sorted(shard_rows)}")
    return bad


_PROCESS_TTS: dict[str, object] = {}


def process_tts(cfg: PipelineConfig):
    """This process's engine for ``cfg.tts``: a worker runs many tasks of one run, and loading
    Kokoro (model, G2P dictionaries) costs seconds and ~500 MB each time. Engines keep no state
    between calls that reaches the audio (eSpeak maps a fresh library per call, the neural
    engines seed each call from its request), so reuse gives the same bytes. One is kept."""
    # the pid: a forked pool worker loads its own (an inherited CUDA session would not work)
    key = json.dumps([os.getpid(), cfg.tts.model_dump(mode="json"), cfg.audio.trim_threshold_db], sort_keys=True)
    if key not in _PROCESS_TTS:
        _PROCESS_TTS.clear()
        _PROCESS_TTS[key] = build_tts(cfg)
    return _PROCESS_TTS[key]


def release_process_tts() -> None:
    """Drop this process's engine and hand its memory back before forking workers: a forked
    child's RSS starts with every page of its parent's."""
    import ctypes
    import gc

    _PROCESS_TTS.clear()
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def build_tts(cfg: PipelineConfig, check: bool = False):
    """The TTS engine of ``cfg.tts``; ``check`` loads it and its voices now (a clear error)."""
    from ..backends.routed import build_engine, check_engine

    tts = build_engine(cfg.tts, cfg.audio.trim_threshold_db)
    if check:
        check_engine(tts, cfg.tts)
    return tts


def _count(into: dict, keys) -> None:
    for k in keys:
        into[k] = into.get(k, 0) + 1


def peak_rss_mb() -> float:
    """This process's peak resident memory (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
