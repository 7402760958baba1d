"""Plans files: ``synth plan ... -o plans.jsonl`` writes decorated plans, ``synth run --plans``
renders exactly those.

One JSON object a line: ``{"session_id": ..., "seed_id": ..., "plan": {...}}`` where ``plan`` is
the plan after the paralinguistic pass, i.e. what will be rendered. Each plan is validated when
its session is made; a bad one becomes a reject naming the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .errors import UserError


def plan_row(session_id: str, seed_id: str, plan: dict) -> str:
    return json.dumps({"session_id": session_id, "seed_id": seed_id, "plan": plan}, ensure_ascii=False,
                      sort_keys=True)


MAX_ID_CHARS = 100
SESSION_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_-]{{0,{MAX_ID_CHARS - 1}}}")
"""A session id names files (``<id>.user.flac`` in a tar, ``audio/<id>.wav`` in exports): no
dots, slashes, spaces or control characters, and short enough for any file system."""


def read_plans(path: Path) -> tuple[tuple[str, str, str], ...]:
    """``(session_id, seed_id, plan JSON)`` per line; a file that is not JSONL is one error line."""
    try:
        lines = Path(path).read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"--plans: cannot read {path} ({getattr(e, 'strerror', None) or e})") from None
    rows, seen = [], set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}: line {n}: not JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(d, dict) or not {"session_id", "seed_id", "plan"} <= set(d):
            raise UserError(f"{path}: line {n}: needs session_id, seed_id and plan")
        sid = d["session_id"]
        if not isinstance(sid, str) or not SESSION_ID.fullmatch(sid):
            shown = sid[:40] + "..." if isinstance(sid, str) and len(sid) > 40 else sid
            raise UserError(f"{path}: line {n}: session_id: must be 1-{MAX_ID_CHARS} letters, digits, '_' or '-' "
                            f"(it names files in shards and exports; got {ascii(shown)})")
        if sid in seen:
            raise UserError(f"{path}: line {n}: session_id: {sid!r} is given twice")
        seen.add(sid)
        rows.append((sid, str(d["seed_id"]), json.dumps(d["plan"], ensure_ascii=False, sort_keys=True)))
    if not rows:
        raise UserError(f"{path}: no plans")
    return tuple(rows)
