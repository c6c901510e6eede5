"""Distributions from a registry, each with its analytic moments.

A scenario writes ``{dist: lognormal, median: 5 min, sigma: 1.0}``; the ``dist`` key picks the class.
Every class can ``sample(rng, n)`` (values in seconds where the parameters are durations) and states
its ``mean`` and ``variance``; tests compare sample moments with these.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy import integrate, optimize, special, stats

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

    @abstractmethod
    def sf(self, t: Any) -> np.ndarray:
        """Survival function P(X > t) at ``t`` (seconds where the parameters are durations), elementwise."""


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

    def sf(self, t: Any) -> np.ndarray:
        return (np.asarray(t, dtype=float) < self.value).astype(float)


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

    def sf(self, t: Any) -> np.ndarray:
        return np.exp(-np.maximum(np.asarray(t, dtype=float), 0.0) / self.mean)


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

    def sf(self, t: Any) -> np.ndarray:
        x = np.asarray(t, dtype=float)
        if self.sigma == 0 or self.median == 0:
            return (x < self.median).astype(float)
        return np.asarray(stats.lognorm.sf(x, self.sigma, scale=self.median), dtype=float)


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

    def sf(self, t: Any) -> np.ndarray:
        return np.exp(-((np.maximum(np.asarray(t, dtype=float), 0.0) / self.scale) ** self.shape))


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

    def sf(self, t: Any) -> np.ndarray:
        return np.asarray(stats.gamma.sf(np.asarray(t, dtype=float), self.shape, scale=self.scale), dtype=float)


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

    def sf(self, t: Any) -> np.ndarray:
        arr = np.sort(np.asarray(self.values, dtype=float))
        x = np.asarray(t, dtype=float)
        return 1.0 - np.searchsorted(arr, x, side="right") / len(arr)


# -- the spread between ranks ---------------------------------------------------------------------
GAMMA_CV_MAX = 2.0  # shape 0.25: a time that is nearly always short and now and then very long
_NORMAL_CV = 1e-4  # below this the gamma is a normal to well within floating point


def _gamma_mean_difference(cv: float) -> float:
    """E|X1 − X2| / E[X] for two independent gammas with this cv: 2·Γ(k + ½) / (√π·Γ(k + 1)), k = 1/cv²."""
    k = 1.0 / cv**2
    return 2.0 * math.exp(special.gammaln(k + 0.5) - special.gammaln(k + 1.0)) / math.sqrt(math.pi)


def gamma_cv_for_mean_difference(ratio: float) -> float:
    """The cv of a gamma whose mean absolute difference between two draws is ``ratio`` × its mean.

    Two ranks at a barrier wait for the later one: on average half the mean absolute difference
    E|X1 − X2|. A gamma with this cv makes the simulator's ranks wait as long as the measured ones,
    however the measured difference is shaped (a rare long stall gives a large standard deviation
    but a small mean difference). The ratio runs from 0 (cv 0) through 2/√π·cv for small cv (the
    normal's 2σ/√π) and 1 at cv 1 (the exponential) towards 2; the cv is capped at GAMMA_CV_MAX.
    """
    if not math.isfinite(ratio) or ratio < 0:
        raise ValueError(f"a mean absolute difference over the mean is a finite number >= 0, not {ratio}")
    if ratio == 0:
        return 0.0
    if ratio <= _gamma_mean_difference(_NORMAL_CV):
        return ratio * math.sqrt(math.pi) / 2.0
    if ratio >= _gamma_mean_difference(GAMMA_CV_MAX):
        return GAMMA_CV_MAX
    return float(optimize.brentq(lambda cv: _gamma_mean_difference(cv) - ratio, _NORMAL_CV, GAMMA_CV_MAX,
                                 xtol=1e-12, rtol=1e-12))


Distribution = Annotated[
    Constant | Exponential | LogNormal | Weibull | Gamma | Empirical,
    Field(discriminator="dist"),
]


# -- lifetime laws of spot and preemptible nodes ----------------------------------------------------
#
# Kadupitiya, Jadhao & Sharma ("Modeling The Temporally Constrained Preemptions of Transient Cloud
# VMs", HPDC 2020, doi:10.1145/3369583.3392671) fit the lifetimes of GCP preemptible VMs, which
# live at most 24 hours, with the CDF F(t) = A·(1 − e^{−t/τ1} + e^{(t−b)/τ2}): an early-failure
# term that saturates at A and a late surge near b. F reaches 1 at a finite t_end, the law's end.
# Functions of plain numbers (any time unit) so the fitter can call them without building models.
MAX_MASS_AT_ZERO = 0.01


def bathtub_cdf(t: Any, a: float, tau1: float, tau2: float, b: float) -> np.ndarray:
    """F(t) = a(1 − e^{−t/τ1} + e^{(t−b)/τ2}), clipped to [0, 1] (1 from the law's end on)."""
    x = np.maximum(np.asarray(t, dtype=float), 0.0)
    with np.errstate(over="ignore"):
        f = a * (-np.expm1(-x / tau1) + np.exp((x - b) / tau2))
    return np.minimum(f, 1.0)


def bathtub_end(a: float, tau1: float, tau2: float, b: float) -> float:
    """t_end where F(t_end) = 1: the longest possible lifetime (F(0) must be below 1)."""
    hi = b + tau2 * math.log1p(1 / a)  # there e^{(t−b)/τ2} = 1 + 1/a, so F ≥ 1
    return float(optimize.brentq(lambda t: a * (-math.expm1(-t / tau1) + math.exp((t - b) / tau2)) - 1, 0.0, hi,
                                 xtol=1e-12 * max(hi, 1.0), rtol=1e-14))


def bathtub_logpdf(t: Any, a: float, tau1: float, tau2: float, b: float, end: float) -> np.ndarray:
    """log f(t) = log a + log(e^{−t/τ1}/τ1 + e^{(t−b)/τ2}/τ2) below the end; −inf from it on."""
    x = np.asarray(t, dtype=float)
    out = math.log(a) + np.logaddexp(-x / tau1 - math.log(tau1), (x - b) / tau2 - math.log(tau2))
    return np.where(x < end, out, -np.inf)


def bathtub_moments(a: float, tau1: float, tau2: float, b: float, end: float) -> tuple[float, float]:
    """(E[X], E[X²]) in closed form: ∫₀ᵀ S(t) dt and ∫₀ᵀ 2t·S(t) dt with S = 1 − F and T the end."""
    T = end
    late = math.exp((T - b) / tau2)
    m1 = T - a * (T + tau1 * math.expm1(-T / tau1) + tau2 * (late - math.exp(-b / tau2)))
    m2 = T**2 - a * (T**2 - 2 * tau1**2 * (1 - math.exp(-T / tau1) * (1 + T / tau1))
                     + 2 * tau2 * (late * (T - tau2) + tau2 * math.exp(-b / tau2)))
    return m1, m2


class Bathtub(_Dist):
    """GCP preemptible lifetimes (Kadupitiya et al. 2020): F(t) = a(1 − e^{−t/τ1} + e^{(t−b)/τ2}) up to its end."""

    dist: Literal["bathtub"]
    a: Number = Field(gt=0, le=1)
    tau1: Seconds = Field(gt=0)
    tau2: Seconds = Field(gt=0)
    b: Seconds = Field(gt=0)

    @model_validator(mode="after")
    def _starts_near_zero(self) -> Bathtub:
        # F(0) = a·e^{−b/τ2} > 0: the law as published puts this mass at lifetime 0 (a node reclaimed
        # as it boots); fits to real lifetimes make it tiny, a typo in b or tau2 would not
        if not self.a * math.exp(-self.b / self.tau2) < MAX_MASS_AT_ZERO:
            raise ValueError(f"a·e^(−b/tau2) is the law's mass at lifetime 0 and must be below {MAX_MASS_AT_ZERO}: "
                             "raise b or lower tau2")
        return self

    @property
    def end(self) -> float:
        """The longest possible lifetime (seconds), where F reaches 1."""
        return bathtub_end(self.a, self.tau1, self.tau2, self.b)

    @property
    def mean(self) -> float:
        return bathtub_moments(self.a, self.tau1, self.tau2, self.b, self.end)[0]

    @property
    def variance(self) -> float:
        m1, m2 = bathtub_moments(self.a, self.tau1, self.tau2, self.b, self.end)
        return max(m2 - m1**2, 0.0)

    def sf(self, t: Any) -> np.ndarray:
        x = np.asarray(t, dtype=float)
        return np.where(x < self.end, 1.0 - bathtub_cdf(x, self.a, self.tau1, self.tau2, self.b), 0.0)

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | float:
        """Inverse transform: F is increasing, so F(x) = u has one root in [0, end] (bisection)."""
        end = self.end
        u = rng.random(n)
        lo, hi = np.zeros(np.shape(u)), np.full(np.shape(u), end)
        for _ in range(64):  # 2⁻⁶⁴ of the end: below a double's resolution
            mid = (lo + hi) / 2
            below = bathtub_cdf(mid, self.a, self.tau1, self.tau2, self.b) < u
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        x = (lo + hi) / 2
        return float(x) if n is None else x


class Law(Protocol):
    """A lifetime law: draws, moments and its survival function (seconds)."""

    @property
    def mean(self) -> float: ...

    @property
    def variance(self) -> float: ...

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | float: ...

    def sf(self, t: Any) -> np.ndarray: ...


@dataclass(frozen=True)
class Discrete:
    """Lifetime ``values`` (seconds, ascending) with probabilities ``probs``: a Kaplan–Meier estimate's law."""

    values: tuple[float, ...]
    probs: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.values or len(self.values) != len(self.probs) or any(p < 0 for p in self.probs):
            raise ValueError("a discrete law needs values with non-negative probabilities, one each")
        if abs(sum(self.probs) - 1) > 1e-9 or list(self.values) != sorted(self.values):
            raise ValueError("a discrete law's probabilities sum to 1 over ascending values")

    @cached_property
    def _cum(self) -> np.ndarray:
        cum = np.cumsum(self.probs)
        cum[-1] = 1.0
        return cum

    @property
    def mean(self) -> float:
        return float(np.dot(self.values, self.probs))

    @property
    def variance(self) -> float:
        return max(float(np.dot(np.square(self.values), self.probs)) - self.mean**2, 0.0)

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | float:
        v = np.asarray(self.values)
        i = np.minimum(np.searchsorted(self._cum, rng.random(n), side="right"), len(v) - 1)
        return float(v[i]) if n is None else v[i]

    def sf(self, t: Any) -> np.ndarray:
        i = np.searchsorted(np.asarray(self.values), np.asarray(t, dtype=float), side="right")
        return 1.0 - np.concatenate(([0.0], self._cum))[i]


@dataclass(frozen=True)
class Capped:
    """min(X, cap): a lifetime law whose nodes are all reclaimed by ``cap_s`` (GCP preemptible: 24 h).

    Moments are ∫₀ᶜ S(t) dt and ∫₀ᶜ 2t·S(t) dt of the law's survival S, by quadrature.
    """

    law: Law
    cap_s: float

    @cached_property
    def _moments(self) -> tuple[float, float]:
        def s(t: float) -> float:
            return float(self.law.sf(t))

        opts = {"limit": 400, "epsabs": 0.0, "epsrel": 1e-10}
        m1 = integrate.quad(s, 0.0, self.cap_s, **opts)[0]
        m2 = integrate.quad(lambda t: 2 * t * s(t), 0.0, self.cap_s, **opts)[0]
        return m1, m2

    @property
    def mean(self) -> float:
        return self._moments[0]

    @property
    def variance(self) -> float:
        m1, m2 = self._moments
        return max(m2 - m1**2, 0.0)

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | float:
        x = self.law.sample(rng, n)
        return min(float(x), self.cap_s) if n is None else np.minimum(x, self.cap_s)

    def sf(self, t: Any) -> np.ndarray:
        x = np.asarray(t, dtype=float)
        return np.where(x < self.cap_s, self.law.sf(x), 0.0)


def capped(law: Law, cap_s: float) -> Law:
    """``law`` with every lifetime cut at ``cap_s``: exact for a discrete law, else ``Capped``."""
    if isinstance(law, Discrete):
        keep = [(v, p) for v, p in zip(law.values, law.probs, strict=True) if v < cap_s]
        rest = 1.0 - sum(p for _, p in keep)
        values, probs = [v for v, _ in keep], [p for _, p in keep]
        if rest > 0:
            values.append(cap_s)
            probs.append(rest)
        return Discrete(tuple(values), tuple(probs))
    return Capped(law, cap_s)
