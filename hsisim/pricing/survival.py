"""The Kaplan–Meier estimate of a censored lifetime sample, its Greenwood variance, and KS distances.

The non-parametric reference the fitted laws are compared with: S(t) = Π_{t_j ≤ t} (1 − d_j/n_j)
over the distinct preemption times t_j, with d_j preemptions among the n_j lifetimes still at risk
(a lifetime censored at t_j counts as at risk at t_j: it was seen alive then). Greenwood's formula
gives its variance, Var S(t) = S(t)² Σ_{t_j ≤ t} d_j / (n_j (n_j − d_j)) (Kaplan & Meier, JASA 53,
1958; Greenwood, 1926).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hsisim.distributions import Discrete


@dataclass(frozen=True)
class KaplanMeier:
    """S just after each distinct preemption time (same unit as the sample), with Greenwood variance."""

    times: np.ndarray  # distinct preemption times, ascending
    at_risk: np.ndarray  # n_j
    events: np.ndarray  # d_j
    survival: np.ndarray  # S(t_j)
    variance: np.ndarray  # Greenwood's Var S(t_j)
    last_seen: float  # the longest lifetime observed (preempted or censored): the estimate's horizon

    def sf(self, t: Any) -> np.ndarray:
        """S(t): the estimate at ``t`` (right-continuous; beyond ``last_seen`` it is undefined, held flat)."""
        i = np.searchsorted(self.times, np.asarray(t, dtype=float), side="right")
        return np.concatenate(([1.0], self.survival))[i]

    def law(self, unit_s: float = 3600.0) -> Discrete:
        """The estimate as a law in seconds (the sample's unit × ``unit_s``).

        The mass the estimate leaves beyond its last preemption (when the longest lifetimes were
        censored) is put at the longest observed lifetime, as if it ended there: Efron's (1967)
        completion, which keeps the law proper and its mean finite (and low rather than invented).
        """
        s_prev = np.concatenate(([1.0], self.survival[:-1]))
        values = list(self.times * unit_s)
        probs = list(s_prev - self.survival)
        tail = float(self.survival[-1]) if len(self.survival) else 1.0
        if tail > 0:
            if values and self.last_seen * unit_s <= values[-1]:
                probs[-1] += tail
            else:
                values.append(self.last_seen * unit_s)
                probs.append(tail)
        total = float(sum(probs))
        return Discrete(tuple(float(v) for v in values), tuple(float(p) / total for p in probs))


def kaplan_meier(times: np.ndarray, observed: np.ndarray) -> KaplanMeier:
    """The Kaplan–Meier estimate of lifetimes ``times`` with event flags ``observed`` (False: censored)."""
    t = np.asarray(times, dtype=float)
    obs = np.asarray(observed, dtype=bool)
    order = np.sort(t)
    distinct = np.unique(t[obs])
    at_risk = (len(t) - np.searchsorted(order, distinct, side="left")).astype(float)
    events = np.array([np.count_nonzero(t[obs] == x) for x in distinct], dtype=float)
    surv = np.cumprod(1.0 - events / at_risk)
    with np.errstate(divide="ignore", invalid="ignore"):  # n_j = d_j: S falls to 0 and so does its variance
        terms = np.where(at_risk > events, events / (at_risk * (at_risk - events)), np.inf)
        var = np.where(surv > 0, surv**2 * np.cumsum(terms), 0.0)
    return KaplanMeier(distinct, at_risk, events, surv, var, float(t.max()) if len(t) else 0.0)


def ks_distance(km: KaplanMeier, sf: Callable[[np.ndarray], np.ndarray]) -> float:
    """sup_t |F(t) − F_KM(t)| over the observed range [0, last_seen), for a law with survival ``sf``.

    F_KM is a step function, so the supremum sits at a jump: each preemption time and just before
    it, and the end of the range (approached from below: a capped sample ends at the cap, where
    the law's own jump to 1 is what the coarsened sample cannot see).
    """
    if len(km.times) == 0:
        return math.nan
    eps = 1e-9 * max(km.last_seen, 1.0)
    before = np.concatenate(([1.0], km.survival[:-1]))
    at = np.abs(sf(km.times) - km.survival)
    left = np.abs(sf(np.maximum(km.times - eps, 0.0)) - before)
    end_t = max(km.last_seen - eps, 0.0)
    end = abs(float(sf(np.array([end_t]))[0]) - float(km.sf(end_t)))
    return float(max(at.max(), left.max(), end))
