"""Atomic file writes: write to a temporary name beside the target, then rename over it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def write_atomic_with(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` and rename ``tmp`` to ``path``; a failed write leaves no file behind.

    An ``OSError`` names ``path`` (the file asked for), not the temporary beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        if e.filename is None or str(e.filename) != str(tmp):
            raise
        raise OSError(e.errno, e.strerror, str(path)) from e
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic_with(path, lambda p: p.write_text(text, encoding="utf-8"))


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 4 MiB blocks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()
