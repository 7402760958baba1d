"""Re-check a written run: schema, label rules, audio/label agreement, Parquet == WebDataset."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import soundfile as sf

from .schema.phenomena import ALL
from .inspection.runfolder import parse_record, pop_flac
from .schema.record import SessionRecord
from .stages import qa
from .stages.label import frame_of, vad_frames
from .schema.common import session_id, session_index
from .schema.labels import FrameLabels


def _decode(data: bytes) -> tuple[np.ndarray, int]:
    x, sr = sf.read(io.BytesIO(data), dtype="float32")
    return x, sr


def check_hits(rec: SessionRecord) -> list[str]:
    """Every phenomenon hit names a known phenomenon, its family and an event of the session."""
    ids = {e.id for e in rec.events}
    return [f"phenomenon_hit:{h.id}:{h.event_id}" for h in rec.phenomena
            if h.id not in ALL or ALL[h.id].family != h.family or h.event_id not in ids]


def check_backend_frames(rec: SessionRecord, period_ms: int) -> list[str]:
    """Each written backend message's ``frame`` is the frame of its sample (``label.frame_of``)."""
    return [f"backend_frame:{w.work_id}" for w in rec.delegations
            if any(m.frame != frame_of(m.sample, rec.sample_rate, period_ms) for m in w.backend)]


def validate_record(rec: SessionRecord, user: bytes, system: bytes, ttl_ms: float) -> list[str]:
    period_ms = int(round(rec.frame_period_s * 1000))
    # sizes first: the checks below allocate per sample and per frame, so a damaged or edited
    # num_samples (1e15) must be a finding, not an out-of-memory
    frames = -(-rec.num_samples * 1000 // max(1, rec.sample_rate * period_ms)) if period_ms > 0 else -1
    if (not 8000 <= rec.sample_rate <= 192000 or rec.num_samples < 0 or period_ms <= 0
            or abs(rec.num_samples - rec.duration_s * rec.sample_rate) > 1 or abs(frames - len(rec.sys_action)) > 1):
        return [f"record_shape (sample_rate {rec.sample_rate}, num_samples {rec.num_samples}, duration_s "
                f"{rec.duration_s}, {len(rec.sys_action)} frames of {period_ms} ms do not agree)"]
    tl = rec.timeline()
    labels = FrameLabels(frame_period_s=rec.frame_period_s, num_frames=len(rec.sys_action),
                         sys_action=rec.sys_action, sys_floor=rec.sys_floor, usr_floor=rec.usr_floor,
                         sys_vad=rec.sys_vad, usr_vad=rec.usr_vad, markers=rec.markers,
                         addressed=rec.addressed, person_vad=rec.person_vad)
    bad = qa.check_labels(tl, labels, period_ms, ttl_ms)
    bad += qa.check_group(tl, labels, period_ms)
    bad += qa.check_long_range(tl, rec.planner_meta)
    bad += check_backend_frames(rec, period_ms)
    bad += check_hits(rec)
    u, sr_u = _decode(user)
    s, sr_s = _decode(system)
    if sr_u != rec.sample_rate or sr_s != rec.sample_rate or len(u) != rec.num_samples or len(s) != rec.num_samples:
        bad.append("audio_shape")
        return bad
    bad += qa.check_vad(s, rec.sys_vad, rec.sample_rate, period_ms, "sys_vad")
    # ch0 also holds other talkers, so usr_vad can only be checked for speech where ch0 is silent
    ch0 = vad_frames(u, rec.sample_rate, period_ms, -90.0)
    if (np.asarray(rec.usr_vad) & (1 - ch0[: len(rec.usr_vad)])).any():
        bad.append("usr_vad_on_silence")
    bad += qa.check_vad_in_events(tl, rec.sys_vad, ("system",), period_ms, "sys_vad")
    bad += qa.check_vad_in_events(tl, rec.usr_vad, ("user",), period_ms, "usr_vad")
    bad += qa.check_peaks({"user": u, "system": s})
    return bad


def _run_info(out: Path) -> dict:
    """``run.json`` as the run folder reads it, with the fields validation needs."""
    from .errors import UserError
    from .inspection.runfolder import RunFolder

    info = RunFolder(out).info
    try:
        info["config"]["timing"]["result_ttl_ms"], info["config"]["output"]["formats"]  # noqa: B018
    except (KeyError, TypeError) as e:
        raise UserError(f"{out / 'run.json'}: damaged run.json ({type(e).__name__}: "
                        f"{str(e).splitlines()[0] if str(e) else ''})") from None
    return info


def validate_run(out_dir: str | Path) -> tuple[int, list[str]]:
    """Number of sessions checked and the list of ``session: problem`` (or ``file: problem``) strings.

    A damaged shard is one problem naming the file; the other shards are still checked.
    """
    out = Path(out_dir)
    run = _run_info(out)
    ttl = run["config"]["timing"]["result_ttl_ms"]
    problems: list[str] = []
    seen: dict[str, dict] = {}
    for pf in sorted((out / "shards" / "parquet").glob("*.parquet")):
        try:
            rows = pq.read_table(pf).to_pylist()
        except Exception as e:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
            problems.append(f"{pf}: unreadable Parquet ({_first_line(e)})")
            continue
        for row in rows:
            problems += _check_row(row, seen, ttl)
    if "webdataset" in run["config"]["output"]["formats"]:
        found: set[str] = set()
        for tf in sorted((out / "shards" / "webdataset").glob("*.tar")):
            problems += _check_tar(tf, seen, found)
        for key in sorted(set(seen) - found):
            problems.append(f"{key}: in Parquet but not in WebDataset")
    problems += _check_markers(out, run, len(seen))
    problems += _check_against_run(run, seen)
    return len(seen), problems


def _check_against_run(run: dict, seen: dict) -> list[str]:
    """Records that this run's ``run.json`` did not make (another seed, rate or name: two runs
    written into one folder), ids outside the run's range, and a run with no session at all."""
    if not seen:
        return ["no sessions in the shards: an empty run is not a pass"]
    cfg = run["config"]
    problems, sessions = [], cfg.get("sessions", 0)
    for sid, item in seen.items():
        rec = item["json"]
        if rec.get("seed") != cfg.get("seed"):
            problems.append(f"{sid}: seed {rec.get('seed')} but run.json's is {cfg.get('seed')} (another run's session?)")
        if rec.get("sample_rate") != cfg["audio"]["sample_rate"]:
            problems.append(f"{sid}: sample rate {rec.get('sample_rate')} but run.json's is {cfg['audio']['sample_rate']}")
        index = session_index(cfg["name"], sid)
        if not (run.get("data_settings") or {}).get("plans") and (index is None or index >= sessions):
            problems.append(f"{sid}: not one of this run's {sessions} session ids ({session_id(cfg['name'], 0)} ...)")
    return problems


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:200]


