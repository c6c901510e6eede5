"""The statistics every summary uses: one confidence-interval rule for means, one for proportions.

Means: the Student-t interval of the sample mean (exact for normal data, and what the replica
means of a Monte Carlo converge to). Proportions: the Wilson score interval, from scipy.
Non-finite values (a replica that never finished has no cost per useful GPU-hour) are left out
of means and percentiles.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

LEVEL = 0.95


def halfwidth(x: np.ndarray, level: float = LEVEL) -> float:
    """Half-width of the Student-t confidence interval of the mean of ``x`` (0 for fewer than 2 values)."""
    n = len(x)
    if n < 2:
        return 0.0
    return float(stats.t.ppf(0.5 + level / 2, n - 1) * x.std(ddof=1) / math.sqrt(n))


def relative_halfwidth(x: np.ndarray) -> float:
    """The half-width of the 95 % interval of the mean of the finite values, as a fraction of the mean."""
    finite = x[np.isfinite(x)]
    if len(finite) < 2:
        return math.inf
    mean = float(finite.mean())
    half = halfwidth(finite)
    return 0.0 if half == 0 else (half / abs(mean) if mean != 0 else math.inf)


def describe(x: np.ndarray) -> dict[str, Any]:
    """mean, std, percentiles and the 95 % confidence interval of the mean, over the finite values."""
    finite = x[np.isfinite(x)]
    if len(finite) == 0:
        nan = float("nan")
        return {"mean": nan, "std": nan, "p5": nan, "p50": nan, "p90": nan, "p95": nan, "p99": nan, "ci95": [nan, nan]}
    mean = float(finite.mean())
    std = float(finite.std(ddof=1)) if len(finite) > 1 else 0.0
    half = halfwidth(finite)
    p = np.percentile(finite, [5, 50, 90, 95, 99])
    return {"mean": mean, "std": std, "p5": float(p[0]), "p50": float(p[1]), "p90": float(p[2]),
            "p95": float(p[3]), "p99": float(p[4]), "ci95": [mean - half, mean + half]}


def proportion(ok: np.ndarray) -> tuple[float, list[float]]:
    """The fraction of True in ``ok`` and its 95 % Wilson score interval."""
    k, n = int(ok.sum()), len(ok)
    if n == 0:
        return math.nan, [0.0, 1.0]
    return k / n, list(wilson(k, n))


def wilson(k: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion, ``k`` of ``n`` independent trials (``n`` > 0)."""
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=LEVEL, method="wilson")
    return float(ci.low), float(ci.high)
