"""A speaker's voice for one session: what the scene stage draws and a render spec records."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Voice:
    """A speaker's voice for one session, drawn by the scene stage. ``variant`` is the engine's
    voice name (a routed engine's is one name per engine: ``kokoro=pool-07;piper=default``)."""

    variant: str
    rate_wpm: int
    pitch: int
    pitch_range: int

    def as_dict(self) -> dict:
        return asdict(self)
