"""lhotse export: one cut per session as NeMo's duplex speech-to-speech dataset reads it.

What we read (NeMo ``speechlm2``: ``DuplexS2SDataset`` and its data docs; lhotse 1.33): a cut whose
``recording`` is what the model hears and whose ``custom["target_audio"]`` is a second
``Recording``, the agent's clean speech **at the target rate** (NeMo resamples the main
recording to ``source_sample_rate`` but loads ``target_audio`` as it is, so a 16 kHz target would
silently stay 16 kHz); supervisions whose ``speaker`` is one of the dataset's ``input_roles``
(``user``/``User``) or ``output_roles`` (``agent``/``Assistant``), each placing its text's tokens at the
frame of its ``start`` and an EOS at its ``end``. Speakers outside both role sets are ignored by
NeMo and kept by lhotse.

Per session:

- ``recording``: the user-side channel (ch0: the user in the room, noise, the third party,
  background speech, echo), mono at the run's rate;
- ``custom["target_audio"]``: the clean system channel (ch1), resampled to ``target_sample_rate``
  (polyphase, at least as long as the cut);
- one supervision per user turn (speaker ``User``) and per system turn (``Assistant``): a turn is
  a chain of one speaker's floor-taking events (LABELS.md R1), from its first onset to its last
  offset; an interrupted system turn ends at the cut and its text is only the words spoken.
  Backchannels and other non-floor events are their own (overlapping) supervisions; third-party
  and background speech are supervisions with speakers ``third_party`` / ``background``.
  Sound tags (``[laughter]``) are dropped from the text unless ``sound_tags="keep"``;
- ``supervision.alignment["word"]``: per-word timing (seconds from the session start);
- ``custom``: ``system_prompt`` (the assistant's, ``synth.persona``; NeMo's duplex models read
  it as the text prompt), ``context_audio`` (the assistant's voice prompt, a few seconds of its
  voice rendered apart from the session, at the run's rate, with ``context_audio_unaligned``
  so that lhotse's ``cut.load_custom`` loads it whole instead of cutting it to the cut's span;
  NeMo's duplex datasets read it as ``cut.context_audio.resample(rate).load_audio()`` and
  condition the speaker on it), ``language``, ``scenario_id``, ``phenomena``, and the frame
  labels at the run's 80 ms period (``frame_period_s``, ``sys_action``, ``sys_floor``,
  ``usr_floor``: value indices, their names in ``export.json``).

Layout under ``DIR``::

    cuts.jsonl.gz                   the CutSet; audio paths relative to DIR
    audio/<session>.user.wav        16-bit PCM, the run's rate
    audio/<session>.assistant.wav   16-bit PCM, the target rate
    audio/<session>.voice.wav       the voice prompt, 16-bit PCM, the run's rate
    export.json

or with ``shar=True`` lhotse Shar shards (``cuts.NNNNNN.jsonl.gz``, ``recording.NNNNNN.tar``,
``target_audio.NNNNNN.tar``, ``context_audio.NNNNNN.tar``, FLAC) under ``DIR/shar``,
``SHAR_SHARD_SIZE`` sessions each: the audio travels inside the shards, the form NeMo's docs
recommend for training (``input_cfg: [{type: lhotse_shar, shar_path: DIR/shar}]``).

The voice prompt in Shar: lhotse 1.33's ``SharWriter`` stores a custom ``Recording`` under the
manifest of ``to_shar_placeholder(recording, cut)``, whose duration and ``num_samples`` are the
*cut's*; a clip shorter than its session then fails to load (``AudioLoadingError``: declared
samples diverge). So ``context_audio`` is written beside the ``SharWriter`` as a Shar field of its
own, by lhotse's ``AudioTarWriter`` (the writer ``SharWriter`` uses per field), whose manifest is
``to_shar_placeholder(recording)``: the clip's own length. Both write one entry per cut (a
placeholder where a session has no clip) with the same shard size, so the shards line up, and
``CutSet.from_shar(in_dir=DIR/shar)`` finds the field by its file name and attaches it to each
cut as ``cut.context_audio``. A reader listing ``fields`` itself must name ``context_audio`` too.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..schema.labels import FLOORS, SYS_ACTIONS
from .common import join_spoken, kept_word, resample, write_json, write_wav

ROLES = {"user": "User", "system": "Assistant", "third_party": "third_party", "background": "background"}
TARGET_RATES = (16000, 22050, 24000, 44100, 48000)
SHAR_SHARD_SIZE = 100
VOICE_FIELD = "context_audio"  # lhotse custom field of the voice prompt (NeMo reads this name)


@dataclass(frozen=True)
class Segment:
    """One supervision before it becomes lhotse's: samples, speaker role, words."""

    id: str
    speaker: str
    on: int
    off: int
    words: tuple  # PlacedWord