def _check_row(row: dict, seen: dict, ttl: float) -> list[str]:
    sid = row["session_id"]
    problems = [f"{sid}: duplicate session"] if sid in seen else []
    user, system = row.pop("user_audio")["bytes"], row.pop("system_audio")["bytes"]
    voice = pop_flac(row, "voice_prompt_audio")
    rec, problem = parse_record(row)
    if rec is None:  # a schema failure is a finding, not a crash
        return problems + [f"{sid}: schema: {problem}"]
    seen[sid] = {"json": rec.model_dump(mode="json"), "user": user, "system": system, "voice": voice}
    wants_voice = rec.render_spec is not None and rec.render_spec.voice_prompt is not None
    if wants_voice != bool(voice):
        problems.append(f"{sid}: voice_prompt_audio: {'missing' if wants_voice else 'present'} but the render "
                        f"spec {'has' if wants_voice else 'has no'} voice_prompt")
    try:
        return problems + [f"{sid}: {p}" for p in validate_record(rec, user, system, ttl)]
    except sf.LibsndfileError as e:
        return problems + [f"{sid}: audio not decodable FLAC ({_first_line(e)})"]


def _check_tar(tf: Path, seen: dict, found: set) -> list[str]:
    problems = []
    try:
        with tarfile.open(tf) as tar:
            for m in tar:
                key, ext = m.name.split(".", 1)
                data = tar.extractfile(m).read()
                ref = seen.get(key)
                if ref is None:
                    if key not in found:
                        problems.append(f"{key}: in WebDataset but not in Parquet")
                elif ext == "json" and json.loads(data) != ref["json"]:
                    problems.append(f"{key}: WebDataset json differs from Parquet row")
                elif ext in ("user.flac", "system.flac", "voice.flac") and data != ref[ext.split(".")[0]]:
                    problems.append(f"{key}: WebDataset {ext} differs from Parquet")
                found.add(key)
    except (tarfile.TarError, OSError, ValueError) as e:  # truncated or damaged tar
        problems.append(f"{tf}: unreadable tar ({_first_line(e)})")
    return problems


def _check_markers(out: Path, run: dict, n_sessions: int) -> list[str]:
    """Every task has a marker whose files are on disk unchanged; the markers' session counts add up."""
    from .executor.task import marker_name, marker_problems, read_marker
    from .io.store import Store

    store = Store(out)
    cfg = run["config"]
    num_tasks = -(-cfg["sessions"] // cfg["output"]["sessions_per_shard"])
    problems, counted, missing = [], 0, []
    for r in range(num_tasks):
        if not store.exists(marker_name(r)):
            missing.append(r)
            continue
        problems += marker_problems(store, r, deep=True)
        try:
            counted += read_marker(store, r)[0].sessions
        except (ValueError, UnicodeDecodeError):  # reported by marker_problems
            pass
    if missing:
        problems.append(f"{out}: {len(missing)} of {num_tasks} tasks have no completion marker "
                        f"(first: {marker_name(missing[0])}); rerun the run command to finish it")
    if "parquet" in cfg["output"]["formats"] and counted != n_sessions:
        problems.append(f"{out}: the markers count {counted} sessions, the Parquet shards hold {n_sessions}")
    return problems
