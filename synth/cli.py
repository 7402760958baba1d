"""The ``synth`` command line."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from .cli_common import _BASE_URL_OPT, _CACHE_OPT, _DEBUG, _MODEL_OPT, _PLANNER_OPT, console
from .cli_content import banks_app, frames_app
from .cli_errors import _class_names, _driver_error, _interrupted
from .cli_run import _all_rejected, _capped_workers, _Progress, _report_run, _with_plans
from .errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Synthetic full-duplex dialogue data.")


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks.")) -> None:
    _DEBUG["on"] = debug




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
    if cfg.kind == "llm":
        from .backends.llm.client import check_cache_dir, default_cache_dir

        check_cache_dir(Path(cfg.llm.cache_dir) if cfg.llm.cache_dir else default_cache_dir())
    if cfg.kind == "llm" and cfg.llm.check_endpoint:
        from .backends.llm import check_endpoint

        check_endpoint(cfg.llm)


def _spec(pipeline: Path, out: Optional[str], sessions: Optional[int], seed: Optional[int],
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
    content = _content(cfg, pipeline)
    planner = make_planner(cfg.planner, content=content)
    for p, s in pairs:
        planner.check_seed(s, str(p))
    _check_endpoint(cfg.planner)
    from .backends.routed import check_engine
    from .executor.task import process_tts

    try:  # an engine that cannot load stops here, with one line, before any work; a run in this process reuses it
        check_engine(process_tts(cfg), cfg.tts)
    except UserError as e:
        raise UserError(str(e) if str(e).startswith(str(pipeline)) else f"{pipeline}: {e}") from None
    seeds = [s for _, s in pairs]
    out_dir = out or cfg.output.dir.format(name=cfg.name)
    bank = _bank(cfg, pipeline)
    if cfg.acoustics.noise:
        from .banks.bank import check_categories

        check_categories(bank, pairs)
    return RunSpec(config=cfg, seeds=tuple(seeds), out_dir=str(out_dir), bank=bank,
                   content=content if cfg.content else None)


def _content(cfg, pipeline: Path):
    """The frames the pipeline plans with: built-in plus its ``content`` folders (read once, here)."""
    from .backends.content import load_library

    return load_library(cfg.content, pipeline.resolve().parent, f"{pipeline}: content")


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
        sessions: Optional[int] = typer.Option(None, "--sessions", min=1, max=1_000_000),
        seed: Optional[int] = typer.Option(None, "--seed"),
        executor: Optional[str] = typer.Option(None, "--executor", help="local or ray"),
        workers: Optional[int] = typer.Option(None, "--workers", min=1),
        ray_address: Optional[str] = typer.Option(None, "--ray-address"),
        planner: Optional[str] = _PLANNER_OPT, llm_base_url: Optional[str] = _BASE_URL_OPT,
        llm_model: Optional[str] = _MODEL_OPT, llm_cache_dir: Optional[Path] = _CACHE_OPT,
        plans: Optional[Path] = typer.Option(None, "--plans", help="Render exactly these plans (JSONL from "
                                             "synth plan -o) instead of planning.")) -> None:
    """Make sessions and write Parquet + WebDataset shards; resumes an interrupted run."""
    from .executor.run import drop_broken_markers, execute, merge, pending_ranks, prepare_folder

    if out is not None and not out.strip():
        raise UserError("--out: an empty path (give a folder, e.g. --out outputs/myrun)")
    if plans is not None and sessions is not None:
        raise UserError(f"--sessions: not with --plans ({plans} gives the sessions, one per plan; to render "
                        "fewer, keep fewer lines)")
    if ray_address:
        from .executor.ray_executor import check_reachable

        check_reachable(ray_address)
    spec = _spec(pipeline, out, sessions, seed, executor, workers,
                 (planner, llm_base_url, llm_model, llm_cache_dir))
    if plans is not None:
        spec = _with_plans(spec, plans)
    store = prepare_folder(spec)
    for line in drop_broken_markers(spec):
        console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False)
    from .executor.odd_settings import odd_settings

    for line in odd_settings(spec):
        console.print(f"[yellow]warning:[/] {escape(str(pipeline))}: {escape(line)}", highlight=False)
    ex = spec.config.executor
    todo = pending_ranks(spec)
    n_workers = _capped_workers(ex.workers, todo)
    t0 = time.time()
    done_before = spec.config.sessions - sum(len(spec.session_ids(r)) for r in todo)
    progress = _Progress(spec.config.sessions, done_before, t0)
    with progress:
        failed = execute(spec, ex.kind, n_workers, ray_address or ex.ray_address, progress.task_done)
    stats = merge(spec)
    _report_run(stats, store, t0, failed)
    if failed:
        from .executor.limits import memory_advice, out_of_memory

        advice = (memory_advice() if any(out_of_memory(e) for e in failed.values())
                  else "rerun the same command to retry them (finished tasks are kept)")
        console.print(f"[red]{len(failed)} of {spec.num_tasks} tasks failed[/]; {escape(advice)}", highlight=False)
        raise typer.Exit(1)
    if stats["sessions"] == 0 and stats["rejects"]:
        _all_rejected(store)
        raise typer.Exit(1)


@app.command()
def plan(path: Path = typer.Argument(..., help="A scenario seed or pipeline YAML."),
         session: int = typer.Option(0, "--session", min=0, help="Session index to plan."),
         count: int = typer.Option(1, "-n", "--count", min=1, max=1_000_000, help="Plan this many sessions from --session on."),
         seed: int = typer.Option(0, "--seed"),
         text: bool = typer.Option(False, "--text", help="Print transcripts to read instead of JSON, then the "
                                   "diversity figures (CONTENT.md) of the plans."),
         planner: Optional[str] = _PLANNER_OPT, llm_base_url: Optional[str] = _BASE_URL_OPT,
         llm_model: Optional[str] = _MODEL_OPT, llm_cache_dir: Optional[Path] = _CACHE_OPT,
         plans_out: Optional[Path] = typer.Option(None, "-o", "--out", help="Write the plans here as JSONL "
                                                  "(for synth run --plans) instead of printing them.")) -> None:
    """Plan sessions (no audio) and print the validated plans as JSON (one object, or a list for -n > 1):
    the plans after the paralinguistic pass, i.e. what ``synth run`` renders.

    Rejected sessions are reported on stderr, one line each, and make the exit code 1.
    """
    from .backends.planner import make_planner
    from .rng import stream

    cfg, seeds, name, run_seed, pcfg = _plan_inputs(path, seed)
    pcfg = _planner_config(pcfg, planner, llm_base_url, llm_model, llm_cache_dir)
    engine = make_planner(pcfg, content=_content(cfg, path))
    for s in seeds:
        engine.check_seed(s, str(path))
    _check_endpoint(pcfg)
    from .schema.common import session_id

    jobs = [(seeds[i % len(seeds)], session_id(name, i)) for i in range(session, session + count)]
    if hasattr(engine, "prefetch"):
        engine.prefetch([(s, sid, stream(run_seed, sid, "plan")) for s, sid in jobs])
    plans, rejected = _decorated_plans(cfg, engine, jobs, run_seed)
    if plans_out is not None:
        from .io.files import write_text_atomic
        from .plans import plan_row

        write_text_atomic(plans_out, "".join(plan_row(p["session_id"], p["scenario_id"], p) + "\n" for p in plans))
        console.print(f"{len(plans)} plans written to {plans_out}", highlight=False)
    elif text:
        _print_transcripts(plans)
    elif plans or count > 1:
        typer.echo(json.dumps(plans[0] if count == 1 else plans, ensure_ascii=False, indent=1))
    if hasattr(engine, "usage"):
        u = engine.usage()
        console.print(f"{len(plans)}/{count} plans valid; {u.get('requests', 0)} requests, "
                      f"{u.get('cache_hits', 0)} cache hits, {u.get('prompt_tokens', 0)} prompt + "
                      f"{u.get('completion_tokens', 0)} completion tokens", highlight=False)
    if rejected:
        raise typer.Exit(1)


def _plan_inputs(path: Path, seed: int):
    """``(config, seeds, name, run seed, planner config)`` of a pipeline or of one scenario seed;
    ``--seed 0`` keeps a pipeline's own seed."""
    from .io.config_files import load_pipeline, load_seed, load_seeds, load_yaml_mapping
    from .schema.config import PipelineConfig, PlannerConfig

    data = load_yaml_mapping(path)  # the loader `run` uses: one line for any unreadable file
    if "seeds" in data:
        cfg = load_pipeline(path)
        return cfg, load_seeds(cfg, path), cfg.name, cfg.seed if seed == 0 else seed, cfg.planner
    return PipelineConfig(name="plan", seeds=[str(path)]), [load_seed(path)], "plan", seed, PlannerConfig()


