"""Interruption hazards from data: censored maximum-likelihood fits and AWS Spot Advisor bands.

Lifetimes of spot instances are right-censored (an instance still alive when observation stopped
tells us only that its lifetime exceeds what we saw), so the likelihood multiplies the density of
each observed preemption by the survival function of each censored instance.

Every fitter takes a ``LifetimeSample`` and returns a ``HazardFit`` (family, parameters with 95 %
intervals, maximised log-likelihood); ``FITTERS`` maps a family name to its fitter, so further
families (a capped or bathtub law) and non-parametric estimates can sit beside these two.
"""

from __future__ import annotations

import csv
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize, special, stats

from hsisim.errors import HsisimInputError

HOURS_PER_MONTH = 730.0
EVENT_STATUS = "preempted"
# Every status other than EVENT_STATUS is right-censored (the real files use "censored_alive_at_end"
# and "stopped").
CHI2_1_95 = float(stats.chi2.ppf(0.95, 1))
# A fitted Weibull shape beyond this is a likelihood without a maximum (identical event times, the
# optimiser stopping near float overflow), not a law; real samples give 0.3–2 (or ~10⁴ for GCP's
# lifetimes that all end at the 24 h cap).
MAX_SHAPE = 1e6  # likelihood-ratio threshold of a 95 % profile interval

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

    @property
    def exposure_hours(self) -> float:
        """Total time at risk (hours): every lifetime, observed or censored."""
        return float(self.hours.sum())


def lifetime_rows(path: str | Path, *, key: str = "spot.hazard.file") -> Iterator[dict[str, str]]:
    """The rows of a lifetimes CSV as dicts; a missing file or a file without a header is an error."""
    p = Path(path)
    if not p.is_file():
        raise HsisimInputError(f"lifetimes file not found: {p}", key=key)
    with p.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames or not {"lifetime_hours", "status"} <= set(reader.fieldnames):
            raise HsisimInputError(f"{p} needs 'lifetime_hours' and 'status' columns, has {reader.fieldnames}",
                                   key=key)
        yield from reader


def sample_of(rows: list[dict[str, str]], *, source: str, key: str = "spot.hazard.file") -> LifetimeSample:
    """Lifetimes (hours) and event flags of ``rows``: status ``preempted`` is an event, any other is censored.

    The real files use ``censored_alive_at_end`` (AWS, still running when the probe stopped) and
    ``stopped`` (GCP, ended by the experimenters) for censored rows.
    """
    try:
        hours = np.array([float(r["lifetime_hours"]) for r in rows], dtype=float)
    except (TypeError, ValueError) as exc:
        raise HsisimInputError(f"{source}: 'lifetime_hours' must be numeric: {exc}", key=key) from None
    if len(hours) and (not np.all(np.isfinite(hours)) or hours.min() < 0):
        raise HsisimInputError(f"{source}: 'lifetime_hours' must be finite and non-negative", key=key)
    observed = np.array([(r["status"] or "").strip().lower() == EVENT_STATUS for r in rows], dtype=bool)
    return LifetimeSample(hours, observed)


def read_lifetimes(path: str | Path, *, where: dict[str, str] | None = None) -> LifetimeSample:
    """Read a lifetimes CSV with columns ``lifetime_hours`` and ``status`` (``preempted`` or censored).

    ``where`` keeps only rows whose columns equal the given values (e.g. ``{"gpu_type": "k80"}``).
    Raises ``HsisimInputError`` when no kept row is a preemption (nothing to fit).
    """
    rows = [r for r in lifetime_rows(path) if not where or all(r.get(k) == v for k, v in where.items())]
    sample = sample_of(rows, source=str(path))
    if sample.events == 0:
        raise HsisimInputError(f"{path} has no preempted rows to fit (after filtering)", key="spot.hazard.file")
    return sample


