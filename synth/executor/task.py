"""One task: sessions ``[rank*k, (rank+1)*k)`` of a run, written to files named by rank.

A retried or resumed task rewrites exactly its own files; a finished task leaves a
completion marker that a rerun of the same command skips.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from ..io.files import write_text_atomic
from ..io.shards import write_parquet, write_webdataset
from ..schema.config import PipelineConfig
from ..schema.record import Reject, TaskStats
from ..schema.seed import ScenarioSeed


@dataclass(frozen=True)
class RunSpec:
    """Everything a worker needs, picklable: resolved config, loaded seeds, output folder."""

    config: PipelineConfig
    seeds: tuple[ScenarioSeed, ...]
    out_dir: str

    @property
    def num_tasks(self) -> int:
        return -(-self.config.sessions // self.config.output.sessions_per_shard)

    def session_ids(self, rank: int) -> list[tuple[str, ScenarioSeed]]:
        k = self.config.output.sessions_per_shard
        lo, hi = rank * k, min(self.config.sessions, (rank + 1) * k)
        # seeds round-robin over the sorted seed list: balanced coverage, independent of workers
        return [(f"{self.config.name}-{i:06d}", self.seeds[i % len(self.seeds)]) for i in range(lo, hi)]


def marker_path(out_dir: str | Path, rank: int) -> Path:
    return Path(out_dir) / "tasks" / f"{rank:05d}.done.json"


def run_task(spec: RunSpec, rank: int) -> TaskStats:
    from ..backends.espeak import EspeakTTS
    from ..backends.planner import make_planner
    from ..rng import stream
    from ..session import SessionOutput, Timer, make_session

    t_start = time.perf_counter()
    cfg = spec.config
    out = Path(spec.out_dir)
    tts = EspeakTTS(cfg.tts.voices, cfg.audio.trim_threshold_db)  # built once per task
    planner = make_planner(cfg.planner)
    timer = Timer()
    good: list[SessionOutput] = []
    rejects: list[Reject] = []
    if hasattr(planner, "prefetch"):  # the LLM planner asks for a task's plans concurrently
        t0 = time.perf_counter()
        planner.prefetch([(seed, sid, stream(cfg.seed, sid, "plan")) for sid, seed in spec.session_ids(rank)])
        timer.add("plan", t0)
    for sid, seed in spec.session_ids(rank):
        result = make_session(cfg, seed, cfg.seed, sid, planner, tts, timer)
        (good if isinstance(result, SessionOutput) else rejects).append(result)
    t0 = time.perf_counter()
    name = f"part-{rank:05d}"
    if good and "parquet" in cfg.output.formats:
        write_parquet(out / "shards" / "parquet" / f"{name}.parquet", good)
    if good and "webdataset" in cfg.output.formats:
        write_webdataset(out / "shards" / "webdataset" / f"{name}.tar", good)
    timer.stages["write"] = time.perf_counter() - t0
    by_reason: dict[str, int] = {}
    for r in rejects:
        by_reason[r.reason] = by_reason.get(r.reason, 0) + 1
    phen: dict[str, int] = {}
    langs: dict[str, int] = {}
    for g in good:
        langs[g.record.language] = langs.get(g.record.language, 0) + 1
        for h in g.record.phenomena:
            phen[h.id] = phen.get(h.id, 0) + 1
    stats = TaskStats(
        rank=rank, sessions=len(good), rejects=len(rejects),
        audio_s=round(sum(g.record.duration_s for g in good), 3),
        wall_s=round(time.perf_counter() - t_start, 3),
        stage_s={k: round(v, 3) for k, v in sorted(timer.stages.items())},
        rejects_by_reason=dict(sorted(by_reason.items())), phenomena=dict(sorted(phen.items())),
        languages=dict(sorted(langs.items())),
        llm_usage=planner.usage() if hasattr(planner, "usage") else {},
    )
    write_text_atomic(out / "tasks" / f"{rank:05d}.rejects.jsonl",
                      "".join(json.dumps(r.model_dump(), sort_keys=True) + "\n" for r in rejects))
    # the marker goes last: its presence means the shard files are final
    write_text_atomic(marker_path(out, rank), json.dumps(stats.model_dump(), indent=1, sort_keys=True))
    return stats
