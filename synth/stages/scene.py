"""Draw a session's acoustic scene (room, positions, levels, noise, echo) before any audio."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..backends.room import draw_room
from ..banks.bank import Bank
from ..schema.config import PipelineConfig
from ..schema.plan import Plan, talker
from ..schema.scene import EchoSpec, NoiseLayer, NoiseSpec, Scene
from ..schema.seed import ScenarioSeed

ROOM_SOURCES = ("user", "third_party", "background")


def draw_scene(config: PipelineConfig, seed: ScenarioSeed, plan: Plan, bank: Bank | None,
               rng_for: Callable[[str], np.random.Generator]) -> Scene:
    """Every acoustic choice of one session; each part from its own named generator."""
    env, ac = seed.environment, config.acoustics
    people = {p.key: p.distance_m for p in seed.people}
    present = sorted({talker(e) for e in plan.events} & (set(ROOM_SOURCES) | set(people)))
    echo = EchoSpec(erl_db=round(float(ac.echo.erl_db.sample(rng_for("echo"))), 2)) if ac.echo.enabled else None
    room = None
    if ac.room and env.room is not None:
        rng = rng_for("room")
        extra = {"loudspeaker": ("mic", float(ac.echo.speaker_to_mic_m.sample(rng)))} if echo else None
        room = draw_room(env, present, rng, ac.room_max_order, ac.room_rays, extra, people)
    rng = rng_for("levels")
    user_db = config.audio.speaker_rms_dbfs
    if people:
        levels = _group_levels(present, people, room, user_db, rng)
        if "background" in present:
            levels["background"] = round(user_db + float(env.media_gain_db.sample(rng)), 2)
        noise = _draw_noise(env, bank, rng_for("noise")) if ac.noise and bank is not None else None
        return Scene(environment=env.kind, room=room, levels_db=levels, noise=noise, echo=echo)
    levels = {"user": user_db}
    if "third_party" in present:
        levels["third_party"] = round(user_db + float(env.third_party_gain_db.sample(rng)), 2)
    if "background" in present:
        levels["background"] = round(user_db + float(env.media_gain_db.sample(rng)), 2)
    noise = _draw_noise(env, bank, rng_for("noise")) if ac.noise and bank is not None else None
    return Scene(environment=env.kind, room=room, levels_db=levels, noise=noise, echo=echo)


GROUP_LEVEL_RANGE_DB = (-12.0, 6.0)
"""How much louder or softer than the nearest person another person of a group is heard, at most."""


def _group_levels(present: list[str], people: dict, room, user_db: float, rng) -> dict[str, float]:
    """Each person's speech level at the microphone: the nearest at ``user_db``, each other one
    lower by the inverse-distance law (``20 log10(d / d_nearest)``, clipped to
    ``GROUP_LEVEL_RANGE_DB``), so who sits near and who far is heard in the level as well as in
    the reverberation. Distances are the room's, or drawn from the people's laws in free field."""
    who = [p for p in present if p in people]
    dist = {p: room.distances_m[p] for p in who} if room is not None else {
        p: float(people[p].sample(rng)) for p in who}
    near = min(dist.values()) if dist else 1.0
    lo, hi = GROUP_LEVEL_RANGE_DB
    return {p: round(user_db + float(np.clip(-20 * np.log10(max(dist[p], 1e-3) / max(near, 1e-3)), lo, hi)), 2)
            for p in who}


def _draw_noise(env, bank: Bank, rng: np.random.Generator) -> NoiseSpec | None:
    beds = [c for c in env.noise_beds if bank.of(c)]
    if not beds:
        return None
    snr = round(float(env.snr_db.sample(rng)), 2)
    layers = [_layer(bank, beds[int(rng.integers(len(beds)))], 0.0, rng)]
    events = [c for c in env.noise_events if bank.of(c)]
    if events and rng.random() < env.noise_event_prob:
        gain = round(float(env.noise_event_gain_db.sample(rng)), 2)
        layers.append(_layer(bank, events[int(rng.integers(len(events)))], gain, rng))
    return NoiseSpec(snr_db=snr, layers=layers)


def _layer(bank: Bank, category: str, gain_db: float, rng) -> NoiseLayer:
    f = bank.pick(category, rng)
    return NoiseLayer(bank=f.bank, path=f.entry.path, category=category, licence=f.entry.licence,
                      offset_s=round(float(rng.uniform(0, f.entry.duration_s)), 3), gain_db=gain_db)