@dataclass(frozen=True)
class HazardFit:
    """A fitted lifetime law. Exponential: rate_per_hour; Weibull: shape and scale_hours.

    Intervals are 95 %: exact χ² for the exponential rate, profile likelihood for the Weibull
    parameters (a side is None where the likelihood stays above the threshold: unbounded).
    """

    family: str
    rate_per_hour: float | None
    rate_ci95: tuple[float, float] | None
    shape: float | None
    scale_hours: float | None
    shape_ci95: tuple[float | None, float | None] | None
    log_likelihood: float
    n: int
    events: int
    scale_ci95: tuple[float | None, float | None] | None = None
    exposure_hours: float = math.nan

    @property
    def parameters(self) -> int:
        return 1 if self.family == "exponential" else 2

    @property
    def aic(self) -> float:
        """Akaike information criterion, 2k − 2·log-likelihood (lower is better)."""
        return 2 * self.parameters - 2 * self.log_likelihood

    @property
    def mean_hours(self) -> float:
        """Mean lifetime in hours."""
        if self.family == "exponential" and self.rate_per_hour:
            return 1 / self.rate_per_hour
        if self.shape and self.scale_hours:
            return self.scale_hours * math.gamma(1 + 1 / self.shape)
        raise ValueError(f"{self.family} fit has no parameters")


def rate_upper_bound_95(exposure_hours: float) -> float:
    """One-sided 95 % upper bound of a constant hazard (per hour) after zero events in ``exposure_hours``.

    With no event, the exact bound is χ²₀.₉₅(2)/(2·exposure) = −ln(0.05)/exposure ≈ 3.0/exposure.
    """
    return -math.log(0.05) / exposure_hours


def _need_events(sample: LifetimeSample, family: str) -> None:
    if sample.events == 0:
        raise HsisimInputError(f"no preemptions among {len(sample.hours)} lifetimes: no {family} law can be fitted")


def fit_exponential(sample: LifetimeSample) -> HazardFit:
    """Censored MLE of a constant hazard: λ̂ = events / total exposure (per hour), with the exact χ² interval."""
    _need_events(sample, "exponential")
    d, exposure = sample.events, sample.exposure_hours
    rate = d / exposure
    lo = stats.chi2.ppf(0.025, 2 * d) / (2 * exposure)
    hi = stats.chi2.ppf(0.975, 2 * d + 2) / (2 * exposure)
    ll = d * math.log(rate) - rate * exposure
    return HazardFit("exponential", rate, (float(lo), float(hi)), None, None, None, ll, len(sample.hours), d,
                     exposure_hours=exposure)


def weibull_log_likelihood(sample: LifetimeSample, shape: float, scale_hours: float) -> float:
    """Censored Weibull log-likelihood: Σ log f(t) over preemptions + Σ log S(t) over censored lifetimes.

    With z = t/λ: log f = ln(k/λ) + (k − 1)·ln z − zᵏ and log S = −zᵏ, so the sum is
    d·ln(k/λ) + (k − 1)·Σ_events ln z − Σ_all zᵏ (zᵏ taken as exp(k·ln z): large k would overflow).
    """
    log_z = np.log(sample.hours) - math.log(scale_hours)
    with np.errstate(over="ignore"):
        zk = np.exp(shape * log_z)
    d = sample.events
    ll = float(d * math.log(shape / scale_hours) + (shape - 1) * log_z[sample.observed].sum() - zk.sum())
    return ll if math.isfinite(ll) else -math.inf


def _profile_shape_ll(sample: LifetimeSample, shape: float) -> float:
    """Log-likelihood at ``shape`` with the scale at its conditional maximum, in closed form.

    For fixed k the scale's MLE is λ̂ = (Σ tᵏ / d)^(1/k), so Σ (t/λ̂)ᵏ = d and the log-likelihood
    is d·ln k − d·k·ln λ̂ + (k − 1)·Σ_events ln t − d; computed in logs (large k overflows tᵏ).
    """
    log_t = np.log(sample.hours)
    d = sample.events
    log_scale = (float(special.logsumexp(shape * log_t)) - math.log(d)) / shape
    return d * math.log(shape) - d * shape * log_scale + (shape - 1) * float(log_t[sample.observed].sum()) - d


def _profile_scale_ll(sample: LifetimeSample, scale: float, shape_hat: float) -> float:
    """Log-likelihood maximised over the shape at a fixed scale (1-D, on log shape).

    For a fixed scale the log-likelihood is concave in the shape, so a bounded search within a
    factor e⁶ of the unconstrained estimate finds its maximum without overflowing.
    """
    u0 = math.log(shape_hat)
    res = optimize.minimize_scalar(lambda u: -weibull_log_likelihood(sample, math.exp(u), scale),
                                   bounds=(max(u0 - 6.0, -30.0), min(u0 + 6.0, 30.0)), method="bounded",
                                   options={"xatol": 1e-10})
    return -float(res.fun)


