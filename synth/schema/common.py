"""Base model and small shared types. Imports nothing heavy."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, model_serializer

Slug = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$", max_length=120)]
"""An identifier without dots or spaces (safe as a WebDataset key and a file name)."""


def session_id(run_name: str, index: int) -> str:
    """The id of session ``index`` of a run (or of ``synth plan``): ``NAME-NNNNNN``."""
    return f"{run_name}-{index:06d}"


def session_index(run_name: str, sid: str) -> int | None:
    """``index`` when ``sid`` is ``session_id(run_name, index)``, else ``None``."""
    prefix, _, num = sid.rpartition("-")
    if prefix != run_name or not num.isdigit() or session_id(run_name, int(num)) != sid:
        return None
    return int(num)


Language = Literal["en", "zh", "en-zh"]
WordLang = Literal["en", "zh"]
Speaker = Literal["user", "system", "third_party", "background", "backend"]
FloorIntent = Literal["take", "hold", "none"]
Relation = Literal[
    "responds_to",
    "continues",
    "interrupts",
    "backchannels_on",
    "addresses_other",
    "delegates_for",
    "delivers_result_of",
    "supersedes",
    "during",
]
Completion = Literal["complete", "interrupted"]

CHANNEL_ORDER = ("user", "system")
"""ch0 is the user side (what the system's microphone hears), ch1 the system's clean speech."""


class Model(BaseModel):
    """Frozen, strict record: unknown fields are errors, instances are values; NaN and infinities
    are refused in every float field."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class OmitUnset(Model):
    """A record whose fields named in ``_omit_if_none`` are left out of its dump while ``None``:
    fields added for group sessions (who speaks, to whom) leave every earlier record's bytes as
    they were."""

    _omit_if_none: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit(self, handler) -> dict[str, Any]:
        out = handler(self)
        for name in self._omit_if_none:
            if out.get(name, 0) is None:
                del out[name]
        return out


Addressee = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$", max_length=120)]
"""Whom an utterance is for: ``system``, ``group`` (everyone in the room) or a person's id."""
