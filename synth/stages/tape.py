"""The clock's random values as data: taken once from the session's generators, replayed from a record.

A ``Tape`` holds, per stream (an event id, ``work-<id>``, ``tail``) and quantity, the values in
the order they were drawn, e.g. ``{"e03": {"system_gap": [312.4]}, "work-w1": {"tool_latency":
[2810.2]}}``. Placing with a recorded tape replays exactly the same decisions and makes no draw:
its generators refuse to be used.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from statistics import NormalDist
from typing import Callable

import numpy as np

from ..errors import SessionReject
from ..schema.dist import LogNormal, Normal, Uniform, _Bounded

REJECTION_TRIES = 400

@dataclass(frozen=True)
class Draw:
    """One timing draw: ``value_ms`` of ``quantity``, measured from the sample ``anchor``,
    drawn from its law conditioned on ``[lo_ms, hi_ms]``."""

    quantity: str
    event_id: str
    anchor: int
    value_ms: float
    lo_ms: float = -math.inf
    hi_ms: float = math.inf


class NoDraws:
    """A stand-in generator for rendering from a record: any use is a bug, so it raises."""

    def __getattr__(self, name):
        raise RuntimeError(f"rendering from a record drew from a generator (.{name})")


class Tape:
    """Records draws (``recorded`` None) or replays them (``recorded`` from a render spec)."""

    def __init__(self, recorded: dict[str, dict[str, list[float]]] | None = None):
        self.replaying = recorded is not None
        self.values: dict[str, dict[str, list[float]]] = {} if recorded is None else recorded
        self._next: dict[tuple[str, str], int] = defaultdict(int)

    def take(self, stream: str, quantity: str, draw: Callable[[], float]) -> float:
        """The next value of ``quantity`` in ``stream``: ``draw()`` when recording, else the record's."""
        if not self.replaying:
            value = float(draw())
            self.values.setdefault(stream, {}).setdefault(quantity, []).append(value)
            return value
        i = self._next[stream, quantity]
        self._next[stream, quantity] = i + 1
        values = self.values.get(stream, {}).get(quantity, [])
        if i >= len(values):
            raise SessionReject("render", "spec_missing_draw", f"clock.{stream}.{quantity}[{i}]")
        return values[i]


def rng_source(tape: Tape, rng_for: Callable[[str], np.random.Generator] | None):
    """The generators a stage may use: the session's when recording, ``NoDraws`` when replaying."""
    if tape.replaying or rng_for is None:
        return lambda name: NoDraws()
    return rng_for


def conditioned(sample, rng: np.random.Generator, lo: float = -math.inf, hi: float = math.inf) -> float:
    """A draw of ``sample`` conditioned on ``[lo, hi]``.

    ``sample`` is a law of ``synth.schema.dist`` (its own bounds apply too) or a function of the
    generator (a mixture, a sum). Uniform, normal and log-normal laws are drawn exactly by the
    inverse CDF (``statistics.NormalDist``: pure Python, the same on every machine); anything
    else by rejection, falling back to the nearest bound when the interval holds almost none of
    the law's mass.
    """
    if isinstance(sample, _Bounded):
        lo = max(lo, -math.inf if sample.low is None else sample.low)
        hi = min(hi, math.inf if sample.high is None else sample.high)
        exact = _inverse_cdf(sample, rng, lo, hi)
        if exact is not None:
            return exact
        sample = sample.sample
    x = sample(rng)
    for _ in range(REJECTION_TRIES):
        if lo <= x <= hi:
            return float(x)
        x = sample(rng)
    return float(min(max(x, lo), hi))


def _inverse_cdf(law, rng: np.random.Generator, lo: float, hi: float) -> float | None:
    if lo > hi:
        return float(hi)
    if isinstance(law, Uniform):
        a, b = max(law.a, lo), min(law.b, hi)
        return float(rng.uniform(a, b)) if a <= b else float(min(max(law.a, lo), hi))
    if isinstance(law, Normal) and law.std > 0:
        dist, to_x, from_x = NormalDist(law.mean, law.std), float, float
    elif isinstance(law, LogNormal) and law.sigma > 0:
        dist, to_x = NormalDist(math.log(law.median), law.sigma), math.exp
        from_x = lambda v: math.log(v) if v > 0 else -math.inf  # noqa: E731
    else:
        return None
    p_lo = dist.cdf(from_x(lo)) if lo > -math.inf else 0.0
    p_hi = dist.cdf(from_x(hi)) if hi < math.inf else 1.0
    if p_hi - p_lo < 1e-12:  # no mass left in the interval: its edge nearest the law
        return float(hi if hi < to_x(dist.mean) else lo)
    u = float(rng.uniform(p_lo, p_hi))
    if not 0.0 < u < 1.0:
        return None
    return float(min(max(to_x(dist.inv_cdf(u)), lo), hi))
