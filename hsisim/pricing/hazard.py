"""Interruption hazards from data: censored maximum-likelihood fits and AWS Spot Advisor bands.

Lifetimes of spot instances are right-censored (an instance still alive when observation stopped
tells us only that its lifetime exceeds what we saw), so the likelihood multiplies the density of
each observed preemption by the survival function of each censored instance.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize, stats

from hsisim.errors import HsisimInputError

HOURS_PER_MONTH = 730.0

# AWS Spot Instance Advisor publishes, per instance type and region, the "frequency of
# interruption": the share of instances of that type reclaimed over the trailing month, in bands.
# We map a band to the constant hazard that gives its midpoint as the probability of at least one
# interruption within a month of running: p = 1 − exp(−λ·730 h)  ⇒  λ = −ln(1 − p) / 730 h.
# The open band ">20%" uses 25 %.
ADVISOR_BANDS = {"<5%": 0.025, "5-10%": 0.075, "10-15%": 0.125, "15-20%": 0.175, ">20%": 0.25}


def advisor_rate_per_hour(band: str) -> float:
    """Constant per-node hazard (per hour) for an AWS Spot Advisor interruption band."""
    if band not in ADVISOR_BANDS:
        raise HsisimInputError(f"unknown Spot Advisor band {band!r}; known: {', '.join(ADVISOR_BANDS)}",
                               key="spot.hazard.band")
    return -math.log(1 - ADVISOR_BANDS[band]) / HOURS_PER_MONTH


@dataclass(frozen=True)
class LifetimeSample:
    hours: np.ndarray
    observed: np.ndarray  # True: preempted at that age; False: right-censored (still alive)

    @property
    def events(self) -> int:
        return int(self.observed.sum())


def read_lifetimes(path: str | Path, *, where: dict[str, str] | None = None) -> LifetimeSample:
    """Read a lifetimes CSV with columns ``lifetime_hours`` and ``status`` (``preempted`` or censored).

    ``where`` keeps only rows whose columns equal the given values (e.g. ``{"gpu_type": "k80"}``).
    """
    p = Path(path)
    if not p.is_file():
        raise HsisimInputError(f"lifetimes file not found: {p}", key="spot.hazard.file")
    hours, observed = [], []
    try:
        with p.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                if where and any(row.get(k) != v for k, v in where.items()):
                    continue
                hours.append(float(row["lifetime_hours"]))
                observed.append(row["status"].strip() == "preempted")
    except (KeyError, ValueError) as exc:
        raise HsisimInputError(f"{p} needs numeric 'lifetime_hours' and a 'status' column: {exc}",
                               key="spot.hazard.file") from None
    if not any(observed):
        raise HsisimInputError(f"{p} has no preempted rows to fit (after filtering)", key="spot.hazard.file")
    return LifetimeSample(np.asarray(hours), np.asarray(observed, dtype=bool))


@dataclass(frozen=True)
class HazardFit:
    """A fitted lifetime law. Exponential: rate_per_hour; Weibull: shape and scale_hours."""

    family: str
    rate_per_hour: float | None
    rate_ci95: tuple[float, float] | None
    shape: float | None
    scale_hours: float | None
    shape_ci95: tuple[float, float] | None
    log_likelihood: float
    n: int
    events: int

    @property
    def mean_hours(self) -> float:
        if self.family == "exponential":
            assert self.rate_per_hour
            return 1 / self.rate_per_hour
        assert self.shape and self.scale_hours
        return self.scale_hours * math.gamma(1 + 1 / self.shape)


def fit_exponential(sample: LifetimeSample) -> HazardFit:
    """Censored MLE of a constant hazard: λ̂ = events / total exposure, with the exact χ² interval."""
    d, exposure = sample.events, float(sample.hours.sum())
    rate = d / exposure
    lo = stats.chi2.ppf(0.025, 2 * d) / (2 * exposure)
    hi = stats.chi2.ppf(0.975, 2 * d + 2) / (2 * exposure)
    ll = d * math.log(rate) - rate * exposure
    return HazardFit("exponential", rate, (float(lo), float(hi)), None, None, None, ll, len(sample.hours), d)


def _weibull_nll(params: np.ndarray, t: np.ndarray, obs: np.ndarray) -> float:
    k, lam = np.exp(params)
    z = (t / lam) ** k
    log_f = np.log(k / lam) + (k - 1) * np.log(t / lam) - z
    return float(-(log_f[obs].sum() - z[~obs].sum()))


def _hessian(fn: Callable[[np.ndarray], float], x: np.ndarray, h: float = 1e-4) -> np.ndarray:
    """Central-difference Hessian (observed information of a negative log-likelihood)."""
    n = len(x)
    out = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = np.eye(n)[i] * h, np.eye(n)[j] * h
            out[i, j] = (fn(x + ei + ej) - fn(x + ei - ej) - fn(x - ei + ej) + fn(x - ei - ej)) / (4 * h * h)
    return out


def fit_weibull(sample: LifetimeSample) -> HazardFit:
    """Censored MLE of a Weibull lifetime (numerical, on log-parameters), Wald 95 % CI for the shape."""
    t, obs = np.maximum(sample.hours, 1e-9), sample.observed
    start = np.log([1.0, float(t.sum() / max(sample.events, 1))])
    res = optimize.minimize(_weibull_nll, start, args=(t, obs), method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20_000})
    res = optimize.minimize(_weibull_nll, res.x, args=(t, obs), method="BFGS")
    k, lam = np.exp(res.x)
    cov = np.linalg.inv(_hessian(lambda x: _weibull_nll(x, t, obs), res.x))
    se = math.sqrt(max(cov[0, 0], 0.0))
    ci = (float(k * math.exp(-1.96 * se)), float(k * math.exp(1.96 * se)))
    return HazardFit("weibull", None, None, float(k), float(lam), ci, -float(res.fun), len(t), sample.events)
