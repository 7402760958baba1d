"""Parquet and WebDataset shard writers (one shard per task rank), atomic and byte-stable."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import pyarrow as pa
import pyarrow.parquet as pq

from ..schema.common import CHANNEL_ORDER
from .store import io_error

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
    ("outcome", pa.string()), ("cancel_sample", pa.int64()), ("drop_sample", pa.int64()),
    ("backend", pa.list_(pa.struct([("kind", pa.string()), ("sample", pa.int64()), ("frame", pa.int64()),
                                    ("text", pa.string())]))),
])
SCHEMA = pa.schema([
    ("session_id", pa.string()), ("scenario_id", pa.string()), ("language", pa.string()),
    ("sample_rate", pa.int32()), ("num_samples", pa.int64()), ("duration_s", pa.float64()),
    ("channels", pa.list_(pa.string())),
    ("user_audio", _AUDIO), ("system_audio", _AUDIO), ("voice_prompt_audio", _AUDIO),
    ("frame_rate_hz", pa.float64()), ("frame_period_s", pa.float64()),
    ("sys_action", pa.list_(pa.int8())), ("sys_floor", pa.list_(pa.int8())), ("usr_floor", pa.list_(pa.int8())),
    ("sys_vad", pa.list_(pa.int8())), ("usr_vad", pa.list_(pa.int8())),
    ("markers", pa.list_(pa.struct([("frame", pa.int32()), ("type", pa.string()), ("ref", pa.string())]))),
    ("events", pa.list_(_EVENT)), ("delegations", pa.list_(_WORK)),
    ("phenomena", pa.list_(pa.struct([("id", pa.string()), ("family", pa.string()), ("event_id", pa.string())]))),
    ("scene", pa.string()), ("seed", pa.int64()), ("planner", pa.string()),
    ("planner_meta", pa.string()), ("render_spec", pa.string()), ("system_prompt", pa.string()),
], metadata={
    "channels": json.dumps(list(CHANNEL_ORDER)),
    "huggingface": json.dumps({"info": {"features": {
        "user_audio": {"_type": "Audio"}, "system_audio": {"_type": "Audio"},
        "voice_prompt_audio": {"_type": "Audio"}}}}),
})


_GROUP_EVENT = pa.struct([*_EVENT, ("person", pa.string()), ("addressee", pa.string())])
GROUP_SCHEMA = pa.schema(
    [f if f.name != "events" else pa.field("events", pa.list_(_GROUP_EVENT)) for f in SCHEMA]
    + [("addressed", pa.list_(pa.int8())), ("person_vad", pa.string())], metadata=SCHEMA.metadata)
"""The Parquet schema of a run with group seeds: each event's person and addressee, the
``addressed`` channel and the people's voice activity (JSON). Runs without groups keep ``SCHEMA``."""


def metadata_dict(out) -> dict:
    """The session's metadata as JSON-ready data (the WebDataset ``.json``, the row minus audio)."""
    return out.record.model_dump(mode="json")


def row(out) -> dict:
    d = metadata_dict(out)
    d["scene"] = json.dumps(d["scene"], sort_keys=True, ensure_ascii=False)
    d["planner_meta"] = json.dumps(d["planner_meta"], sort_keys=True, ensure_ascii=False)
    d["render_spec"] = json.dumps(d["render_spec"], sort_keys=True, ensure_ascii=False)
    if d.get("person_vad") is not None:
        d["person_vad"] = json.dumps(d["person_vad"], sort_keys=True)
    sid = out.record.session_id
    d["user_audio"] = {"bytes": out.user_flac, "path": f"{sid}.user.flac"}
    d["system_audio"] = {"bytes": out.system_flac, "path": f"{sid}.system.flac"}
    d["voice_prompt_audio"] = {"bytes": out.voice_flac, "path": f"{sid}.voice.flac"} if out.voice_flac else None
    return d