def _decorated_plans(cfg, engine, jobs: list, run_seed: int) -> tuple[list[dict], int]:
    """The plans of ``jobs`` after the paralinguistic pass (as JSON), and how many were rejected
    (each said on stderr)."""
    from .errors import SessionReject
    from .session import decorated_plan

    plans, rejected = [], 0
    for s, sid in jobs:
        try:
            plans.append(decorated_plan(cfg, s, run_seed, sid, engine).model_dump(mode="json"))
        except SessionReject as r:
            rejected += 1
            console.print(f"[yellow]reject[/] {sid}: {r.stage}: {r.reason} ({escape(str(r.detail))})", highlight=False)
    return plans, rejected


def _print_transcripts(plans: list[dict]) -> None:
    """``plan --text``: the transcripts, then the diversity figures of the plans."""
    from .inspection.diversity import diversity, diversity_lines, plan_text
    from .inspection.transcript import transcript
    from .schema.plan import Plan

    models = [Plan.model_validate(p) for p in plans]
    typer.echo("\n\n".join(transcript(p) for p in models))
    for line in diversity_lines(diversity(plan_text(p) for p in models), "plans"):
        console.print(line, highlight=False, markup=False)


@app.command()
def validate(out_dir: Path = typer.Argument(..., help="A run folder.")) -> None:
    """Re-check every written session; exit 1 on any violation."""
    from .validate import validate_run

    if not (out_dir / "run.json").exists():
        raise UserError(f"{out_dir}: not a run folder (no run.json)")
    n, problems = validate_run(out_dir)
    for p in problems[:50]:
        console.print(f"[red]✗[/] {escape(p)}", highlight=False)
    if len(problems) > 50:
        console.print(f"... and {len(problems) - 50} more", highlight=False)
    if problems:
        console.print(f"[red]{len(problems)} problems[/] in {n} sessions")
        raise typer.Exit(1)
    console.print(f"[green]ok[/] {n} sessions pass")


