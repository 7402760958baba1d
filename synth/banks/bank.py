"""Sound banks: folders of audio with a ``manifest.jsonl`` (one JSON object per file).

Each line names a file relative to the folder, its category, duration, sample rate and licence::

    {"path": "babble/cafe-01.flac", "category": "babble", "duration_s": 20.0,
     "sample_rate": 48000, "licence": "CC-BY-4.0", "source": "my recordings"}

A manifest line that does not validate is a user error (file, line, field, value). A file that
cannot be read is skipped with a warning and counted: one bad file never stops a run.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field, ValidationError, field_validator

from ..audio import resample
from ..errors import UserError
from ..schema.common import Model, Slug

log = logging.getLogger(__name__)
MANIFEST = "manifest.jsonl"
AUDIO_SUFFIXES = {".wav", ".flac", ".ogg", ".mp3"}


class BankEntry(Model):
    path: str = Field(min_length=1)
    category: Slug
    duration_s: float = Field(gt=0)
    sample_rate: int = Field(gt=0)
    licence: str = Field(min_length=1)
    source: str = ""
    text: str = ""
    style: str = ""

    @field_validator("licence")
    @classmethod
    def _licence_id(cls, v: str) -> str:
        from ..schema.licence import file_licence

        return file_licence(v)


@dataclass(frozen=True)
class BankFile:
    entry: BankEntry
    file: str  # absolute path
    bank: str  # the bank folder's name

    def ref(self) -> dict:
        """How a record names this file: bank folder name, path in it, licence."""
        return {"bank": self.bank, "path": self.entry.path, "category": self.category,
                "licence": self.entry.licence}

    @property
    def category(self) -> str:
        return self.entry.category


@dataclass(frozen=True)
class Bank:
    """The readable files of one or more bank folders, in a stable order."""

    files: tuple[BankFile, ...]
    skipped: tuple[tuple[str, str], ...] = ()  # (file, reason)
    digest: str = ""

    def find(self, bank: str, path: str) -> BankFile | None:
        return next((f for f in self.files if f.bank == bank and f.entry.path == path), None)

    def of(self, category: str) -> list[BankFile]:
        return [f for f in self.files if f.category == category]

    def categories(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.files:
            out[f.category] = out.get(f.category, 0) + 1
        return dict(sorted(out.items()))

    def pick(self, category: str, rng: np.random.Generator, target_s: float | None = None) -> BankFile | None:
        """A file of ``category``: uniformly, or among the 3 closest in length to ``target_s``."""
        pool = self.of(category)
        if not pool:
            return None
        if target_s is not None:
            pool = sorted(pool, key=lambda f: (abs(f.entry.duration_s - target_s), f.file))[:3]
        return pool[int(rng.integers(len(pool)))]


class BankReadError(Exception):
    pass


def read_manifest(folder: Path) -> list[BankEntry]:
    path = folder / MANIFEST
    if not path.is_file():
        raise UserError(f"{folder}: no {MANIFEST} (a bank folder lists its files there)")
    entries = []
    for i, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append(BankEntry.model_validate_json(line))
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err["loc"]) or "line"
            got = f" (got {err['input']!r})" if "input" in err and field != "line" else ""
            raise UserError(f"{path}:{i}: {field}: {err['msg'].removeprefix('Value error, ')}{got}") from None
    return entries


def load_bank(folders: list[Path]) -> Bank:
    """Read the manifests of ``folders`` and probe every file; unreadable files are skipped."""
    import soundfile as sf

    files, skipped = [], []
    h = hashlib.blake2b(digest_size=16)
    for folder in folders:
        root = folder.resolve()
        for entry in read_manifest(folder):
            file = (folder / entry.path).resolve()
            if not file.is_relative_to(root):
                raise UserError(f"{folder / MANIFEST}: path: points outside the bank folder (got {entry.path!r})")
            reason = _unreadable(file, sf)
            if reason:
                log.debug("bank: skipping %s: %s", file, reason)  # the caller reports each skipped file once
                skipped.append((str(file), reason))
                continue
            files.append(BankFile(entry, str(file), folder.name))
            h.update(entry.model_dump_json().encode())
            h.update(str(file.stat().st_size).encode())
    if skipped and not files:
        raise UserError(f"{folders[0]}: no readable audio file in the bank ({len(skipped)} unreadable; "
                        f"first: {skipped[0][0]}: {skipped[0][1]})")
    return Bank(tuple(files), tuple(skipped), h.hexdigest())


def _unreadable(file: Path, sf) -> str | None:
    """Why a bank file cannot be used, or None. The end of the file is decoded too: a truncated
    FLAC has a good header and fails only there."""
    if file.suffix.lower() not in AUDIO_SUFFIXES:
        return f"unsupported file type {file.suffix!r}"
    if not file.is_file():
        return "missing"
    try:
        with sf.SoundFile(str(file)) as f:
            if f.frames <= 0:
                return "no audio frames"
            f.seek(max(0, f.frames - 4096))
            tail = f.read(4096, dtype="float32")
            if len(tail) < min(4096, f.frames):
                return f"truncated ({len(tail)} of the last {min(4096, f.frames)} frames decode)"
            if not np.all(np.isfinite(tail)):
                return "non-finite samples"
    except Exception as e:  # noqa: BLE001 - libsndfile raises several kinds
        return f"unreadable ({str(e).splitlines()[0][:120]})"
    return None


def check_categories(bank: Bank | None, seeds) -> None:
    """Every noise category a seed asks for is in some bank (else its sessions get no noise).

    ``seeds`` are ``(path, ScenarioSeed)`` pairs."""
    if bank is None:  # no banks configured (``banks: []``): a run without noise, by choice
        return
    have = bank.categories()
    for path, seed in seeds:
        env = seed.environment
        events = env.noise_events if env.noise_event_prob > 0 else []
        for field, cats in (("noise_beds", env.noise_beds), ("noise_events", events)):
            missing = [c for c in cats if c not in have]
            if missing:
                raise UserError(f"{path}: environment.{field}: no bank has the category {missing[0]!r} "
                                f"(banks have: {', '.join(have)})")


_CLIPS: OrderedDict = OrderedDict()
_CLIP_CACHE_BYTES = 256 * 2**20


def read_clip(f: BankFile, sample_rate: int) -> np.ndarray:
    """The file as mono float32 at ``sample_rate``; decoded clips are cached per worker."""
    key = (f.file, sample_rate)
    if key in _CLIPS:
        _CLIPS.move_to_end(key)
        return _CLIPS[key]
    import soundfile as sf

    try:
        x, sr = sf.read(f.file, dtype="float32", always_2d=True)
    except Exception as e:  # noqa: BLE001
        raise BankReadError(f"{f.file}: {str(e).splitlines()[0][:120]}") from None
    if len(x) == 0:
        raise BankReadError(f"{f.file}: no audio frames")
    y = resample(x.mean(axis=1), sr, sample_rate)
    _CLIPS[key] = y
    while sum(v.nbytes for v in _CLIPS.values()) > _CLIP_CACHE_BYTES and len(_CLIPS) > 1:
        _CLIPS.popitem(last=False)
    return y


def write_manifest(folder: Path, entries: list[BankEntry]) -> None:
    from ..io.files import write_text_atomic

    lines = [json.dumps(e.model_dump(exclude_defaults=True), ensure_ascii=False, sort_keys=True) for e in entries]
    write_text_atomic(folder / MANIFEST, "\n".join(lines) + "\n")


def resolve_banks(refs, base_dir: Path, on_build=None) -> Bank | None:
    """Load the bank folders of a pipeline (paths relative to ``base_dir``), building the
    generated one first where it is missing or was made by another generator version."""
    from .generate import SOURCE, build_bank, check_bank_target

    if not refs:
        return None
    folders = []
    for i, ref in enumerate(refs):
        folder = (base_dir / ref.path).resolve()
        if ref.generate and _stale(folder, SOURCE):
            check_bank_target(folder, f"acoustics.banks[{i}].path", unlisted_ok=True)
            if on_build:
                on_build(folder)
            build_bank(folder)
        elif not folder.is_dir():
            raise UserError(f"acoustics.banks[{i}].path: no such folder {folder} (got {ref.path!r})")
        folders.append(folder)
    return load_bank(folders)


def _stale(folder: Path, source: str) -> bool:
    path = folder / MANIFEST
    if not path.is_file():
        return True
    first = path.read_text("utf-8").split("\n", 1)[0]
    return source not in first
