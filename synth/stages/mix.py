"""Mix placed events into the two channels: ch0 user side, ch1 the system's clean speech."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..schema.timeline import Timeline


@dataclass(frozen=True)
class Mix:
    user_side: np.ndarray  # ch0: what the system's microphone hears
    system: np.ndarray  # ch1: the system's clean speech
    user_stem: np.ndarray  # the user's own voice only (for usr_vad)
    gains_db: dict


def mix(tl: Timeline, audio: dict[str, np.ndarray], gains_db: dict[str, float], peak_limit: float) -> Mix:
    n = tl.num_samples
    tracks = {k: np.zeros(n, np.float32) for k in ("user", "system", "third_party", "background")}
    for e in tl.events:
        if e.speaker not in tracks:
            continue
        x = audio[e.id][: n - e.on_sample]
        tracks[e.speaker][e.on_sample : e.on_sample + len(x)] += x
    g = {k: float(10 ** (gains_db.get(k, 0.0) / 20)) for k in tracks}
    user_side = tracks["user"] * g["user"] + tracks["third_party"] * g["third_party"] + tracks["background"] * g["background"]
    system = tracks["system"] * g["system"]
    # peak guard: one gain per channel, applied to the stems too so labels see what is written
    scale_u = min(1.0, peak_limit / max(float(np.abs(user_side).max()), 1e-9))
    scale_s = min(1.0, peak_limit / max(float(np.abs(system).max()), 1e-9))
    return Mix(user_side * scale_u, system * scale_s, tracks["user"] * g["user"] * scale_u,
               {**gains_db, "peak_scale_user_side_db": 20 * np.log10(scale_u),
                "peak_scale_system_db": 20 * np.log10(scale_s)})