app.add_typer(banks_app, name="banks")
app.add_typer(frames_app, name="frames")


def _run_folder(out_dir: Path):
    from .inspection.runfolder import RunFolder

    return RunFolder(out_dir)


@app.command("render")
def render_cmd(out_dir: Path = typer.Argument(..., help="A run folder."),
               session: str = typer.Option(..., "--session", help="The session id."),
               dest: Path = typer.Option(..., "-o", "--out", help="Folder for the rebuilt files."),
               bank: list[Path] = typer.Option([], "--bank", help="Sound-bank folder the session used (repeat for "
                                               "several; default: those run.json lists).")) -> None:
    """Rebuild one session from its record alone and compare it byte for byte with the run's."""
    from .rerender import rerender_from_run

    same = rerender_from_run(out_dir, session, dest, bank)
    for name, ok in same.items():
        console.print(f"  {session}.{name}: {'identical to the run' if ok else '[red]differs from the run[/]'}")
    if not all(same.values()):
        raise typer.Exit(1)


@app.command()
def preview(out_dir: Path = typer.Argument(..., help="A run folder."),
            session_id: str = typer.Argument(..., help="A session id, e.g. demo-000003."),
            output: Path = typer.Option(..., "-o", "--output", help="PNG file to write."),
            spectrogram: bool = typer.Option(False, "--spectrogram", help="Spectrograms instead of waveforms."),
            start: Optional[float] = typer.Option(None, "--start", help="Window start (s)."),
            end: Optional[float] = typer.Option(None, "--end", help="Window end (s).")) -> None:
    """One picture of a session: both channels, words, events, label lanes, markers, work items."""
    from .inspection.preview import draw

    if output.suffix.lower() != ".png":
        raise UserError(f"-o: the picture is a PNG file (got {str(output)!r})")
    session = _run_folder(out_dir).session(session_id)
    path = draw(session, output, "spec" if spectrogram else "wave", start, end)
    console.print(f"[green]wrote[/] {path}")


