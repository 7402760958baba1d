"""Moshi / moshi-finetune export: stereo WAV with the assistant first, word alignments, manifest.

What we read (kyutai-labs/moshi-finetune README and forks that document its data loader):
training data is a ``.jsonl`` manifest of ``{"path": ".../x.wav", "duration": seconds}``; each
WAV is stereo with the **left channel (0) = Moshi, the assistant** and the right channel (1) = the
user; beside it, ``x.json`` holds ``{"alignments": [[word, [start_s, end_s], "SPEAKER_MAIN"], ...]}``
sorted by start, the text stream Moshi learns for its own channel. Mimi runs at 24 kHz, so the
default export rate is 24000 (polyphase resampling). Our channel order is the opposite
(ch0 user side, ch1 system), so this exporter swaps it and says so in ``export.json``.

Layout under ``DIR``::

    audio/<session>.wav     stereo, ch0 = system (assistant), ch1 = user side
    audio/<session>.json    {"alignments": [...SPEAKER_MAIN...], "user_alignments": [...SPEAKER_OTHER...]}
    data.jsonl              {"path": absolute path of the wav, "duration": s}
    export.json             channel order, sample rate, counts

Only the words actually spoken are aligned (the unspoken remainder of a cut turn,
``text_after_cut``, is not audio and is left out).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .common import resample, seconds, words_of, write_json, write_wav

MAIN, OTHER = "SPEAKER_MAIN", "SPEAKER_OTHER"


def alignments(rec, speaker: str, label: str) -> list:
    sr = rec.sample_rate
    return [[w, [seconds(on, sr), seconds(off, sr)], label] for w, on, off, *_ in words_of(rec, (speaker,))]


def export(run, out: Path, sample_rate: int = 24000, **_) -> dict:
    from ..errors import UserError
    from ..io.files import write_text_atomic

    if sample_rate not in (16000, 24000, 44100, 48000):
        raise UserError(f"--sample-rate: must be 16000, 24000, 44100 or 48000 (got {sample_rate})")
    lines = []
    for s in run.sessions():
        rec = s.record
        user, sr = s.decode("user")
        system, _ = s.decode("system")
        stereo = resample(np.stack([system, user], axis=1), sr, sample_rate)
        wav = out / "audio" / f"{rec.session_id}.wav"
        write_wav(wav, stereo, sample_rate)
        write_json(wav.with_suffix(".json"), {"alignments": alignments(rec, "system", MAIN),
                                              "user_alignments": alignments(rec, "user", OTHER)})
        lines.append(json.dumps({"path": str(wav.resolve()), "duration": round(len(stereo) / sample_rate, 4)}))
    write_text_atomic(out / "data.jsonl", "\n".join(lines) + ("\n" if lines else ""))
    meta = {"format": "moshi", "channels": ["system", "user"], "sample_rate": sample_rate,
            "note": "channel 0 is the assistant (Moshi's order); the run's own order is user, system",
            "sessions": len(lines), "source": str(run.path)}
    write_json(out / "export.json", meta)
    return meta
