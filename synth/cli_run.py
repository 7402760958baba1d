"""What ``synth run`` says while and after it works: the progress bar (or one line per task), the
totals, the rejects when every session was rejected; and the run spec for ``--plans``."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .cli_common import console
from .errors import UserError


def _capped_workers(workers: int, todo: list[int]) -> int:
    """No more workers than tasks left to run (said when it caps them)."""
    if todo and workers > len(todo):
        console.print(f"workers: {workers} capped at {len(todo)} (one per task to run)", highlight=False)
        return len(todo)
    return workers


def _report_run(stats: dict, store, t0: float, failed: dict) -> None:
    """The end of a run: totals, where the shards are, LLM usage, each failed task."""
    head = "[red]incomplete[/]" if failed else "[red]nothing written:[/]" if not stats["sessions"] else "[green]done[/]"
    console.print(
        f"{head} {stats['sessions']} sessions, "
        f"{stats['audio_s'] / 3600:.3f} h audio, "
        f"{stats['rejects']} rejects {stats['rejects_by_reason'] or ''} in {time.time() - t0:.1f} s"
    )
    console.print(f"  parquet:    {store.path('shards/parquet')}")
    console.print(f"  webdataset: {store.path('shards/webdataset')}")
    console.print(f"  stats:      {store.path('stats.json')}   rejects: {store.path('rejects.jsonl')}")
    if stats.get("llm_usage"):
        u = stats["llm_usage"]
        console.print(f"  llm:        {u.get('requests', 0)} requests, {u.get('cache_hits', 0)} cache hits, "
                      f"{u.get('prompt_tokens', 0)} prompt + {u.get('completion_tokens', 0)} completion tokens")
    for rank, err in sorted(failed.items()):
        console.print(f"[red]task {rank:05d} failed:[/] {escape(str(err))}", highlight=False)


def _with_plans(spec, path: Path):
    """The run spec rendering the plans of ``path``: one session per plan, in the file's order."""
    import dataclasses

    from .plans import read_plans

    rows = read_plans(path)
    known = {s.id for s in spec.seeds}
    for n, (sid, seed_id, _) in enumerate(rows, 1):
        if seed_id not in known:
            raise UserError(f"{path}: {sid}: seed_id: {seed_id!r} is not a seed of the pipeline")
    cfg = spec.config.model_copy(update={"sessions": len(rows)})
    return dataclasses.replace(spec, config=cfg, plans=rows)


def _all_rejected(store) -> None:
    """Every session was rejected: one line per reason, with a count and a first example."""
    rows = [json.loads(line) for line in store.read_text("rejects.jsonl").splitlines() if line.strip()]
    by_reason: dict[str, list[dict]] = {}
    for r in rows:
        by_reason.setdefault(f"{r.get('stage', '?')}:{r.get('reason', '?')}", []).append(r)
    console.print(f"[red]error:[/] all {len(rows)} sessions were rejected; nothing was written", highlight=False)
    for reason, rs in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        first = rs[0]
        detail = f": {first['detail']}" if first.get("detail") else ""
        console.print(f"  {reason} x{len(rs)} (first: {first.get('session_id')}{detail})", highlight=False)


class _Progress:
    """A bar on a terminal; one line per finished task otherwise (cluster jobs, CI logs)."""

    def __init__(self, total: int, done: int, t0: float):
        self.total, self.done, self.t0 = total, done, t0
        self.audio, self.rejects = 0.0, 0
        self.bar = None
        if console.is_terminal:
            self.bar = Progress(TextColumn("[bold]sessions"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TextColumn("{task.fields[note]}"), console=console)
            self.task = self.bar.add_task("run", total=total, completed=done, note="")

    def __enter__(self):
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def task_done(self, stats) -> None:
        self.audio += stats.audio_s
        self.rejects += stats.rejects
        self.done += stats.sessions + stats.rejects
        rate = self.audio / 3600 / max(1e-9, (time.time() - self.t0) / 3600)
        note = f"{self.audio / 3600:.3f} h audio, {self.rejects} rejects, {rate:.0f}x real time"
        if stats.sessions == 0 and stats.rejects:
            reasons = ", ".join(f"{k} {v}" for k, v in stats.rejects_by_reason.items())
            console.print(f"[yellow]task {stats.rank:05d}: all {stats.rejects} sessions rejected[/] ({escape(reasons)})",
                          highlight=False)
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, note=note)
        else:
            console.print(f"progress: {self.done}/{self.total} sessions, {note}", highlight=False)
