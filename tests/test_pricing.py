"""Spot price traces: the integral that billing uses, and billing that follows price changes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_DATA

from hsisim.errors import HsisimInputError
from hsisim.montecarlo import prepare, run_replica
from hsisim.pricing.trace import PriceTrace, read_trace
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
    assert prep.spot is not None and prep.spot.trace is not None
    r = run_replica(prep, 0, 0)
    from hsisim.sim.cluster import Cluster

    streams = np.random.SeedSequence(0, spawn_key=(1, 0)).spawn(6)  # as Replica spawns them
    offset = Cluster(prep.job, prep.spot, 0, streams[2], np.random.default_rng(streams[3]),
                     np.random.default_rng(streams[5])).trace_offset
    expected = prep.spot.trace.integral(offset, 0, 5400)
    assert r.cost == pytest.approx(expected, rel=1e-9)
    assert r.money["compute"] == pytest.approx(expected, rel=1e-9)


def test_real_aws_trace_replays() -> None:
    path = SHARED_DATA / "spot" / "aws_gpu_spot_prices_2019-12_2020-03.csv"
    if not path.is_file():
        pytest.skip("../shared/data/spot/aws_gpu_spot_prices_2019-12_2020-03.csv is absent")
    tr = read_trace(path, where={"availability_zone": "us-west-2c", "instance_type": "p3.8xlarge"})
    assert len(tr.t) > 100 and tr.span > 30 * 86400
    assert 0 < tr.usd_per_hour.min() <= tr.mean_usd_per_hour() <= tr.usd_per_hour.max() < 12.24
