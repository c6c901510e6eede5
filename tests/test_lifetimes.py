"""Capped, bathtub and Kaplan–Meier lifetime laws, and their censored fits to the real GCP preemptible sample."""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest
from conftest import ROOT, SHARED_DATA
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from scipy import integrate

from hsisim.cli import app
from hsisim.distributions import Bathtub, Capped, Discrete, Exponential, Weibull, capped
from hsisim.pricing import hazard as hz
from hsisim.pricing import laws
from hsisim.pricing.survival import kaplan_meier, ks_distance
from hsisim.resolve.spot import resolve_spot
from hsisim.scenario import load_scenario

GCP = SHARED_DATA / "spot" / "gcp_preemptible_2019" / "gcp_preemptible_lifetimes_2019.csv"


def _gcp() -> hz.LifetimeSample:
    if not GCP.is_file():
        pytest.skip("../shared/data/spot/gcp_preemptible_2019 is absent")
    return hz.read_lifetimes(GCP)


def _moments_agree(law: object, n: int = 200_000, seed: int = 5) -> np.ndarray:
    """Sample moments against the declared ones: the mean within a 99.9 % band, the variance within 10 %."""
    x = np.asarray(law.sample(np.random.default_rng(seed), n))  # type: ignore[attr-defined]
    mean, var = law.mean, law.variance  # type: ignore[attr-defined]
    assert abs(x.mean() - mean) <= 3.29 * math.sqrt(var / n)
    assert x.var() == pytest.approx(var, rel=0.1)
    return x


# -- laws ---------------------------------------------------------------------------------------------

BATHTUB = {"dist": "bathtub", "a": 0.3846, "tau1": "3.687 h", "tau2": "0.6318 h", "b": "24.54 h"}


def test_bathtub_moments_are_the_integrals_of_its_survival_and_match_samples() -> None:
    law = Bathtub.model_validate(BATHTUB)
    end = law.end
    assert float(law.sf(end)) == 0.0 and float(law.sf(end * (1 - 1e-9))) > 0
    m1 = integrate.quad(lambda t: float(law.sf(t)), 0, end, limit=400)[0]
    m2 = integrate.quad(lambda t: 2 * t * float(law.sf(t)), 0, end, limit=400)[0]
    assert law.mean == pytest.approx(m1, rel=1e-8)
    assert law.variance == pytest.approx(m2 - m1**2, rel=1e-8)
    x = _moments_agree(law)
    assert x.max() <= end
    # the early-failure term: about a·(1 − e^{−1/τ1}) of the nodes are gone within the first hour
    assert float(np.mean(x < 3600)) == pytest.approx(1 - float(law.sf(3600)), abs=0.005)


def test_a_bathtub_with_mass_at_zero_is_refused() -> None:
    with pytest.raises(ValidationError, match="mass at lifetime 0"):
        Bathtub.model_validate({**BATHTUB, "tau2": "10 h"})


@settings(max_examples=40, deadline=None)
@given(shape=st.floats(0.3, 3.0), scale_h=st.floats(0.5, 100.0), cap_h=st.floats(0.1, 48.0))
def test_the_capped_law_never_yields_a_lifetime_above_its_cap(shape: float, scale_h: float, cap_h: float) -> None:
    law = capped(Weibull(dist="weibull", shape=shape, scale=scale_h * 3600), cap_h * 3600)
    x = np.asarray(law.sample(np.random.default_rng(1), 2000))
    assert x.max() <= cap_h * 3600
    assert float(law.sample(np.random.default_rng(2))) <= cap_h * 3600
    assert law.mean <= min(cap_h * 3600, law.law.mean) + 1e-6  # type: ignore[attr-defined]


def test_capped_exponential_has_the_closed_form_moments() -> None:
    # min(X, c) with X ~ Exp(λ): E = (1 − e^{−λc})/λ, E[min²] = 2/λ² (1 − e^{−λc}(1 + λc))
    lam, c = 0.1 / 3600, 8 * 3600.0
    law = Capped(Exponential(dist="exponential", rate_per_hour=0.1), c)
    m1 = -math.expm1(-lam * c) / lam
    m2 = 2 / lam**2 * (1 - math.exp(-lam * c) * (1 + lam * c))
    assert law.mean == pytest.approx(m1, rel=1e-9)
    assert law.variance == pytest.approx(m2 - m1**2, rel=1e-8)
    x = _moments_agree(law)
    assert float(np.mean(x == c)) == pytest.approx(math.exp(-lam * c), abs=0.005)  # the atom at the cap


