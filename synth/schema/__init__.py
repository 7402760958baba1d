"""pydantic v2 records for seeds, plans, timelines, labels, sessions and runs.

This package imports only pydantic, numpy and the standard library.
"""

from .common import CHANNEL_ORDER
from .config import PipelineConfig
from .labels import FrameLabels, Marker
from .plan import Plan, PlannedEvent, PlannedWork, PlannedWord
from .record import Reject, SessionRecord, TaskStats
from .seed import ScenarioSeed
from .timeline import PlacedEvent, PlacedWord, Timeline, WorkItem

__all__ = [
    "CHANNEL_ORDER", "FrameLabels", "Marker", "PipelineConfig", "Plan", "PlannedEvent",
    "PlannedWork", "PlannedWord", "PlacedEvent", "PlacedWord", "Reject", "ScenarioSeed",
    "SessionRecord", "TaskStats", "Timeline", "WorkItem",
]
