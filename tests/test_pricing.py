"""Spot price traces (the integral billing uses, trace files) and hazard fits against independent computations."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_DATA
from scipy import optimize, stats

from hsisim.errors import HsisimInputError
from hsisim.montecarlo import prepare, replica
from hsisim.pricing import hazard as hz
from hsisim.pricing.trace import PriceTrace, read_provenance, read_trace, write_trace
from hsisim.scenario import parse_scenario

TRACE = PriceTrace(np.array([0.0, 3600.0, 7200.0]), np.array([1.0, 3.0, 2.0]))  # span 2 h, wraps


def test_integral_of_a_piecewise_constant_price() -> None:
    assert TRACE.integral(0, 0, 3600) == pytest.approx(1.0)
    assert TRACE.integral(0, 1800, 5400) == pytest.approx(0.5 + 1.5)
    assert TRACE.integral(1800, 0, 3600) == pytest.approx(0.5 + 1.5)  # replayed from an offset
    assert TRACE.integral(0, 0, 4 * 3600) == pytest.approx(2 * (1 + 3))  # wraps around at the end
    assert TRACE.mean_usd_per_hour() == pytest.approx(2.0)


def _csv(tmp_path: Path) -> Path:
    p = tmp_path / "prices.csv"
    p.write_text("region,availability_zone,instance_type,product_description,spot_price_usd_per_hour,timestamp_utc\n"
                 "us-east-1,us-east-1a,g5.xlarge,Linux/UNIX,1.0,2020-01-01T00:00:00Z\n"
                 "us-east-1,us-east-1a,g5.xlarge,Linux/UNIX,3.0,2020-01-01T01:00:00Z\n"
                 "us-east-1,us-east-1a,g5.xlarge,Linux/UNIX,2.0,2020-01-01T02:00:00Z\n"
                 "us-east-1,us-east-1b,g5.xlarge,Linux/UNIX,9.0,2020-01-01T01:30:00Z\n")
    return p


def test_read_trace_filters_and_orders(tmp_path: Path) -> None:
    tr = read_trace(_csv(tmp_path), where={"availability_zone": "us-east-1a"})
    assert tr.t.tolist() == [0.0, 3600.0, 7200.0] and tr.usd_per_hour.tolist() == [1.0, 3.0, 2.0]
    with pytest.raises(HsisimInputError, match="fewer than two"):
        read_trace(_csv(tmp_path), where={"availability_zone": "eu-west-1a"})


def test_billing_follows_the_replayed_trace(tmp_path: Path) -> None:
    text = f"""
name: traced
dataset: {{name: xiongan, patch: 15, pca_components: 30}}
model: {{name: hybridsn}}
training: {{steps: 5400, global_batch: 64, micro_batch: 64}}
cluster: {{instance: g5.xlarge, nodes: 1, market: spot}}
timings: {{compute_per_step: 1 s}}
spot: {{hazard: {{dist: constant, value: 1000 h}}}}
cost: {{spot_price: trace, price_trace: {{file: {_csv(tmp_path)}, availability_zone: us-east-1a,
        instance_type: g5.xlarge}}, min_billed: 0 s}}
