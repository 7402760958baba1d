"""Real two-speaker conversations as :class:`LearnSession`: stereo audio plus voice activity.

``synth learn … --eval-real DIR`` scores a model on conversations held under licence
(Switchboard, Fisher, Candor). ``DIR`` holds, per conversation, a stereo ``NAME.wav`` or
``NAME.flac`` (one speaker per channel, any sample rate) and ONE annotation with the same stem:

- ``NAME.json``: VAP voice-activity lists, as the voice-activity-projection code writes them
  (``VAD_LIST = list[list[list[float]]]`` in ErikEkstedt/VoiceActivityProjection
  ``vap/utils/utils.py``, one json file per audio stem): ``[[[s, e], …], [[s, e], …]]``, channel 0
  then channel 1, seconds. A dict ``{"vad_list": [...]}`` (its sliding-window samples) is read too.
- ``NAME.rttm``: ``SPEAKER <file> <chan> <start_s> <dur_s> <NA> <NA> <speaker> <NA> <NA>`` lines.
  A speaker goes to a channel through ``channel_map``; without one, two speakers whose RTTM
  channel fields are distinct 0/1 or 1/2 go to those channels (lower first).
- ``NAME.TextGrid``: one interval tier per speaker, labelled intervals are speech. A tier goes to
  a channel through ``channel_map`` (other tiers ignored); without one, exactly two interval
  tiers, in order, are channels 0 and 1.

Labels come from voice activity alone (LABELS.md §2 frames, R1 floor). A *turn* is a maximal
chain of one speaker's segments whose gaps the other speaker does not fill with a segment longer
than :data:`BACKCHANNEL_MAX_S` (shorter ones are backchannels and never end a turn). Each
conversation is read on its own (one soundfile read per file), its two channels turned into
features, and yielded once per system channel.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import numpy as np

from ..errors import UserError
from .data import HOLD, NOT_HOLD, RELEASE, TAKE, LearnSession, spans_of
from .features import frame_features, hops_per_frame

BACKCHANNEL_MAX_S = 1.0  # a segment this short never ends the other speaker's turn
END_SLACK_S = 1.0        # annotations may run this far past the audio's end (they are clipped)
AUDIO_SUFFIXES = (".wav", ".flac")
FORMATS = {".json": "vap", ".rttm": "rttm", ".textgrid": "textgrid"}
_ANNOTATION_NAMES = "NAME.json (VAP), NAME.rttm or NAME.TextGrid"

Segment = tuple[float, float]


class RawSegment(NamedTuple):
    """One speech segment as the annotation states it; ``where`` names it in error messages."""

    on_s: float
    off_s: float
    where: str


@dataclass(frozen=True)
class Conversation:
    """One conversation of the folder: its audio file and its annotation file."""

    name: str
    audio: Path
    annotation: Path

    @property
    def format(self) -> str:
        return FORMATS[self.annotation.suffix.lower()]


def read_real(path: str | Path, frame_period_s: float, *, system_channel: int | None = None,
              channel_map: dict[str, int] | None = None, language: str = "unknown") -> Iterator[LearnSession]:
    """The conversations of folder ``path`` as sessions, one conversation in memory at a time.

    ``system_channel`` 0 or 1 plays the system; ``None`` yields each conversation twice (system on
    channel 0, then on channel 1), session ids ``NAME-ch0`` and ``NAME-ch1``. ``channel_map`` maps
    RTTM speakers and TextGrid tier names to channels (VAP lists are already per channel). Arguments
    and the folder's pairing of audio and annotations are checked at once; each file when it is read.

    >>> sessions = read_real("swb_dev", 0.08, channel_map={"A": 0, "B": 1})  # doctest: +SKIP
    """
    try:
        hops_per_frame(frame_period_s)
    except ValueError:
        raise UserError(f"frame period {frame_period_s} s: not a whole number of 10 ms feature hops "
                        "(such as 0.02, 0.04, 0.08 or 1.0)") from None
    if system_channel not in (None, 0, 1) or isinstance(system_channel, bool):
        raise UserError(f"system channel {system_channel!r}: a conversation has channels 0 and 1")
    folder = Path(path)
    convs = find_conversations(folder)
    channels = (0, 1) if system_channel is None else (system_channel,)
    run = folder.resolve().name
    return _sessions(convs, frame_period_s, channels, _checked_map(channel_map), language, run)


def _sessions(convs: list[Conversation], period_s: float, channels: tuple[int, ...],
              channel_map: dict[str, int] | None, language: str, run: str) -> Iterator[LearnSession]:
    for conv in convs:
        yield from conversation_sessions(conv, period_s, channels, channel_map, language, run)


def _checked_map(channel_map: dict[str, int] | None) -> dict[str, int] | None:
    if channel_map is None:
        return None
    for name, ch in channel_map.items():
        if isinstance(ch, bool) or ch not in (0, 1):
            raise UserError(f"channel map: {name!r} goes to channel {ch!r}; channels are 0 and 1")
    return dict(channel_map)


# ---- the folder ---------------------------------------------------------------------------------

def find_conversations(folder: Path) -> list[Conversation]:
    """Audio files paired with their annotation by stem; every file of either kind needs its pair."""
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder of conversations")
    audio: dict[str, Path] = {}
    notes: dict[str, Path] = {}
    for f in sorted(folder.iterdir()):
        suffix = f.suffix.lower()
        if f.is_file() and suffix in AUDIO_SUFFIXES:
            _put(audio, f, "audio file")
        elif f.is_file() and suffix in FORMATS:
            _put(notes, f, "annotation")
    if not audio and not notes:
        raise UserError(f"{folder}: no conversations (stereo NAME.wav or NAME.flac with {_ANNOTATION_NAMES})")
    lone_audio, lone_notes = sorted(set(audio) - set(notes)), sorted(set(notes) - set(audio))
    if lone_audio:
        stem = lone_audio[0]
        raise UserError(f"{audio[stem]}: audio without an annotation (no {_ANNOTATION_NAMES.replace('NAME', stem)})")
    if lone_notes:
        stem = lone_notes[0]
        raise UserError(f"{notes[stem]}: annotation without audio (no {stem}.wav or {stem}.flac)")
    return [Conversation(stem, audio[stem], notes[stem]) for stem in sorted(audio)]


def _put(found: dict[str, Path], f: Path, kind: str) -> None:
    if f.stem in found:
        raise UserError(f"{f}: a second {kind} for conversation {f.stem!r} (beside {found[f.stem].name}): keep one")
    found[f.stem] = f


# ---- one conversation ---------------------------------------------------------------------------

def conversation_sessions(conv: Conversation, period_s: float, channels: tuple[int, ...],
                          channel_map: dict[str, int] | None, language: str, run: str) -> Iterator[LearnSession]:
    """The sessions of one conversation, one per system channel in ``channels``."""
    sr, num_samples = _audio_info(conv.audio)
    activity = checked_segments(conv.annotation, read_activity(conv, channel_map), num_samples / sr)
    x = _read_audio(conv.audio)
    n = math.ceil(round(len(x) / (sr * period_s), 6))
    feats = [frame_features(x[:, c], sr, n, period_s) for c in (0, 1)]
    del x
    vads = [vad_frames(segs, period_s, n) for segs in activity]
    turns = [turns_of(activity[c], activity[1 - c]) for c in (0, 1)]
    for c in channels:
        u = 1 - c
        yield LearnSession(
            session_id=f"{conv.name}-ch{c}", run=run, language=language, scenario_id=conv.name,
            frame_period_s=period_s, user_feat=feats[u], system_feat=feats[c],
            sys_floor=floor_frames(turns[c], period_s, n), sys_vad=vads[c], usr_vad=vads[u], sys_action=None,
            families={}, contexts=contexts_of(activity[u], turns[c], turns[u], vads[u], period_s, n),
            meta={"source": "real", "format": conv.format, "system_channel": c},
        )


def _audio_info(path: Path) -> tuple[int, int]:
    """``(sample_rate, num_samples)`` of a stereo file, from its header."""
    import soundfile as sf

    try:
        info = sf.info(str(path))
    except (sf.SoundFileError, RuntimeError, OSError) as e:
        raise UserError(f"{path}: unreadable audio ({_first_line(e)})") from None
    if info.channels != 2:
        kind = "mono audio" if info.channels == 1 else f"{info.channels} channels"
        raise UserError(f"{path}: {kind}; a conversation needs stereo audio, one speaker per channel")
    if info.frames <= 0:
        raise UserError(f"{path}: no audio samples")
    return int(info.samplerate), int(info.frames)


def _read_audio(path: Path) -> np.ndarray:
    import soundfile as sf

    try:
        x, _ = sf.read(str(path), dtype="float32", always_2d=True)
    except (sf.SoundFileError, RuntimeError, OSError) as e:
        raise UserError(f"{path}: unreadable audio ({_first_line(e)})") from None
    return x


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


# ---- annotations --------------------------------------------------------------------------------

def read_activity(conv: Conversation, channel_map: dict[str, int] | None) -> list[list[RawSegment]]:
    """Speech segments of channel 0 and channel 1 as the annotation states them (unchecked)."""
    if conv.format == "vap":
        return vap_activity(conv.annotation)
    if conv.format == "rttm":
        return rttm_activity(conv.annotation, channel_map)
    return textgrid_activity(conv.annotation, channel_map)


def vap_activity(path: Path) -> list[list[RawSegment]]:
    """A VAP ``vad_list``: ``[[[s, e], …], [[s, e], …]]`` or ``{"vad_list": that}``."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: unreadable VAP activity JSON ({_first_line(e)})") from None
    if isinstance(data, dict):
        if "vad_list" not in data:
            raise UserError(f"{path}: a JSON object without vad_list (keys {sorted(data)[:5]})")
        data = data["vad_list"]
    if not isinstance(data, list) or len(data) != 2 or not all(isinstance(ch, list) for ch in data):
        got = f"{len(data)} items" if isinstance(data, list) else type(data).__name__
        raise UserError(f"{path}: vad_list must be two lists of [start_s, end_s] pairs (channel 0, channel 1), "
                        f"got {got}")
    return [[_vap_pair(path, pair, f"vad_list[{c}][{i}]") for i, pair in enumerate(ch)] for c, ch in enumerate(data)]