def _groups(rec) -> list[tuple]:
    """Events grouped as supervisions: turns of user and system, every other audible event alone."""
    from ..schema.timeline import Timeline
    from ..stages.label import turns_of

    timeline = Timeline(sample_rate=rec.sample_rate, num_samples=rec.num_samples, events=rec.events)
    groups = [t.events for spk in ("user", "system") for t in turns_of(timeline, spk)]
    groups += [(e,) for e in rec.events if e.speaker in ROLES
               and (e.floor_intent == "none" or e.speaker not in ("user", "system"))]
    return groups


def _role(e) -> str:
    """The supervision's speaker: NeMo's role names; in a group, speech a person addresses to
    someone else carries the person's id (outside NeMo's roles: heard in the recording, not taken
    as the user's input text), speech to the assistant is ``User``."""
    if e.person and e.speaker == "user" and e.addressee != "system":
        return e.person
    return ROLES[e.speaker]


def segments(rec, sound_tags: str = "drop") -> list[Segment]:
    """The session's supervisions, by onset. A supervision spans its events that keep a word (a
    dropped ``[breath]`` before a turn does not move its start); a group with none is left out."""
    out = []
    for events in _groups(rec):
        kept = [(e, [w for w in e.words if kept_word(w, sound_tags)]) for e in events]
        kept = [(e, ws) for e, ws in kept if ws]
        if not kept:
            continue
        words = tuple(w for _, ws in kept for w in ws)
        on, off = kept[0][0].on_sample, kept[-1][0].off_sample
        if off > on:
            out.append(Segment(f"{rec.session_id}-{kept[0][0].id}", _role(events[0]), on, off, words))
    return sorted(out, key=lambda s: (s.on, s.off, s.id))


def _supervision(seg: Segment, rec, word_alignments: bool):
    from lhotse import SupervisionSegment
    from lhotse.supervision import AlignmentItem

    sr = rec.sample_rate
    align = None
    if word_alignments:
        align = {"word": [AlignmentItem(symbol=w.word, start=w.on_sample / sr,
                                        duration=(w.off_sample - w.on_sample) / sr) for w in seg.words]}
    return SupervisionSegment(id=seg.id, recording_id=rec.session_id, start=seg.on / sr,
                              duration=(seg.off - seg.on) / sr, channel=0, text=join_spoken(seg.words),
                              language=rec.language, speaker=seg.speaker, alignment=align)


def _recording(rid: str, audio: np.ndarray, sr: int, path: str | None):
    """A lhotse Recording: of a file at ``path`` (relative to the manifest), or in memory (Shar)."""
    from lhotse import AudioSource, Recording

    if path is None:
        import soundfile as sf

        buf = io.BytesIO()
        sf.write(buf, audio, sr, subtype="PCM_16", format="WAV")
        return Recording.from_bytes(buf.getvalue(), recording_id=rid)
    return Recording(id=rid, sources=[AudioSource(type="file", channels=[0], source=path)], sampling_rate=sr,
                     num_samples=len(audio), duration=len(audio) / sr)


