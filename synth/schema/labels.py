"""Frame labels (LABELS.md §2): the arrays the trainer reads."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import Model, OmitUnset

SYS_ACTIONS = ("listen", "speak", "turn_eos", "delegate")
FLOORS = ("NOT_HOLD", "TAKE", "HOLD", "RELEASE")
LISTEN, SPEAK, TURN_EOS, DELEGATE = range(4)
NOT_HOLD, TAKE, HOLD, RELEASE = range(4)

MarkerType = Literal[
    "turn_eos", "yield", "delegate_open", "delegate_close", "backend_inject",
    "deliver_start", "stale_drop", "cancel",
]


class Marker(Model):
    frame: int = Field(ge=0)
    type: MarkerType
    ref: str


class FrameLabels(OmitUnset):
    """``addressed`` (group sessions): 1 where a person speaks to the system (the user side's
    speech it must answer), 0 in speech to others and silence; ``person_vad``: each person's voice
    activity, from their own clean stem."""

    _omit_if_none = ("addressed", "person_vad")
    frame_period_s: float = Field(gt=0)
    num_frames: int = Field(ge=0)
    sys_action: list[int]
    sys_floor: list[int]
    usr_floor: list[int]
    sys_vad: list[int]
    usr_vad: list[int]
    markers: list[Marker]
    addressed: list[int] | None = None
    person_vad: dict[str, list[int]] | None = None
