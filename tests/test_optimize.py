"""`hsisim optimize`: the simulated optimum against Young and Daly where their assumptions hold."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hsisim.cli import app
from hsisim.scenario import parse_scenario
from hsisim.tuning import optimize_interval

# Daly's assumptions: exponential failures of one node, sync checkpoints of fixed cost δ = 2 min,
# a short restart, work far longer than the MTBF of 2 h.
DALY = """
name: daly-world
dataset: {name: xiongan, patch: 15, pca_components: 30}
model: {name: hybridsn}
training: {steps: 43200, global_batch: 64, micro_batch: 64}
cluster: {instance: g5.xlarge, nodes: 1, market: spot}
timings: {compute_per_step: 1 s}
spot: {hazard: {dist: exponential, rate_per_hour: 0.5}, notice: 0 s, replacement_delay: {dist: constant, value: 1 min}}
checkpoint: {policy: daly, write_time: 2 min, restore_time: 1 min}
cost: {spot_price: 0.4}
simulation: {seed: 5}
"""


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["time", "cost"])
def test_optimum_is_near_daly_where_daly_holds(objective: str) -> None:
    res = optimize_interval(parse_scenario(DALY), objective=objective, replicas=120, executor="inline")
    assert res.daly_interval_s == pytest.approx(1235.75, rel=1e-4)  # δ = 120 s, M = 7200 s (DESIGN.md form)
    assert 0.5 * res.daly_interval_s <= res.optimal_interval_s <= 2 * res.daly_interval_s
    lo, hi = res.ci95_s
    assert lo <= res.optimal_interval_s <= hi
    # the optimum is no worse than Daly's interval under the same random numbers
    assert res.at_optimal <= res.at_daly + 1e-12
    # a U: both ends of the grid are worse than the middle
    curve = sorted(res.curve)
    assert curve[0][1] > res.at_optimal and curve[-1][1] > res.at_optimal


@pytest.mark.slow
def test_optimize_cli_json_keys() -> None:
    out = CliRunner().invoke(app, ["optimize", "-", "--json"])
    assert out.exit_code == 2  # a missing file is bad input
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.yaml"
        p.write_text(DALY)
        res = CliRunner().invoke(app, ["optimize", str(p), "--json", "--replicas", "20", "--executor", "inline"])
        assert res.exit_code == 0, res.stderr
        data = json.loads(res.stdout)
        for key in ("optimal_interval_min", "ci95_min", "young_interval_min", "daly_interval_min", "mtbf_h",
                    "checkpoint_write_min", "objective_at_optimal", "objective_at_young", "objective_at_daly",
                    "curve"):
            assert key in data
        assert data["mtbf_h"] == pytest.approx(2.0)
        human = CliRunner().invoke(app, ["optimize", str(p), "--replicas", "20", "--executor", "inline"])
        assert "Daly" in human.stdout and "optimal" in human.stdout


def test_optimize_refuses_on_demand() -> None:
    res = CliRunner().invoke(app, ["optimize", "scenarios/ondemand_8x.yaml"])
    assert res.exit_code == 2 and "spot" in res.stderr


def test_policy_optimal_runs_with_the_optimised_interval() -> None:
    from hsisim.api import simulate

    sc = parse_scenario(DALY, ["checkpoint.policy=optimal", "training.steps=14400"])
    res = simulate(sc, replicas=20, executor="inline")
    assert (res.df["checkpoints"] > 0).all() and (res.df["finished"] == 1).all()



def test_an_interval_whose_replicas_never_finish_is_shown_as_such() -> None:
    # gcp_preemptible_24h at its default 200 replicas: at a 23 h interval some replica never keeps any
    # work before its VM's 24 h cap, so the interval's mean is infinite (null in the JSON)
    import io

    from rich.console import Console

    from hsisim.report.table import print_optimize

    optimal = {"interval_min": 41.4, "mean": 0.92, "ci95_halfwidth": 0.003}
    res = json.loads(json.dumps({
        "objective": "cost", "replicas": 200, "optimal_interval_min": 41.4, "ci95_min": [40.2, 42.0],
        "young_interval_min": 44.8, "daly_interval_min": 43.5, "mtbf_h": 8.4, "checkpoint_write_min": 2.0,
        "objective_at_optimal": 0.92, "objective_at_young": 0.924, "objective_at_daly": 0.924,
        "curve": [optimal, {"interval_min": 1375.7, "mean": None, "ci95_halfwidth": None}]}))
    out = io.StringIO()
    print_optimize(res, Console(file=out, width=100))
    assert "never finishes" in out.getvalue() and "← optimal" in out.getvalue()


def test_the_optimum_s_range_holds_the_intervals_it_cannot_be_told_from() -> None:
    # paired values over 50 replicas: the same noise at every interval plus a U-shaped mean; 60 s
    # differs from the optimum (100 s) by less than its noise, 30 s and 400 s by far more
    from types import SimpleNamespace

    from hsisim.tuning import _near_optimal

    rng = np.random.default_rng(0)
    common = rng.normal(1.0, 0.2, 50)
    shift = {30.0: 0.5, 60.0: 0.001, 100.0: 0.0, 200.0: 0.002, 400.0: 0.6}
    values = {t: common + s + rng.normal(0, 0.01, 50) for t, s in shift.items()}
    lo, hi = _near_optimal(SimpleNamespace(values=values), 100.0)  # type: ignore[arg-type]
    assert (lo, hi) == (60.0, 200.0)
    values[200.0] = values[200.0] + np.inf  # never finishes: never near the optimum
    assert _near_optimal(SimpleNamespace(values=values), 100.0)[1] == 100.0  # type: ignore[arg-type]
