"""``synth render``: one written session made again from its record and the engines.

A record of render-spec version 2 holds every draw (``scene`` and ``render_spec``) and every
setting rendering reads (``render_spec.params``, the TTS settings included): it renders with
nothing else but the sound bank's folders (``--bank``, by default those ``run.json`` lists),
checked against the digest the record holds. A version-1 record (written before ``params``)
renders with the run's config from ``run.json``. The result is compared byte for byte with the
run's.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import SessionReject, UserError


def _bank(run_dir: Path, session_id: str, digest: str | None, folders: list[Path], where: str):
    from .banks.bank import load_bank

    if digest is None:
        return None
    if not folders:
        raise UserError(f"--bank: session {session_id} was rendered with the sound bank {digest}; give its "
                        f"folders with --bank DIR ({run_dir}/run.json lists none)")
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise UserError(f"{where}: {missing} cannot be read")
    try:
        bank = load_bank(folders)
    except UserError as e:
        raise UserError(f"{where}: {e}; session {session_id} needs the bank {digest}") from None
    if bank.digest != digest:
        raise UserError(f"{where}: the bank folders hold {bank.digest}, not the bank the session was rendered "
                        f"with ({digest})")
    return bank


def _engine(params):
    from pydantic import TypeAdapter, ValidationError

    from .backends.routed import build_engine, check_engine
    from .schema.config import TTSConfig

    try:
        cfg = TypeAdapter(TTSConfig).validate_python(params.engines.tts)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise UserError(f"render_spec.params.engines.tts.{where}: {err['msg']}") from None
    tts = build_engine(cfg, params.engines.trim_threshold_db)
    check_engine(tts, cfg)
    return tts


def rerender_from_run(run_dir: Path, session_id: str, out_dir: Path, banks: list[Path] | None = None) -> dict[str, bool]:
    """Write ``<id>.user.flac``, ``<id>.system.flac``, ``<id>.json`` (and ``<id>.voice.flac``, the
    voice prompt, when the record has one) into ``out_dir``;
    returns, per file, whether it is identical to the run's."""
    from .executor.task import build_tts
    from .inspection.runfolder import RunFolder
    from .io.shards import metadata_dict
    from .schema.config import PipelineConfig
    from .session import SessionOutput, rerender

    run = RunFolder(run_dir, require_info=False)
    written = run.session(session_id)
    spec = written.record.render_spec
    if spec is None:
        raise UserError(f"{run_dir}: session {session_id} has no render_spec (written by an older version)")
    listed = [Path(f) for f in (run.info.get("bank") or {}).get("folders", [])]
    folders, where = (list(banks), "--bank") if banks else (listed, f"{run_dir}/run.json: bank.folders")
    cfg = None
    if spec.params is None:
        if not run.info:
            raise UserError(f"{run_dir}: session {session_id} has a version-1 render_spec, which renders with the "
                            "run's config: run.json is missing")
        cfg = PipelineConfig.model_validate(run.info["config"])
        tts, digest = build_tts(cfg, check=True), (run.info.get("bank") or {}).get("digest")
    else:
        tts, digest = _engine(spec.params), spec.params.engines.bank_digest
    bank = _bank(run_dir, session_id, digest, folders, where)
    try:
        out = rerender(written.record, tts, bank, cfg)
    except SessionReject as r:
        raise UserError(f"session {session_id}: cannot be rendered from its record ({r.stage}:{r.reason} {r.detail})") from None
    mine = _files(out, metadata_dict)
    theirs = _files(SessionOutput(written.record, written.user_flac, written.system_flac, written.voice_flac),
                    metadata_dict)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, data in mine.items():
        (out_dir / f"{session_id}.{name}").write_bytes(data)
    return {name: data == theirs[name] for name, data in mine.items()}


def _files(out, metadata_dict) -> dict[str, bytes]:
    meta = json.dumps(metadata_dict(out), sort_keys=True, ensure_ascii=False).encode()
    files = {"user.flac": out.user_flac, "system.flac": out.system_flac, "json": meta}
    return files | ({"voice.flac": out.voice_flac} if out.voice_flac else {})
