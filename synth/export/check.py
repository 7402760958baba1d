"""``synth export --check``: read an export back with the reader its consumer uses.

- ``moshi``: ``sphn.dataset_jsonl`` over ``data.jsonl`` (moshi-finetune's loader) and the
  ``alignments`` of each WAV it yields, found as moshi-finetune finds them (``<wav stem>.json``);
- ``moshi`` voice prompts (``--voice-prompts``): each ``voice_prompt`` of ``data.jsonl`` read as
  PersonaPlex's ``LMGen.load_voice_prompt`` reads its ``--voice-prompt`` file (``sphn.read``, then
  ``sphn.resample`` to Mimi's 24 kHz);
- ``lhotse``: ``CutSet.from_file`` (paths resolved against the export folder) or
  ``CutSet.from_shar``; every cut's recording and ``target_audio`` loaded, and its
  ``context_audio`` (the voice prompt) as NeMo's duplex datasets load it,
  ``cut.context_audio.resample(rate).load_audio()``, which must match ``cut.load_custom``;
- ``textgrid``: ``praatio.textgrid.openTextgrid``, the ``<speaker> words`` tiers;
- ``rttm``: NeMo's diarization manifest and the CTM lines split as NeMo's CTM reader does (8
  fields, the speaker in the 8th).

Each returns sessions, seconds and words read back (and voice-prompt clips with their seconds,
where the format holds them), and words that collide: two words of one
speaker starting in the same 80 ms frame (one text-token slot of Moshi's 12.5 Hz stream and of
NeMo's default ``frame_length``), which a frame-aligned text stream cannot hold apart.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

FRAME_S = 0.08
CHECKED = ("moshi", "lhotse", "textgrid", "rttm")


class Tally:
    def __init__(self) -> None:
        self.sessions, self.seconds, self.words, self.collisions = 0, 0.0, 0, 0
        self.examples: list[str] = []
        self.voice_seconds: list[float] | None = None  # per voice-prompt clip read back; None: no place for them

    def add_voice(self, samples: int, rate: int) -> None:
        """A voice-prompt clip read back: empty is an error (a trainer would condition on nothing)."""
        if samples <= 0:
            raise ValueError("a voice-prompt clip reads back empty")
        self.voice_seconds = (self.voice_seconds or []) + [samples / rate]

    def add_words(self, session: str, words: list[tuple[str, float, str]]) -> None:
        """``(word, start_s, speaker)`` of one session: counted, and collisions noted."""
        self.words += len(words)
        slots = Counter((spk, int(start / FRAME_S)) for _, start, spk in words)
        for (spk, frame), n in sorted(slots.items()):
            if n > 1:
                self.collisions += n - 1
                if len(self.examples) < 5:
                    self.examples.append(f"{session} {spk} {frame * FRAME_S:.2f}s: {n} words")

    def result(self, reader: str) -> dict:
        out = {"reader": reader, "sessions": self.sessions, "seconds": round(self.seconds, 3),
               "words": self.words, "colliding_words": self.collisions, "collision_examples": self.examples}
        if self.voice_seconds is not None:
            out |= {"voice_prompts": len(self.voice_seconds), "voice_prompt_seconds": round(sum(self.voice_seconds), 3)}
        return out


def _version(package: str) -> str:
    from importlib.metadata import version

    return f"{package} {version(package)}"


def check_moshi(out: Path, meta: dict) -> dict:
    import sphn

    t = Tally()
    sr = meta["sample_rate"]
    seen: dict[str, float] = {}
    ds = sphn.dataset_jsonl(str(out / "data.jsonl"), duration_sec=3600.0, num_threads=1, sample_rate=sr,
                            pad_last_segment=True)
    for sample in ds.seq(skip=0, step_by=1):
        seen[sample["path"]] = seen.get(sample["path"], 0.0) + sample["unpadded_len"] / sr
    for path, secs in sorted(seen.items()):
        t.sessions, t.seconds = t.sessions + 1, t.seconds + secs
        with open(Path(path).with_suffix(".json"), encoding="utf-8") as f:
            al = json.load(f)["alignments"]
        t.add_words(Path(path).stem, [(w, a, spk) for w, (a, _), spk in al])
    if meta.get("voice_prompts"):
        _check_moshi_voices(out, t)
    return t.result(_version("sphn"))


def _check_moshi_voices(out: Path, t: Tally) -> None:
    """Each line's ``voice_prompt`` (relative to ``data.jsonl``) read as PersonaPlex reads one."""
    import sphn

    t.voice_seconds = []
    for line in (out / "data.jsonl").read_text(encoding="utf-8").splitlines():
        rel = json.loads(line)["voice_prompt"]
        pcm, sr = sphn.read(str(out / rel))
        pcm = sphn.resample(pcm, src_sample_rate=sr, dst_sample_rate=24000)
        if pcm.shape[0] != 1:
            raise ValueError(f"{rel}: {pcm.shape[0]} channels (a voice prompt is mono)")
        t.add_voice(pcm.shape[-1], 24000)