"""
    sc = parse_scenario(text)
    prep = prepare(sc, 0)
    assert prep.spec.spot is not None and prep.spec.spot.trace is not None
    rep = replica(prep, 0, 0)
    offset = rep.cluster.trace_offset  # where this replica starts replaying the trace
    r = rep.run()
    expected = prep.spec.spot.trace.integral(offset, 0, 5400)
    assert r.cost == pytest.approx(expected, rel=1e-9)
    assert r.money["compute"] == pytest.approx(expected, rel=1e-9)


def test_real_aws_trace_replays() -> None:
    path = SHARED_DATA / "spot" / "aws_gpu_spot_prices_2019-12_2020-03.csv"
    if not path.is_file():
        pytest.skip("../shared/data/spot/aws_gpu_spot_prices_2019-12_2020-03.csv is absent")
    tr = read_trace(path, where={"availability_zone": "us-west-2c", "instance_type": "p3.8xlarge"})
    assert len(tr.t) > 100 and tr.span > 30 * 86400
    assert 0 < tr.usd_per_hour.min() <= tr.mean_usd_per_hour() <= tr.usd_per_hour.max() < 12.24


# --- trace files: tidy and old formats, one series at a time, atomic writes -------------------

def _tidy() -> pd.DataFrame:
    stamps = ["2020-01-01T00:00:00Z", "2020-01-01T01:00:00Z", "2020-01-01T02:00:00Z", "2020-01-01T00:30:00Z",
              "2020-01-01T01:30:00Z"]
    return pd.DataFrame({"timestamp_utc": pd.to_datetime(stamps, utc=True), "region": "us-east-1",
                         "availability_zone": "us-east-1a", "instance_type": "g5.xlarge",
                         "product": ["Linux/UNIX"] * 3 + ["Windows"] * 2,
                         "spot_usd_per_hour": [1.0, 3.0, 2.0, 7.0, 8.0]})


@pytest.mark.parametrize("name", ["trace.csv", "trace.parquet"])
def test_tidy_trace_round_trips_and_product_description_selects_the_product(tmp_path: Path, name: str) -> None:
    path, side = write_trace(_tidy(), tmp_path / name, {"source": "test"})
    assert json.loads(side.read_text()) == {"source": "test"} and read_provenance(path) == {"source": "test"}
    tr = read_trace(path, where={"product_description": "Linux/UNIX"})
    assert tr.t.tolist() == [0.0, 3600.0, 7200.0] and tr.usd_per_hour.tolist() == [1.0, 3.0, 2.0]
    win = read_trace(path, where={"product_description": "Windows"})
    assert win.t.tolist() == [0.0, 3600.0] and win.usd_per_hour.tolist() == [7.0, 8.0]
    with pytest.raises(HsisimInputError, match="Linux/UNIX, Windows") as err:
        read_trace(path)  # two products, no filter: never mixed
    assert err.value.key == "cost.price_trace.product_description"


def test_several_zones_without_a_filter_are_an_error_not_a_mix(tmp_path: Path) -> None:
    # the old reader kept the last price of duplicate timestamps across zones: a silent mix
    with pytest.raises(HsisimInputError, match="us-east-1a, us-east-1b") as err:
        read_trace(_csv(tmp_path), where={"instance_type": "g5.xlarge"})
    assert err.value.key == "cost.price_trace.availability_zone"


def test_two_prices_at_one_time_in_one_series_are_an_error(tmp_path: Path) -> None:
    p = tmp_path / "clash.csv"
    p.write_text("timestamp_utc,spot_price_usd_per_hour\n2020-01-01T00:00:00Z,1.0\n2020-01-01T00:00:00Z,2.0\n"
                 "2020-01-01T01:00:00Z,2.0\n")
    with pytest.raises(HsisimInputError, match="two different prices"):
        read_trace(p)
    p.write_text("timestamp_utc,spot_price_usd_per_hour\n2020-01-01T00:00:00Z,1.0\n2020-01-01T00:00:00Z,1.0\n"
                 "2020-01-01T01:00:00Z,2.0\n")
    assert read_trace(p).usd_per_hour.tolist() == [1.0, 2.0]  # the same record twice counts once


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hsisim.pricing.trace as trace_mod

    def half_then_fail(table: pd.DataFrame, out: Path, tmp: str) -> None:
        Path(tmp).write_text("timestamp_utc,spot")
        raise OSError("disk full")

    monkeypatch.setattr(trace_mod, "_write_table", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        write_trace(_tidy(), tmp_path / "t.csv", {})
    assert list(tmp_path.iterdir()) == []


# --- hazard fits against independent computations --------------------------------------------

LIFETIMES = SHARED_DATA / "spot" / "aws_spot_gpu_lifetimes_2020-03-15.csv"


def _lifetime_rows() -> list[dict[str, str]]:
    if not LIFETIMES.is_file():
        pytest.skip("../shared/data/spot/aws_spot_gpu_lifetimes_2020-03-15.csv is absent")
    with LIFETIMES.open(newline="") as f:
        return list(csv.DictReader(f))


def _censored_weibull_ll(k: float, lam: float, t: np.ndarray, event: np.ndarray) -> float:
    """Written out here, independently of the package: Σ log f over events + Σ log S over the censored."""
    z = t / lam
    return float(np.sum(np.log(k / lam) + (k - 1) * np.log(z[event]) - z[event] ** k) - np.sum(z[~event] ** k))


def test_exponential_fit_per_gpu_type_is_events_over_exposure_with_the_exact_interval() -> None:
    rows = _lifetime_rows()
    k80 = [r for r in rows if r["gpu_type"] == "k80"]
    d = sum(r["status"] == "preempted" for r in k80)
    exposure = sum(float(r["lifetime_hours"]) for r in k80)
    fit = hz.fit_exponential(hz.read_lifetimes(LIFETIMES, where={"gpu_type": "k80"}))
    assert (d, fit.events, fit.n) == (32, 32, 35)
    assert fit.rate_per_hour == pytest.approx(d / exposure, rel=1e-12)
    lo, hi = fit.rate_ci95  # type: ignore[misc]
    # the exact (Garwood) interval is defined by Poisson tail probabilities of 2.5 % each
    assert stats.poisson.sf(d - 1, lo * exposure) == pytest.approx(0.025, abs=1e-9)
    assert stats.poisson.cdf(d, hi * exposure) == pytest.approx(0.025, abs=1e-9)
    assert fit.log_likelihood == pytest.approx(d * math.log(d / exposure) - d)
    assert fit.aic == pytest.approx(2 - 2 * fit.log_likelihood)


def test_weibull_fit_maximises_an_independently_written_likelihood() -> None:
    rows = _lifetime_rows()
    t = np.array([float(r["lifetime_hours"]) for r in rows if r["gpu_type"] == "k80"])
    ev = np.array([r["status"] == "preempted" for r in rows if r["gpu_type"] == "k80"])
    res = optimize.minimize(lambda x: -_censored_weibull_ll(*np.exp(x), t, ev), np.log([1.0, 5.0]),
                            method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-12, "maxiter": 10_000})
    k, lam = np.exp(res.x)
    fit = hz.fit_weibull(hz.LifetimeSample(t, ev))
    assert fit.shape == pytest.approx(k, rel=1e-5) and fit.scale_hours == pytest.approx(lam, rel=1e-5)
    assert fit.log_likelihood == pytest.approx(-res.fun, abs=1e-8)
    assert fit.aic == pytest.approx(4 + 2 * res.fun, abs=1e-7)
    # the LR test: 2 (ll_w − ll_e) against χ²₁, ll_e = d ln(d/T) − d for a constant hazard
    ll_e = ev.sum() * math.log(ev.sum() / t.sum()) - ev.sum()
    lr = hz.likelihood_ratio(hz.fit_exponential(hz.LifetimeSample(t, ev)), fit)
    assert lr.statistic == pytest.approx(2 * (-res.fun - ll_e), abs=1e-6)
    assert lr.p_value == pytest.approx(stats.chi2.sf(2 * (-res.fun - ll_e), 1), rel=1e-5) and lr.p_value < 1e-6


def test_weibull_intervals_are_where_the_profile_likelihood_drops_by_half_the_chi2_quantile() -> None:
    rows = _lifetime_rows()
    t = np.array([float(r["lifetime_hours"]) for r in rows if r["gpu_type"] == "k80"])
    ev = np.array([r["status"] == "preempted" for r in rows if r["gpu_type"] == "k80"])
    fit = hz.fit_weibull(hz.LifetimeSample(t, ev))
    drop = stats.chi2.ppf(0.95, 1) / 2

    def best_over(fixed: str, value: float) -> float:  # maximise over the other parameter numerically
        if fixed == "shape":
            r = optimize.minimize_scalar(lambda u: -_censored_weibull_ll(value, math.exp(u), t, ev), bounds=(-5, 8),
                                         method="bounded", options={"xatol": 1e-10})
        else:
            r = optimize.minimize_scalar(lambda u: -_censored_weibull_ll(math.exp(u), value, t, ev), bounds=(-5, 3),
                                         method="bounded", options={"xatol": 1e-10})
        return -float(r.fun)

    for name, ci, est in (("shape", fit.shape_ci95, fit.shape), ("scale", fit.scale_ci95, fit.scale_hours)):
        lo, hi = ci  # type: ignore[misc]
        assert lo is not None and hi is not None and lo < est < hi
        for end in (lo, hi):
            assert fit.log_likelihood - best_over(name, end) == pytest.approx(drop, abs=1e-5)


def test_weibull_interval_covers_the_true_parameters_of_synthetic_censored_data() -> None:
    rng = np.random.default_rng(5)
    life = 10.0 * rng.weibull(0.7, 400)
    seen = np.minimum(life, 20.0)  # observation stops at 20 h: right-censored beyond
    fit = hz.fit_weibull(hz.LifetimeSample(seen, life < 20.0))
    k_lo, k_hi = fit.shape_ci95  # type: ignore[misc]
    s_lo, s_hi = fit.scale_ci95  # type: ignore[misc]
    assert k_lo < 0.7 < k_hi and s_lo < 10.0 < s_hi  # type: ignore[operator]
    assert fit.mean_hours == pytest.approx(fit.scale_hours * math.gamma(1 + 1 / fit.shape))  # type: ignore[operator]


def test_no_preemption_gives_no_fit_but_the_one_sided_bound() -> None:
    sample = hz.LifetimeSample(np.array([50.0, 53.5]), np.array([False, False]))
    with pytest.raises(HsisimInputError, match="no exponential law"):
        hz.fit_exponential(sample)
    # P(no event | λ) = exp(−λ T) = 5 % at the bound
    assert math.exp(-hz.rate_upper_bound_95(103.5) * 103.5) == pytest.approx(0.05)