def session_cut(session, target_sample_rate: int, sound_tags: str, word_alignments: bool, out: Path | None):
    """The cut of one session; its audio written under ``out/audio`` (or kept in memory when None)."""
    from lhotse import MonoCut

    rec = session.record
    sid = rec.session_id
    user, sr = session.decode("user")
    target = resample(session.decode("system")[0], sr, target_sample_rate)
    voice = session.decode("voice")[0] if session.voice_flac else None
    paths = (None, None, None)
    if out is not None:
        paths = (f"audio/{sid}.user.wav", f"audio/{sid}.assistant.wav", f"audio/{sid}.voice.wav")
        write_wav(out / paths[0], user, sr)
        write_wav(out / paths[1], target, target_sample_rate)
        if voice is not None:
            write_wav(out / paths[2], voice, sr)
    custom = {"target_audio": _recording(f"{sid}-assistant", target, target_sample_rate, paths[1]),
              "language": rec.language, "scenario_id": rec.scenario_id,
              "phenomena": sorted({p.id for p in rec.phenomena}),
              "frame_period_s": rec.frame_period_s, "sys_action": list(rec.sys_action),
              "sys_floor": list(rec.sys_floor), "usr_floor": list(rec.usr_floor)}
    if rec.system_prompt:
        custom["system_prompt"] = rec.system_prompt
    if voice is not None:
        custom[VOICE_FIELD] = _recording(f"{sid}-voice", voice, sr, paths[2])
        custom[f"{VOICE_FIELD}_unaligned"] = True  # lhotse: not cut to the cut's span, loaded whole
    recording = _recording(sid, user, sr, paths[0])
    sups = [_supervision(s, rec, word_alignments) for s in segments(rec, sound_tags)]
    return MonoCut(id=sid, start=0.0, duration=recording.duration, channel=0, recording=recording,
                   supervisions=sups, custom=custom)


def _shar_writers(out: Path, stack):
    """The Shar writers: lhotse's ``SharWriter`` for the cuts and their aligned audio, and an
    ``AudioTarWriter`` for ``context_audio`` that keeps the clip's own length (module docstring)."""
    from lhotse.shar import AudioTarWriter, SharWriter

    shar = out / "shar"
    shar.mkdir(parents=True, exist_ok=True)
    for old in shar.glob("*.[0-9][0-9][0-9][0-9][0-9][0-9].*"):
        old.unlink()  # an earlier export's shards: from_shar would read every one in the folder
    cuts = stack.enter_context(SharWriter(shar, fields={"recording": "flac", "target_audio": "flac"},
                                          shard_size=SHAR_SHARD_SIZE))
    voices = stack.enter_context(AudioTarWriter(f"{shar}/{VOICE_FIELD}.%06d.tar", shard_size=SHAR_SHARD_SIZE,
                                                format="flac"))
    return cuts, voices


def _write_shar(cuts, voices, cut) -> None:
    """One cut into the shards: its voice prompt (or a placeholder) into its own field first."""
    voice = cut.custom.pop(VOICE_FIELD, None)
    if voice is None:
        voices.write_placeholder(cut.id)
    else:
        voices.write(cut.id, voice.load_audio(), voice.sampling_rate, manifest=voice)
    cuts.write(cut)


def export(run, out: Path, target_sample_rate: int = 22050, shar: bool = False, sound_tags: str = "drop",
           word_alignments: bool = True, **_) -> dict:
    from contextlib import ExitStack

    from ..errors import UserError

    if target_sample_rate not in TARGET_RATES:
        raise UserError(f"--target-sample-rate: must be one of {', '.join(map(str, TARGET_RATES))} "
                        f"(got {target_sample_rate})")
    try:
        from lhotse import CutSet
    except ImportError as e:
        raise UserError("synth export --format lhotse needs the package lhotse: "
                        "pip install 'duplexsynth[export]' (or make install)") from e
    count = seconds = voices = 0
    with ExitStack() as stack:
        if shar:
            shar_writers = _shar_writers(out, stack)
        else:
            writer = stack.enter_context(CutSet.open_writer(out / "cuts.jsonl.gz"))
        for s in run.sessions():
            cut = session_cut(s, target_sample_rate, sound_tags, word_alignments, None if shar else out)
            voices += cut.has_custom(VOICE_FIELD)
            if shar:
                _write_shar(*shar_writers, cut)
            else:
                writer.write(cut)
            count, seconds = count + 1, seconds + cut.duration
    meta = {"format": "lhotse", "layout": "shar" if shar else "manifest", "sessions": count,
            "hours": round(seconds / 3600, 4), "target_sample_rate": target_sample_rate, "voice_prompts": voices,
            "roles": {"input": ["User"], "output": ["Assistant"]}, "sound_tags": sound_tags,
            "label_names": {"sys_action": list(SYS_ACTIONS), "sys_floor": list(FLOORS), "usr_floor": list(FLOORS)},
            "note": "recording = user side (ch0); custom.target_audio = clean system channel (ch1) at the "
                    "target rate; custom.context_audio = the assistant's voice prompt, whole (in Shar: "
                    "its own field, context_audio.NNNNNN.tar); manifest paths are relative to this folder",
            "source": str(run.path)}
    write_json(out / "export.json", meta)
    return meta
