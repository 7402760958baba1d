"""What the learner reads: :class:`LearnSession`, streamed from run shards and cached per run.

A run is read one session at a time (``pyarrow`` batches of one row, or a WebDataset tar read as a
stream), its two channels turned into log-mel frames at once and the audio dropped, so a run is
never whole in memory. Features and labels of each session are cached as ``.npz`` under
``CACHE/<run key>/``; the key hashes ``run.json``'s fingerprint, the shard files' names and sizes
and the feature version, so a changed run is read again.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import UserError
from ..inspection.runfolder import RunFolder
from ..io.files import write_atomic_with, write_text_atomic
from .features import FEATURE_VERSION, frame_features

TAKE, HOLD, RELEASE, NOT_HOLD = 1, 2, 3, 0
FAMILY_TAIL_S = 1.5  # a transition up to this long after a phenomenon's event is counted for its family
CONTEXTS = ("user_pause", "backchannel", "side_talk", "background")
_LABEL_KEYS = ("sys_floor", "sys_action", "usr_floor", "sys_vad", "usr_vad")


@dataclass
class LearnSession:
    """One conversation as the learner sees it: per-frame features and labels of both channels.

    ``user_feat``/``system_feat`` are ``(n_frames, D)`` float16 log-mel stacks (ch0 user side, ch1
    system). ``sys_action`` is ``None`` for real conversations (they have no delegate label).
    ``families`` maps a phenomenon family to frame spans ``[start, end)`` in which a transition is
    attributed to it; ``contexts`` maps ``user_pause``/``backchannel``/``side_talk``/``background``
    to frame spans where the system should not react (take-over rates).
    """

    session_id: str
    run: str
    language: str
    scenario_id: str
    frame_period_s: float
    user_feat: np.ndarray
    system_feat: np.ndarray
    sys_floor: np.ndarray
    sys_vad: np.ndarray
    usr_vad: np.ndarray
    sys_action: np.ndarray | None = None
    families: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    contexts: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_frames(self) -> int:
        return int(len(self.sys_floor))

    @property
    def duration_s(self) -> float:
        return self.n_frames * self.frame_period_s

    def to_npz(self, path: Path) -> None:
        """Write atomically (``io.files.write_atomic_with``)."""
        arrays = {k: getattr(self, k) for k in ("user_feat", "system_feat", "sys_floor", "sys_vad", "usr_vad")}
        if self.sys_action is not None:
            arrays["sys_action"] = self.sys_action
        head = {k: getattr(self, k) for k in ("session_id", "run", "language", "scenario_id", "frame_period_s",
                                              "families", "contexts", "meta")}
        def save(tmp: Path) -> None:
            with open(tmp, "wb") as f:  # a file object: np.savez would add ".npz" to a temporary's name
                np.savez(f, head=np.frombuffer(json.dumps(head).encode(), dtype=np.uint8), **arrays)

        write_atomic_with(path, save)

    @classmethod
    def from_npz(cls, path: Path) -> "LearnSession":
        with np.load(path) as z:
            head = json.loads(z["head"].tobytes().decode())
            arrays = {k: z[k] for k in z.files if k != "head"}
        head["families"] = {k: [tuple(s) for s in v] for k, v in head["families"].items()}
        head["contexts"] = {k: [tuple(s) for s in v] for k, v in head["contexts"].items()}
        return cls(**head, **arrays)


def spans_of(mask: np.ndarray, min_len: int = 1) -> list[tuple[int, int]]:
    """Maximal runs of True in a 1-d mask as ``[start, end)`` pairs at least ``min_len`` long."""
    m = np.concatenate([[False], np.asarray(mask, dtype=bool), [False]])
    d = np.diff(m.astype(np.int8))
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    return [(int(s), int(e)) for s, e in zip(starts, ends) if e - s >= min_len]


def _frame_of(sample: int, sr: int, period_s: float) -> int:
    return int(sample // round(sr * period_s))


def _event_spans(row: dict, sr: int, period_s: float, n: int):
    """Per-family and per-context frame spans from a record's events and phenomena."""
    events = {e["id"]: e for e in row.get("events") or []}
    tail = int(round(FAMILY_TAIL_S / period_s))
    families: dict[str, list[tuple[int, int]]] = {}
    for p in row.get("phenomena") or []:
        e = events.get(p.get("event_id"))
        if e is None or e.get("on_sample") is None or e.get("off_sample") is None:
            continue
        span = (_frame_of(e["on_sample"], sr, period_s), min(n, _frame_of(e["off_sample"], sr, period_s) + 1 + tail))
        families.setdefault(p["family"], []).append(span)
    contexts: dict[str, list[tuple[int, int]]] = {k: [] for k in CONTEXTS}
    for e in events.values():
        if e.get("on_sample") is None or e.get("off_sample") is None:
            continue
        span = (_frame_of(e["on_sample"], sr, period_s), min(n, _frame_of(e["off_sample"] - 1, sr, period_s) + 1))
        phen = set(e.get("phenomena") or [])
        if e["speaker"] == "background":
            contexts["background"].append(span)
        elif e["speaker"] == "third_party" or (e["speaker"] == "user" and e.get("relation") == "addresses_other"):
            contexts["side_talk"].append(span)
        elif e["speaker"] == "user" and (e.get("relation") == "backchannels_on" or phen & _USER_BACKCHANNELS):
            contexts["backchannel"].append(span)
    for m in row.get("markers") or []:
        if m.get("type") == "yield":
            f = int(m["frame"])
            families.setdefault("barge_in_yield", []).append((max(0, f - tail), min(n, f + tail + 1)))
    usr_floor, usr_vad = np.asarray(row["usr_floor"]), np.asarray(row["usr_vad"])
    contexts["user_pause"] = spans_of((usr_floor == HOLD) & (usr_vad == 0), min_len=2)
    return families, contexts


