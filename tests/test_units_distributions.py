"""Units parsing and the distribution registry: declared moments against samples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from hsisim import distributions, units
from hsisim.distributions import Distribution


@pytest.mark.parametrize(("text", "kind", "si"), [
    ("2 min", "duration", 120.0),
    ("48 h", "duration", 172800.0),
    ("100 ms", "duration", 0.1),
    ("24 GiB", "size", 24 * 2**30),
    ("200 MB", "size", 200e6),
    ("25 Gbit/s", "bandwidth", 25e9 / 8),
    ("600 GB/s", "bandwidth", 600e9),
    ("1.62 USD/h", "price", 1.62),
    (3, "duration", 3.0),
    ("3", "size", 3.0),
])
def test_units_parse_to_si(text: object, kind: str, si: float) -> None:
    assert units.parse_quantity(text, kind) == pytest.approx(si)


@pytest.mark.parametrize(("text", "kind"), [
    ("2 min", "size"), ("24 GiB", "duration"), ("fast", "duration"), ("-3 s", "duration"), (-1, "size"),
    (True, "duration"), ([1], "duration"), ("nan", "duration"), ("5 kg", "bandwidth"),
])
def test_units_reject_bad_input(text: object, kind: str) -> None:
    with pytest.raises(ValueError):
        units.parse_quantity(text, kind)


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False), st.sampled_from(["s", "min", "h", "ms"]))
def test_duration_round_trip(value: float, unit: str) -> None:
    factor = {"s": 1, "min": 60, "h": 3600, "ms": 1e-3}[unit]
    assert units.duration(f"{value!r} {unit}") == pytest.approx(value * factor, rel=1e-12)


@given(st.floats(max_value=-1e-12, min_value=-1e12))
def test_negative_durations_always_rejected(value: float) -> None:
    with pytest.raises(ValueError, match="negative"):
        units.duration(f"{value!r} s")


DIST = TypeAdapter(Distribution)

CASES = [
    {"dist": "constant", "value": "3 min"},
    {"dist": "exponential", "mean": "5 min"},
    {"dist": "exponential", "rate_per_hour": 0.02},
    {"dist": "lognormal", "median": "5 min", "sigma": 0.8},
    {"dist": "weibull", "shape": 0.8, "scale": "30 h"},
    {"dist": "weibull", "shape": 2.5, "scale": 100},
    {"dist": "gamma", "shape": 2.0, "scale": "10 s"},
    {"dist": "empirical", "values": [1, 2, "3 s", 10]},
]


@pytest.mark.parametrize("spec", CASES, ids=lambda s: s["dist"])
def test_sample_mean_matches_declared_mean(spec: dict[str, object]) -> None:
    d = DIST.validate_python(spec)
    n = 200_000
    x = d.sample(np.random.default_rng(1234), n)
    assert x.shape == (n,)
    if d.variance == 0:
        assert np.all(x == d.mean)
        return
    # 99.9 % two-sided band from the declared variance: a correct implementation fails 1 in 1000
    half = 3.29 * math.sqrt(d.variance / n)
    assert abs(x.mean() - d.mean) <= half
    # the sample variance agrees too (loose: heavy tails make its own CI wide)
    assert x.var() == pytest.approx(d.variance, rel=0.1)


def test_exponential_rate_and_mean_are_the_same_thing() -> None:
    a = DIST.validate_python({"dist": "exponential", "rate_per_hour": 0.02})
    b = DIST.validate_python({"dist": "exponential", "mean": "50 h"})
    assert a.mean == pytest.approx(b.mean) == 50 * 3600


@pytest.mark.parametrize("spec", [
    {"dist": "exponential"},
    {"dist": "exponential", "mean": 3, "rate_per_hour": 1},
    {"dist": "exponential", "rate_per_hour": 0},
    {"dist": "lognormal", "median": "5 min", "sigma": -1},
    {"dist": "weibull", "shape": 0, "scale": 1},
    {"dist": "empirical", "values": []},
    {"dist": "poisson", "mean": 1},
    {"dist": "gamma", "shape": 1, "scale": 1, "extra": 2},
])
def test_bad_distribution_specs_are_rejected(spec: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        DIST.validate_python(spec)


@pytest.mark.parametrize("cv", [0.02, 0.1, 0.3, 0.7, 1.0, 1.5])
def test_gamma_cv_from_mean_difference_inverts_a_sample(cv: float) -> None:
    """Draw pairs from a gamma with this cv; the inversion of their mean |X1 - X2| gives the cv back."""
    rng = np.random.default_rng(int(cv * 1000))
    n = 400_000
    x = rng.gamma(1 / cv**2, cv**2, (2, n))  # mean 1
    diff = np.abs(x[0] - x[1])
    ratio = float(diff.mean())
    # the ratio's s.e. is sd(diff)/sqrt(n); the cv moves with it by 1/(d ratio / d cv) < 1/0.5 here
    tol = 4 * float(diff.std()) / math.sqrt(n) * 2
    assert distributions.gamma_cv_for_mean_difference(ratio) == pytest.approx(cv, abs=tol)


def test_gamma_cv_from_mean_difference_exact_points() -> None:
    f = distributions.gamma_cv_for_mean_difference
    assert f(0.0) == 0.0
    assert f(1.0) == pytest.approx(1.0, abs=1e-9)  # the exponential: E|X1 - X2| = E[X]
    assert f(2 * 0.05 / math.sqrt(math.pi)) == pytest.approx(0.05, rel=2e-3)  # near the normal's 2σ/√π
    assert f(1e-6) == pytest.approx(1e-6 * math.sqrt(math.pi) / 2)  # the normal limit itself
    assert f(1.99) == distributions.GAMMA_CV_MAX  # beyond the cap
    for bad in (-0.1, math.nan, math.inf):
        with pytest.raises(ValueError, match="mean absolute difference"):
            f(bad)
