"""``synth banks build``: a local bank made from nothing but code, byte-identical every time.

Stationary noise colours, appliance/HVAC hum, keyboard and dish clicks, multi-talker babble
and TV/radio-like speech (the project's own eSpeak NG voices reading the phrase banks, then
band-limited and compressed), laughter, breaths, sighs, coughs and throat clears. Licence
CC0-1.0: everything here is generated.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import UserError
from ..io.files import write_atomic_with
from ..rng import stream
from . import sounds
from .bank import BankEntry, write_manifest

BANK_VERSION = "gen-v3"
# the domains whose answers the TV and the babble say, fixed with the bank's version: a domain added
# to the content library does not change the generated bank (nor any session that plays it)
BANK_DOMAINS = ("banking", "calendar_email", "cooking_help", "customer_support", "doctor_appointment", "home_repair",
                "music_media", "navigation", "restaurant_booking", "smart_home", "tech_support", "travel_booking")
SOURCE_PREFIX = "duplexsynth "  # every generated manifest entry's source starts so
SOURCE = f"{SOURCE_PREFIX}{BANK_VERSION}"
SAMPLE_RATE = 24000
LICENCE = "CC0-1.0"


def _flac(path: Path, x: np.ndarray, sr: int) -> None:
    import soundfile as sf

    pcm = np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)
    write_atomic_with(path, lambda p: sf.write(p, pcm, sr, format="FLAC", subtype="PCM_16"))


def _specs(seed: int):
    """(relative path, category, style, text-or-None, maker(rng) -> audio) for every file."""
    sr = SAMPLE_RATE
    out = []
    for name, exp in (("white", 0.0), ("pink", 1.0), ("brown", 2.0), ("fan", 1.4)):
        out.append((f"stationary/{name}.flac", "stationary", name,
                    lambda rng, e=exp: sounds.coloured_noise(rng, sr, 20.0, e)))
    for name, mains, hvac in (("fridge-50hz", 50, False), ("fridge-60hz", 60, False), ("hvac-50hz", 50, True),
                              ("hvac-60hz", 60, True)):
        out.append((f"hum/{name}.flac", "hum", name, lambda rng, m=mains, h=hvac: sounds.hum(rng, sr, 20.0, m, h)))
    for i in range(2):
        out.append((f"clicks/keyboard-{i:02d}.flac", "clicks", "keyboard", lambda rng: sounds.keyboard(rng, sr, 20.0)))
        out.append((f"clicks/dishes-{i:02d}.flac", "clicks", "dishes", lambda rng: sounds.dishes(rng, sr, 20.0)))
    for style in ("chuckle", "giggle", "hearty", "snicker"):
        for voice, f0 in (("low", 120.0), ("high", 215.0)):
            for length in (0.45, 0.8, 1.3, 2.0):
                out.append((f"laughter/{style}-{voice}-{int(length * 1000):04d}ms.flac", "laughter",
                            f"{style}-{voice}",
                            lambda rng, L=length, f=f0, s=style: sounds.laughter(rng, sr, L, f, s)))
    for i, length in enumerate((0.35, 0.45, 0.55, 0.7)):
        out.append((f"breath/inhale-{i:02d}.flac", "breath", "inhale", lambda rng, L=length: sounds.breath(rng, sr, L)))
    for i, (length, f0) in enumerate(((0.7, 120.0), (0.9, 210.0), (1.1, 130.0))):
        out.append((f"sigh/sigh-{i:02d}.flac", "sigh", "sigh", lambda rng, L=length, f=f0: sounds.sigh(rng, sr, L, f)))
    for i, (bursts, f0) in enumerate(((1, 130.0), (2, 130.0), (1, 220.0), (2, 220.0), (3, 170.0))):
        out.append((f"cough/cough-{i:02d}.flac", "cough", f"{bursts}x",
                    lambda rng, b=bursts, f=f0: sounds.cough(rng, sr, b, f)))
    for i, length in enumerate((0.35, 0.5, 0.65)):
        out.append((f"throat_clear/clear-{i:02d}.flac", "throat_clear", "clear",
                    lambda rng, L=length: sounds.throat_clear(rng, sr, L)))
    return out


def check_bank_target(out_dir: Path, field: str = "--out", unlisted_ok: bool = False) -> None:
    """Refuse to write a bank where it would replace a user's files: a non-empty folder is only
    written again when it is a generated bank (every manifest line ours); a run folder never.
    ``unlisted_ok``: files without a manifest are taken for an interrupted build (a pipeline's
    ``generate: true`` folder) rather than refused."""
    import json

    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise UserError(f"{field}: {out_dir} is a file, not a folder")
    if (out_dir / "run.json").exists():
        raise UserError(f"{field}: {out_dir} is a run folder; build the bank in its own folder")
    if not any(out_dir.iterdir()):
        return
    manifest = out_dir / "manifest.jsonl"
    if unlisted_ok and not manifest.exists():
        return
    try:
        lines = [json.loads(x) for x in manifest.read_text(encoding="utf-8").splitlines() if x.strip()]
        ours = bool(lines) and all(str(x.get("source", "")).startswith(SOURCE_PREFIX) for x in lines)
    except (OSError, ValueError, AttributeError):
        ours = False
    if not ours:
        raise UserError(f"{field}: {out_dir} is not empty and not a generated bank (its manifest.jsonl has entries "
                        "of your own, or there is none); use a new or empty folder")


def build_bank(out_dir: Path, seed: int = 0) -> list[BankEntry]:
    """Write every file and ``manifest.jsonl`` under ``out_dir``; same seed, same bytes."""
    out_dir = Path(out_dir)
    entries = []
    for rel, category, style, make in _specs(seed):
        x = make(stream(seed, BANK_VERSION, rel))
        _flac(out_dir / rel, x, SAMPLE_RATE)
        entries.append(BankEntry(path=rel, category=category, duration_s=round(len(x) / SAMPLE_RATE, 4),
                                 sample_rate=SAMPLE_RATE, licence=LICENCE, source=SOURCE,
                                 style=style))
    entries += _speech_files(out_dir, seed)
    write_manifest(out_dir, entries)
    return entries


def _sentences(lang: str) -> list[str]:
    """What the TV and the babble say: the answers of ``BANK_DOMAINS``, slots filled with their first value."""
    from ..backends.frames import block, fill, slot_pool

    texts = []
    for domain in BANK_DOMAINS:
        for frame in block(domain, lang).frames:
            values = {k: slot_pool(v, lang)[0] for k, v in frame.slots.items()}
            values["topic"] = fill(frame.topic, values)
            for unit in [frame.request, *frame.followups]:
                texts.append(fill(unit.system[0], values))
    return texts


def _read_aloud(tts, texts: list[str], seconds: float, voice, rng, sr: int) -> tuple[np.ndarray, str]:
    from ..text import tokenize

    parts, said, total = [], [], 0
    while total < seconds * sr:
        text = texts[int(rng.integers(len(texts)))]
        r = tts.synthesize(tokenize(text), voice, sr)
        parts += [r.audio, np.zeros(int(rng.uniform(0.15, 0.6) * sr), np.float32)]
        said.append(text)
        total += len(r.audio) + len(parts[-1])
    return np.concatenate(parts)[: int(seconds * sr)], " ".join(said)


def _speech_files(out_dir: Path, seed: int) -> list[BankEntry]:
    """Babble (6 voices summed) and TV/radio speech (one voice, loudspeaker-filtered)."""
    from ..backends.espeak import EspeakTTS
    from ..backends.tts import Voice

    sr = SAMPLE_RATE
    tts = EspeakTTS({"en": "en-us", "zh": "cmn"})
    variants = ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f4"]
    entries = []
    for lang in ("en", "zh"):
        texts = _sentences(lang)
        for i in range(2):
            rel = f"babble/babble-{lang}-{i:02d}.flac"
            rng = stream(seed, BANK_VERSION, rel)
            mix = np.zeros(int(20.0 * sr))
            for k in range(6):
                voice = Voice(variants[int(rng.integers(len(variants)))], int(rng.integers(150, 200)),
                              int(rng.integers(25, 75)), int(rng.integers(30, 80)))
                x, _ = _read_aloud(tts, texts, 20.0, voice, rng, sr)
                x = np.roll(x, int(rng.integers(len(x))))  # talkers do not start together
                mix[: len(x)] += x / (np.sqrt(np.mean(x ** 2)) + 1e-9)
            mix = sounds._norm(sounds._lowpass(mix, sr, 6000, 2), 0.4)
            _flac(out_dir / rel, mix, sr)
            entries.append(BankEntry(path=rel, category="babble", duration_s=round(len(mix) / sr, 4),
                                     sample_rate=sr, licence=LICENCE, source=SOURCE,
                                     style=f"6-talker-{lang}"))
        for i in range(3):
            rel = f"media/tv-{lang}-{i:02d}.flac"
            rng = stream(seed, BANK_VERSION, rel)
            voice = Voice(variants[int(rng.integers(len(variants)))], int(rng.integers(160, 200)),
                          int(rng.integers(30, 70)), int(rng.integers(50, 90)))
            x, text = _read_aloud(tts, texts, 12.0, voice, rng, sr)
            y = sounds.media_filter(x, sr, rng)
            _flac(out_dir / rel, y, sr)
            entries.append(BankEntry(path=rel, category="media", duration_s=round(len(y) / sr, 4),
                                     sample_rate=sr, licence=LICENCE, source=SOURCE,
                                     style=f"tv-{lang}", text=text))
    return entries
