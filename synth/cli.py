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


_PLANNER_OPT = typer.Option(None, "--planner", help="scripted or llm (default from the pipeline)")
_BASE_URL_OPT = typer.Option(None, "--llm-base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
_MODEL_OPT = typer.Option(None, "--llm-model", help="Model name sent to the endpoint.")
_CACHE_OPT = typer.Option(None, "--llm-cache-dir", help="Reply cache (default $XDG_CACHE_HOME/duplexsynth/llm).")


def _planner_config(current, planner: Optional[str], base_url: Optional[str], model: Optional[str],
                    cache_dir: Optional[Path]):
    """The pipeline's planner config with the command-line overrides; ``--llm-*`` implies ``llm``."""
    from pydantic import ValidationError

    from .schema.config import PlannerConfig

    if planner not in (None, "scripted", "llm"):
        raise UserError(f"--planner: must be scripted or llm (got {planner!r})")
    llm = {k: v for k, v in {"base_url": base_url, "model": model,
                             "cache_dir": str(cache_dir) if cache_dir else None}.items() if v is not None}
    data = current.model_dump()
    data["kind"] = planner or ("llm" if llm else current.kind)
    data["llm"].update(llm)
    try:
        cfg = PlannerConfig.model_validate(data)
    except ValidationError as e:
        msg = e.errors()[0]["msg"].removeprefix("Value error, ")
        raise UserError(f"planner: {msg} (use --llm-model or planner.llm.model)") from None
    return cfg


def _check_endpoint(cfg) -> None:
    """Once per command, after the cheap checks: an unreachable LLM endpoint is one error line."""
    if cfg.kind == "llm" and cfg.llm.check_endpoint:
        from .backends.llm import check_endpoint

        check_endpoint(cfg.llm)


def _spec(pipeline: Path, out: Optional[Path], sessions: Optional[int], seed: Optional[int],
          executor: Optional[str], workers: Optional[int], planner_opts: tuple = (None, None, None, None)):
    from .executor.task import RunSpec
    from .backends.planner import make_planner
    from .io.config_files import load_pipeline, load_seed_files

    cfg = load_pipeline(pipeline)
    upd: dict = {}
    if sessions is not None:
        upd["sessions"] = sessions
    if seed is not None:
        upd["seed"] = seed
    ex = cfg.executor.model_copy(update={k: v for k, v in {"kind": executor, "workers": workers}.items() if v is not None})
    if executor not in (None, "local", "ray"):
        raise UserError(f"--executor: must be local or ray (got {executor!r})")
    planner_cfg = _planner_config(cfg.planner, *planner_opts)
    cfg = cfg.model_copy(update={**upd, "executor": ex, "planner": planner_cfg})
    pairs = load_seed_files(cfg, pipeline)
    planner = make_planner(cfg.planner)
    for p, s in pairs:
        planner.check_seed(s, str(p))
    _check_endpoint(cfg.planner)
    seeds = [s for _, s in pairs]
    out_dir = out or Path(cfg.output.dir.format(name=cfg.name))
    return RunSpec(config=cfg, seeds=tuple(seeds), out_dir=str(out_dir))


@app.command()
def run(pipeline: Path = typer.Argument(..., help="Pipeline YAML."),
        out: Optional[Path] = typer.Option(None, "--out", help="Run folder (default from the pipeline)."),
        sessions: Optional[int] = typer.Option(None, "--sessions", min=1),
        seed: Optional[int] = typer.Option(None, "--seed"),
        executor: Optional[str] = typer.Option(None, "--executor", help="local or ray"),
        workers: Optional[int] = typer.Option(None, "--workers", min=1),
        ray_address: Optional[str] = typer.Option(None, "--ray-address"),
        planner: Optional[str] = _PLANNER_OPT, llm_base_url: Optional[str] = _BASE_URL_OPT,
        llm_model: Optional[str] = _MODEL_OPT, llm_cache_dir: Optional[Path] = _CACHE_OPT) -> None:
    """Make sessions and write Parquet + WebDataset shards; resumes an interrupted run."""
    from .executor.run import execute, merge, pending_ranks, prepare_folder

    spec = _spec(pipeline, out, sessions, seed, executor, workers,
                 (planner, llm_base_url, llm_model, llm_cache_dir))
    out_dir = prepare_folder(spec)
    ex = spec.config.executor
    todo = pending_ranks(spec)
    t0 = time.time()
    with Progress(TextColumn("[bold]sessions"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[note]}"), console=console, transient=False) as bar:
        done_before = spec.config.sessions - sum(len(spec.session_ids(r)) for r in todo)
        task = bar.add_task("run", total=spec.config.sessions, completed=done_before, note="")
        totals = {"audio": 0.0, "rejects": 0}

        def on_done(stats) -> None:
            totals["audio"] += stats.audio_s
            totals["rejects"] += stats.rejects
            bar.update(task, advance=stats.sessions + stats.rejects,
                       note=f"{totals['audio'] / 3600:.3f} h audio, {totals['rejects']} rejects")

        execute(spec, ex.kind, ex.workers, ray_address or ex.ray_address, on_done)
    stats = merge(spec)
    console.print(
        f"[green]done[/] {stats['sessions']} sessions, {stats['audio_s'] / 3600:.3f} h audio, "
        f"{stats['rejects']} rejects {stats['rejects_by_reason'] or ''} in {time.time() - t0:.1f} s"
    )
    console.print(f"  parquet:    {out_dir / 'shards' / 'parquet'}")
    console.print(f"  webdataset: {out_dir / 'shards' / 'webdataset'}")
    console.print(f"  stats:      {out_dir / 'stats.json'}   rejects: {out_dir / 'rejects.jsonl'}")
    if stats.get("llm_usage"):
        u = stats["llm_usage"]
        console.print(f"  llm:        {u.get('requests', 0)} requests, {u.get('cache_hits', 0)} cache hits, "
                      f"{u.get('prompt_tokens', 0)} prompt + {u.get('completion_tokens', 0)} completion tokens")


@app.command()
def plan(path: Path = typer.Argument(..., help="A scenario seed or pipeline YAML."),
         session: int = typer.Option(0, "--session", help="Session index to plan."),
         count: int = typer.Option(1, "-n", "--count", min=1, help="Plan this many sessions from --session on."),
         seed: int = typer.Option(0, "--seed"),
         planner: Optional[str] = _PLANNER_OPT, llm_base_url: Optional[str] = _BASE_URL_OPT,
         llm_model: Optional[str] = _MODEL_OPT, llm_cache_dir: Optional[Path] = _CACHE_OPT) -> None:
    """Plan sessions (no audio) and print the validated plans as JSON (one object, or a list for -n > 1).

    Rejected sessions are reported on stderr, one line each, and make the exit code 1.
    """
    import yaml

    from .backends.planner import make_planner
    from .errors import SessionReject
    from .io.config_files import load_pipeline, load_seed, load_seeds
    from .rng import stream
    from .schema.config import PlannerConfig

    data = yaml.safe_load(path.read_text()) if path.exists() else None
    if isinstance(data, dict) and "seeds" in data:
        cfg = load_pipeline(path)
        seeds, name, run_seed, pcfg = load_seeds(cfg, path), cfg.name, cfg.seed if seed == 0 else seed, cfg.planner
    else:
        seeds, name, run_seed, pcfg = [load_seed(path)], "plan", seed, PlannerConfig()
    pcfg = _planner_config(pcfg, planner, llm_base_url, llm_model, llm_cache_dir)
    engine = make_planner(pcfg)
    for s in seeds:
        engine.check_seed(s, str(path))
    _check_endpoint(pcfg)
    jobs = [(seeds[i % len(seeds)], f"{name}-{i:06d}") for i in range(session, session + count)]
    if hasattr(engine, "prefetch"):
        engine.prefetch([(s, sid, stream(run_seed, sid, "plan")) for s, sid in jobs])
    plans, rejected = [], 0
    for s, sid in jobs:
        try:
            plans.append(engine.plan(s, sid, stream(run_seed, sid, "plan")).model_dump(mode="json"))
        except SessionReject as r:
            rejected += 1
            console.print(f"[yellow]reject[/] {sid}: {r.stage}: {r.reason} ({r.detail})", highlight=False)
    out = plans[0] if count == 1 and plans else plans
    if plans or count > 1:
        typer.echo(json.dumps(out, ensure_ascii=False, indent=1))
    if hasattr(engine, "usage"):
        u = engine.usage()
        console.print(f"{len(plans)}/{count} plans valid; {u.get('requests', 0)} requests, "
                      f"{u.get('cache_hits', 0)} cache hits, {u.get('prompt_tokens', 0)} prompt + "
                      f"{u.get('completion_tokens', 0)} completion tokens", highlight=False)
    if rejected:
        raise typer.Exit(1)


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