def _vap_pair(path: Path, pair: Any, where: str) -> RawSegment:
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if not (isinstance(pair, list) and len(pair) == 2 and all(number(v) for v in pair)):
        raise UserError(f"{path}: {where} is {json.dumps(pair)[:60]}, not a [start_s, end_s] pair of numbers")
    return RawSegment(float(pair[0]), float(pair[1]), where)


def rttm_activity(path: Path, channel_map: dict[str, int] | None) -> list[list[RawSegment]]:
    """RTTM ``SPEAKER`` lines put on channels by speaker (other line types are skipped)."""
    rows = _rttm_rows(path)
    if not rows:
        raise UserError(f"{path}: no SPEAKER lines")
    cmap = channel_map if channel_map is not None else _rttm_channels(path, rows)
    out: list[list[RawSegment]] = [[], []]
    for speaker, _, seg in rows:
        if speaker not in cmap:
            raise UserError(f"{path}: {seg.where}: speaker {speaker!r} is not in the channel map "
                            f"(it has {', '.join(map(repr, sorted(cmap)))})")
        out[cmap[speaker]].append(seg)
    return out


def _rttm_rows(path: Path) -> list[tuple[str, str, RawSegment]]:
    """``(speaker, channel field, segment)`` of each SPEAKER line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: unreadable RTTM ({_first_line(e)})") from None
    rows = []
    for i, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields or fields[0] != "SPEAKER":
            continue
        where = f"line {i}"
        if len(fields) < 8:
            raise UserError(f"{path}: {where}: {len(fields)} fields; a SPEAKER line has 10 "
                            "(SPEAKER file chan start dur NA NA speaker NA NA)")
        try:
            on, dur = float(fields[3]), float(fields[4])
        except ValueError:
            raise UserError(f"{path}: {where}: start {fields[3]!r} or duration {fields[4]!r} is not a number") from None
        rows.append((fields[7], fields[2], RawSegment(on, on + dur, where)))
    return rows


def _rttm_channels(path: Path, rows: list[tuple[str, str, RawSegment]]) -> dict[str, int]:
    """Speaker -> channel from the RTTM channel field, when it tells exactly two speakers apart."""
    chans: dict[str, set[str]] = {}
    for speaker, chan, _ in rows:
        chans.setdefault(speaker, set()).add(chan)
    names = ", ".join(repr(s) for s in chans)
    if len(chans) != 2:
        raise UserError(f"{path}: {len(chans)} speakers ({names}); give --channel-map to put each on channel 0 or 1")
    fields = [next(iter(c)) if len(c) == 1 else None for c in chans.values()]
    if None in fields or set(fields) not in ({"0", "1"}, {"1", "2"}):
        shown = ", ".join(f"{s!r} on {'/'.join(sorted(c))}" for s, c in chans.items())
        raise UserError(f"{path}: the chan field does not put speakers {names} on two channels ({shown}); "
                        "give --channel-map")
    low = min(fields)
    return {s: int(f != low) for s, f in zip(chans, fields)}


def textgrid_activity(path: Path, channel_map: dict[str, int] | None) -> list[list[RawSegment]]:
    """Labelled intervals of a TextGrid's interval tiers, a tier per speaker."""
    tiers = [t for t in _open_textgrid(path).tiers if t.tierType == "IntervalTier"]
    names = ", ".join(repr(t.name) for t in tiers)
    if channel_map is None:
        if len(tiers) != 2:
            raise UserError(f"{path}: {len(tiers)} interval tiers ({names}); without --channel-map a TextGrid "
                            "needs exactly two (channel 0, then channel 1)")
        channel_map = {tiers[0].name: 0, tiers[1].name: 1}
    out: list[list[RawSegment]] = [[], []]
    used = set()
    for t in tiers:
        if t.name not in channel_map:
            continue
        used.add(channel_map[t.name])
        out[channel_map[t.name]] += [RawSegment(float(e.start), float(e.end), f"tier {t.name!r} interval {i}")
                                     for i, e in enumerate(t.entries) if e.label.strip()]
    for ch in (0, 1):
        if ch not in used:
            raise UserError(f"{path}: no tier goes to channel {ch} (tiers {names}; channel map {channel_map})")
    return out