_USER_BACKCHANNELS = {"continuer", "assessment", "agreement", "question_backchannel"}


def _voices(row: dict) -> dict[str, str]:
    """``{role: voice}`` from the record's render spec (for the same-voice confound check)."""
    spec = row.get("render_spec")
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError:
            return {}
    voices = (spec or {}).get("voices") or {}
    return {str(k): json.dumps(v, sort_keys=True) if not isinstance(v, str) else v for k, v in voices.items()}


def _decode(data: bytes, what: str) -> tuple[np.ndarray, int]:
    import soundfile as sf

    try:
        x, sr = sf.read(io.BytesIO(data), dtype="float32")
    except sf.LibsndfileError as e:
        raise UserError(f"{what}: audio is not decodable FLAC ({e.error_string})") from None
    return x, sr


def session_from_row(row: dict, user: bytes, system: bytes, run: str, where: str) -> LearnSession:
    """A :class:`LearnSession` from one record (Parquet row or WebDataset json) and its FLAC bytes."""
    missing = [k for k in _LABEL_KEYS if not row.get(k)]
    if missing:
        raise UserError(f"{where}: session {row.get('session_id')!r} has no frame labels ({missing[0]} is "
                        "missing or empty): synth learn needs a run written by synth run")
    period = float(row.get("frame_period_s") or 1.0 / float(row["frame_rate_hz"]))
    n = len(row["sys_floor"])
    sr = int(row["sample_rate"])
    ux, usr_sr = _decode(user, f"{where}: session {row['session_id']}: user")
    sx, sys_sr = _decode(system, f"{where}: session {row['session_id']}: system")
    families, contexts = _event_spans(row, sr, period, n)
    scene = row.get("scene")
    if isinstance(scene, str):
        scene = json.loads(scene)
    return LearnSession(
        session_id=row["session_id"], run=run, language=row.get("language") or "unknown",
        scenario_id=row.get("scenario_id") or "", frame_period_s=period,
        user_feat=frame_features(ux, usr_sr, n, period), system_feat=frame_features(sx, sys_sr, n, period),
        sys_floor=np.asarray(row["sys_floor"], dtype=np.int8), sys_vad=np.asarray(row["sys_vad"], dtype=np.int8),
        usr_vad=np.asarray(row["usr_vad"], dtype=np.int8), sys_action=np.asarray(row["sys_action"], dtype=np.int8),
        families=families, contexts=contexts,
        meta={"voices": _voices(row), "seed_id": (scene or {}).get("seed_id", row.get("scenario_id"))},
    )


