"""Typed distributions for seeds and timing laws.

Each distribution is a small frozen record with a ``dist`` tag, drawn with an explicit
generator. Units are the caller's (timing laws are in milliseconds)::

    LogNormal(median=450, sigma=0.55, low=180, high=2000).sample(rng)

Truncated laws redraw (up to 64 times) and then clip, so a bound is never violated.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, Union

import numpy as np
from pydantic import Field, model_validator

from .common import Model


MAX_PARAMETER = 1e7
"""Every number of a law (parameters and bounds): a millisecond law reaches 2.8 hours at most."""


class _Bounded(Model):
    low: float | None = None
    high: float | None = None

    @model_validator(mode="after")
    def _check_bounds(self):
        for name, value in self:
            if isinstance(value, (int, float)) and not -MAX_PARAMETER <= value <= MAX_PARAMETER:
                raise ValueError(f"{name}: a law's numbers lie within ±{MAX_PARAMETER:.0e} (got {value})")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self

    def _raw_support(self) -> tuple[float, float]:
        return -math.inf, math.inf

    def support(self) -> tuple[float, float]:
        """The smallest and largest value a draw can take (bounds applied)."""
        raw_lo, raw_hi = self._raw_support()
        lo = -math.inf if self.low is None else self.low
        hi = math.inf if self.high is None else self.high
        return min(max(raw_lo, lo), hi), max(min(raw_hi, hi), lo)

    def sample(self, rng: np.random.Generator) -> float:
        """One draw inside [low, high]."""
        lo = -math.inf if self.low is None else self.low
        hi = math.inf if self.high is None else self.high
        x = self._raw(rng)  # every concrete distribution defines _raw
        for _ in range(64):
            if lo <= x <= hi:
                return float(x)
            x = self._raw(rng)  # every concrete distribution defines _raw
        return float(min(max(x, lo), hi))


class Fixed(_Bounded):
    dist: Literal["fixed"] = "fixed"
    value: float

    def _raw(self, rng):
        return self.value

    def _raw_support(self):
        return self.value, self.value


class Uniform(_Bounded):
    dist: Literal["uniform"] = "uniform"
    a: float
    b: float

    @model_validator(mode="after")
    def _order(self):
        if self.a > self.b:
            raise ValueError(f"a ({self.a}) must not exceed b ({self.b})")
        return self

    def _raw(self, rng):
        return rng.uniform(self.a, self.b)

    def _raw_support(self):
        return self.a, self.b


class Normal(_Bounded):
    dist: Literal["normal"] = "normal"
    mean: float
    std: float = Field(ge=0)

    def _raw(self, rng):
        return rng.normal(self.mean, self.std)


class LogNormal(_Bounded):
    """Log-normal given by its median (not the log-mean) and the log-space sigma."""

    dist: Literal["lognormal"] = "lognormal"
    median: float = Field(gt=0)
    sigma: float = Field(ge=0)

    def _raw_support(self):
        return 0.0, math.inf  # open at 0: every draw is > 0

    def _raw(self, rng):
        return rng.lognormal(math.log(self.median), self.sigma)


class Gamma(_Bounded):
    """Gamma with shape ``k`` and scale ``theta`` (mean k·θ)."""

    dist: Literal["gamma"] = "gamma"
    k: float = Field(gt=0)
    theta: float = Field(gt=0)

    def _raw_support(self):
        return 0.0, math.inf  # open at 0: every draw is > 0

    def _raw(self, rng):
        return rng.gamma(self.k, self.theta)


class IntUniform(_Bounded):
    """Integers a..b inclusive."""

    dist: Literal["int_uniform"] = "int_uniform"
    a: int
    b: int

    @model_validator(mode="after")
    def _order(self):
        if self.a > self.b:
            raise ValueError(f"a ({self.a}) must not exceed b ({self.b})")
        return self

    def _raw(self, rng):
        return float(rng.integers(self.a, self.b + 1))

    def _raw_support(self):
        return float(self.a), float(self.b)


Distribution = Annotated[
    Union[Fixed, Uniform, Normal, LogNormal, Gamma, IntUniform], Field(discriminator="dist")
]


def check_support(dist: "_Bounded", lo: float = -math.inf, hi: float = math.inf, *, positive: bool = False,
                  integer: bool = False):
    """Refuse a law that can draw outside ``[lo, hi]`` (``positive``: only values > 0; ``integer``:
    fixed values must be whole numbers). Returns ``dist`` (a pydantic ``AfterValidator``)."""
    s_lo, s_hi = dist.support()
    if positive and s_lo <= 0 and not (isinstance(dist, (LogNormal, Gamma)) and s_lo == 0 < s_hi):
        raise ValueError(f"must be > 0, but this law can draw {_shown(s_lo)}")
    if s_lo < lo or s_hi > hi:
        bad = s_lo if s_lo < lo else s_hi
        raise ValueError(f"must lie in [{_shown(lo)}, {_shown(hi)}], but this law can draw {_shown(bad)} "
                         "(give low/high bounds or narrower parameters)")
    if integer and isinstance(dist, Fixed) and dist.value != int(dist.value):
        raise ValueError(f"must be a whole number (got {dist.value})")
    return dist


def _shown(x: float) -> str:
    return str(int(x)) if math.isfinite(x) and x == int(x) else str(x)


def bounded(lo: float = -math.inf, hi: float = math.inf, *, positive: bool = False, integer: bool = False):
    """``Distribution`` restricted to draws in a range, e.g. ``bounded(positive=True)`` for a length."""
    from pydantic import AfterValidator

    return Annotated[Distribution, AfterValidator(
        lambda d: check_support(d, lo, hi, positive=positive, integer=integer))]