def test_a_discrete_law_caps_exactly() -> None:
    law = Discrete((1.0, 2.0, 5.0), (0.2, 0.3, 0.5))
    assert (law.mean, law.variance) == pytest.approx((3.3, 0.2 + 1.2 + 12.5 - 3.3**2))
    cut = capped(law, 3.0)
    assert isinstance(cut, Discrete) and cut.values == (1.0, 2.0, 3.0) and cut.probs == pytest.approx((0.2, 0.3, 0.5))
    _moments_agree(law)


# -- Kaplan–Meier ----------------------------------------------------------------------------------------


def test_kaplan_meier_and_greenwood_against_a_hand_computation() -> None:
    # lifetimes 1, 2+, 3, 3, 4+, 5 (+: censored). At risk 6, 4, 1 at the event times 1, 3, 5:
    # S(1) = 5/6, S(3) = 5/6 · (1 − 2/4) = 5/12, S(5) = 0.
    # Greenwood: Var S(1) = (5/6)² · 1/(6·5); Var S(3) = (5/12)² · (1/30 + 2/(4·2)).
    km = kaplan_meier(np.array([1, 2, 3, 3, 4, 5.0]), np.array([1, 0, 1, 1, 0, 1], bool))
    assert km.times.tolist() == [1, 3, 5] and km.at_risk.tolist() == [6, 4, 1] and km.events.tolist() == [1, 2, 1]
    assert km.survival == pytest.approx([5 / 6, 5 / 12, 0.0])
    assert km.variance[:2] == pytest.approx([(5 / 6) ** 2 / 30, (5 / 12) ** 2 * (1 / 30 + 2 / 8)])
    assert km.sf([0.5, 2.9, 3.0, 7]).tolist() == pytest.approx([1, 5 / 6, 5 / 12, 0])
    law = km.law(unit_s=1.0)  # jumps of the estimate; its mean is the area under it
    assert law.values == (1.0, 3.0, 5.0) and law.probs == pytest.approx((1 / 6, 5 / 12, 5 / 12))
    assert law.mean == pytest.approx(1 + 5 / 6 * 2 + 5 / 12 * 2)


def test_kaplan_meier_puts_a_censored_tail_at_the_longest_lifetime() -> None:
    km = kaplan_meier(np.array([1.0, 2.0, 4.0]), np.array([True, False, False]))
    law = km.law(unit_s=1.0)  # Efron: the 2/3 still alive after 1 end at the longest lifetime, 4
    assert law.values == (1.0, 4.0) and law.probs == pytest.approx((1 / 3, 2 / 3))


def _km_by_hand(t: np.ndarray, d: np.ndarray) -> tuple[list[float], list[float]]:
    """The product-limit estimate, one lifetime at a time in sorted order (events before censorings at ties)."""
    order = sorted(range(len(t)), key=lambda i: (t[i], not d[i]))
    s, at_risk, times, surv = 1.0, len(t), [], []
    i = 0
    while i < len(order):
        x = t[order[i]]
        deaths = 0
        j = i
        while j < len(order) and t[order[j]] == x:
            deaths += bool(d[order[j]])
            j += 1
        if deaths:
            s *= 1 - deaths / at_risk
            times.append(float(x))
            surv.append(s)
        at_risk -= j - i
        i = j
    return times, surv


@functools.cache
def _gcp_comparison(cap: float | None) -> laws.Comparison:
    return laws.compare_laws(_gcp(), cap_hours=cap)


def test_kaplan_meier_of_the_gcp_sample_matches_the_product_limit_by_hand() -> None:
    s = _gcp()
    km = kaplan_meier(s.hours, s.observed)
    times, surv = _km_by_hand(s.hours, s.observed)
    assert km.times.tolist() == times
    assert km.survival == pytest.approx(surv, rel=1e-12)


def test_the_fits_to_the_gcp_sample_against_independent_computations() -> None:
    s = _gcp()
    raw = {f.family: f for f in _gcp_comparison(None).fits}
    # the bathtub law wins by far on the raw sample: its late surge is the 24 h cap
    assert _gcp_comparison(None).fits[0].family == "bathtub"
    assert raw["weibull"].aic - raw["bathtub"].aic > 1000
    # its likelihood is a maximum: moving any parameter by 1 % lowers it
    p = raw["bathtub"].params
    best = laws.bathtub_log_likelihood(s, p["a"], p["tau1_hours"], p["tau2_hours"], p["b_hours"])
    assert best == pytest.approx(raw["bathtub"].log_likelihood, abs=1e-9)
    for k in p:
        for f in (0.99, 1.01):
            q = {**p, k: p[k] * f}
            assert laws.bathtub_log_likelihood(s, q["a"], q["tau1_hours"], q["tau2_hours"], q["b_hours"]) < best
    # KS distance to Kaplan–Meier, recomputed on a fine grid from the hand-made product-limit estimate
    times, surv = _km_by_hand(s.hours, s.observed)
    grid = np.linspace(0, s.hours.max() * (1 - 1e-9), 200_001)
    km_grid = np.concatenate(([1.0], surv))[np.searchsorted(times, grid, side="right")]
    law = raw["bathtub"].law()
    ks_grid = float(np.abs(law.sf(grid * 3600) - km_grid).max())
    assert raw["bathtub"].ks == pytest.approx(ks_grid, abs=2e-3)
    assert raw["bathtub"].ks < raw["weibull"].ks < raw["exponential"].ks


