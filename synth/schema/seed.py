"""Scenario seeds: what a session is about, as distributions rather than fixed values."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from .common import Language, Model, Slug
from .dist import Fixed, bounded
from .phenomena import resolve_rates, unknown_name
from .scene import AcousticEnvironment


MAX_EXCHANGES = 120
"""Most user-system exchanges a session may have (a plan grows with it: this bounds a session;
80 exchanges make the ~22-minute session of ``pipelines/long-session.yaml``)."""


THIRD_PARTY_PHENOMENA = ("user_to_third_party", "third_party_to_user", "readdress_after_side_talk")


class Persona(Model):
    name: str
    role: str = ""
    style: str = ""


class Personas(Model):
    user: Persona
    system: Persona = Persona(name="assistant", role="voice assistant")
    third_party: Persona | None = None


class Tool(Model):
    name: Slug
    description: str


class ScenarioSeed(Model):
    """One scenario: domain, people, language mode, phenomena with per-exchange rates."""

    id: Slug
    domain: Slug
    language: Language
    description: str = ""
    personas: Personas
    goals: list[str] = Field(min_length=1)
    exchanges: bounded(1, MAX_EXCHANGES, integer=True) = Fixed(value=5)
    phenomena: dict[str, float] = Field(default_factory=dict, description="rates by phenomenon id or family name")
    tools: list[Tool] = Field(default_factory=list)
    environment: AcousticEnvironment = AcousticEnvironment()
    weight: float = Field(default=1.0, gt=0, le=1e6)

    @field_validator("phenomena")
    @classmethod
    def _known_phenomena(cls, value: dict[str, float]) -> dict[str, float]:
        for pid, rate in value.items():
            if unknown_name(pid):
                raise ValueError(f"unknown phenomenon or family {pid!r}")
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"rate of {pid!r} must be in [0, 1] (got {rate})")
        return value

    @field_validator("tools")
    @classmethod
    def _unique_tools(cls, value: list[Tool]) -> list[Tool]:
        names = [t.name for t in value]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise ValueError(f"tool name {dup!r} is given twice")
        return value

    @model_validator(mode="after")
    def _third_party_present(self):
        if self.personas.third_party is None:
            named = [p for p in THIRD_PARTY_PHENOMENA if self.phenomena.get(p, 0) > 0]
            if named:
                raise ValueError(f"phenomena: {named[0]!r} needs a third party, but personas.third_party is not set")
        return self

    @property
    def rates(self) -> dict[str, float]:
        """Per-phenomenon rates, family names expanded (an id's own rate wins)."""
        return resolve_rates(self.phenomena)