def _crossing(fn: Callable[[float], float], ll_max: float, at: float, factor: float) -> float | None:
    """Where the profile log-likelihood ``fn`` falls χ²₁(0.95)/2 below ``ll_max``, moving from ``at`` by ``factor``.

    Searched on a geometric ladder up to factor¹⁶ away, then solved with brentq; None if never crossed.
    """
    def excess(x: float) -> float:
        return CHI2_1_95 / 2 - (ll_max - fn(x))

    inner = at
    if not excess(inner) > 0:  # ``at`` is not the maximum (a degenerate sample): no interval
        return None
    for _ in range(16):
        outer = inner * factor
        if not np.isfinite(outer) or outer <= 0:
            return None
        if excess(outer) < 0:
            return float(optimize.brentq(excess, min(inner, outer), max(inner, outer), xtol=1e-12, rtol=1e-10))
        inner = outer
    return None


def _tight_fmin(func: Callable[..., float], x0: np.ndarray, args: tuple = (), disp: int = 0) -> np.ndarray:
    # scipy's default fmin tolerances (1e-4) leave the fitted shape uncertain in the 4th digit
    return optimize.fmin(func, x0, args=args, disp=disp, xtol=1e-10, ftol=1e-12, maxiter=20_000, maxfun=40_000)


def fit_weibull(sample: LifetimeSample) -> HazardFit:
    """Censored MLE of a Weibull lifetime with scipy (``CensoredData``, location fixed at 0), in hours.

    95 % intervals for shape and scale are profile-likelihood intervals: the values whose maximised
    log-likelihood lies within χ²₁(0.95)/2 of the maximum (Meeker & Escobar, *Statistical Methods
    for Reliability Data*, 1998, ch. 8: preferred to Wald intervals for censored samples because
    they follow the likelihood's skew and do not depend on the parametrisation).
    """
    _need_events(sample, "Weibull")
    t = np.maximum(sample.hours, 1e-9)
    s = LifetimeSample(t, sample.observed)
    data = stats.CensoredData(uncensored=t[s.observed], right=t[~s.observed])
    # near-degenerate samples (every event at GCP's 24 h cap) push the shape to thousands, where
    # scipy's intermediate powers overflow harmlessly on the way to the maximum
    with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return _weibull_fit(s, data, sample.exposure_hours)


def _weibull_fit(s: LifetimeSample, data: stats.CensoredData, exposure_hours: float) -> HazardFit:
    shape, _, scale = stats.weibull_min.fit(data, floc=0, optimizer=_tight_fmin)
    if not (np.isfinite(shape) and shape < MAX_SHAPE and np.isfinite(scale)):
        raise HsisimInputError("no finite Weibull maximum: the preemption times barely spread (the shape runs "
                               "to infinity); fit an exponential, or gather more lifetimes")
    # the profile's own maximum where it beats the optimiser's end point by rounding
    ll = max(weibull_log_likelihood(s, shape, scale), _profile_shape_ll(s, shape))
    shape_ci = (_crossing(lambda k: _profile_shape_ll(s, k), ll, shape, 0.5),
                _crossing(lambda k: _profile_shape_ll(s, k), ll, shape, 2.0))
    scale_ci = (_crossing(lambda c: _profile_scale_ll(s, c, shape), ll, scale, 0.5),
                _crossing(lambda c: _profile_scale_ll(s, c, shape), ll, scale, 2.0))
    return HazardFit("weibull", None, None, float(shape), float(scale), shape_ci, ll, len(s.hours), s.events,
                     scale_ci95=scale_ci, exposure_hours=exposure_hours)


@dataclass(frozen=True)
class LikelihoodRatio:
    """Exponential (Weibull with shape 1) against Weibull: statistic 2(ll_w − ll_e) and its χ²₁ p-value."""

    statistic: float
    p_value: float


def likelihood_ratio(exponential: HazardFit, weibull: HazardFit) -> LikelihoodRatio:
    """The likelihood-ratio test of a constant hazard inside the Weibull family (1 degree of freedom).

    Shape 1 is inside the Weibull parameter space, so Wilks' χ²₁ reference applies.
    """
    stat = max(2 * (weibull.log_likelihood - exponential.log_likelihood), 0.0)
    return LikelihoodRatio(stat, float(stats.chi2.sf(stat, 1)))


FITTERS: dict[str, Callable[[LifetimeSample], HazardFit]] = {"exponential": fit_exponential, "weibull": fit_weibull}