def _open_textgrid(path: Path) -> Any:
    try:
        from praatio import textgrid
    except ImportError as e:
        raise ImportError("reading TextGrid annotations needs praatio: pip install 'duplexsynth[learn]'") from e
    try:
        return textgrid.openTextgrid(str(path), includeEmptyIntervals=False)
    except Exception as e:  # noqa: BLE001 - praatio raises IndexError, ValueError, … for a damaged file
        raise UserError(f"{path}: unreadable TextGrid ({_first_line(e)})") from None


def checked_segments(path: Path, channels: list[list[RawSegment]], duration_s: float) -> list[list[Segment]]:
    """Each channel's segments checked against the audio, clipped to it, sorted and merged."""
    out = []
    for segs in channels:
        kept = []
        for s in segs:
            if not (math.isfinite(s.on_s) and math.isfinite(s.off_s)) or s.on_s < 0:
                raise UserError(f"{path}: {s.where}: start {s.on_s} s / end {s.off_s} s is not a time in the audio")
            if s.off_s < s.on_s:
                raise UserError(f"{path}: {s.where}: end {s.off_s} s is before start {s.on_s} s")
            if s.off_s > duration_s + END_SLACK_S:
                raise UserError(f"{path}: {s.where}: end {s.off_s} s is more than {END_SLACK_S:g} s past the end "
                                f"of the audio ({duration_s:.3f} s)")
            if s.on_s < min(s.off_s, duration_s):
                kept.append((s.on_s, min(s.off_s, duration_s)))
        out.append(merge(kept))
    return out


