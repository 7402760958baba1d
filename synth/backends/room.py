"""Shoebox rooms with pyroomacoustics: draw a room jointly with its RT60, compute its RIRs.

Cost is kept small by computing impulse responses only (one ``compute_rir`` per session for
every source that occurs) and convolving whole tracks with ``scipy.signal.oaconvolve``; the
image-source order stays low (3 by default) and the hybrid ray tracer makes the late tail, which
reaches the drawn RT60 where pure image sources of order 10 stop at about 0.17 s. An RIR set is
cached per worker by its ``RoomSpec``.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from ..errors import SessionReject
from ..schema.scene import AcousticEnvironment, RoomSpec

SOUND_SPEED = 343.0
SABINE = 24 * math.log(10) / SOUND_SPEED  # 0.161 s/m
WALL_MARGIN_M = 0.3
MIN_ABSORPTION = 0.02
SCATTERING = 0.2  # furnished rooms; makes the late field diffuse, so the decay follows Eyring
_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 16


def rt60_range(dims: tuple[float, float, float]) -> tuple[float, float]:
    """RT60s this room can have with energy absorption in ``[MIN_ABSORPTION, 1]`` (Sabine)."""
    lx, ly, lz = dims
    v, s = lx * ly * lz, 2 * (lx * ly + lx * lz + ly * lz)
    return SABINE * v / s, SABINE * v / (s * MIN_ABSORPTION)


def eyring_absorption(dims: tuple[float, float, float], rt60_s: float) -> float:
    """Wall energy absorption for ``rt60_s`` by Eyring's formula.

    With scattering walls the hybrid simulator follows Eyring closely (within 8 % over the
    default room law, against up to 33 % for Sabine's formula without scattering, which
    ``pyroomacoustics.inverse_sabine`` uses).
    """
    lx, ly, lz = dims
    v, s = lx * ly * lz, 2 * (lx * ly + lx * lz + ly * lz)
    return 1.0 - math.exp(-SABINE * v / (s * rt60_s))


def draw_room(env: AcousticEnvironment, sources: list[str], rng: np.random.Generator,
              max_order: int, n_rays: int, extra: dict[str, tuple[str, float]] | None = None,
              people: dict | None = None) -> RoomSpec:
    """Draw size, then an RT60 the size can reach, then the mic and each source around it.

    ``extra`` places more sources at a fixed distance from another point, e.g. the device's own
    loudspeaker next to its microphone: ``{"loudspeaker": ("mic", 0.08)}``. ``people``: the distance
    law of each person of a group, each placed as a source of their own.
    """
    law = env.room
    dims = (round(law.length_m.sample(rng), 3), round(law.width_m.sample(rng), 3),
            round(law.height_m.sample(rng), 3))
    lo, hi = rt60_range(dims)
    lo *= 1.15  # keep well away from fully absorbing walls, where Sabine is wrong
    rt60 = law.rt60_s.sample(rng)
    rt60 = round(float(min(max(rt60, lo), hi)), 4)
    e_abs = eyring_absorption(dims, rt60)
    # the device stands away from the walls (a third of a small room's size at most)
    mic = tuple(round(float(rng.uniform(min(0.8, d / 3), d - min(0.8, d / 3))), 3) for d in dims[:2]) + (
        round(float(rng.uniform(min(0.7, dims[2] / 2), min(1.2, dims[2] - WALL_MARGIN_M))), 3),)
    laws = {"user": env.user_distance_m, "third_party": env.third_party_distance_m,
            "background": env.media_distance_m, **(people or {})}
    pos, dist = {}, {}
    for name in sources:
        want = float(laws[name].sample(rng))
        p = _around(mic, want, dims, rng, height=(1.1, 1.7) if name != "background" else (0.8, 1.4))
        pos[name] = p
        dist[name] = round(float(np.linalg.norm(np.subtract(p, mic))), 3)
    for name, (anchor, d) in (extra or {}).items():
        base = mic if anchor == "mic" else pos[anchor]
        p = _around(base, d, dims, rng, height=(base[2] - 0.05, base[2] + 0.05))
        pos[name] = p
        dist[name] = round(float(np.linalg.norm(np.subtract(p, mic))), 3)
    return RoomSpec(dims_m=dims, rt60_s=rt60, e_absorption=round(float(e_abs), 6), max_order=max_order,
                    ray_tracing=n_rays > 0, n_rays=n_rays, mic_m=mic, sources_m=pos, distances_m=dist,
                    rng_seed=int(rng.integers(0, 2**31 - 1)))


def _around(center, distance: float, dims, rng, height: tuple[float, float]) -> tuple[float, float, float]:
    """A point about ``distance`` from ``center`` (horizontally), inside the walls' margin."""
    z = float(np.clip(rng.uniform(*height), WALL_MARGIN_M, dims[2] - WALL_MARGIN_M))
    for shrink in np.linspace(1.0, 0.2, 9):
        az = rng.uniform(0, 2 * np.pi)
        for k in range(8):  # try a few directions at this distance
            a = az + k * np.pi / 4
            x = center[0] + distance * shrink * np.cos(a)
            y = center[1] + distance * shrink * np.sin(a)
            if WALL_MARGIN_M < x < dims[0] - WALL_MARGIN_M and WALL_MARGIN_M < y < dims[1] - WALL_MARGIN_M:
                return (round(float(x), 3), round(float(y), 3), round(z, 3))
    raise SessionReject("scene", "source_unplaceable", f"{distance:.2f} m from {center} in {dims}")


def room_irs(spec: RoomSpec, sample_rate: int) -> dict[str, np.ndarray]:
    """Impulse response from each source of ``spec`` to its microphone (float32).

    pyroomacoustics draws from package-global generators (numpy's and its C++ engine's): they
    are seeded from the spec right before the room is built, so the RIRs depend on the spec
    alone. The fractional-delay filter's group delay is removed, so that only the propagation
    delay remains between an event's placed time and its sound at the microphone.
    """
    key = (spec.model_dump_json(), sample_rate)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    import pyroomacoustics as pra

    pra.random.seed(spec.rng_seed)
    room = pra.ShoeBox(list(spec.dims_m), fs=sample_rate, materials=pra.Material(spec.e_absorption, SCATTERING),
                       max_order=spec.max_order, ray_tracing=spec.ray_tracing, air_absorption=False)
    if spec.ray_tracing:
        room.set_ray_tracing(receiver_radius=0.5, n_rays=spec.n_rays, energy_thres=1e-7)
    names = sorted(spec.sources_m)
    for name in names:
        room.add_source(list(spec.sources_m[name]))
    room.add_microphone(list(spec.mic_m))
    room.compute_rir()
    lag = pra.constants.get("frac_delay_length") // 2
    out = {name: np.asarray(room.rir[0][i][lag:], dtype=np.float32) for i, name in enumerate(names)}
    _CACHE[key] = out
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return out


def measure_rt60(ir: np.ndarray, sample_rate: int) -> float:
    """RT60 of an impulse response from its Schroeder decay (T30 extrapolated to 60 dB)."""
    import pyroomacoustics as pra

    return float(pra.experimental.measure_rt60(ir, fs=sample_rate, decay_db=30))