class ShardWriter:
    """One task's shards, written session by session (memory stays one session deep).

    Files are written under hidden temporary names (``.part-RRRRR.parquet.tmp-PID``, which
    readers and ``*.parquet`` globs skip) and moved to their names on ``close``; nothing is
    opened before the first session, so a task with no good session writes no shard.
    """

    def __init__(self, store, name: str, formats: list[str], group: bool = False):
        self.store = store
        self.schema = GROUP_SCHEMA if group else SCHEMA
        self.targets = {}
        if "parquet" in formats:
            self.targets["parquet"] = f"shards/parquet/{name}.parquet"
        if "webdataset" in formats:
            self.targets["webdataset"] = f"shards/webdataset/{name}.tar"
        self._streams: dict = {}
        self._tmp: dict = {}
        self._pq = None
        self._tar = None
        self.count = 0
        self.files: dict[str, dict] = {}  # after close: the proof of each shard, for the task marker

    def add(self, out) -> None:
        try:
            self._add(out)
        except OSError as e:
            raise io_error(e, self.store.path(next(iter(self.targets.values()), ""))) from None

    def _add(self, out) -> None:
        if self.count == 0:
            for k, rel in self.targets.items():
                self._streams[k], self._tmp[k] = self.store.open_temp(rel)
            if "parquet" in self._streams:
                self._pq = pq.ParquetWriter(self._streams["parquet"], self.schema, compression="zstd")
            if "webdataset" in self._streams:
                self._tar = tarfile.open(fileobj=self._streams["webdataset"], mode="w|",
                                         format=tarfile.USTAR_FORMAT)
        if self._pq is not None:
            self._pq.write_table(pa.Table.from_pylist([row(out)], schema=self.schema))
        if self._tar is not None:
            _add_sample(self._tar, out)
        self.count += 1

    def close(self) -> None:
        try:
            for closer in (self._pq, self._tar, *self._streams.values()):
                if closer is not None:
                    closer.close()
            for k, tmp in self._tmp.items():
                self.store.commit(tmp, self.targets[k])
        except OSError as e:
            raise io_error(e, self.store.path(next(iter(self.targets.values()), ""))) from None
        self.files = {rel: file_proof(self.store, rel, self.count) for k, rel in self.targets.items()
                      if k in self._tmp}

    def abort(self) -> None:
        for closer in (self._pq, self._tar, *self._streams.values()):
            if closer is not None:
                try:
                    closer.close()
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
        for tmp in self._tmp.values():
            self.store.delete(tmp)


def file_proof(store, rel: str, rows: int) -> dict:
    """What a completion marker records of one file: ``{bytes, sha256, rows}`` (rows: sessions)."""
    data = store.read_bytes(rel)
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "rows": rows}


def proof_problems(store, files: dict[str, dict], deep: bool = True) -> list[str]:
    """How the shards on disk differ from a marker's ``files`` (empty: the marker holds).

    ``deep`` also compares sha256 (reads every byte); otherwise names and sizes only.
    """
    bad = []
    for rel, proof in sorted(files.items()):
        size = store.size(rel)
        if size is None:
            bad.append(f"{rel}: missing")
        elif size != proof["bytes"]:
            bad.append(f"{rel}: {size} bytes, the marker says {proof['bytes']}")
        elif deep and hashlib.sha256(store.read_bytes(rel)).hexdigest() != proof["sha256"]:
            bad.append(f"{rel}: sha256 differs from the marker (damaged)")
    return bad


def shard_name(rank: int) -> str:
    """The shard files of task ``rank``: ``part-RRRRR.parquet`` and ``part-RRRRR.tar``."""
    return f"part-{rank:05d}"


def shard_temporaries(store, name: str) -> list[str]:
    """The temp files of shard ``name`` on ``store`` (``.name.ext.tmp-PID``, any process id)."""
    return [rel for sub, ext in (("parquet", "parquet"), ("webdataset", "tar"))
            for rel in store.list(f"shards/{sub}", f".{name}.{ext}.tmp-*", hidden=True)]


def remove_stale_temporaries(store, name: str) -> None:
    """Temp files a killed earlier attempt of this task left behind (any process id)."""
    for rel in shard_temporaries(store, name):
        store.delete(rel)


def _add_sample(tar: tarfile.TarFile, o) -> None:
    """``<key>.json``, ``<key>.system.flac``, ``<key>.user.flac``.

    tarfile directly rather than webdataset.TarWriter: fixed owner/mode/mtime so the bytes are stable.
    """
    key = o.record.session_id
    meta = json.dumps(metadata_dict(o), sort_keys=True, ensure_ascii=False).encode()
    members = (("json", meta), ("system.flac", o.system_flac), ("user.flac", o.user_flac), ("voice.flac", o.voice_flac))
    for ext, data in ((e, d) for e, d in members if d):
        info = tarfile.TarInfo(f"{key}.{ext}")
        info.size, info.mtime, info.mode = len(data), 0, 0o444
        info.uname = info.gname = "duplexsynth"
        tar.addfile(info, io.BytesIO(data))
