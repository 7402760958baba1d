"""One written session (everything but the audio bytes) and one reject."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .common import Language, Model, Slug
from .labels import Marker
from .timeline import PlacedEvent, WorkItem


class PhenomenonHit(Model):
    id: str
    family: str
    event_id: str


class SessionRecord(Model):
    """The metadata of a session: identical in the Parquet row and the WebDataset ``.json``."""

    session_id: Slug
    scenario_id: Slug
    language: Language
    sample_rate: int
    num_samples: int
    duration_s: float
    channels: list[str]
    frame_rate_hz: float
    frame_period_s: float
    sys_action: list[int]
    sys_floor: list[int]
    usr_floor: list[int]
    sys_vad: list[int]
    usr_vad: list[int]
    markers: list[Marker]
    events: list[PlacedEvent]
    delegations: list[WorkItem]
    phenomena: list[PhenomenonHit]
    scene: dict[str, Any]
    seed: int
    planner: str
    planner_meta: dict[str, Any] = Field(default_factory=dict)


class Reject(Model):
    session_id: Slug
    scenario_id: str
    stage: str
    reason: str
    detail: str = ""


class TaskStats(Model):
    rank: int
    sessions: int = 0
    rejects: int = 0
    audio_s: float = 0.0
    wall_s: float = 0.0
    peak_rss_mb: float = 0.0
    stage_s: dict[str, float] = Field(default_factory=dict)
    rejects_by_reason: dict[str, int] = Field(default_factory=dict)
    phenomena: dict[str, int] = Field(default_factory=dict)
    languages: dict[str, int] = Field(default_factory=dict)
    families: dict[str, int] = Field(default_factory=dict)
    phenomena_by_language: dict[str, int] = Field(default_factory=dict, description="'<language>/<id>': hits")
    llm_usage: dict[str, int] = Field(default_factory=dict, description="requests, cache hits, tokens")
