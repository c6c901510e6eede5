"""Lifetime laws fitted to censored samples and compared: log-likelihood, AIC, KS distance to Kaplan–Meier.

Families: ``exponential`` (1 parameter), ``weibull`` (2) and ``bathtub`` (4: the GCP preemptible law
of Kadupitiya, Jadhao & Sharma, HPDC 2020, see ``hsisim.distributions.Bathtub``), each by censored
maximum likelihood (Σ log f over preemptions + Σ log S over censored lifetimes), in hours.

A known maximum lifetime (GCP preemptible VMs: 24 h, from the provider's documentation, so not a
fitted parameter) makes every law *capped*: min(X, cap). Its likelihood has a density below the
cap and the probability S(cap) of reaching it, so every lifetime at or beyond the cap (preempted
there, or seen alive there) contributes log S(cap): the sample is coarsened at the cap, and every
family is fitted and compared on that same coarsened sample, which keeps their likelihoods
comparable. The Kaplan–Meier estimate (``survival``) is the non-parametric reference: the KS
distance sup |F − F_KM| says how far each law is from it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize

from hsisim.distributions import (
    MAX_MASS_AT_ZERO,
    Bathtub,
    Exponential,
    Law,
    Weibull,
    bathtub_cdf,
    bathtub_end,
    bathtub_logpdf,
    capped,
)
from hsisim.errors import HsisimInputError
from hsisim.pricing import hazard as hz
from hsisim.pricing.survival import kaplan_meier, ks_distance

FAMILIES = ("exponential", "weibull", "bathtub")
PARAMETERS = {"exponential": 1, "weibull": 2, "bathtub": 4}


@dataclass(frozen=True)
class LawFit:
    """A fitted family: parameters (durations in hours), maximised log-likelihood, AIC, KS distance to KM."""

    family: str
    params: dict[str, float]
    log_likelihood: float
    n: int
    events: int
    ks: float
    cap_hours: float | None = None
    hazard_fit: hz.HazardFit | None = field(default=None, compare=False)  # exponential/Weibull: with intervals

    @property
    def parameters(self) -> int:
        return PARAMETERS[self.family]

    @property
    def aic(self) -> float:
        """2k − 2·log-likelihood (lower is better); the cap is known, not fitted, so it adds no k."""
        return 2 * self.parameters - 2 * self.log_likelihood

    def law(self) -> Law:
        """The fitted law in seconds (capped when the fit was)."""
        body = body_law(self.family, self.params)
        return capped(body, self.cap_hours * 3600.0) if self.cap_hours is not None else body

    @property
    def mean_hours(self) -> float:
        return self.law().mean / 3600.0


def body_law(family: str, p: dict[str, float]) -> Law:
    """The registry distribution (seconds) of ``family`` with parameters ``p`` (hours)."""
    if family == "exponential":
        return Exponential(dist="exponential", rate_per_hour=p["rate_per_hour"])
    if family == "weibull":
        return Weibull(dist="weibull", shape=p["shape"], scale=p["scale_hours"] * 3600.0)
    return Bathtub(dist="bathtub", a=p["a"], tau1=p["tau1_hours"] * 3600, tau2=p["tau2_hours"] * 3600,
                   b=p["b_hours"] * 3600)


def coarsened(sample: hz.LifetimeSample, cap_hours: float | None) -> hz.LifetimeSample:
    """The sample as a capped law sees it: every lifetime at or beyond the cap becomes 'reached the cap'
    (censored there: the likelihood of reaching it is S(cap), the same whether it then died or not)."""
    if cap_hours is None:
        return sample
    reach = sample.hours >= cap_hours
    return hz.LifetimeSample(np.minimum(sample.hours, cap_hours), sample.observed & ~reach)


def _sf_hours(family: str, p: dict[str, float], cap: float | None) -> Callable[[np.ndarray], np.ndarray]:
    """S(t) of a fitted family, t in hours (plain arithmetic: no law object, which may refuse odd parameters)."""
    def body(t: np.ndarray) -> np.ndarray:
        if family == "exponential":
            return np.exp(-p["rate_per_hour"] * t)
        if family == "weibull":
            return np.exp(-((t / p["scale_hours"]) ** p["shape"]))
        return 1.0 - bathtub_cdf(t, p["a"], p["tau1_hours"], p["tau2_hours"], p["b_hours"])

    if cap is None:
        return lambda t: body(np.asarray(t, dtype=float))
    return lambda t: np.where(np.asarray(t) < cap, body(np.asarray(t, dtype=float)), 0.0)


def fit_law(sample: hz.LifetimeSample, family: str, *, cap_hours: float | None = None) -> LawFit:
    """The censored ML fit of ``family`` to ``sample`` (hours), capped at ``cap_hours`` when given.

    Raises ``HsisimInputError`` when the family has no maximum on this sample.
    """
    if family not in FAMILIES:
        raise HsisimInputError(f"unknown lifetime family {family!r}; known: {', '.join(FAMILIES)}", key="fit")
    s = coarsened(sample, cap_hours)
    hf: hz.HazardFit | None = None
    if family == "exponential":
        hf = hz.fit_exponential(s)
        assert hf.rate_per_hour is not None
        params, ll = {"rate_per_hour": hf.rate_per_hour}, hf.log_likelihood
    elif family == "weibull":
        hf = hz.fit_weibull(s)
        assert hf.shape is not None and hf.scale_hours is not None
        params, ll = {"shape": hf.shape, "scale_hours": hf.scale_hours}, hf.log_likelihood
    else:
        params, ll = fit_bathtub(s)
    km = kaplan_meier(s.hours, s.observed)
    ks = ks_distance(km, _sf_hours(family, params, cap_hours))
    return LawFit(family, params, ll, len(s.hours), s.events, ks, cap_hours, hf)


# -- the bathtub law ---------------------------------------------------------------------------------


def bathtub_log_likelihood(sample: hz.LifetimeSample, a: float, tau1: float, tau2: float, b: float) -> float:
    """Σ log f over preemptions + Σ log S over censored lifetimes (hours); −inf where a lifetime passes the end."""
    try:
        end = bathtub_end(a, tau1, tau2, b)
    except (ValueError, OverflowError):  # F(0) ≥ 1: not a law
        return -math.inf
    t, obs = sample.hours, sample.observed
    if t.size and t.max() >= end:
        return -math.inf
    with np.errstate(over="ignore", divide="ignore"):
        f = bathtub_logpdf(t[obs], a, tau1, tau2, b, end)
        tc = t[~obs]
        surv = 1.0 - a * (-np.expm1(-tc / tau1) + np.exp((tc - b) / tau2))
        ll = float(f.sum() + np.log(np.maximum(surv, 0.0)).sum())
    return ll if math.isfinite(ll) else -math.inf


def _unpack(x: np.ndarray) -> tuple[float, float, float, float]:
    """Unconstrained → (a in (0, 1), τ1 > 0, τ2 > 0, b > 0); clipped where exp would overflow."""
    u = np.clip(x, -50.0, 50.0)
    return float(1 / (1 + math.exp(-u[0]))), math.exp(u[1]), math.exp(u[2]), math.exp(u[3])


def _starts(sample: hz.LifetimeSample) -> list[np.ndarray]:
    """Starting points whose end lies just past the longest lifetime (so every start has a finite likelihood)."""
    end = float(sample.hours.max()) * 1.001 + 1e-3
    out = []
    for a in (0.3, 0.5, 0.7):
        for tau1 in (0.5, 3.0):
            for tau2 in (0.1, 1.0):
                b = end - tau2 * math.log(1 / a - 1 + math.exp(-end / tau1))
                if b > 0:
                    out.append(np.array([math.log(a / (1 - a)), math.log(tau1), math.log(tau2), math.log(b)]))
    return out


def fit_bathtub(sample: hz.LifetimeSample) -> tuple[dict[str, float], float]:
    """Censored ML fit of the bathtub law (Nelder–Mead from a grid of starts, then polished): (params, ll)."""
    hz._need_events(sample, "bathtub")
    if sample.events < 4:
        raise HsisimInputError(f"{sample.events} preemptions cannot fit the bathtub law's 4 parameters")

    def nll(x: np.ndarray) -> float:
        ll = bathtub_log_likelihood(sample, *_unpack(x))
        return -ll if math.isfinite(ll) else 1e300

    opts: dict[str, Any] = {"xatol": 1e-9, "fatol": 1e-10, "maxiter": 40_000, "maxfev": 40_000}
    with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        runs = [optimize.minimize(nll, x0, method="Nelder-Mead", options={**opts, "maxiter": 4000}) for x0 in
                _starts(sample)]
        best = min(runs, key=lambda r: r.fun)
        for _ in range(4):  # restarting Nelder–Mead from its end rebuilds a simplex that had collapsed
            again = optimize.minimize(nll, best.x, method="Nelder-Mead", options=opts)
            done = again.fun > best.fun - 1e-7
            best = again if again.fun < best.fun else best
            if done:
                break
    if not best.fun < 1e299:
        raise HsisimInputError("no bathtub maximum: no start gave a finite likelihood")
    a, tau1, tau2, b = _unpack(best.x)
    if a * math.exp(-b / tau2) >= MAX_MASS_AT_ZERO:
        raise HsisimInputError(f"the bathtub maximum puts {a * math.exp(-b / tau2):.2g} of the lifetimes at 0 h "
                               "(no late surge in this sample): not a lifetime law here")
    return {"a": a, "tau1_hours": tau1, "tau2_hours": tau2, "b_hours": b}, -float(best.fun)


# -- comparison ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """Every family that could be fitted, best AIC first, and the notes of those that could not."""

    fits: list[LawFit]
    notes: list[str]
    cap_hours: float | None

    @property
    def best(self) -> LawFit | None:
        return self.fits[0] if self.fits else None


def compare_laws(sample: hz.LifetimeSample, families: tuple[str, ...] = FAMILIES, *,
                 cap_hours: float | None = None) -> Comparison:
    """Fit each family to ``sample`` (capped at ``cap_hours`` when given) and rank them by AIC."""
    fits, notes = [], []
    for fam in families:
        try:
            fits.append(fit_law(sample, fam, cap_hours=cap_hours))
        except HsisimInputError as exc:  # a family without a maximum here: say so, keep the others
            notes.append(f"{fam}: {exc.message}")
    return Comparison(sorted(fits, key=lambda f: f.aic), notes, cap_hours)
