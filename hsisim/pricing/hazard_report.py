"""Per-group censored fits of observed spot lifetimes, as a report and a pasteable ``spot.hazard`` block."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from hsisim.errors import HsisimInputError
from hsisim.pricing import hazard as hz

FITS = ("exponential", "weibull", "both")
ALPHA = 0.05  # the likelihood-ratio test level that prefers the Weibull


def _num(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or not math.isfinite(x) else float(f"{x:.{digits}g}")


def _pair(ci: tuple[float | None, float | None] | None) -> list[float | None] | None:
    return None if ci is None else [_num(v) for v in ci]


def _fit_json(fit: hz.HazardFit) -> dict[str, Any]:
    out: dict[str, Any] = {"log_likelihood": _num(fit.log_likelihood, 10), "aic": _num(fit.aic, 10),
                           "mean_hours": _num(fit.mean_hours)}
    if fit.family == "exponential":
        return {"rate_per_hour": _num(fit.rate_per_hour), "rate_ci95": _pair(fit.rate_ci95)} | out
    return {"shape": _num(fit.shape), "shape_ci95": _pair(fit.shape_ci95), "scale_hours": _num(fit.scale_hours),
            "scale_hours_ci95": _pair(fit.scale_ci95)} | out


def _plain(x: float | None) -> str:
    # positional, 4 significant digits: YAML 1.1 reads "2e-05" (no dot) as a string, not a number
    return str(np.format_float_positional(float(x or 0.0), precision=4, unique=False, fractional=False, trim="-"))


def hazard_block(fit: hz.HazardFit) -> str:
    """The scenario's ``spot.hazard`` for ``fit``, as one line of YAML flow (4 significant digits)."""
    if fit.family == "exponential":
        return f"{{dist: exponential, rate_per_hour: {_plain(fit.rate_per_hour)}}}"
    return f"{{dist: weibull, shape: {_plain(fit.shape)}, scale: {_plain(fit.scale_hours)} h}}"


def group_report(sample: hz.LifetimeSample, *, fit: str = "both") -> dict[str, Any]:
    """Fits of one group: n, events, exposure (h), the chosen fits, the LR test, the preferred block.

    With ``both``, the Weibull is preferred when the likelihood-ratio test rejects a constant hazard
    at 5 %. A group without preemptions gets no fit, only the one-sided 95 % upper bound of its rate.
    """
    out: dict[str, Any] = {"n": len(sample.hours), "events": sample.events,
                           "exposure_hours": _num(sample.exposure_hours), "exponential": None, "weibull": None,
                           "likelihood_ratio": None, "preferred": None, "spot_hazard": None, "note": None}
    if sample.events == 0:
        bound = hz.rate_upper_bound_95(sample.exposure_hours) if sample.exposure_hours > 0 else math.inf
        out["rate_upper_95_per_hour"] = _num(bound)
        out["note"] = (f"no preemptions in {sample.exposure_hours:.4g} h: no rate can be fitted; the one-sided "
                       f"95 % upper bound is −ln(0.05)/exposure = {bound:.4g}/h")
        return out
    fits, notes = {}, []
    for name in ("exponential", "weibull") if fit == "both" else (fit,):
        try:
            fits[name] = hz.FITTERS[name](sample)
        except HsisimInputError as exc:  # a family without a maximum here: say so, keep the others
            notes.append(f"{name}: {exc.message}")
    if not fits:
        out["note"] = "; ".join(notes)
        return out
    for name, f in fits.items():
        out[name] = _fit_json(f)
    out["note"] = "; ".join(notes) or None
    preferred = next(iter(fits.values()))
    if len(fits) == 2:
        lr = hz.likelihood_ratio(fits["exponential"], fits["weibull"])
        out["likelihood_ratio"] = {"statistic": _num(lr.statistic), "p_value": _num(lr.p_value, 4), "df": 1}
        preferred = fits["weibull"] if lr.p_value < ALPHA else fits["exponential"]
    out["preferred"] = preferred.family
    out["spot_hazard"] = hazard_block(preferred)
    return out


def fit_hazards(*, path: str | Path, group_by: str | None = None, fit: str = "both") -> dict[str, Any]:
    """Censored ML fits of the lifetimes CSV at ``path``, per value of column ``group_by`` (or all rows).

    Lifetimes are in hours; ``status`` ``preempted`` is an event and every other status (the real
    files use ``censored_alive_at_end`` and ``stopped``) is right-censored; the report lists the
    censored statuses it met. Returns a JSON-ready dict with ``groups``, one entry per group.
    """
    if fit not in FITS:
        raise HsisimInputError(f"expected one of {', '.join(FITS)}, got {fit!r}", key="fit")
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
    return {"file": str(path), "group_by": group_by, "fit": fit, "censored_statuses": dict(censored),
            "groups": [{"group": g} | group_report(hz.sample_of(rs, source=f"{path} ({g})", key="path"), fit=fit)
                       for g, rs in sorted(groups.items())]}
