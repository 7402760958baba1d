"""Scenario seeds: what a session is about, as distributions rather than fixed values."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from .common import Language, Model, Slug
from .dist import Fixed, Uniform, bounded
from .phenomena import resolve_rates, unknown_name
from .scene import AcousticEnvironment


MAX_EXCHANGES = 120
"""Most user-system exchanges a session may have (a plan grows with it: this bounds a session;
80 exchanges make the ~22-minute session of ``pipelines/long-session.yaml``)."""


THIRD_PARTY_PHENOMENA = ("user_to_third_party", "third_party_to_user", "readdress_after_side_talk")
GROUP_PHENOMENA = ("human_exchange", "request_by_other_person", "answer_for_other", "people_overlap",
                   "name_in_human_exchange", "group_decision_wait", "long_range_reference")


class Persona(Model):
    name: str
    role: str = ""
    style: str = ""


class Personas(Model):
    user: Persona | None = Field(default=None, description="the one user; null in a group seed (``people``)")
    system: Persona = Persona(name="assistant", role="voice assistant")
    third_party: Persona | None = None


RESERVED_IDS = ("system", "group", "user", "third_party", "background", "backend", "loudspeaker", "mic")
"""Names that plans, rooms and records already use: no person may take one as their id."""

GROUP_SIZE = (2, 4)
"""People on the user side of a group seed, at least and at most."""


class Person(Persona):
    """One human of a group seed. ``id`` names them in plans and records (default: the name,
    lower-cased, spaces as ``-``); ``voices`` are TTS voice names the person's voice is drawn
    from (empty: the engine's pool); ``distance_m`` is their distance law to the device's
    microphone; ``can_address_system``: false for someone who never speaks to the assistant (a
    small child, a visitor); ``child``: the child's lines of a parent-and-child chat are theirs;
    ``called``: what the assistant calls them when it answers them by name (default: their name;
    ``""``: never by name, for someone named by kinship, "Mum" or 妈妈, whom only family call so)."""

    id: Slug | None = None
    voices: list[str] = Field(default_factory=list, max_length=64)
    distance_m: bounded(0.2, 15.0) = Uniform(a=0.5, b=3.0)
    can_address_system: bool = True
    child: bool = False
    called: str | None = Field(default=None, max_length=40)

    @property
    def key(self) -> str:
        return self.id or "-".join(self.name.lower().split())


LONG_MINUTES = (5.0, 60.0)
"""Bounds of a long group session's target length (README "Long group sessions")."""


class LongForm(Model):
    """A long group session: planned to ``minutes`` of estimated speech (not an exchange count),
    chaining the group scenes of the seed's domain and of ``more_domains`` in chapters, with
    references back to values settled in the first chapter (``long_range_reference``)."""

    minutes: bounded(*LONG_MINUTES) = Uniform(a=20.0, b=30.0)
    more_domains: list[Slug] = Field(default_factory=list, max_length=8,
                                     description="further domains whose group scenes later chapters use")
    scenes: list[Slug] = Field(default_factory=list, max_length=64,
                               description="only these scene ids (of the domain and more_domains); empty: all")


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
    people: list[Person] = Field(default_factory=list, description="a group on the user side (2-4 people)")
    goals: list[str] = Field(min_length=1)
    exchanges: bounded(1, MAX_EXCHANGES, integer=True) = Fixed(value=5)
    long_form: LongForm | None = Field(default=None, description="group seeds: a long session (minutes, chapters)")
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
    def _one_user_or_a_group(self):
        lo, hi = GROUP_SIZE
        if self.people:
            if not lo <= len(self.people) <= hi:
                raise ValueError(f"people: a group has {lo} to {hi} people (got {len(self.people)})")
            if self.personas.user is not None or self.personas.third_party is not None:
                raise ValueError("personas.user / personas.third_party: a group seed names its humans in people only")
            keys = [p.key for p in self.people]
            dup = next((k for k in keys if keys.count(k) > 1), None)
            if dup is not None:
                raise ValueError(f"people: two people have the id {dup!r}")
            reserved = [k for k in keys if k in RESERVED_IDS]
            if reserved:
                raise ValueError(f"people: the id {reserved[0]!r} is reserved, give the person another id")
            if not any(p.can_address_system for p in self.people):
                raise ValueError("people: nobody can address the system (can_address_system)")
        elif self.personas.user is None:
            raise ValueError("personas.user: a seed needs its user (or a group in people)")
        return self

    @property
    def user(self) -> Persona:
        """The user, or in a group the first person."""
        return self.people[0] if self.people else self.personas.user

    @property
    def is_group(self) -> bool:
        return bool(self.people)

    @model_validator(mode="after")
    def _third_party_present(self):
        if not self.people:
            group = [p for p in GROUP_PHENOMENA if self.rates.get(p, 0) > 0]
            if group:
                raise ValueError(f"phenomena: {group[0]!r} needs a group, but people is not set")
        if self.long_form is not None and not self.people:
            raise ValueError("long_form: a long session of chapters needs a group, but people is not set")
        if self.people and self.rates.get("long_range_reference", 0) > 0 and self.long_form is None:
            raise ValueError("phenomena: 'long_range_reference' needs long_form (a long group session)")
        if self.personas.third_party is None and not self.people:
            named = [p for p in THIRD_PARTY_PHENOMENA if self.phenomena.get(p, 0) > 0]
            if named:
                raise ValueError(f"phenomena: {named[0]!r} needs a third party, but personas.third_party is not set")
        return self

    @property
    def rates(self) -> dict[str, float]:
        """Per-phenomenon rates, family names expanded (an id's own rate wins)."""
        return resolve_rates(self.phenomena)
