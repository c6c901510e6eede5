"""`hsisim plan`: probabilities against the empirical fractions, sweeps, Pareto flags, CRN, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from scipy import stats
from typer.testing import CliRunner

from hsisim.api import simulate
from hsisim.cli import app
from hsisim.planning import pareto, parse_sweeps, plan
from hsisim.scenario import load_scenario
from hsisim.stats import proportion

SPOT8 = ROOT / "scenarios" / "spot_8x.yaml"
runner = CliRunner()


def test_probabilities_are_the_empirical_fractions_of_the_replicas() -> None:
    df = simulate(load_scenario(SPOT8), replicas=200, executor="inline").df
    budget = float(np.quantile(df["cost_usd"], 0.7))
    deadline = float(np.quantile(df["wall_h"], 0.4)) * 3600
    res = plan(SPOT8, sweeps=[], budget=budget, deadline_s=deadline, replicas=200, executor="inline").to_json()
    p_b = float((df["cost_usd"] <= budget).mean())
    p_d = float((df["wall_h"] * 3600 <= deadline).mean())
    assert res["p_budget"] == p_b and res["p_deadline"] == p_d
    both = float(((df["cost_usd"] <= budget) & (df["wall_h"] * 3600 <= deadline)).mean())
    assert res["p_both"] == both
    k = round(p_b * 200)
    ci = stats.binomtest(k, 200).proportion_ci(method="wilson")
    assert res["p_budget_ci95"] == pytest.approx([ci.low, ci.high], abs=1e-8)
    assert res["metrics"]["cost_usd"]["p90"] == pytest.approx(float(np.percentile(df["cost_usd"], 90)))
    assert res["meets"] is False  # P(deadline) ≈ 0.4 < 0.9


def test_wilson_interval_edges() -> None:
    assert proportion(np.zeros(50, dtype=bool))[1][0] == 0.0 and proportion(np.ones(50, dtype=bool))[1][1] == 1.0
    hi = proportion(np.zeros(50, dtype=bool))[1][1]
    # no success in 50: the Wilson upper bound is z²/(n + z²) (closed form at k = 0)
    z2 = stats.norm.ppf(0.975) ** 2
    assert hi == pytest.approx(z2 / (50 + z2), rel=1e-9)


def test_pareto_flags_match_brute_force() -> None:
    rng = np.random.default_rng(3)
    pts = [(float(a), float(b)) for a, b in rng.integers(0, 6, (40, 2))]
    flags = pareto(pts)
    for (c, t), f in zip(pts, flags, strict=True):
        dominated = any(c2 <= c and t2 <= t and (c2, t2) != (c, t) for c2, t2 in pts)
        assert f == (not dominated)
    assert pareto([(1.0, float("inf")), (2.0, 2.0)]) == [False, True]


def test_sweep_table_recommendation_and_common_random_numbers() -> None:
    res = plan(SPOT8, sweeps=["cluster.nodes=1,2", "cost.spot_price=0.3,0.5"], budget=80.0,
               deadline_s=32 * 3600, replicas=128, executor="inline").to_json()
    rows = res["combinations"]
    assert [r["settings"] for r in rows] == [
        {"cluster.nodes": n, "cost.spot_price": p} for n in ("1", "2") for p in ("0.3", "0.5")]
    # common random numbers: the spot price changes the bill, never a replica's timeline
    for a, b in ((0, 1), (2, 3)):
        assert rows[a]["wall_h"] == rows[b]["wall_h"]
        assert rows[a]["interruptions"] == rows[b]["interruptions"]
        assert rows[a]["cost_usd"]["p90"] < rows[b]["cost_usd"]["p90"]
    assert [r["pareto"] for r in rows] == pareto([(r["cost_usd"]["p90"], r["wall_h"]["p90"]) for r in rows])
    meets = [i for i, r in enumerate(rows) if r["p_budget"] >= 0.9 and r["p_deadline"] >= 0.9]
    assert meets, "the sweep should contain a feasible configuration"
    best = min(meets, key=lambda i: rows[i]["cost_usd"]["p90"])
    assert res["recommended"]["index"] == best and res["settings"] == rows[best]["settings"]
    assert res["p_budget"] == rows[best]["p_budget"]


def test_no_feasible_combination_says_so() -> None:
    res = plan(SPOT8, sweeps=["cost.spot_price=0.3,0.5"], budget=1.0, deadline_s=None, replicas=64,
               executor="inline").to_json()
    assert res["recommended"] is None and "no combination meets" in res["recommendation"]


def test_plan_cli_json_and_out_resume(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    args = ["plan", str(SPOT8), "--budget", "100 USD", "--deadline", "22 h", "--sweep", "cost.spot_price=0.3,0.4",
            "--replicas", "64", "--executor", "inline", "--json", "--out", str(out)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert {"p_budget", "p_deadline", "combinations", "recommended"} <= set(data)
    assert data["deadline_h"] == pytest.approx(22.0)
    assert json.loads((out / "plan.json").read_text()) == data
    assert (out / "combo-000" / "replicas.parquet").exists() and (out / "combo-001" / "replicas.parquet").exists()
    again = runner.invoke(app, [*args, "--resume"])
    assert again.exit_code == 0 and json.loads(again.output) == data


def test_plan_prints_a_table() -> None:
    res = runner.invoke(app, ["plan", str(SPOT8), "--budget", "$100", "--sweep", "cost.spot_price=0.3,0.4",
                              "--replicas", "64", "--executor", "inline"])
    assert res.exit_code == 0, res.output
    assert "recommended" in res.output and "spot_price" in res.output


@pytest.mark.parametrize("args, message", [
    (["--sweep", "cluster.nodes"], "--sweep expects KEY=V1,V2"),
    (["--sweep", "cluster.nodes=1,,2"], "no empty value"),
    (["--sweep", "cluster.nodes=1,2", "--sweep", "cluster.nodes=4"], "given twice"),
    (["--sweep", "cluster.nodes=1,1"], "repeats a value"),
    (["--sweep", "cluster.gpus=1,2"], "cluster.gpus"),
    (["--sweep", "cluster.nodes=1,4"], "in the --sweep combination cluster.nodes=4"),
    (["--sweep", "cluster.nodes=1,-2"], "cluster.nodes"),
    (["--deadline", "soon"], "--deadline"),
    (["--deadline", "5 GB"], "--deadline"),
    (["--budget", "-3 USD"], "--budget must be a positive"),
    (["--budget", "300"], "--budget 300 has no unit"),
    (["--deadline", "22"], "--deadline 22 has no unit"),
    (["--confidence", "1.5"], "--confidence"),
    (["--replicas", "1"], "--replicas must be at least 2"),
])
def test_bad_plan_input_exits_2_with_one_clear_line(args: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "never"
    res = runner.invoke(app, ["plan", str(SPOT8), "--executor", "inline", "--out", str(out), *args])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert not out.exists()


def test_parse_sweeps_keeps_order() -> None:
    assert parse_sweeps(["a.b=1,2", "c=x"]) == [("a.b", ["1", "2"]), ("c", ["x"])]
