"""Parquet and WebDataset shard writers (one shard per task rank), atomic and byte-stable."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..schema.common import CHANNEL_ORDER
from .files import write_atomic_with

_AUDIO = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
_WORD = pa.struct([("word", pa.string()), ("lang", pa.string()), ("on_sample", pa.int64()), ("off_sample", pa.int64())])
_EVENT = pa.struct([
    ("id", pa.string()), ("speaker", pa.string()), ("act", pa.string()), ("floor_intent", pa.string()),
    ("relation", pa.string()), ("attach_to", pa.string()), ("text", pa.string()),
    ("text_after_cut", pa.string()), ("lang", pa.string()), ("on_sample", pa.int64()),
    ("off_sample", pa.int64()), ("completion", pa.string()), ("overlap_ok", pa.bool_()),
    ("words", pa.list_(_WORD)), ("phenomena", pa.list_(pa.string())),
])
_STATE = pa.struct([("state", pa.string()), ("sample", pa.int64())])
_WORK = pa.struct([
    ("work_id", pa.string()), ("tool", pa.string()), ("objective", pa.string()), ("result_text", pa.string()),
    ("opened_by", pa.string()), ("open_sample", pa.int64()), ("close_sample", pa.int64()),
    ("complete_sample", pa.int64()), ("inject_sample", pa.int64()), ("deliver_sample", pa.int64()),
    ("delivered_sample", pa.int64()), ("stale", pa.bool_()), ("states", pa.list_(_STATE)),
])
SCHEMA = pa.schema([
    ("session_id", pa.string()), ("scenario_id", pa.string()), ("language", pa.string()),
    ("sample_rate", pa.int32()), ("num_samples", pa.int64()), ("duration_s", pa.float64()),
    ("channels", pa.list_(pa.string())),
    ("user_audio", _AUDIO), ("system_audio", _AUDIO),
    ("frame_rate_hz", pa.float64()), ("frame_period_s", pa.float64()),
    ("sys_action", pa.list_(pa.int8())), ("sys_floor", pa.list_(pa.int8())), ("usr_floor", pa.list_(pa.int8())),
    ("sys_vad", pa.list_(pa.int8())), ("usr_vad", pa.list_(pa.int8())),
    ("markers", pa.list_(pa.struct([("frame", pa.int32()), ("type", pa.string()), ("ref", pa.string())]))),
    ("events", pa.list_(_EVENT)), ("delegations", pa.list_(_WORK)),
    ("phenomena", pa.list_(pa.struct([("id", pa.string()), ("family", pa.string()), ("event_id", pa.string())]))),
    ("scene", pa.string()), ("seed", pa.int64()), ("planner", pa.string()),
    ("planner_meta", pa.string()),
], metadata={
    "channels": json.dumps(list(CHANNEL_ORDER)),
    "huggingface": json.dumps({"info": {"features": {
        "user_audio": {"_type": "Audio"}, "system_audio": {"_type": "Audio"}}}}),
})


def metadata_dict(out) -> dict:
    """The session's metadata as JSON-ready data (the WebDataset ``.json``, the row minus audio)."""
    return out.record.model_dump(mode="json")


def row(out) -> dict:
    d = metadata_dict(out)
    d["scene"] = json.dumps(d["scene"], sort_keys=True, ensure_ascii=False)
    d["planner_meta"] = json.dumps(d["planner_meta"], sort_keys=True, ensure_ascii=False)
    sid = out.record.session_id
    d["user_audio"] = {"bytes": out.user_flac, "path": f"{sid}.user.flac"}
    d["system_audio"] = {"bytes": out.system_flac, "path": f"{sid}.system.flac"}
    return d


def write_parquet(path: Path, outputs: list) -> None:
    table = pa.Table.from_pylist([row(o) for o in outputs], schema=SCHEMA)
    write_atomic_with(path, lambda p: pq.write_table(table, p, compression="zstd", row_group_size=64))


def write_webdataset(path: Path, outputs: list) -> None:
    """A tar of ``<key>.user.flac``, ``<key>.system.flac``, ``<key>.json`` per session."""

    def write(p: Path) -> None:
        # tarfile directly rather than webdataset.TarWriter: fixed owner/mode/mtime so the bytes are stable
        with tarfile.open(p, "w", format=tarfile.USTAR_FORMAT) as tar:
            for o in outputs:
                key = o.record.session_id
                meta = json.dumps(metadata_dict(o), sort_keys=True, ensure_ascii=False).encode()
                for ext, data in (("json", meta), ("system.flac", o.system_flac), ("user.flac", o.user_flac)):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size, info.mtime, info.mode = len(data), 0, 0o444
                    info.uname = info.gname = "duplexsynth"
                    tar.addfile(info, io.BytesIO(data))

    write_atomic_with(path, write)
