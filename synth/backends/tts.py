"""The TTS interface: text words in, trimmed audio plus word times on its own clock out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..schema.plan import PlannedWord


@dataclass(frozen=True)
class Voice:
    """A speaker's voice for one session, drawn by the scene stage."""

    variant: str
    rate_wpm: int
    pitch: int
    pitch_range: int

    def as_dict(self) -> dict:
        return {"variant": self.variant, "rate_wpm": self.rate_wpm, "pitch": self.pitch,
                "pitch_range": self.pitch_range}


@dataclass(frozen=True)
class WordTime:
    word: str
    lang: str
    on: int
    off: int


@dataclass(frozen=True)
class Rendered:
    """Audio (float32, mono, at ``sample_rate``) and word times in samples from its start."""

    audio: np.ndarray
    sample_rate: int
    words: tuple[WordTime, ...]


class TTSEngine(Protocol):
    name: str
    word_timing: str  # where word times come from: the engine's events, the model, or an aligner

    def synthesize(self, words: list[PlannedWord], voice: Voice, sample_rate: int) -> Rendered:
        """Speak ``words`` (each with its language) with ``voice``."""
