"""Per-group censored fits of observed spot lifetimes, as a report and a pasteable ``spot.hazard`` block."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from hsisim.errors import HsisimInputError
from hsisim.pricing import hazard as hz
from hsisim.pricing import laws

FITS = ("exponential", "weibull", "bathtub", "both", "all")
ALPHA = 0.05  # the likelihood-ratio test level that prefers the Weibull


def _num(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or not math.isfinite(x) else float(f"{x:.{digits}g}")


def _pair(ci: tuple[float | None, float | None] | None) -> list[float | None] | None:
    return None if ci is None else [_num(v) for v in ci]


def _fit_json(fit: laws.LawFit) -> dict[str, Any]:
    out: dict[str, Any] = {"log_likelihood": _num(fit.log_likelihood, 10), "aic": _num(fit.aic, 10),
                           "mean_hours": _num(_mean_hours(fit)), "ks_distance": _num(fit.ks, 4)}
    hf, p = fit.hazard_fit, fit.params
    if fit.family == "exponential" and hf is not None:
        return {"rate_per_hour": _num(hf.rate_per_hour), "rate_ci95": _pair(hf.rate_ci95)} | out
    if fit.family == "weibull" and hf is not None:
        return {"shape": _num(hf.shape), "shape_ci95": _pair(hf.shape_ci95), "scale_hours": _num(hf.scale_hours),
                "scale_hours_ci95": _pair(hf.scale_ci95)} | out
    return {k: _num(v) for k, v in p.items()} | out


def _mean_hours(fit: laws.LawFit) -> float | None:
    try:
        return fit.mean_hours
    except (HsisimInputError, ValueError):
        return None


def _plain(x: float | None) -> str:
    # positional, 4 significant digits: YAML 1.1 reads "2e-05" (no dot) as a string, not a number
    return str(np.format_float_positional(float(x or 0.0), precision=4, unique=False, fractional=False, trim="-"))


def hazard_block(fit: hz.HazardFit | laws.LawFit) -> str:
    """The scenario's ``spot.hazard`` for ``fit``, as one line of YAML flow (4 significant digits)."""
    if isinstance(fit, laws.LawFit) and fit.family == "bathtub":
        p = fit.params
        return (f"{{dist: bathtub, a: {_plain(p['a'])}, tau1: {_plain(p['tau1_hours'])} h, "
                f"tau2: {_plain(p['tau2_hours'])} h, b: {_plain(p['b_hours'])} h}}")
    hf = fit.hazard_fit if isinstance(fit, laws.LawFit) else fit
    assert hf is not None
    if hf.family == "exponential":
        return f"{{dist: exponential, rate_per_hour: {_plain(hf.rate_per_hour)}}}"
    return f"{{dist: weibull, shape: {_plain(hf.shape)}, scale: {_plain(hf.scale_hours)} h}}"


def _families(fit: str) -> tuple[str, ...]:
    return {"both": ("exponential", "weibull"), "all": laws.FAMILIES}.get(fit, (fit,))