def merge(segs: list[Segment]) -> list[Segment]:
    """Sorted segments with overlapping or touching ones joined."""
    out: list[Segment] = []
    for on, off in sorted(segs):
        if out and on <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], off))
        else:
            out.append((on, off))
    return out


# ---- labels from activity -----------------------------------------------------------------------

def turns_of(own: list[Segment], other: list[Segment], max_backchannel_s: float = BACKCHANNEL_MAX_S) -> list[Segment]:
    """Turn spans of a speaker: consecutive segments stay one turn unless, somewhere in the gap
    between them, the other speaker talks in a segment longer than ``max_backchannel_s``.

    This covers a long segment that starts in the gap and also one that started earlier (a
    barge-in still going when the speaker stopped). ``own`` and ``other`` are merged, sorted.
    """
    long = [(a, b) for a, b in other if round(b - a, 6) > max_backchannel_s]
    turns: list[Segment] = []
    for on, off in own:
        if turns and not any(a < on and b > turns[-1][1] for a, b in long):
            turns[-1] = (turns[-1][0], off)
        else:
            turns.append((on, off))
    return turns


def frame_span(on_s: float, off_s: float, period_s: float) -> tuple[int, int]:
    """Frames ``[first, end)`` that speech ``[on_s, off_s)`` overlaps (at least one); frame k is
    ``[k*P, (k+1)*P)``. Times are rounded to 1e-6 frame first, so 0.24 s is frame 3 at 80 ms."""
    first = math.floor(round(on_s / period_s, 6))
    end = math.ceil(round(off_s / period_s, 6))
    return first, max(first + 1, end)


