"""Plans files: ``synth plan ... -o plans.jsonl`` writes decorated plans, ``synth run --plans``
renders exactly those.

One JSON object a line: ``{"session_id": ..., "seed_id": ..., "plan": {...}}`` where ``plan`` is
the plan after the paralinguistic pass, i.e. what will be rendered. Each plan is validated when
its session is made; a bad one becomes a reject naming the field.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import UserError


def plan_row(session_id: str, seed_id: str, plan: dict) -> str:
    return json.dumps({"session_id": session_id, "seed_id": seed_id, "plan": plan}, ensure_ascii=False,
                      sort_keys=True)


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
        if not isinstance(sid, str) or not sid or "." in sid or sid in seen:
            raise UserError(f"{path}: line {n}: session_id: {sid!r} is not a new id without dots")
        seen.add(sid)
        rows.append((sid, str(d["seed_id"]), json.dumps(d["plan"], ensure_ascii=False, sort_keys=True)))
    if not rows:
        raise UserError(f"{path}: no plans")
    return tuple(rows)
