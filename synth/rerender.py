"""``synth render``: one written session made again from its record and the run's engines.

The record holds every draw (``scene`` and ``render_spec``); ``run.json`` holds the engines'
settings and the sound bank's folders. The result is compared byte for byte with the run's.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import SessionReject, UserError


def rerender_from_run(run_dir: Path, session_id: str, out_dir: Path) -> dict[str, bool]:
    """Write ``<id>.user.flac``, ``<id>.system.flac`` and ``<id>.json`` into ``out_dir``;
    returns, per file, whether it is identical to the run's."""
    from .banks.bank import load_bank
    from .executor.task import build_tts
    from .inspection.runfolder import RunFolder
    from .io.shards import metadata_dict
    from .schema.config import PipelineConfig
    from .session import SessionOutput, rerender

    run = RunFolder(run_dir)
    cfg = PipelineConfig.model_validate(run.info["config"])
    written = run.session(session_id)
    if written.record.render_spec is None:
        raise UserError(f"{run_dir}: session {session_id} has no render_spec (written by an older version)")
    bank = None
    info = run.info.get("bank")
    if info:
        folders = [Path(f) for f in info.get("folders", [])]
        missing = [str(f) for f in folders if not f.is_dir()]
        if not folders or missing:
            raise UserError(f"{run_dir}/run.json: bank.folders: {missing or 'none listed'} cannot be read")
        bank = load_bank(folders)
        if bank.digest != info.get("digest"):
            raise UserError(f"{run_dir}/run.json: bank.digest: the bank folders changed since the run "
                            f"({info.get('digest')} -> {bank.digest})")
    try:
        out = rerender(cfg, written.record, build_tts(cfg, check=True), bank)
    except SessionReject as r:
        raise UserError(f"session {session_id}: cannot be rendered from its record ({r.stage}:{r.reason} {r.detail})") from None
    mine = _files(out, metadata_dict)
    theirs = _files(SessionOutput(written.record, written.user_flac, written.system_flac), metadata_dict)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, data in mine.items():
        (out_dir / f"{session_id}.{name}").write_bytes(data)
    return {name: data == theirs[name] for name, data in mine.items()}


def _files(out, metadata_dict) -> dict[str, bytes]:
    meta = json.dumps(metadata_dict(out), sort_keys=True, ensure_ascii=False).encode()
    return {"user.flac": out.user_flac, "system.flac": out.system_flac, "json": meta}
