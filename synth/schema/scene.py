"""The acoustic scene: the laws a seed gives (``AcousticEnvironment``) and what one session drew.

Plan, then render: ``Scene`` is sampled completely before any audio is mixed and saved in the
session record, so the user channel can be re-rendered from the record alone.
"""

from __future__ import annotations


from pydantic import Field, model_validator

from .common import Model, Slug
from .dist import Distribution, Fixed, Uniform, bounded

Positive = bounded(positive=True)

NOISE_BEDS = ("stationary", "hum", "babble")
NOISE_EVENTS = ("clicks",)


class RoomLaw(Model):
    """Shoebox size and reverberation. The RT60 is drawn after the size and truncated to what
    that room can reach (Sabine: ``rt60 >= 0.161 V / S`` with fully absorbing walls)."""

    length_m: Positive = Uniform(a=3.0, b=7.0)
    width_m: Positive = Uniform(a=2.5, b=5.0)
    height_m: Positive = Uniform(a=2.4, b=3.2)
    rt60_s: Positive = Uniform(a=0.2, b=0.7)


class AcousticEnvironment(Model):
    """Where the user is: room, distances to the device, levels, noise and its SNR.

    Gains are relative to the user's speech level at the microphone, in dB.
    """

    kind: str = "home"
    room: RoomLaw | None = Field(default=RoomLaw(), description="null: free field (outdoors)")
    user_distance_m: Positive = Uniform(a=0.5, b=2.0)
    third_party_distance_m: Positive = Uniform(a=1.5, b=4.0)
    media_distance_m: Positive = Uniform(a=1.5, b=4.0)
    third_party_gain_db: Distribution = Uniform(a=-9.0, b=-3.0)
    media_gain_db: Distribution = Uniform(a=-18.0, b=-8.0)
    snr_db: Distribution = Uniform(a=10.0, b=30.0)
    noise_beds: list[Slug] = Field(default=list(NOISE_BEDS), min_length=1, description="bank categories")
    noise_events: list[Slug] = Field(default=list(NOISE_EVENTS), description="bank categories layered on top")
    noise_event_prob: float = Field(default=0.4, ge=0, le=1, description="chance of a click layer")
    noise_event_gain_db: Distribution = Uniform(a=-6.0, b=0.0)


class EchoLaw(Model):
    """The system's own voice played by the device's loudspeaker and picked up by its microphone.

    Off by default: most duplex recipes assume an echo canceller in front of the model.
    """

    enabled: bool = False
    erl_db: Distribution = Uniform(a=10.0, b=30.0)
    speaker_to_mic_m: Positive = Fixed(value=0.08)


class BankRef(Model):
    """A folder of audio with a ``manifest.jsonl``; ``generate`` builds it if it is missing."""

    path: str
    generate: bool = False


class RoomSpec(Model):
    """One drawn shoebox room, with every source and the device microphone placed in it."""

    dims_m: tuple[float, float, float]
    rt60_s: float = Field(gt=0)
    e_absorption: float = Field(gt=0, le=1)
    max_order: int = Field(ge=0)
    ray_tracing: bool
    n_rays: int = Field(ge=0)
    mic_m: tuple[float, float, float]
    sources_m: dict[str, tuple[float, float, float]]
    distances_m: dict[str, float]
    rng_seed: int

    @model_validator(mode="after")
    def _inside(self):
        for name, p in {"mic": self.mic_m, **self.sources_m}.items():
            if not all(0 < c < d for c, d in zip(p, self.dims_m)):
                raise ValueError(f"{name} at {p} is outside the room {self.dims_m}")
        return self


class NoiseLayer(Model):
    bank: str  # the bank folder's name (no machine paths in records: shards stay byte-stable)
    path: str  # as the bank's manifest names it
    category: Slug
    licence: str
    offset_s: float = Field(ge=0)
    gain_db: float


class NoiseSpec(Model):
    snr_db: float
    layers: list[NoiseLayer]


class EchoSpec(Model):
    erl_db: float


class Scene(Model):
    """Everything random about how a session sounds; saved in the record's ``scene``."""

    environment: str
    room: RoomSpec | None
    levels_db: dict[str, float]
    noise: NoiseSpec | None
    echo: EchoSpec | None
