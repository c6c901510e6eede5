"""Distributions from a registry, each with its analytic moments.

A scenario writes ``{dist: lognormal, median: 5 min, sigma: 1.0}``; the ``dist`` key picks the class.
Every class can ``sample(rng, n)`` (values in seconds where the parameters are durations) and states
its ``mean`` and ``variance``; tests compare sample moments with these.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy import special

from hsisim.fields import Number, Seconds


class _Dist(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _finite_moments(self) -> _Dist:
        # finite parameters can still give an infinite mean (a Weibull shape of 1e-9, a lognormal
        # sigma of 30): nothing downstream can simulate or bill such a law
        try:
            finite = math.isfinite(self.mean) and math.isfinite(self.variance)
        except OverflowError:
            finite = False
        if not finite:
            raise ValueError(f"this {self.__class__.__name__.lower()} law has no finite mean and variance; "
                             "check its parameters")
        return self

    # pydantic's model metaclass derives from ABCMeta, so these are enforced on subclasses
    @property
    @abstractmethod
    def mean(self) -> float:
        """Analytic mean (seconds where the parameters are durations)."""

    @property
    @abstractmethod
    def variance(self) -> float:
        """Analytic variance."""

    @abstractmethod
    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | float:
        """One draw (``n`` None) or an array of ``n`` draws."""


class Constant(_Dist):
    """Always ``value``."""

    dist: Literal["constant"]
    value: Seconds

    @property
    def mean(self) -> float:
        return self.value

    @property
    def variance(self) -> float:
        return 0.0

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | float:
        return self.value if n is None else np.full(n, self.value)


class Exponential(_Dist):
    """Exponential, given by ``mean`` (a duration) or by ``rate_per_hour``."""

    dist: Literal["exponential"]
    mean_s: Seconds | None = Field(default=None, alias="mean")
    rate_per_hour: Number | None = Field(default=None, gt=0)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_parameter(self) -> Exponential:
        if (self.mean_s is None) == (self.rate_per_hour is None):
            raise ValueError("give exactly one of 'mean' or 'rate_per_hour'")
        return self

    @property
    def mean(self) -> float:
        if self.mean_s is not None:
            return self.mean_s
        assert self.rate_per_hour is not None
        return 3600.0 / self.rate_per_hour

    @property
    def variance(self) -> float:
        return self.mean**2

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | float:
        return rng.exponential(self.mean, n)


class LogNormal(_Dist):
    """Log-normal with the given ``median`` and log-space standard deviation ``sigma``."""

    dist: Literal["lognormal"]
    median: Seconds
    sigma: Number = Field(ge=0, le=20)

    @property
    def mean(self) -> float:
        return self.median * math.exp(self.sigma**2 / 2)

    @property
    def variance(self) -> float:
        s2 = self.sigma**2
        return (math.exp(s2) - 1) * self.median**2 * math.exp(s2)

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | float:
        return rng.lognormal(math.log(self.median) if self.median > 0 else -math.inf, self.sigma, n)


class Weibull(_Dist):
    """Weibull with ``shape`` k and ``scale`` λ: mean λΓ(1 + 1/k)."""

    dist: Literal["weibull"]
    shape: Number = Field(gt=0)
    scale: Seconds

    @property
    def mean(self) -> float:
        return self.scale * float(special.gamma(1 + 1 / self.shape))

    @property
    def variance(self) -> float:
        g1 = special.gamma(1 + 1 / self.shape)
        g2 = special.gamma(1 + 2 / self.shape)
        return float(self.scale**2 * (g2 - g1**2))

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | float:
        return self.scale * rng.weibull(self.shape, n)


class Gamma(_Dist):
    """Gamma with ``shape`` k and ``scale`` θ: mean kθ, variance kθ²."""

    dist: Literal["gamma"]
    shape: Number = Field(gt=0)
    scale: Seconds

    @property
    def mean(self) -> float:
        return self.shape * self.scale

    @property
    def variance(self) -> float:
        return self.shape * self.scale**2

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | float:
        return rng.gamma(self.shape, self.scale, n)


class Empirical(_Dist):
    """Resample uniformly from observed ``values`` (durations)."""

    dist: Literal["empirical"]
    values: tuple[Seconds, ...] = Field(min_length=1)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def variance(self) -> float:
        return float(np.var(self.values))

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | float:
        arr = np.asarray(self.values, dtype=float)
        return arr[rng.integers(0, len(arr), n)] if n is not None else float(arr[rng.integers(len(arr))])


Distribution = Annotated[
    Constant | Exponential | LogNormal | Weibull | Gamma | Empirical,
    Field(discriminator="dist"),
]
