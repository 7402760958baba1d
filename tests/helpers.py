"""The one way tests run the command line: ``synth ARGS`` in a subprocess of this interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def synth(*args, check: bool = True, cwd: Path = ROOT, timeout: float = 600, pythonpath: str = "",
          env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``synth ARGS`` and return the finished process (stdout, stderr as text). ``check``
    raises with the end of stderr on a non-zero exit; ``pythonpath`` goes after the project on
    ``PYTHONPATH`` (and so before the venv's site-packages); ``env`` adds to the environment. Rich
    writes 300 columns, so one message is one line."""
    path = os.pathsep.join(p for p in (str(ROOT), pythonpath) if p)
    full = {**os.environ, "RAY_AUTH_MODE": "disabled", "COLUMNS": "300", "PYTHONPATH": path, **(env or {})}
    r = subprocess.run([sys.executable, "-m", "synth.cli", *map(str, args)], capture_output=True, text=True,
                       env=full, cwd=cwd, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(r.stderr[-3000:])
    return r


def flip_flac(shard: Path) -> list[dict]:
    """Bit-flip the user FLAC of the shard's first row (the row rewritten, the Parquet file sound);
    returns the shard's rows as written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(shard)
    rows = t.to_pylist()
    b = bytearray(rows[0]["user_audio"]["bytes"])
    for i in range(200, len(b), 997):
        b[i] ^= 0xFF
    rows[0]["user_audio"]["bytes"] = bytes(b)
    pq.write_table(pa.Table.from_pylist(rows, schema=t.schema), shard)
    return rows
