"""One written session (everything but the audio bytes) and one reject."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from .common import Language, Model, OmitUnset, Slug
from .config import TimingLaws
from .labels import Marker
from .plan import Plan
from .timeline import BackendMessage, PlacedEvent, Timeline, WorkItem
from .voice import Voice


class PhenomenonHit(Model):
    id: str
    family: str
    event_id: str


class SoundClip(Model):
    """A bank clip as rendered: ``[start_sample, start_sample + num_samples)`` of the file at the
    session rate, faded out over its last ``fade_samples``; ``target_s`` the drawn laugh length."""

    bank: str
    path: str
    category: str
    licence: str = ""
    target_s: float | None = None
    start_sample: int = Field(ge=0)
    num_samples: int = Field(ge=0)
    fade_samples: int = Field(default=0, ge=0)


class EventRender(Model):
    """How one planned event is rendered: TTS with ``voice`` (drawn out by ``prolong_samples``),
    or a bank ``sound``."""

    voice: Voice | None = None
    prolong_samples: int = Field(default=0, ge=0)
    sound: SoundClip | None = None


class Engines(Model):
    """What builds the engines a session was rendered with: the TTS settings (``tts`` as the
    config's JSON, with the trim threshold it is built with) and the digest of the sound bank
    whose files it used (None: no bank). Bank folders are paths of one machine and stay out of
    the record; ``synth render`` is given them and checks the digest."""

    tts: dict[str, Any]
    trim_threshold_db: float
    bank_digest: str | None = None


class RenderParams(Model):
    """Every setting rendering reads, copied from the run's config when the session is sampled
    (``synth.session.render_params``): rendering reads these and nothing else of the config."""

    sample_rate: int = Field(gt=0)
    speaker_rms_dbfs: float
    peak_limit: float = Field(gt=0, le=1)
    levels_db: dict[str, float] = Field(description="paralinguistic sound levels relative to speech")
    frame_period_ms: int = Field(gt=0)
    vad_threshold_dbfs: float
    vad_window_ms: int = Field(gt=0)
    timing: TimingLaws
    engines: Engines


class VoicePrompt(Model):
    """A few seconds of the assistant's voice rendered apart from the session (a voice-cloning or
    speaker-conditioning prompt): ``text`` (``synth.persona.voice_prompt_text``) spoken with
    ``voice``, the session's system voice, at the speaker level."""

    text: str = Field(min_length=1)
    voice: Voice


RENDER_SPEC_VERSION = 2


class RenderSpec(Model):
    """Everything about a session after its scene: with the record's ``scene``, enough to render
    it again without the run seed or the run's config (``synth render``).

    ``plan`` is the decorated plan (after the paralinguistic pass) as rendered; ``clock`` every
    value the shared clock drew, by stream and quantity, in draw order (``synth.stages.tape``);
    ``params`` every setting rendering reads. ``version`` 1 (written before ``params``) renders
    with the run's config from ``run.json``; 2 from the record alone.
    """

    version: Literal[1, 2] = RENDER_SPEC_VERSION
    plan: Plan
    voices: dict[str, Voice]
    events: dict[str, EventRender]
    clock: dict[str, dict[str, list[float]]]
    params: RenderParams | None = None
    system_prompt: str = Field(default="", description="the assistant's system prompt (synth.persona), "
                                                        "made from the seed when the session is sampled")
    voice_prompt: VoicePrompt | None = None

    @model_validator(mode="after")
    def _params_with_version(self) -> RenderSpec:
        if self.version >= 2 and self.params is None:
            raise ValueError(f"version {self.version} holds params; this one has none")
        if self.version == 1 and self.params is not None:
            raise ValueError("version 1 was written before params; this one has them")
        return self


class RecordedMessage(BackendMessage):
    """A backend message as written: ``frame`` is the frame of its ``backend_inject`` marker at the
    record's frame period, computed from ``sample`` when the labels are made
    (``stages.label.recorded_work``); ``synth validate`` checks it against the sample."""

    frame: int = Field(ge=0)


class RecordedWork(WorkItem):
    """A work item as written: its backend messages carry their frames."""

    backend: list[RecordedMessage] = Field(default_factory=list)

    def on_timeline(self) -> WorkItem:
        """The work item without the frames (the timeline holds samples only)."""
        fields = {k: getattr(self, k) for k in WorkItem.model_fields if k != "backend"}
        return WorkItem(**fields, backend=[BackendMessage(kind=m.kind, sample=m.sample, text=m.text)
                                           for m in self.backend])


SCENE_EXTRAS = ("tts_engine", "word_timing", "voices", "sounds", "gains_db", "channel_order", "asr")
"""Keys a record's ``scene`` holds beside the drawn ``Scene``: the engine and where its word times come
from, the voices, the bank sounds, the mix's gains, the channel order, the ASR gate's transcripts."""


class SessionRecord(OmitUnset):
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
    delegations: list[RecordedWork]
    phenomena: list[PhenomenonHit]
    scene: dict[str, Any]
    seed: int
    planner: str
    planner_meta: dict[str, Any] = Field(default_factory=dict)
    render_spec: RenderSpec | None = None
    system_prompt: str = Field(default="", description="the assistant's system prompt in the session's language, "
                                                        "from the seed's persona and scenario (empty: written before)")
    addressed: list[int] | None = Field(default=None, description="group sessions: 1 where a person speaks "
                                                                   "to the system (README, Group conversations)")
    person_vad: dict[str, list[int]] | None = Field(default=None, description="group sessions: each person's "
                                                                               "voice activity per frame")
    _omit_if_none = ("addressed", "person_vad")

    def drawn_scene(self):
        """The ``Scene`` the scene stage drew, from the record's ``scene`` (which also holds what
        rendering used besides it: ``SCENE_EXTRAS``). The record's scene stays a mapping: readers
        take scenes written by other versions and keys users add (licences of their own noise)."""
        from .scene import Scene

        return Scene.model_validate({k: v for k, v in self.scene.items() if k not in SCENE_EXTRAS})

    def timeline(self) -> Timeline:
        """The session's timeline, rebuilt from the record (samples only, no frames)."""
        return Timeline(sample_rate=self.sample_rate, num_samples=self.num_samples, events=self.events,
                        work=[w.on_timeline() for w in self.delegations])


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
    cpu_s: float = Field(default=0.0, description="CPU seconds of the task's process, engine loading included")
    peak_rss_mb: float = 0.0
    pid: int = Field(default=0, ge=0, description="the process that ran the task (0: not recorded)")
    stage_s: dict[str, float] = Field(default_factory=dict, description="wall seconds per stage")
    stage_cpu_s: dict[str, float] = Field(default_factory=dict, description="CPU seconds per stage")
    rejects_by_reason: dict[str, int] = Field(default_factory=dict)
    phenomena: dict[str, int] = Field(default_factory=dict)
    languages: dict[str, int] = Field(default_factory=dict)
    families: dict[str, int] = Field(default_factory=dict)
    phenomena_by_language: dict[str, int] = Field(default_factory=dict, description="'<language>/<id>': hits")
    llm_usage: dict[str, int] = Field(default_factory=dict, description="requests, cache hits, tokens")
