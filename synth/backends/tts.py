"""The TTS interface: text words in, trimmed audio plus word times on its own clock out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Protocol

import numpy as np

from ..schema.plan import PlannedWord
from ..schema.voice import Voice  # noqa: F401  (re-exported: engines take a Voice)


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


JUNCTION_MS = 40
"""Silence between runs of one utterance spoken by separate calls (a language run, an engine run)."""


def runs_by(words: list[PlannedWord], key: Callable[[PlannedWord], Hashable]) -> list[list[PlannedWord]]:
    """Consecutive words with the same ``key`` (a language, an engine), in order."""
    runs: list[list[PlannedWord]] = []
    for w in words:
        if runs and key(runs[-1][-1]) == key(w):
            runs[-1].append(w)
        else:
            runs.append([w])
    return runs


def join_runs(parts: list[Rendered], sample_rate: int) -> Rendered:
    """Renderings of consecutive runs as one: ``JUNCTION_MS`` of silence between them, each
    run's word times moved onto the joined clock."""
    if len(parts) == 1:
        return parts[0]
    junction = np.zeros(sample_rate * JUNCTION_MS // 1000, np.float32)
    pieces, times, cursor = [], [], 0
    for r in parts:
        if pieces:
            pieces.append(junction)
            cursor += len(junction)
        pieces.append(r.audio)
        times.extend(WordTime(t.word, t.lang, t.on + cursor, t.off + cursor) for t in r.words)
        cursor += len(r.audio)
    return Rendered(np.concatenate(pieces), sample_rate, tuple(times))
