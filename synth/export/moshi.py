"""Moshi / moshi-finetune export: stereo WAV with the assistant first, word alignments, manifest.

What we read (kyutai-labs/moshi-finetune: README, ``finetune/data/dataset.py`` and
``interleaver.py``; sphn 0.1.12 as it pins, and 0.2): training data is a ``.jsonl`` manifest of
``{"path": "relative/path/to/x.wav", "duration": seconds}`` (``sphn.dataset_jsonl`` resolves a
relative path against the manifest's folder, so the export can be moved whole); each WAV is stereo
with the **left channel (0) = Moshi, the assistant** and the right channel (1) = the user; beside it,
``x.json`` holds ``{"alignments": [[word, [start_s, end_s], speaker], ...]}`` sorted by start, which
the loader bisects by start time. The interleaver turns the ``SPEAKER_MAIN`` words into Moshi's
own text stream (others are dropped with ``keep_main_only``, or used by forks that model both
sides). Mimi runs at 24 kHz, so the default export rate is 24000 (polyphase resampling). Our
channel order is the opposite (ch0 user side, ch1 system), so this exporter swaps it and says so
in ``export.json``.

Layout under ``DIR``::

    audio/<session>.wav     stereo, ch0 = system (assistant), ch1 = user side
    audio/<session>.json    {"alignments": [...]}: every speaker's words, one list sorted by start
    data.jsonl              {"path": "audio/<session>.wav", "duration": s}, paths relative to DIR
    voices/<session>.wav    with voice_prompts: the assistant's voice prompt, mono, 16-bit, the export's
                            rate; data.jsonl's line then also holds "voice_prompt": "voices/<session>.wav"
    export.json             channel order, sample rate, speaker labels, counts

Speakers: ``SPEAKER_MAIN`` (the assistant), ``SPEAKER_OTHER`` (the user), and with
``others="label"`` (the default) ``SPEAKER_THIRD_PARTY`` / ``SPEAKER_BACKGROUND`` for the other
voices on the user side; ``others="drop"`` leaves those out. Sound tags (``[laughter]``) are not
words Moshi should say: dropped unless ``sound_tags="keep"``. Only the words actually spoken are
aligned (the unspoken remainder of a cut turn, ``text_after_cut``, is not audio).

Text conditions (``text_conditions="NAME"``, off by default): each ``x.json`` also holds
``{"text_conditions": {NAME: the assistant's system prompt}}``. moshi-finetune reads that key
(``interleaver.py``: ``Sample(codes, data.get("text_conditions"))``) and, when present, calls
``model.condition_provider.prepare`` with it; the released Moshi models have no condition provider,
and moshi's ``ConditionAttributes`` check refuses a plain dict, so upstream moshi-finetune trains
with it only in a fork that has conditioners and turns the dict into
``ConditionAttributes(text={NAME: prompt})``. Hence opt-in, never the default.

Voice prompts (``voice_prompts=True``, off by default): NVIDIA PersonaPlex (a Moshi fine-tune
conditioned on a voice prompt and a text prompt) reads a voice prompt as a file named by its
basename inside a voice-prompt folder (``moshi/offline.py``: ``--voice-prompt-dir``,
``--voice-prompt``; ``models/lm.py`` ``LMGen.load_voice_prompt``: ``sphn.read``, resampled to 24 kHz,
normalised to -24 LUFS), so ``voices/`` is such a folder (``--voice-prompt-dir DIR/voices
--voice-prompt <session>.wav``), and ``--text-conditions`` holds the matching text prompt (the
session's system prompt). PersonaPlex publishes no training code or data layout, and the
public forks that train it each read their own (e.g. one folder per sample with
``voice_prompt_left.wav`` and ``metadata.json``); moshi-finetune has no voice-prompt key. So the
clip's place in the manifest, ``"voice_prompt"`` beside ``"path"`` (relative to ``data.jsonl``'s
folder, the rule ``sphn.dataset_jsonl`` applies to ``path``; it ignores the extra key), is ours:
a fork that conditions on a voice reads it from there.

Text tokenizers: Moshi's released text tokenizer is an English SentencePiece model; the Mandarin
and code-switched sessions need a text tokenizer that covers Han characters (the alignments hold
jieba words, one entry per word, which any tokenizer can split further).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .common import kept_word, resample, seconds, write_json, write_wav

MAIN, OTHER = "SPEAKER_MAIN", "SPEAKER_OTHER"
LABELS = {"system": MAIN, "user": OTHER, "third_party": "SPEAKER_THIRD_PARTY", "background": "SPEAKER_BACKGROUND"}
SAMPLE_RATES = (16000, 24000, 44100, 48000)


def alignments(rec, others: str = "label", sound_tags: str = "drop") -> list:
    """``[word, [start_s, end_s], label]`` of every kept spoken word, sorted by start."""
    sr = rec.sample_rate
    speakers = ("system", "user") if others == "drop" else tuple(LABELS)
    words = sorted((w.on_sample, w.off_sample, e.person or e.speaker, w.word) for e in rec.events
                   if e.speaker in speakers for w in e.words if kept_word(w, sound_tags))
    return [[word, [seconds(on, sr), seconds(off, sr)], label(spk)] for on, off, spk, word in words]


def label(talker: str) -> str:
    """The alignment label of a talker; a person of a group is ``SPEAKER_<ID>`` (never the main one)."""
    return LABELS.get(talker) or "SPEAKER_" + talker.upper().replace("-", "_")


def _write_voice(session, out: Path, sample_rate: int) -> str:
    """The session's voice prompt as ``voices/<session>.wav`` (mono, at the export's rate); its
    path relative to ``out``. A record without a clip cannot be given one: refused."""
    from ..errors import UserError

    sid = session.record.session_id
    if not session.voice_flac:
        raise UserError(f"--voice-prompts: session {sid} has no voice-prompt clip (its run was written "
                        "before voice prompts: run it again to have them)")
    voice, sr = session.decode("voice")
    rel = f"voices/{sid}.wav"
    write_wav(out / rel, resample(voice, sr, sample_rate), sample_rate)
    return rel


def export(run, out: Path, sample_rate: int = 24000, others: str = "label", sound_tags: str = "drop",
           text_conditions: str | None = None, voice_prompts: bool = False, **_) -> dict:
    from ..errors import UserError
    from ..io.files import write_text_atomic

    if text_conditions is not None and not text_conditions.isidentifier():
        raise UserError(f"--text-conditions: a conditioner name such as description (got {text_conditions!r})")
    if sample_rate not in SAMPLE_RATES:
        raise UserError(f"--sample-rate: must be one of {', '.join(map(str, SAMPLE_RATES))} (got {sample_rate})")
    lines = []
    for s in run.sessions():
        rec = s.record
        user, sr = s.decode("user")
        system, _ = s.decode("system")
        stereo = resample(np.stack([system, user], axis=1), sr, sample_rate)
        rel = f"audio/{rec.session_id}.wav"
        write_wav(out / rel, stereo, sample_rate)
        info = {"alignments": alignments(rec, others, sound_tags)}
        if text_conditions:
            info["text_conditions"] = {text_conditions: rec.system_prompt}
        write_json((out / rel).with_suffix(".json"), info)
        line = {"path": rel, "duration": round(len(stereo) / sample_rate, 4)}
        if voice_prompts:
            line["voice_prompt"] = _write_voice(s, out, sample_rate)
        lines.append(json.dumps(line))
    write_text_atomic(out / "data.jsonl", "\n".join(lines) + ("\n" if lines else ""))
    labels = {k: v for k, v in LABELS.items() if others == "label" or k in ("system", "user")}
    meta = {"format": "moshi", "channels": ["system", "user"], "sample_rate": sample_rate, "speakers": labels,
            "sound_tags": sound_tags, "text_conditions": text_conditions,
            "voice_prompts": len(lines) if voice_prompts else 0,
            "note": "channel 0 is the assistant (Moshi's order); the run's own order is user, system; "
                    "paths in data.jsonl are relative to this folder",
            "sessions": len(lines), "source": str(run.path)}
    write_json(out / "export.json", meta)
    return meta
