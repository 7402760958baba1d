"""How the command line ends: one line for an error of this process (out of memory with its limit,
a missing extra with the extra to install, an OS error with its file) and the message an
interruption leaves, per command."""

from __future__ import annotations

import os
import sys

from rich.markup import escape

from .cli_common import console


def _class_names(e: BaseException) -> set[str]:
    return {c.__name__ for c in type(e).__mro__}


def _driver_error(e: BaseException) -> None:
    """One line for an error of this process: out of memory (with its limit), a missing extra
    (exit 2), or the file and reason of an OS error (exit 1)."""
    from .executor.limits import memory_advice, out_of_memory

    first = (str(e).splitlines() or [type(e).__name__])[0]
    if isinstance(e, MemoryError) or out_of_memory(first):
        console.print(f"[red]error:[/] {escape(first or 'MemoryError')}: {escape(memory_advice())}", highlight=False)
        sys.exit(1)
    if isinstance(e, ImportError):
        console.print(f"[red]error:[/] {escape(missing_package_message(e, sys.argv[1:2]))}", highlight=False)
        sys.exit(2)
    where = f"{e.filename}: {e.strerror}" if getattr(e, "filename", None) else first
    console.print(f"[red]error:[/] {escape(where)}", highlight=False)
    sys.exit(1)


EXTRA_OF_MODULE = {
    "matplotlib": "inspect", "huggingface_hub": "inspect", "datasets": "inspect",
    "torch": "learn", "praatio": "learn", "ray": "ray",
    "onnxruntime": "kokoro", "onnx": "kokoro", "misaki": "kokoro", "phonemizer": "kokoro",
    "piper": "piper", "TTS": "coqui", "torchaudio": "coqui",
    "lhotse": "export", "sphn": "export",
    "faster_whisper": "asr", "opencc": "asr", "rapidfuzz": "asr", "cn2an": "asr", "num2words": "asr",
}
"""Top-level modules of optional dependencies and the extra that installs each."""


def missing_package_message(e: ImportError, command: list[str]) -> str:
    """One line for an optional package that is not installed: which command needs which extra.
    An ImportError of our own (it already names the extra) is passed on as it is."""
    name = (getattr(e, "name", None) or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(name)
    if extra is None or "pip install" in str(e):
        return (str(e).splitlines() or [type(e).__name__])[0]
    what = f"synth {command[0]}" if command else "this command"
    return f"{what} needs the package {name}: pip install 'duplexsynth[{extra}]' (or make install)"


INTERRUPTED = {
    "run": "interrupted; finished tasks are kept: rerun the same command to resume",
    "export": "interrupted; the export is incomplete: the same command again writes it over",
    "learn": "interrupted; the features of runs read to the end are cached: the same command again reuses them",
}
"""What an interruption leaves, per command (anything else: nothing to resume)."""


def _interrupted() -> None:
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
    sys.stderr.write(INTERRUPTED.get(command, "interrupted") + "\n")
    sys.stderr.flush()
    os._exit(130)  # at once: the interpreter's exit would join threads a stop may have left waiting
