"""The master timeline: placed events and work items on one clock in integer samples."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import Addressee, Completion, FloorIntent, Model, OmitUnset, Relation, Slug, Speaker, WordLang


class PlacedWord(Model):
    word: str
    lang: WordLang
    on_sample: int = Field(ge=0)
    off_sample: int = Field(ge=0)


class PlacedEvent(OmitUnset):
    """An event on the session clock. ``[on_sample, off_sample)`` is its trimmed rendered audio.
    ``person`` and ``addressee`` as in the plan (group sessions only)."""

    _omit_if_none = ("person", "addressee")

    id: Slug
    speaker: Speaker
    act: Slug
    floor_intent: FloorIntent
    relation: Relation | None = None
    attach_to: Slug | None = None
    text: str
    text_after_cut: str = ""
    lang: str
    on_sample: int = Field(ge=0)
    off_sample: int = Field(ge=0)
    completion: Completion = "complete"
    overlap_ok: bool = False
    words: list[PlacedWord] = Field(default_factory=list)
    phenomena: list[str] = Field(default_factory=list)
    person: Slug | None = None
    addressee: Addressee | None = None

    @model_validator(mode="after")
    def _ordered(self):
        if self.off_sample < self.on_sample:
            raise ValueError(f"event {self.id!r} ends ({self.off_sample}) before it starts ({self.on_sample})")
        return self


WorkState = Literal[
    "QUEUED", "RUNNING", "COMPLETED", "DELIVERING", "DELIVERED", "FAILED", "CANCELLING", "CANCELLED"
]


class StateTime(Model):
    state: WorkState
    sample: int = Field(ge=0)


class BackendMessage(Model):
    """Text the backend hands the system, as a trainer injects it: ``<backend>...</backend>``.

    ``sample`` is the injection time. Its frame depends on the frame period, so the timeline does
    not hold it: labels compute it (``stages.label.frame_of``).
    """

    kind: Literal["progress", "result", "error"]
    sample: int = Field(ge=0)
    text: str


class WorkItem(Model):
    """A delegated job: the private delegate span ``[open, close)`` and what became of it.

    ``inject`` is where the backend text is injected for the trainer; ``deliver`` the TAKE of the
    system turn that speaks it. A stale item (cancelled or superseded by the user) has
    ``deliver``/``delivered`` of None; ``cancel_sample`` is when the user's cancel ended and
    ``drop_sample`` where its result was dropped (``stale_drop``).
    """

    work_id: Slug
    tool: Slug
    objective: str
    result_text: str
    opened_by: Slug
    open_sample: int = Field(ge=0)
    close_sample: int = Field(ge=0)
    complete_sample: int = Field(ge=0)
    inject_sample: int | None = None
    deliver_sample: int | None = None
    delivered_sample: int | None = None
    stale: bool = False
    states: list[StateTime] = Field(default_factory=list)
    outcome: Literal["success", "failure"] = "success"
    cancel_sample: int | None = None
    drop_sample: int | None = None
    backend: list[BackendMessage] = Field(default_factory=list)


class Timeline(Model):
    sample_rate: int = Field(gt=0)
    num_samples: int = Field(gt=0)
    events: list[PlacedEvent]
    work: list[WorkItem] = Field(default_factory=list)