def vad_frames(segs: list[Segment], period_s: float, n: int) -> np.ndarray:
    """0/1 per frame: 1 where any segment overlaps the frame."""
    vad = np.zeros(n, dtype=np.int8)
    for on, off in segs:
        first, end = frame_span(on, off, period_s)
        vad[first:min(end, n)] = 1
    return vad


def floor_frames(turns: list[Segment], period_s: float, n: int) -> np.ndarray:
    """R1: a turn's first frame TAKE, last RELEASE, HOLD between; a frame shared by the end of one
    turn and the start of the next shows TAKE (turns are in time order, so later TAKEs win)."""
    floor = np.full(n, NOT_HOLD, dtype=np.int8)
    for on, off in turns:
        first, end = frame_span(on, off, period_s)
        last = min(end, n) - 1
        floor[first + 1:last] = HOLD
        floor[last] = RELEASE
        floor[first] = TAKE
    return floor


def contexts_of(usr_segs: list[Segment], sys_turns: list[Segment], usr_turns: list[Segment],
                usr_vad: np.ndarray, period_s: float, n: int) -> dict[str, list[tuple[int, int]]]:
    """Where the system should not react: the user's pauses inside user turns (at least two
    frames) and user backchannels (segments up to 1 s inside a system turn)."""
    usr_floor = floor_frames(usr_turns, period_s, n)
    backchannels = []
    for on, off in usr_segs:
        if round(off - on, 6) <= BACKCHANNEL_MAX_S and any(a <= on and off <= b for a, b in sys_turns):
            first, end = frame_span(on, off, period_s)
            backchannels.append((first, min(end, n)))
    return {
        "user_pause": spans_of((usr_floor == HOLD) & (usr_vad == 0), min_len=2),
        "backchannel": backchannels,
        "side_talk": [],
        "background": [],
    }
