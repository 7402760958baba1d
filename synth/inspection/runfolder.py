"""Read a written run folder tolerantly: ``run.json``, session records, audio bytes, rejects.

Records are read from the Parquet shards (the WebDataset holds the same content). Columns the
current :class:`SessionRecord` does not know (a newer writer) are dropped, and ``scene`` is a free
dict, so a run whose scene gained keys (``room``, ``noise``, ``echo``...) still reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

from ..errors import UserError
from ..schema.record import SessionRecord
from ..schema.timeline import Timeline

AUDIO_COLUMNS = ("user_audio", "system_audio", "voice_prompt_audio")


@dataclass(frozen=True)
class Session:
    """One written session: its record and its two FLAC streams (ch0 user side, ch1 system)."""

    record: SessionRecord
    user_flac: bytes
    system_flac: bytes
    shard: str
    voice_flac: bytes = b""  # the assistant's voice prompt, b"" for records without one

    @property
    def timeline(self) -> Timeline:
        return self.record.timeline()

    def decode(self, channel: str):
        """``(float32 samples, sample_rate)`` of ``user``, ``system`` or ``voice`` (the voice prompt)."""
        import io

        import soundfile as sf

        data = {"user": self.user_flac, "system": self.system_flac, "voice": self.voice_flac}[channel]
        try:
            x, sr = sf.read(io.BytesIO(data), dtype="float32")
        except sf.LibsndfileError as e:
            raise UserError(f"{self.shard}: session {self.record.session_id}: the {channel} audio is not "
                            f"decodable FLAC ({e.error_string}); `synth validate` lists every damaged "
                            "session") from None
        return x, sr


def pop_flac(row: dict, column: str) -> bytes:
    """The FLAC bytes of an audio column, removed from a Parquet row (b"" when absent or null)."""
    return (row.pop(column, None) or {}).get("bytes") or b""


def record_from_row(row: dict[str, Any], source: str = "a shard") -> SessionRecord:
    """A :class:`SessionRecord` from a Parquet row (audio columns removed, unknown columns dropped);
    a row that is not one (a renamed or missing column, bad JSON) is a :class:`UserError` naming
    ``source``, the session and the field."""
    rec, problem = parse_record(row)
    if rec is None:
        sid = str(row.get("session_id", "?"))[:80]
        raise UserError(f"{source}: {sid}: {problem}; `synth validate` lists every damaged record")
    return rec


def parse_record(row: dict[str, Any]) -> tuple[SessionRecord | None, str | None]:
    """The record of a Parquet row or WebDataset json, or ``None`` and what is wrong with it
    (``field: message``): the one parser behind :func:`record_from_row` and ``synth validate``."""
    from pydantic import ValidationError

    known = set(SessionRecord.model_fields)
    d = {k: v for k, v in row.items() if k in known}
    key = "?"
    try:
        for key in ("scene", "planner_meta", "render_spec", "person_vad"):  # JSON strings in Parquet, dicts in the WebDataset json
            if isinstance(d.get(key), str):
                d[key] = json.loads(d[key])
        return SessionRecord.model_validate(d), None
    except json.JSONDecodeError as e:
        return None, f"{key}: not JSON ({e.msg})"
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "?"
        return None, f"{where}: {first['msg'].lower()} (not a record of this version?)"


def _read_parquet(pf: Path):
    """The table of one shard; a damaged shard is a :class:`UserError` naming it."""
    import pyarrow.parquet as pq

    try:
        return pq.read_table(pf)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        lines = str(e).strip().splitlines()
        raise UserError(f"{pf}: damaged Parquet shard ({type(e).__name__}: {lines[0] if lines else ''}); "
                        "`synth validate` lists every damaged file") from None


@dataclass
class RunFolder:
    """A run folder as written by ``synth run``; raises :class:`UserError` if it is not one."""

    path: Path
    require_info: bool = True  # False: a folder of shards whose run.json is gone reads as one with info {}
    info: dict = field(init=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        run_json = self.path / "run.json"
        if not run_json.exists() and not self.require_info and (self.path / "shards").is_dir():
            self.info = {}
            return
        if not run_json.exists():
            raise UserError(f"{self.path}: not a run folder (no run.json)")
        try:
            self.info = json.loads(run_json.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise UserError(f"{run_json}: damaged run.json, not valid JSON ({e.msg} at line {e.lineno})") from None
        except UnicodeDecodeError as e:
            raise UserError(f"{run_json}: damaged run.json, not UTF-8 ({e.reason} at byte {e.start})") from None
        if not isinstance(self.info, dict):
            raise UserError(f"{run_json}: damaged run.json (not a JSON object)")

    @property
    def config(self) -> dict:
        return self.info.get("config", {})

    @property
    def name(self) -> str:
        return str(self.config.get("name", self.path.name))

    @property
    def parquet_files(self) -> list[Path]:
        return sorted((self.path / "shards" / "parquet").glob("*.parquet"))

    @property
    def webdataset_files(self) -> list[Path]:
        return sorted((self.path / "shards" / "webdataset").glob("*.tar"))

    def sessions(self, with_audio: bool = True) -> Iterator[Session]:
        """Every written session in shard order (from WebDataset when a run wrote no Parquet)."""

        if not self.parquet_files:
            yield from self._webdataset_sessions()
            return
        for pf in self.parquet_files:
            table = _read_parquet(pf)
            if not with_audio:
                table = table.drop_columns([c for c in AUDIO_COLUMNS if c in table.column_names])
            for row in table.to_pylist():
                user, system, voice = (pop_flac(row, c) for c in AUDIO_COLUMNS)
                yield Session(record_from_row(row, str(pf)), user, system, pf.name, voice)

    def _webdataset_sessions(self) -> Iterator[Session]:
        import tarfile

        for tf in self.webdataset_files:
            parts: dict[str, dict[str, bytes]] = {}
            try:
                with tarfile.open(tf) as tar:
                    for m in tar.getmembers():
                        key, ext = m.name.split(".", 1)
                        parts.setdefault(key, {})[ext] = tar.extractfile(m).read()
            except (tarfile.TarError, OSError, ValueError) as e:
                raise UserError(f"{tf}: damaged WebDataset shard ({type(e).__name__}: {e}); "
                                "`synth validate` lists every damaged file") from None
            for key, p in parts.items():
                rec = record_from_row(json.loads(p["json"]), f"{tf}: {key}")
                yield Session(rec, p.get("user.flac", b""), p.get("system.flac", b""), tf.name, p.get("voice.flac", b""))

    def repeated_ids(self) -> dict[str, int]:
        """Session ids written more than once (two runs merged into one folder), with their counts;
        read from the id column alone."""
        counts: dict[str, int] = {}
        if self.parquet_files:
            import pyarrow.parquet as pq

            ids = []
            for pf in self.parquet_files:
                try:
                    ids += pq.read_table(pf, columns=["session_id"]).column("session_id").to_pylist()
                except Exception:  # noqa: BLE001 - a damaged shard is reported by the reader that needs it
                    continue
        else:
            ids = [s.record.session_id for s in self._webdataset_sessions()]
        for i in ids:
            counts[i] = counts.get(i, 0) + 1
        return {k: n for k, n in counts.items() if n > 1}

    def require_unique_ids(self, command: str) -> None:
        """A ``UserError`` when session ids repeat: an export or upload would overwrite one
        session's files with another's."""
        rep = self.repeated_ids()
        if rep:
            first = sorted(rep)[:3]
            raise UserError(f"{self.path}: {len(rep)} session ids are written more than once "
                            f"({', '.join(f'{k} x{rep[k]}' for k in first)}{' ...' if len(rep) > 3 else ''}); "
                            f"{command} would overwrite one with another: `synth validate` lists them")

    @cached_property
    def records(self) -> list[SessionRecord]:
        return [s.record for s in self.sessions(with_audio=False)]

    def session(self, session_id: str) -> Session:
        import pyarrow.compute as pc

        if not self.parquet_files:
            for s in self._webdataset_sessions():
                if s.record.session_id == session_id:
                    return s
        for pf in self.parquet_files:
            table = _read_parquet(pf)
            hit = table.filter(pc.equal(table["session_id"], session_id))
            if hit.num_rows:
                row = hit.slice(0, 1).to_pylist()[0]
                user, system = row.pop("user_audio")["bytes"], row.pop("system_audio")["bytes"]
                voice = pop_flac(row, "voice_prompt_audio")
                return Session(record_from_row(row, str(pf)), user, system, pf.name, voice)
        known = [r.session_id for r in self.records[:3]]
        raise UserError(f"{self.path}: no session {session_id!r} (e.g. {', '.join(known) or 'none written'})")

    def rejects(self) -> list[dict]:
        p = self.path / "rejects.jsonl"
        if not p.exists():
            return []
        return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]

    def stats(self) -> dict:
        p = self.path / "stats.json"
        return json.loads(p.read_text()) if p.exists() else {}
