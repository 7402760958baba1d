"""A run folder on any filesystem ``pyarrow.fs`` knows: a local path, ``s3://bucket/prefix``,
``gs://...``, ``hdfs://...`` (credentials from the environment, as the filesystem expects).

Writes are atomic in the sense that matters for a dataset listing: every file is written under
a hidden temporary name (``.name.tmp-PID``, which ``*.parquet`` globs, ``datasets`` and
pyarrow's dataset discovery skip) and then moved to its final name. Locally that move is a
rename; on object stores it is a server-side copy of a complete object. A reader never sees a
truncated shard under a final name.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from pathlib import Path

import pyarrow.fs as pafs

from ..errors import UserError


class Store:
    def __init__(self, location: str | Path):
        loc = str(location)
        self.uri = loc
        if "://" in loc and not loc.startswith("file://"):
            try:
                self.fs, self.base = pafs.FileSystem.from_uri(loc)
            except Exception as e:  # noqa: BLE001 - pyarrow raises several kinds
                raise UserError(f"output.dir: cannot open {loc} ({str(e).splitlines()[0]})") from None
            self.local = False
        else:
            path = Path(loc.removeprefix("file://")).absolute()
            self.fs, self.base, self.local = pafs.LocalFileSystem(), str(path), True

    def __str__(self) -> str:
        return self.uri

    def path(self, rel: str) -> str:
        return posixpath.join(self.base, rel) if rel else self.base

    def local_path(self, rel: str = "") -> Path:
        if not self.local:
            raise ValueError(f"{self.uri} is not a local folder")
        return Path(self.path(rel))

    def exists(self, rel: str) -> bool:
        return self.fs.get_file_info(self.path(rel)).type != pafs.FileType.NotFound

    def read_bytes(self, rel: str) -> bytes:
        with self.fs.open_input_stream(self.path(rel)) as f:
            return f.read()

    def size(self, rel: str) -> int | None:
        """Bytes in ``rel``, or None if it is not there."""
        info = self.fs.get_file_info(self.path(rel))
        return None if info.type == pafs.FileType.NotFound else info.size

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8")

    def makedirs(self, rel: str = "") -> None:
        self.fs.create_dir(self.path(rel), recursive=True)

    def temp_name(self, rel: str) -> str:
        d, name = posixpath.split(rel)
        return posixpath.join(d, f".{name}.tmp-{os.getpid()}")

    def open_temp(self, rel: str):
        """An output stream for ``rel`` under its hidden temporary name; ``commit`` finishes it."""
        tmp = self.temp_name(rel)
        parent = posixpath.dirname(tmp)
        if parent:
            self.makedirs(parent)
        return self.fs.open_output_stream(self.path(tmp)), tmp

    def commit(self, tmp: str, rel: str) -> None:
        if self.local:
            os.replace(self.path(tmp), self.path(rel))
        else:
            self.fs.move(self.path(tmp), self.path(rel))

    def write_bytes(self, rel: str, data: bytes) -> None:
        try:
            stream, tmp = self.open_temp(rel)
        except OSError as e:
            raise io_error(e, self.path(rel)) from None
        try:
            with stream:
                stream.write(data)
            self.commit(tmp, rel)
        except OSError as e:
            raise io_error(e, self.path(rel)) from None
        finally:
            try:
                self.delete(tmp)
            except OSError:  # best effort: the first error is the one to report
                pass

    def write_text(self, rel: str, text: str) -> None:
        self.write_bytes(rel, text.encode("utf-8"))

    def delete(self, rel: str) -> None:
        if self.exists(rel):
            self.fs.delete_file(self.path(rel))

    def list(self, rel_dir: str, pattern: str = "*", hidden: bool = False) -> list[str]:
        """Names (relative to the store) of files in ``rel_dir`` matching ``pattern``, sorted."""
        sel = pafs.FileSelector(self.path(rel_dir), allow_not_found=True)
        out = []
        for info in self.fs.get_file_info(sel):
            name = info.base_name
            if info.type == pafs.FileType.File and fnmatch.fnmatchcase(name, pattern) and (
                    hidden or not name.startswith(".")):
                out.append(posixpath.join(rel_dir, name))
        return sorted(out)


def io_error(e: OSError, path: str) -> OSError:
    """``e`` as an OSError naming ``path``: pyarrow's write errors name no file, and the user must
    learn which folder is full or read-only."""
    if getattr(e, "filename", None):
        return e
    code = e.errno
    if code is None:
        m = re.search(r"\[errno (\d+)\]", str(e), re.IGNORECASE)
        code = int(m.group(1)) if m else None
    if code is not None:
        return OSError(code, os.strerror(code), path)
    lines = str(e).splitlines()
    return OSError(f"{path}: {lines[0] if lines else type(e).__name__}")