def test_with_the_24_hour_cap_every_law_is_fitted_to_the_sample_as_a_capped_law_sees_it() -> None:
    s = _gcp()
    cmp = _gcp_comparison(24.0)
    fits = {f.family: f for f in cmp.fits}
    # capped exponential in closed form: λ = preemptions before the cap / Σ min(t, cap)
    before = int((s.observed & (s.hours < 24)).sum())
    rate = before / np.minimum(s.hours, 24).sum()
    assert fits["exponential"].params["rate_per_hour"] == pytest.approx(rate, rel=1e-9)
    # the log-likelihood of the capped law, summed directly: density below the cap, S(cap) at or beyond it
    law = fits["weibull"].law()
    k, lam = fits["weibull"].params["shape"], fits["weibull"].params["scale_hours"]
    t, d = s.hours, s.observed
    below = t < 24
    logf = np.log(k / lam) + (k - 1) * np.log(t / lam) - (t / lam) ** k
    ll = logf[d & below].sum() + (-(t / lam) ** k)[~d & below].sum() + (~below).sum() * -(24 / lam) ** k
    assert fits["weibull"].log_likelihood == pytest.approx(ll, rel=1e-9)
    assert float(np.max(law.sample(np.random.default_rng(0), 10_000))) <= 24 * 3600
    assert cmp.best is not None and cmp.best.family == "weibull"  # below the cap, a falling hazard is enough
    assert all(f.ks < 0.1 for f in cmp.fits if f.family != "exponential")


# -- the command and the scenario -------------------------------------------------------------------------


def test_prices_hazard_compares_every_law_with_the_cap() -> None:
    from typer.testing import CliRunner

    _gcp()
    res = CliRunner().invoke(app, ["prices", "hazard", str(GCP), "--fit", "all", "--max-lifetime", "24 h", "--json"])
    assert res.exit_code == 0, res.output
    (g,) = json.loads(res.stdout)["groups"]
    assert g["comparison"][0]["family"] == g["preferred"] == "weibull"
    assert g["comparison"][0]["delta_aic"] == 0 and all(c["ks_distance"] > 0 for c in g["comparison"])
    assert g["spot_max_lifetime"] == "24 h"
    sc = load_scenario(ROOT / "scenarios" / "spot_8x.yaml",
                       [f"spot.hazard={g['spot_hazard']}", f"spot.max_lifetime={g['spot_max_lifetime']}"])
    setup = resolve_spot(sc, 5.672)
    assert setup is not None and setup.lifetime is not None
    assert setup.lifetime.mean / 3600 == pytest.approx(g["weibull"]["mean_hours"], rel=2e-3)


@pytest.mark.parametrize("fit", ["bathtub", "empirical", "weibull"])
def test_a_scenario_fits_the_lifetimes_file_with_the_cap(fit: str) -> None:
    s = _gcp()
    sc = load_scenario(ROOT / "scenarios" / "spot_8x.yaml",
                       [f"spot.hazard={{dist: lifetimes, file: {GCP}, fit: {fit}}}", "spot.max_lifetime=24 h"])
    setup = resolve_spot(sc, 5.672)
    assert setup is not None and setup.lifetime is not None
    x = np.asarray(setup.lifetime.sample(np.random.default_rng(3), 50_000))
    assert x.max() <= 24 * 3600
    if fit == "empirical":  # Kaplan–Meier below the cap: its restricted mean is the area under the estimate
        km = kaplan_meier(np.minimum(s.hours, 24), s.observed & (s.hours < 24))
        grid = np.linspace(0, 24, 240_001)
        area = float(np.sum(km.sf(grid[:-1]) * np.diff(grid)))
        assert setup.lifetime.mean / 3600 == pytest.approx(area, rel=1e-4)
    assert abs(x.mean() - setup.lifetime.mean) <= 3.29 * math.sqrt(setup.lifetime.variance / len(x))


def test_ks_distance_of_a_law_to_its_own_sample_shrinks() -> None:
    law = Weibull(dist="weibull", shape=0.7, scale=10.0)
    x = np.asarray(law.sample(np.random.default_rng(9), 20_000))
    km = kaplan_meier(x, np.ones(len(x), bool))
    assert ks_distance(km, law.sf) < 1.36 / math.sqrt(len(x)) * 1.5  # the KS 95 % band, with margin
