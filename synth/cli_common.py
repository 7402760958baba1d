"""What the command line's modules share: the console (stderr), the ``--debug`` switch and the LLM
endpoint options."""

from __future__ import annotations

import typer
from rich.console import Console

console = Console(stderr=True, soft_wrap=True)
_DEBUG = {"on": False}

_PLANNER_OPT = typer.Option(None, "--planner", help="scripted or llm (default from the pipeline)")
_BASE_URL_OPT = typer.Option(None, "--llm-base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
_MODEL_OPT = typer.Option(None, "--llm-model", help="Model name sent to the endpoint.")
_CACHE_OPT = typer.Option(None, "--llm-cache-dir", help="Reply cache (default $XDG_CACHE_HOME/duplexsynth/llm).")