@app.command()
def report(out_dir: Path = typer.Argument(..., help="A run folder."),
           output: Optional[Path] = typer.Option(None, "-o", "--output",
                                                 help="HTML file (default OUT_DIR/report/report.html).")) -> None:
    """Statistics against the LABELS.md targets: terminal summary + self-contained HTML report."""
    from rich.console import Console as _Console

    from .inspection.report import print_summary, write_report

    if output is not None and output.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"-o: the report is an HTML file, with its numbers beside it as .json "
                        f"(got {str(output)!r})")
    run = _run_folder(out_dir)
    if repeated := run.repeated_ids():
        console.print(f"[yellow]warning:[/] {len(repeated)} session ids are written more than once (two runs in one "
                      "folder?): their figures count each copy; `synth validate` lists them", highlight=False)
    html_path = output or run.path / "report" / "report.html"
    rep = write_report(run, html_path)
    print_summary(rep, _Console(soft_wrap=False))
    console.print(f"[green]wrote[/] {html_path}")


@app.command()
def view(out_dir: Path = typer.Argument(..., help="A run folder."),
         port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free).")) -> None:
    """Browse and listen to a run in a local web page: filtered, paged sessions; per session a stereo
    player (ch0 left, ch1 right) with mute/solo, a timeline with a playhead and a clickable transcript."""
    from .inspection.viewer import make_server

    _run_folder(out_dir)
    try:
        server = make_server(out_dir, port)
    except OSError as e:
        raise UserError(f"--port: cannot listen on 127.0.0.1:{port} ({e.strerror})") from None
    host, real_port = server.server_address[:2]
    console.print(f"serving {out_dir} on [bold]http://{host}:{real_port}/[/] (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@app.command()
def export(out_dir: Path = typer.Argument(..., help="A run folder."),
           fmt: str = typer.Option(..., "--format", help="lhotse (NeMo duplex S2S), moshi, minicpm (experimental), "
                                   "fdb, textgrid, rttm (+ CTM) or audacity"),
           output: Path = typer.Option(..., "-o", "--output", help="Folder to write: new, empty, or an earlier "
                                       "export of the same format."),
           target_sample_rate: Optional[int] = typer.Option(None, "--target-sample-rate", help="lhotse: rate of "
                                                            "the assistant's target_audio (NeMo's "
                                                            "target_sample_rate; default 22050)."),
           shar: bool = typer.Option(False, "--shar", help="lhotse: Shar shards with the audio inside (FLAC) "
                                     "instead of a manifest beside WAV files."),
           sound_tags: Optional[str] = typer.Option(None, "--sound-tags", help="drop or keep [laughter]-style tags "
                                                    "(default: drop for lhotse and moshi, keep as non-lex in CTM)."),
           others: Optional[str] = typer.Option(None, "--others", help="moshi: third-party and background words "
                                                "under their own speaker labels (label, the default) or left out "
                                                "(drop)."),
           decision_lag: Optional[int] = typer.Option(None, "--decision-lag", help="minicpm: units the text runs "
                                                      "ahead of its audio (default 0)."),
           sample_rate: Optional[int] = typer.Option(None, "--sample-rate", help="moshi: WAV rate (default 24000, "
                                                     "Mimi's)."),
           text_conditions: Optional[str] = typer.Option(None, "--text-conditions", help="moshi: also write "
                                                         "text_conditions {NAME: system prompt} per WAV (for a "
                                                         "fork with conditioners; see README)."),
           voice_prompts: bool = typer.Option(False, "--voice-prompts", help="moshi: also write each session's "
                                              "voice prompt as voices/<session>.wav (PersonaPlex's voice folder)."),
           check: bool = typer.Option(False, "--check", help="Read the export back with its consumer's reader "
                                      "(sphn, lhotse, praatio, NeMo's CTM rule) and report what it read.")) -> None:
    """Export a run for a trainer or benchmark, recomputed from each session's timeline."""
    from .export import export_run

    meta = export_run(out_dir, fmt, output, check=check, decision_lag=decision_lag, sample_rate=sample_rate,
                      target_sample_rate=target_sample_rate, shar=shar, sound_tags=sound_tags, others=others,
                      text_conditions=text_conditions, voice_prompts=voice_prompts)
    console.print(f"[green]exported[/] {fmt} to {output}: "
                  + ", ".join(f"{k} {v}" for k, v in meta.items() if isinstance(v, (int, float)) and k != "source"))
    if check:
        c = meta["check"]
        console.print(f"[green]read back[/] with {c['reader']}: {c['sessions']} sessions, {c['seconds']:.1f} s, "
                      f"{c['words']} words, {c['colliding_words']} sharing an 80 ms frame with another word "
                      "of their speaker" + (f" (e.g. {c['collision_examples'][0]})" if c["collision_examples"] else "")
                      + (f"; {c['voice_prompts']} voice-prompt clips, {c['voice_prompt_seconds']:.1f} s"
                         if "voice_prompts" in c else ""))


@app.command()
def learn(train: str = typer.Argument(..., help="Training run folder(s), RUN[,RUN...]."),
          eval_runs: list[str] = typer.Option([], "--eval", help="Held-out run folder(s), RUN[,RUN...]; repeat for "
                                              "several eval sets."),
          eval_real: Optional[Path] = typer.Option(None, "--eval-real", help="Folder of real two-channel "
                                                   "conversations (stereo audio + VAP json / RTTM / TextGrid)."),
          output: Optional[Path] = typer.Option(None, "-o", "--output", help="Report folder (default "
                                                "outputs/learn/TRAIN)."),
          hours: Optional[float] = typer.Option(None, "--hours", help="Train on the first H hours only."),
          seeds: int = typer.Option(3, "--seeds", help="Model seeds (trained in parallel)."),
          epochs: int = typer.Option(12, "--epochs", help="Passes over the training audio."),
          device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
          workers: int = typer.Option(2, "--workers", help="Processes training at once (one torch thread each)."),
          tolerance: float = typer.Option(0.4, "--tolerance", help="Event match tolerance, seconds."),
          bootstrap: int = typer.Option(1000, "--bootstrap", help="Session resamples for the 95% intervals."),
          controls: bool = typer.Option(True, "--controls/--no-controls", help="Baselines and controls."),
          cache: Optional[Path] = typer.Option(None, "--cache", help="Feature cache (default "
                                               "$XDG_CACHE_HOME/duplexsynth/learn)."),
          system_channel: Optional[int] = typer.Option(None, "--system-channel", help="--eval-real: the channel "
                                                       "playing the system (default: both, in turn)."),
          channel_map: Optional[str] = typer.Option(None, "--channel-map", help="--eval-real: SPEAKER=0|1,..."),
          language: str = typer.Option("unknown", "--language", help="--eval-real: the conversations' language."),
          ) -> None:
    """Train a small causal turn-taking model on runs; score it and baselines on held-out runs."""
    from rich.console import Console as _Console

    from .learn.command import parse_channel_map, run_learn
    from .learn.experiment import LearnConfig

    cfg = LearnConfig(seeds=seeds, epochs=epochs, device=device, workers=workers, tolerance_s=tolerance,
                      bootstrap=bootstrap, controls=controls)
    if system_channel is not None and system_channel not in (0, 1):
        raise UserError(f"--system-channel: 0 or 1 (got {system_channel})")
    real = {"system_channel": system_channel, "channel_map": parse_channel_map(channel_map), "language": language}
    rep, out = run_learn(train, eval_runs, eval_real, output, hours, cfg, cache, real,
                         lambda m: console.print(m, highlight=False))
    from .learn.report import print_summary

    import shutil

    print_summary(rep, _Console(soft_wrap=False, width=max(100, shutil.get_terminal_size().columns)))
    console.print(f"[green]wrote[/] {out / 'report.json'} and {out / 'report.html'}")


@app.command()
def publish(out_dir: Path = typer.Argument(..., help="A run folder."),
            repo_id: str = typer.Option(..., "--repo-id", help="Hub dataset repo, ORG/NAME."),
            dry_run: bool = typer.Option(False, "--dry-run", help="Build the folder, upload nothing."),
            output: Optional[Path] = typer.Option(None, "-o", "--output",
                                                  help="Folder to build (default OUT_DIR/hub)."),
            licence: str = typer.Option("cc-by-4.0", "--license", help="Dataset licence id for the card."),
            private: bool = typer.Option(False, "--private", help="Create the repo as private.")) -> None:
    """Dataset card + Hub upload (resumable); --dry-run builds the exact folder only."""
    from .publish import build_folder, upload

    folder = build_folder(out_dir, output or out_dir / "hub", repo_id, licence)
    console.print(f"[green]built[/] {folder}")
    if dry_run:
        console.print("dry run: nothing uploaded")
        return
    url = upload(folder, repo_id, private)
    console.print(f"[green]uploaded[/] {url}")


def main() -> None:
    """Entry point: one line and exit 2 for a user error or a usage error, 130 when interrupted.

    Usage errors are matched by class name, not class: typer >= 0.20 raises its own vendored copy
    of click's exceptions (``typer._click``), older typer raises click's.
    """
    import signal

    from .executor.stop import STOP, quiet_swallowed_interrupts, request_stop

    # SIGTERM (a scheduler, `kill`) stops a run the way Ctrl-C does: workers stopped, resumable
    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    quiet_swallowed_interrupts()
    for arg in sys.argv[1:]:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            console.print(f"[red]error:[/] {escape(shown)}: not UTF-8 (the run folder, its records and the "
                          "Parquet/Arrow file systems need UTF-8 paths); rename it", highlight=False)
            sys.exit(2)
    try:
        rc = app(standalone_mode=False)
        if STOP["signal"] or rc == 130:  # typer >= 0.2x returns Ctrl-C as exit code 130
            _interrupted()
        sys.exit(rc if isinstance(rc, int) else 0)
    except SystemExit:
        raise
    except UserError as e:
        if _DEBUG["on"]:
            raise
        console.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        _interrupted()
    except (ImportError, OSError, MemoryError) as e:
        if _DEBUG["on"]:
            raise
        _driver_error(e)
    except Exception as e:
        names = _class_names(e)
        if "Exit" in names and hasattr(e, "exit_code"):
            if isinstance(e.__cause__, KeyboardInterrupt):  # typer >= 0.2x: Ctrl-C becomes Exit(130)
                _interrupted()
            sys.exit(e.exit_code)
        if "Abort" in names:
            _interrupted()
        if ("ClickException" in names or "TyperException" in names) and not _DEBUG["on"]:
            if hasattr(e, "show"):
                e.show()
            else:
                console.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
            sys.exit(getattr(e, "exit_code", 2) or 2)
        raise


if __name__ == "__main__":
    main()
