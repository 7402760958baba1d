"""The ``synth`` command line."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Synthetic full-duplex dialogue data.")
console = Console(stderr=True, soft_wrap=True)
_DEBUG = {"on": False}


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks.")) -> None:
    _DEBUG["on"] = debug


def _spec(pipeline: Path, out: Optional[str], sessions: Optional[int], seed: Optional[int],
          executor: Optional[str], workers: Optional[int]):
    from .executor.task import RunSpec
    from .backends.scripted_planner import ScriptedPlanner
    from .io.config_files import load_pipeline, load_seed_files

    cfg = load_pipeline(pipeline)
    upd: dict = {}
    if sessions is not None:
        upd["sessions"] = sessions
    if seed is not None:
        upd["seed"] = seed
    ex = cfg.executor.model_copy(update={k: v for k, v in {"kind": executor, "workers": workers}.items() if v is not None})
    cfg = cfg.model_copy(update={**upd, "executor": ex})
    if executor not in (None, "local", "ray"):
        raise UserError(f"--executor: must be local or ray (got {executor!r})")
    pairs = load_seed_files(cfg, pipeline)
    planner = ScriptedPlanner()
    for p, s in pairs:
        planner.check_seed(s, str(p))
    seeds = [s for _, s in pairs]
    out_dir = out or cfg.output.dir.format(name=cfg.name)
    return RunSpec(config=cfg, seeds=tuple(seeds), out_dir=str(out_dir), bank=_bank(cfg, pipeline))


def _bank(cfg, pipeline: Path):
    from .banks.bank import resolve_banks

    bank = resolve_banks(cfg.acoustics.banks, pipeline.resolve().parent,
                         on_build=lambda f: console.print(f"building the generated sound bank in {f}"))
    if bank is not None and bank.skipped:
        console.print(f"[yellow]warning:[/] {len(bank.skipped)} unreadable bank files skipped "
                      f"(first: {bank.skipped[0][0]}: {bank.skipped[0][1]})")
    return bank


@app.command()
def run(pipeline: Path = typer.Argument(..., help="Pipeline YAML."),
        out: Optional[str] = typer.Option(None, "--out", help="Run folder: a path or a pyarrow.fs URI "
                                          "(s3://bucket/prefix?endpoint_override=..., gs://...)."),
        sessions: Optional[int] = typer.Option(None, "--sessions", min=1),
        seed: Optional[int] = typer.Option(None, "--seed"),
        executor: Optional[str] = typer.Option(None, "--executor", help="local or ray"),
        workers: Optional[int] = typer.Option(None, "--workers", min=1),
        ray_address: Optional[str] = typer.Option(None, "--ray-address")) -> None:
    """Make sessions and write Parquet + WebDataset shards; resumes an interrupted run."""
    from .executor.run import execute, merge, pending_ranks, prepare_folder
    from .executor.task import build_tts

    spec = _spec(pipeline, out, sessions, seed, executor, workers)
    build_tts(spec.config, check=True)  # an engine that cannot load stops here, with one line
    store = prepare_folder(spec)
    ex = spec.config.executor
    todo = pending_ranks(spec)
    t0 = time.time()
    done_before = spec.config.sessions - sum(len(spec.session_ids(r)) for r in todo)
    progress = _Progress(spec.config.sessions, done_before, t0)
    with progress:
        failed = execute(spec, ex.kind, ex.workers, ray_address or ex.ray_address, progress.task_done)
    stats = merge(spec)
    console.print(
        f"[green]done[/] {stats['sessions']} sessions, {stats['audio_s'] / 3600:.3f} h audio, "
        f"{stats['rejects']} rejects {stats['rejects_by_reason'] or ''} in {time.time() - t0:.1f} s"
    )
    console.print(f"  parquet:    {store.path('shards/parquet')}")
    console.print(f"  webdataset: {store.path('shards/webdataset')}")
    console.print(f"  stats:      {store.path('stats.json')}   rejects: {store.path('rejects.jsonl')}")
    for rank, err in sorted(failed.items()):
        console.print(f"[red]task {rank:05d} failed:[/] {err}", highlight=False)
    if failed:
        console.print(f"[red]{len(failed)} of {spec.num_tasks} tasks failed[/]; "
                      "rerun the same command to retry them (finished tasks are kept)")
        raise typer.Exit(1)


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
            console.print(f"[yellow]task {stats.rank:05d}: all {stats.rejects} sessions rejected[/] ({reasons})",
                          highlight=False)
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, note=note)
        else:
            console.print(f"progress: {self.done}/{self.total} sessions, {note}", highlight=False)


@app.command()
def plan(path: Path = typer.Argument(..., help="A scenario seed or pipeline YAML."),
         session: int = typer.Option(0, "--session", help="Session index to plan."),
         seed: int = typer.Option(0, "--seed")) -> None:
    """Plan one session (no audio) and print the relational event list as JSON."""
    import yaml

    from .backends.scripted_planner import ScriptedPlanner
    from .io.config_files import load_pipeline, load_seed, load_seeds
    from .rng import stream

    data = yaml.safe_load(path.read_text()) if path.exists() else None
    if isinstance(data, dict) and "seeds" in data:
        cfg = load_pipeline(path)
        seeds = load_seeds(cfg, path)
        s, name, run_seed = seeds[session % len(seeds)], cfg.name, cfg.seed if seed == 0 else seed
    else:
        s, name, run_seed = load_seed(path), "plan", seed
    planner = ScriptedPlanner()
    planner.check_seed(s, str(path))
    sid = f"{name}-{session:06d}"
    p = planner.plan(s, sid, stream(run_seed, sid, "plan"))
    typer.echo(json.dumps(p.model_dump(mode="json"), ensure_ascii=False, indent=1))


@app.command()
def validate(out_dir: Path = typer.Argument(..., help="A run folder.")) -> None:
    """Re-check every written session; exit 1 on any violation."""
    from .validate import validate_run

    if not (out_dir / "run.json").exists():
        raise UserError(f"{out_dir}: not a run folder (no run.json)")
    n, problems = validate_run(out_dir)
    for p in problems[:50]:
        console.print(f"[red]✗[/] {p}")
    if problems:
        console.print(f"[red]{len(problems)} problems[/] in {n} sessions")
        raise typer.Exit(1)
    console.print(f"[green]ok[/] {n} sessions pass")


banks_app = typer.Typer(no_args_is_help=True, help="Sound banks: noise, babble, media, laughter.")
app.add_typer(banks_app, name="banks")


@banks_app.command("build")
def banks_build(out: Path = typer.Option(Path("noise_banks/generated"), "--out", help="Folder to write."),
                seed: int = typer.Option(0, "--seed")) -> None:
    """Generate the local bank (deterministic: same seed, same bytes) with its manifest.jsonl."""
    from .banks.generate import build_bank

    t0 = time.time()
    entries = build_bank(out, seed)
    cats: dict[str, int] = {}
    for e in entries:
        cats[e.category] = cats.get(e.category, 0) + 1
    console.print(f"[green]built[/] {len(entries)} files in {out} in {time.time() - t0:.1f} s: "
                  + ", ".join(f"{k} {v}" for k, v in sorted(cats.items())))


@banks_app.command("check")
def banks_check(folders: list[Path] = typer.Argument(..., help="Bank folders with a manifest.jsonl.")) -> None:
    """Probe every file of the banks; list the unreadable ones (they are skipped in runs)."""
    from .banks.bank import load_bank

    bank = load_bank(list(folders))
    for f, reason in bank.skipped:
        console.print(f"[yellow]skipped[/] {f}: {reason}")
    console.print(f"{len(bank.files)} files usable, {len(bank.skipped)} skipped: "
                  + ", ".join(f"{k} {v}" for k, v in bank.categories().items()))


def main() -> None:
    try:
        rc = app(standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except UserError as e:
        if _DEBUG["on"]:
            raise
        console.print(f"[red]error:[/] {e}", highlight=False)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except Exception as e:  # click usage errors
        import click

        if isinstance(e, click.exceptions.ClickException):
            e.show()
            sys.exit(e.exit_code)
        if isinstance(e, click.exceptions.Abort):
            sys.exit(130)
        raise


if __name__ == "__main__":
    main()
