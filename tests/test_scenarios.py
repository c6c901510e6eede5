"""Every scenario in scenarios/ is a regression case: it runs, keeps the identities, and answers its question."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from conftest import SCENARIOS

from hsisim.api import simulate
from hsisim.montecarlo import Results
from hsisim.scenario import load_scenario
from hsisim.sim.ledger import MONEY_CATEGORIES, TIME_TERMS


@functools.cache
def _results(name: str) -> Results:
    path = next(p for p in SCENARIOS if p.stem == name)
    return simulate(load_scenario(path), replicas=40, executor="inline")


@pytest.mark.parametrize("name", [p.stem for p in SCENARIOS])
def test_identities_hold_for_every_replica(name: str) -> None:
    df = _results(name).df
    terms = df[[f"t_{t}_h" for t in TIME_TERMS]].sum(axis=1)
    assert np.all(np.abs(terms - df["wall_h"]) <= 1e-9 * df["wall_h"])
    money = df[[f"cost_{c}_usd" for c in MONEY_CATEGORIES]].sum(axis=1)
    assert np.all(np.abs(money - df["cost_usd"]) <= 1e-9 * np.maximum(df["cost_usd"], 1e-12))
    assert np.all((df["eta"] > 0) & (df["eta"] <= 1))
    assert np.all(df[[f"t_{t}_h" for t in TIME_TERMS]] >= 0)
    assert np.all(df["billed_gpu_h"] >= df["useful_gpu_h"])


def test_seed_article_eta_baseline_and_degraded() -> None:
    assert _results("seed_eta_baseline").df["eta"].to_numpy() == pytest.approx(100 / 110, rel=1e-9)
    assert _results("seed_eta_degraded").df["eta"].to_numpy() == pytest.approx(100 / 240, rel=1e-9)


def test_lab_prototype_is_data_starved() -> None:
    df = _results("single_3090").df
    assert (df["t_data_h"] / df["wall_h"]).min() > 0.3
    assert df["t_comm_h"].max() == 0.0


def test_multinode_over_25gbe_is_communication_bound() -> None:
    df = _results("multinode_25gbe").df
    assert (df["t_comm_h"] > df["t_compute_h"]).all()
    hier = simulate(load_scenario(next(p for p in SCENARIOS if p.stem == "multinode_25gbe"),
                                  ["cluster.collective=hierarchical"]), replicas=10, executor="inline").df
    assert hier["t_comm_h"].mean() < df["t_comm_h"].mean()


def test_spot_8x_needs_about_a_day_and_costs_less_than_on_demand() -> None:
    spot, od = _results("spot_8x"), _results("ondemand_8x")
    assert 16 <= spot.df["wall_h"].mean() <= 32
    calm = spot.df[spot.df["interruptions"] == 0]
    ratio = calm["cost_compute_usd"].mean() / od.df["cost_compute_usd"].mean()
    assert ratio == pytest.approx(0.4, rel=1e-3)  # spot_price: 0.4 of on-demand when nothing is reclaimed
    assert spot.job.total_steps == od.job.total_steps


def test_no_interruption_cost_is_the_on_demand_arithmetic_at_the_spot_price() -> None:
    res = _results("spot_8x")
    df, job = res.df[res.df["interruptions"] == 0], res.job
    assert len(df) > 5
    billed_h = df["billed_gpu_h"] / job.gpus_per_node
    node_money = df["cost_usd"] - df["cost_storage_usd"] - df["cost_egress_usd"]
    assert node_money.to_numpy() == pytest.approx((billed_h * job.price_usd_per_node_hour).to_numpy(), rel=1e-9)


# --- the header comments: every figure a scenario's header states is checked against what it resolves to ---


def _header(name: str) -> str:
    path = next(p for p in SCENARIOS if p.stem == name)
    return " ".join(line.lstrip("# ") for line in path.read_text().splitlines() if line.startswith("#"))


def _claims(text: str) -> dict[str, float]:
    """Numbers a header states, by kind."""
    import re

    out: dict[str, float] = {}
    for kind, pattern in (("steps", r"about ([\d.]+e\d+) optimizer steps"), ("wall_h", r"~(\d+)[- ]h"),
                          ("gpus", r"(\d+) (?:spot )?(?:V100s|A10G GPUs|A100s|H100s)"),
                          ("grad_mb", r"(\d+) MB of fp32 gradients"), ("eta", r"η = (\d+/\d+)")):
        m = re.search(pattern, text)
        if m:
            a, _, b = m.group(1).partition("/")
            out[kind] = float(a) / float(b) if b else float(a)
    return out


@pytest.mark.parametrize("name", [p.stem for p in SCENARIOS])
def test_header_comments_state_what_the_scenario_resolves_to(name: str) -> None:
    from hsisim.analytic.memory import state_bytes_per_param
    from hsisim.resolve import resolve_job
    from hsisim.resolve.workload import workload

    claims = _claims(_header(name))
    if not claims:
        pytest.skip("no figure in the header")
    sc = next(load_scenario(p) for p in SCENARIOS if p.stem == name)
    job = resolve_job(sc)
    checks = {"steps": (job.total_steps, 0.05), "gpus": (job.world, 0),
              "wall_h": (float(_results(name).df["wall_h"].mean()), 0.1),
              "eta": (float(_results(name).df["eta"].mean()), 0.01)}
    if "grad_mb" in claims:
        params = workload(sc, None, allow_code=False).stats.params
        checks["grad_mb"] = (params * state_bytes_per_param("fp32", sc.model.optimizer)["grads"] / 1e6, 0.1)
    for kind, stated in claims.items():
        truth, tolerance = checks[kind]
        assert abs(truth - stated) <= tolerance * abs(truth) + 1e-9, (name, kind, stated, truth)


def test_trace_capacity_costs_the_spot_job_waits_and_idle_survivors() -> None:
    trace, spot = _results("spot_trace_8x"), _results("spot_8x")
    assert trace.df["t_overhead_h"].mean() > spot.df["t_overhead_h"].mean() + 1  # outages last hours
    assert trace.df["interruptions"].mean() > 1 and trace.df["cost_idle_usd"].mean() > 0
    assert (trace.df["on_demand_gpu_h"] == 0).all() and (trace.df["switches"] == 0).all()


def test_the_safety_net_meets_the_deadline_on_the_trace() -> None:
    res = _results("deadline_8x")
    assert res.summary()["p_deadline"] == 1.0
    assert res.df["on_demand_gpu_h"].mean() > 0 and res.df["spot_gpu_h"].mean() > 0


def test_gcp_preemptible_nodes_never_outlive_the_cap() -> None:
    res = _results("gcp_preemptible_24h")
    spot = res.spec.spot
    assert spot is not None and spot.lifetime is not None
    assert float(np.max(spot.lifetime.sample(np.random.default_rng(0), 100_000))) <= 24 * 3600
    assert res.df["interruptions"].mean() >= 1