def group_report(sample: hz.LifetimeSample, *, fit: str = "both", max_lifetime_hours: float | None = None
                 ) -> dict[str, Any]:
    """Fits of one group: n, events, exposure (h), the chosen fits, the LR test, the comparison, the preferred block.

    Every family is fitted by censored maximum likelihood (capped at ``max_lifetime_hours`` when
    given: see ``laws``) and compared by AIC and by the KS distance to the Kaplan–Meier estimate.
    With ``both`` and no cap, the Weibull is preferred when the likelihood-ratio test rejects a
    constant hazard at 5 %; otherwise the lowest AIC is. A group without preemptions gets no fit,
    only the one-sided 95 % upper bound of its rate.
    """
    out: dict[str, Any] = {"n": len(sample.hours), "events": sample.events,
                           "exposure_hours": _num(sample.exposure_hours), "exponential": None, "weibull": None,
                           "likelihood_ratio": None, "preferred": None, "spot_hazard": None, "note": None}
    if fit in ("bathtub", "all"):
        out["bathtub"] = None
    if max_lifetime_hours is not None:
        out["max_lifetime_hours"] = max_lifetime_hours
        out["spot_max_lifetime"] = f"{_plain(max_lifetime_hours)} h"
    if sample.events == 0:
        bound = hz.rate_upper_bound_95(sample.exposure_hours) if sample.exposure_hours > 0 else math.inf
        out["rate_upper_95_per_hour"] = _num(bound)
        out["note"] = (f"no preemptions in {sample.exposure_hours:.4g} h: no rate can be fitted; the one-sided "
                       f"95 % upper bound is −ln(0.05)/exposure = {bound:.4g}/h")
        return out
    cmp = laws.compare_laws(sample, _families(fit), cap_hours=max_lifetime_hours)
    out["note"] = "; ".join(cmp.notes) or None
    if not cmp.fits:
        return out
    fits = {f.family: f for f in cmp.fits}
    for name, f in fits.items():
        out[name] = _fit_json(f)
    best = cmp.fits[0]
    out["comparison"] = [{"family": f.family, "parameters": f.parameters, "log_likelihood": _num(f.log_likelihood, 10),
                          "aic": _num(f.aic, 10), "delta_aic": _num(f.aic - best.aic, 6), "ks_distance": _num(f.ks, 4)}
                         for f in cmp.fits]
    preferred = best
    if set(fits) == {"exponential", "weibull"} and max_lifetime_hours is None:
        e, w = fits["exponential"].hazard_fit, fits["weibull"].hazard_fit
        assert e is not None and w is not None
        lr = hz.likelihood_ratio(e, w)
        out["likelihood_ratio"] = {"statistic": _num(lr.statistic), "p_value": _num(lr.p_value, 4), "df": 1}
        preferred = fits["weibull"] if lr.p_value < ALPHA else fits["exponential"]
    out["preferred"] = preferred.family
    out["spot_hazard"] = hazard_block(preferred)
    return out


def fit_hazards(*, path: str | Path, group_by: str | None = None, fit: str = "both",
                max_lifetime_hours: float | None = None) -> dict[str, Any]:
    """Censored ML fits of the lifetimes CSV at ``path``, per value of column ``group_by`` (or all rows).

    ``fit`` is a family (``exponential``, ``weibull``, ``bathtub``), ``both`` (the first two) or
    ``all``; ``max_lifetime_hours`` caps every law there (a provider's maximum lifetime).

    Lifetimes are in hours; ``status`` ``preempted`` is an event and every other status (the real
    files use ``censored_alive_at_end`` and ``stopped``) is right-censored; the report lists the
    censored statuses it met. Returns a JSON-ready dict with ``groups``, one entry per group.
    """
    if fit not in FITS:
        raise HsisimInputError(f"expected one of {', '.join(FITS)}, got {fit!r}", key="fit")
    if max_lifetime_hours is not None and not (math.isfinite(max_lifetime_hours) and max_lifetime_hours > 0):
        raise HsisimInputError(f"{{max_lifetime_hours}} must be a positive number of hours, got {max_lifetime_hours}")
    rows = list(hz.lifetime_rows(path, key="path"))
    if group_by is not None and rows and group_by not in rows[0]:
        raise HsisimInputError(f"no column {group_by!r} in {path}; columns: {', '.join(rows[0])}", key="group_by")
    groups: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault((r[group_by] or "") if group_by else "all", []).append(r)
    if not groups:
        raise HsisimInputError(f"{path} has no lifetimes", key="path")
    statuses = [(r["status"] or "").strip() for r in rows]
    censored = Counter(st for st in statuses if st.lower() != hz.EVENT_STATUS)
    return {"file": str(path), "group_by": group_by, "fit": fit, "max_lifetime_hours": max_lifetime_hours,
            "censored_statuses": dict(censored),
            "groups": [{"group": g} | group_report(hz.sample_of(rs, source=f"{path} ({g})", key="path"), fit=fit,
                                                   max_lifetime_hours=max_lifetime_hours)
                       for g, rs in sorted(groups.items())]}
