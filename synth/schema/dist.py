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


class _Bounded(Model):
    low: float | None = None
    high: float | None = None

    @model_validator(mode="after")
    def _check_bounds(self):
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self

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

    def _raw(self, rng):
        return rng.lognormal(math.log(self.median), self.sigma)


class Gamma(_Bounded):
    """Gamma with shape ``k`` and scale ``theta`` (mean k·θ)."""

    dist: Literal["gamma"] = "gamma"
    k: float = Field(gt=0)
    theta: float = Field(gt=0)

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


Distribution = Annotated[
    Union[Fixed, Uniform, Normal, LogNormal, Gamma, IntUniform], Field(discriminator="dist")
]
