"""``synth banks`` and ``synth frames``: the sound banks and the content library."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from .cli_common import _BASE_URL_OPT, _CACHE_OPT, _MODEL_OPT, console
from .errors import UserError

banks_app = typer.Typer(no_args_is_help=True, help="Sound banks: noise, babble, media, laughter.")


@banks_app.command("build")
def banks_build(out: Path = typer.Option(Path("noise_banks/generated"), "--out", help="Folder to write."),
                seed: int = typer.Option(0, "--seed")) -> None:
    """Generate the local bank (deterministic: same seed, same bytes) with its manifest.jsonl."""
    from .banks.generate import build_bank, check_bank_target

    check_bank_target(out)
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
        console.print(f"[yellow]skipped[/] {f}: {escape(str(reason))}", highlight=False)
    console.print(f"{len(bank.files)} files usable, {len(bank.skipped)} skipped: "
                  + ", ".join(f"{k} {v}" for k, v in bank.categories().items()))

frames_app = typer.Typer(no_args_is_help=True, help="Content frames of the offline planner: check, draft with an LLM.")


@frames_app.command("check")
def frames_check(files: list[Path] = typer.Argument(..., help="Domain files, built-in or of a content folder.")) -> None:
    """Check frame files (python -m synth.backends.frames FILE...); exit 1 on any problem."""
    from .backends.frame_checks import main as check_main

    if check_main([str(f) for f in files]):
        raise typer.Exit(1)


@frames_app.command("draft")
def frames_draft(domain: str = typer.Argument(..., help="A built-in domain, e.g. pharmacy."),
                 language: str = typer.Option("en", "--language", help="en, zh or en-zh"),
                 count: int = typer.Option(5, "-n", "--count", help="Frames to ask for (1-50)."),
                 out: Optional[Path] = typer.Option(None, "-o", "--out", help="Content folder: accepted frames go to "
                                                    "OUT/DOMAIN.yaml, rejected ones to OUT/rejected.jsonl."),
                 llm_base_url: Optional[str] = _BASE_URL_OPT, llm_model: Optional[str] = _MODEL_OPT,
                 llm_cache_dir: Optional[Path] = _CACHE_OPT,
                 llm_max_tokens: int = typer.Option(16384, "--llm-max-tokens", help="Ceiling of one request's "
                                                    "max_tokens (a request asks for as many frames as fit).")) -> None:
    """Grow the library: a chat model writes new frames, the frame checker accepts or rejects each
    (with its reasons); point a pipeline at the folder with ``content: [OUT]``."""
    from .backends.llm.draft import MAX_FRAMES, draft_frames
    from .backends.llm.client import check_cache_dir, check_endpoint, default_cache_dir

    cfg = _draft_inputs(domain, language, count, out, llm_base_url, llm_model, llm_max_tokens, MAX_FRAMES)
    cache = llm_cache_dir or default_cache_dir()
    check_cache_dir(cache)
    check_endpoint(cfg)
    out.mkdir(parents=True, exist_ok=True)
    done = draft_frames(domain, language, count, out, cfg, cache)
    typer.echo(f"accepted {len(done.accepted)}, rejected {len(done.rejected)}")
    for r in done.rejected:
        typer.echo(f"rejected {r['id']}: " + "; ".join(" ".join(x.split()) for x in r["reasons"]))
    if done.accepted:
        typer.echo(f"wrote {out / (domain + '.yaml')} (+{len(done.accepted)} {language} frames)")
    if done.failure:
        console.print(f"[red]error:[/] no usable reply after {cfg.max_attempts} attempts: "
                      f"{escape('; '.join(done.failure[:3]))}", highlight=False)
        raise typer.Exit(1)


def _draft_inputs(domain, language, count, out, base_url, model, max_tokens, most):
    """The draft's LLM config; every bad input is one line naming the option and value."""
    from pydantic import ValidationError

    from .backends.frames import LANGS, domains
    from .schema.config import LLMConfig

    if domain not in domains():
        raise UserError(f"DOMAIN: no built-in domain {domain!r} (known: {', '.join(domains())})")
    if language not in LANGS:
        raise UserError(f"--language: must be en, zh or en-zh (got {language!r})")
    if not 1 <= count <= most:
        raise UserError(f"-n: 1 to {most} frames per draft (got {count})")
    if out is None:
        raise UserError("-o: a content folder to write the frames to is needed (e.g. -o content/mine)")
    if out.exists() and not out.is_dir():
        raise UserError(f"-o: {out} is a file, not a folder")
    if not base_url:
        raise UserError("--llm-base-url: an OpenAI-compatible endpoint is needed (e.g. http://127.0.0.1:8080/v1)")
    if not model:
        raise UserError("--llm-model: the model name to send to the endpoint is needed")
    try:  # a draft's schema is pydantic's (optional fields): not OpenAI's strict subset
        return LLMConfig(base_url=base_url, model=model, max_tokens=max_tokens, json_schema_strict=False)
    except ValidationError as e:
        raise UserError(f"--llm-max-tokens: {e.errors()[0]['msg']} (got {max_tokens})") from None