def check_lhotse(out: Path, meta: dict) -> dict:
    from lhotse import CutSet
    from lhotse.audio.utils import AudioLoadingError, DurationMismatchError

    t = Tally()
    t.voice_seconds = []
    if meta.get("layout") == "shar":
        cuts = CutSet.from_shar(in_dir=out / "shar")
    else:
        # the manifest's paths are relative to its folder, as lhotse recipes write them
        cuts = (_prefixed(c, out) for c in CutSet.from_file(out / "cuts.jsonl.gz"))
    for cut in cuts:
        try:
            _check_cut_audio(cut, meta, t)
        except (AudioLoadingError, DurationMismatchError) as e:  # lhotse's own, not ValueErrors
            raise ValueError(f"{cut.id}: {str(e).split('. ')[0]}") from None
        t.sessions, t.seconds = t.sessions + 1, t.seconds + cut.duration
        t.add_words(cut.id, [(a.symbol, a.start, s.speaker) for s in cut.supervisions
                             for a in (s.alignment or {}).get("word", [])])
    if len(t.voice_seconds) != meta.get("voice_prompts", 0):
        raise ValueError(f"{len(t.voice_seconds)} voice prompts read back, {meta.get('voice_prompts', 0)} written")
    return t.result(_version("lhotse"))


def _check_cut_audio(cut, meta: dict, t: Tally) -> None:
    """A cut's recording, ``target_audio`` and voice prompt load, each as long as it should be."""
    audio, target = cut.load_audio(), cut.load_target_audio()
    rate = cut.target_audio.sampling_rate
    if rate != meta["target_sample_rate"] or target.shape[-1] < round(cut.duration * rate) - 1:
        raise ValueError(f"{cut.id}: target_audio {target.shape[-1]} samples at {rate} Hz for a "
                         f"{cut.duration:.3f} s cut")
    if audio.shape[-1] != cut.num_samples:
        raise ValueError(f"{cut.id}: recording {audio.shape[-1]} samples, cut {cut.num_samples}")
    if cut.has_custom("context_audio"):
        _check_context_audio(cut, t, rate)


def _check_context_audio(cut, t: Tally, target_rate: int) -> None:
    """The voice prompt whole: as lhotse's ``load_custom`` loads it (unaligned: not cut to the
    cut's span) and as NeMo's duplex datasets do (the Recording itself, resampled to the target
    rate): as many samples as the clip declares."""
    rec = cut.context_audio
    custom = cut.load_custom("context_audio").shape[-1]
    nemo = rec.resample(target_rate).load_audio().shape[-1]
    if custom != rec.num_samples or abs(nemo - rec.num_samples * target_rate / rec.sampling_rate) > 1:
        raise ValueError(f"{cut.id}: context_audio reads {custom} samples ({nemo} at {target_rate} Hz), "
                         f"declares {rec.num_samples} at {rec.sampling_rate} Hz")
    t.add_voice(rec.num_samples, rec.sampling_rate)


def _prefixed(cut, out: Path):
    """A manifest cut with its paths (recording, target and context audio) resolved against ``out``."""
    for name in ("target_audio", "context_audio"):
        if cut.has_custom(name):
            cut = cut.with_custom(name, cut.custom[name].with_path_prefix(out))
    return cut.with_recording_path_prefix(out)


def check_textgrid(out: Path, meta: dict) -> dict:
    from praatio import textgrid

    t = Tally()
    for path in sorted(out.glob("*.TextGrid")):
        tg = textgrid.openTextgrid(str(path), includeEmptyIntervals=False)
        t.sessions, t.seconds = t.sessions + 1, t.seconds + tg.maxTimestamp
        words = [(e.label, e.start, name.split(" words")[0]) for name in tg.tierNames
                 if " words" in name for e in tg.getTier(name).entries]
        t.add_words(path.stem, words)
    return t.result(_version("praatio"))


def check_rttm(out: Path, meta: dict) -> dict:
    t = Tally()
    for line in (out / "manifest.json").read_text(encoding="utf-8").splitlines():
        m = json.loads(line)
        t.sessions, t.seconds = t.sessions + 1, t.seconds + m["duration"]
        words = []
        for row in Path(m["ctm_filepath"]).read_text(encoding="utf-8").splitlines():
            f = row.split()
            if len(f) != 8:
                raise ValueError(f"{m['ctm_filepath']}: {len(f)} fields in {row!r} (NeMo reads 8)")
            words.append((f[4], float(f[2]), f[7]))
        t.add_words(Path(m["ctm_filepath"]).stem, words)
    return t.result("NeMo CTM rule (8 fields, speaker in field 8)")


def check_export(fmt: str, out: Path, meta: dict) -> dict:
    """Read ``out`` back as its consumer does; raises ``UserError`` if the reader fails."""
    from ..errors import UserError

    try:
        read = globals()[f"check_{fmt}"](Path(out), meta)
    except ImportError as e:
        raise UserError(f"--check: reading {fmt} back needs the package {e.name}: "
                        "pip install 'duplexsynth[export]' (or make install)") from None
    except (ValueError, OSError, KeyError) as e:
        raise UserError(f"--check: the {fmt} export in {out} does not read back: {e}") from None
    if read["sessions"] != meta["sessions"]:
        raise UserError(f"--check: {read['reader']} read {read['sessions']} of the {meta['sessions']} sessions "
                        f"exported to {out}")
    return read