def _parquet_rows(pf: Path) -> Iterator[tuple[dict, bytes, bytes]]:
    import pyarrow.parquet as pq

    try:
        f = pq.ParquetFile(pf)
        if "sys_floor" not in f.schema_arrow.names:
            raise UserError(f"{pf}: no frame labels (no sys_floor column): synth learn needs a run written by "
                            "synth run")
        for batch in f.iter_batches(batch_size=1):
            for row in batch.to_pylist():
                user = (row.pop("user_audio", None) or {}).get("bytes") or b""
                system = (row.pop("system_audio", None) or {}).get("bytes") or b""
                yield row, user, system
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        raise UserError(f"{pf}: damaged Parquet shard ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                        ) from None


def _webdataset_rows(tf: Path) -> Iterator[tuple[dict, bytes, bytes]]:
    """Samples of one tar in order, read as a stream (a sample's members are consecutive)."""
    key, parts = None, {}
    try:
        with tarfile.open(tf, mode="r|") as tar:
            for m in tar:
                if not m.isfile():
                    continue
                k, ext = m.name.split(".", 1)
                if k != key and key is not None:
                    yield _wds_sample(tf, parts)
                    parts = {}
                key = k
                parts[ext] = tar.extractfile(m).read()
    except (tarfile.TarError, OSError, ValueError) as e:
        raise UserError(f"{tf}: damaged WebDataset shard ({type(e).__name__}: {e})") from None
    if parts:
        yield _wds_sample(tf, parts)


def _wds_sample(tf: Path, parts: dict) -> tuple[dict, bytes, bytes]:
    if "json" not in parts:
        raise UserError(f"{tf}: a sample without its .json record (keys {sorted(parts)})")
    return json.loads(parts["json"]), parts.get("user.flac", b""), parts.get("system.flac", b"")


@dataclass(frozen=True)
class RunSource:
    """A run folder written by ``synth run``, read as a stream of :class:`LearnSession`.

    ``run.json`` is read once, by :class:`~synth.inspection.runfolder.RunFolder` (its one-line
    errors for a missing or damaged file); the sessions are streamed here, not through
    ``RunFolder.sessions``, which holds a whole shard in memory.
    """

    folder: RunFolder

    @classmethod
    def open(cls, path: str | Path) -> "RunSource":
        src = cls(RunFolder(Path(path)))
        if not src.shard_files():
            raise UserError(f"{src.path}: no shards (shards/parquet/*.parquet or shards/webdataset/*.tar)")
        return src

    @property
    def path(self) -> Path:
        return self.folder.path

    def info(self) -> dict:
        return self.folder.info

    def shard_files(self) -> list[Path]:
        return self.folder.parquet_files or self.folder.webdataset_files

    @property
    def name(self) -> str:
        return self.folder.name

    def frame_period_s(self) -> float:
        ms = self.info().get("config", {}).get("labels", {}).get("frame_period_ms")
        if ms is None:
            raise UserError(f"{self.path / 'run.json'}: config.labels.frame_period_ms is missing")
        return float(ms) / 1000.0

    def cache_key(self) -> str:
        info = self.info()
        h = hashlib.blake2b(digest_size=10)
        h.update(FEATURE_VERSION.encode())
        h.update(str(info.get("fingerprint", "")).encode())
        for f in self.shard_files():
            h.update(f"{f.name}:{f.stat().st_size}".encode())
        return h.hexdigest()

    def rows(self) -> Iterator[tuple[dict, bytes, bytes, str]]:
        for f in self.shard_files():
            reader = _parquet_rows if f.suffix == ".parquet" else _webdataset_rows
            for row, user, system in reader(f):
                yield row, user, system, str(f)

    def sessions(self, cache_dir: Path | None = None) -> Iterator[LearnSession]:
        """Every session in shard order, from the feature cache where it holds the run."""
        if cache_dir is None:
            for row, user, system, where in self.rows():
                yield session_from_row(row, user, system, self.name, where)
            return
        d = Path(cache_dir) / self.cache_key()
        done = d / "complete.json"
        if done.is_file():
            for sid in json.loads(done.read_text())["sessions"]:
                yield LearnSession.from_npz(d / f"{sid}.npz")
            return
        d.mkdir(parents=True, exist_ok=True)
        ids = []
        for row, user, system, where in self.rows():
            s = session_from_row(row, user, system, self.name, where)
            s.to_npz(d / f"{s.session_id}.npz")
            ids.append(s.session_id)
            yield s
        write_text_atomic(done, json.dumps({"run": str(self.path), "sessions": ids}))


def default_cache_dir() -> Path:
    """``$DUPLEXSYNTH_CACHE`` or ``$XDG_CACHE_HOME/duplexsynth`` (``~/.cache/duplexsynth``), ``/learn``."""
    base = os.environ.get("DUPLEXSYNTH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "duplexsynth")
    return Path(base) / "learn"


def take_hours(sessions: Iterator[LearnSession], hours: float | None) -> list[LearnSession]:
    """Sessions in order until their audio reaches ``hours`` (all of them when ``None``)."""
    out, total = [], 0.0
    for s in sessions:
        if hours is not None and total >= hours * 3600:
            break
        out.append(s)
        total += s.duration_s
    return out
