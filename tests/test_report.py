"""Reports and diagnosis: each figure is a valid PNG whose data match the results it claims to show; the
diagnosis ranks the article's bottlenecks and claims exactly what ``simulate`` gives with each fix applied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from typer.testing import CliRunner

import hsisim
from hsisim import montecarlo, planning
from hsisim.cli import app
from hsisim.errors import HsisimInputError
from hsisim.report import curves, figures, folder, gantt, markdown
from hsisim.report.diagnose import MIN_GAIN
from hsisim.report.thresholds import fragmentation
from hsisim.scenario import Scenario
from hsisim.writer import dumps

SPOT = ROOT / "scenarios" / "spot_8x.yaml"
LAB = ROOT / "scenarios" / "single_3090.yaml"
MULTI = ROOT / "scenarios" / "multinode_25gbe.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png(path: Path) -> None:
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_MAGIC
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 400


@pytest.fixture(scope="module")
def spot_results() -> montecarlo.Results:
    return hsisim.simulate(SPOT, replicas=24, executor="inline")


# -- figures of one run ------------------------------------------------------------------------------------


def test_budget_figure_shows_the_six_terms_of_the_summary(spot_results: montecarlo.Results, tmp_path: Path) -> None:
    df = figures.budget(spot_results, tmp_path / "budget.png")
    _png(tmp_path / "budget.png")
    m = spot_results.summary()["metrics"]
    assert list(df["term"]) == ["compute", "data", "comm", "stall", "recover", "overhead"]
    for r in df.itertuples():
        assert r.mean_h == m[f"t_{r.term}_h"]["mean"] and r.p95_h == m[f"t_{r.term}_h"]["p95"]
    assert df["share_of_T"].sum() == pytest.approx(1.0, rel=1e-12)  # the six terms sum to T, replica by replica
    assert df["mean_h"].sum() == pytest.approx(m["wall_h"]["mean"], rel=1e-12)


def test_cost_figure_shows_the_bill_and_the_price_per_useful_gpu_hour(spot_results: montecarlo.Results,
                                                                       tmp_path: Path) -> None:
    df, prices = figures.cost(spot_results, tmp_path / "cost.png")
    _png(tmp_path / "cost.png")
    s = spot_results.summary()
    assert df["usd"].sum() == pytest.approx(s["metrics"]["cost_usd"]["mean"], rel=1e-12)
    got = dict(zip(prices["price"], prices["usd_per_gpu_h"], strict=True))
    assert got["effective cost per useful GPU-hour"] == s["metrics"]["cost_per_useful_gpu_h"]["mean"]
    assert got["on-demand list price per GPU-hour"] == s["on_demand_usd_per_gpu_h"] == pytest.approx(5.672 / 4)
    # spot at 40 % of on-demand: the price paid per billed GPU-hour
    assert got["paid per billed GPU-hour"] == pytest.approx(0.4 * 5.672 / 4, rel=0.01)


def test_distribution_figure_marks_the_summary_percentiles_budget_and_deadline(spot_results: montecarlo.Results,
                                                                                tmp_path: Path) -> None:
    df = figures.distribution(spot_results, tmp_path / "distribution.png")
    _png(tmp_path / "distribution.png")
    s = spot_results.summary()
    cost, wall = df.set_index("metric").loc["cost_usd"], df.set_index("metric").loc["wall_h"]
    for q in ("p50", "p90", "p99", "mean"):
        assert cost[q] == s["metrics"]["cost_usd"][q] and wall[q] == s["metrics"]["wall_h"][q]
    assert cost["limit"] == 500 and wall["limit"] == 48
    assert cost["p_within"] == s["p_budget"] and wall["p_within"] == s["p_deadline"]


# -- the timeline: a traced replica -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sparse() -> tuple[Scenario, montecarlo.Prepared]:
    """spot_8x with a blocking checkpoint every 2 h: reclaims lose visible work."""
    sc = Scenario.load(SPOT, overrides=["checkpoint.policy=fixed", "checkpoint.interval=2 h", "checkpoint.async=false"])
    return sc, montecarlo.prepare(sc, 42)


def test_a_trace_changes_nothing_and_its_budget_is_the_replica_s(sparse: tuple[Scenario, montecarlo.Prepared]) -> None:
    _, prep = sparse
    for i in range(4):
        plain = montecarlo.run_replica(prep, 42, i).row()
        tx = gantt.trace_replica(prep, 42, i)
        assert tx.row == plain  # bit for bit
        terms = gantt.job_terms(tx.trace)
        for t, v in terms.items():
            assert v / 3600 == pytest.approx(plain[f"t_{t}_h"], rel=1e-9, abs=1e-12)


def test_timeline_figure_shows_every_state_of_a_reclaim(sparse: tuple[Scenario, montecarlo.Prepared],
                                                        tmp_path: Path) -> None:
    sc, prep = sparse
    df = montecarlo.run(sc, prep, replicas=16, seed=42, executor="inline").df
    i = gantt.pick_replica(df)
    assert df.loc[df["replica"] == i, "interruptions"].iloc[0] > 0
    tx = gantt.trace_replica(prep, 42, i)
    bars = gantt.figure(tx, sc.name, tmp_path / "timeline.png")
    _png(tmp_path / "timeline.png")
    states = set(bars["state"])
    assert {"compute", "data wait", "comm", "checkpoint", "notice", "interrupted (lost work)", "waiting", "starting",
            "restoring"} <= states
    assert set(bars["node"]) == {0, 1}
    # the lost work drawn is the work the ledger moved to recover: training between the restore point and the reclaim
    lost = bars[bars["state"] == "interrupted (lost work)"]
    spans = gantt.lost_spans(tx.trace)
    assert len(spans) == tx.row["interruptions"]
    drawn = lost.drop_duplicates(["t0_h", "t1_h"])
    assert (drawn["t1_h"] - drawn["t0_h"]).sum() == pytest.approx(sum(b - a for a, b in spans) / 3600, rel=1e-9)
    # every bar lies within the replica's wall time; notices end at a reclaim
    assert bars["t0_h"].min() >= 0 and bars["t1_h"].max() <= tx.row["wall_h"] + 1e-9
    reclaims = {n.end / 3600 for n in tx.nodes if n.spot and n.end == n.reclaim}
    assert set(bars.loc[bars["state"] == "notice", "t1_h"]) == reclaims


# -- the checkpoint U-curve and the scaling sweep -----------------------------------------------------------


def test_checkpoint_figure_draws_optimize_s_curve_and_optima(tmp_path: Path) -> None:
    opt = hsisim.optimize(SPOT, replicas=4, executor="inline")
    df = curves.checkpoint(opt, "spot_8x", tmp_path / "checkpoint.png")
    _png(tmp_path / "checkpoint.png")
    cur = df[df["kind"] == "evaluated"]
    assert list(cur["interval_min"] * 60) == pytest.approx([t for t, _, _ in opt.curve], rel=1e-12)
    assert list(cur["mean"]) == [v for _, v, _ in opt.curve]
    assert list(cur["ci95_halfwidth"]) == [h for _, _, h in opt.curve]
    marks = df.set_index("kind")
    assert marks.loc["young", "interval_min"] * 60 == pytest.approx(opt.young_interval_s)
    assert marks.loc["daly", "interval_min"] * 60 == pytest.approx(opt.daly_interval_s)
    assert marks.loc["optimal", "mean"] == opt.at_optimal
    empty = curves.checkpoint(None, "ondemand_8x", tmp_path / "none.png")
    _png(tmp_path / "none.png")
    assert empty.empty


def test_micro_batch_keeps_the_global_batch() -> None:
    sc = Scenario.load(SPOT)
    assert curves.micro_for(sc, 8) == 64 and curves.micro_for(sc, 16) == 32 and curves.micro_for(sc, 4) == 64
    assert curves.micro_for(sc, 1024) is None  # fewer samples than GPUs
    assert curves.micro_for(sc, 24) is None  # 512 cannot be split over 24 GPUs
    assert curves.node_counts(2) == [1, 2, 4] and curves.node_counts(1) == [1, 2] and curves.node_counts(3) == [1, 2,
                                                                                                            3, 4]


def test_scaling_figure_shows_plan_s_combinations_and_pareto_front(tmp_path: Path) -> None:
    # the lab prototype on rented spot capacity: cheap to simulate, both markets, a micro-batch to shrink
    sets = ["cluster.market=spot", "spot.hazard={dist: exponential, rate_per_hour: 0.05}", "cost.spot_price=0.4",
            "cost.on_demand_price=1.5 USD/h", "checkpoint.policy=daly", "checkpoint.async=true"]
    sc = Scenario.load(LAB, overrides=sets)
    rows, notes = curves.plan_scaling(LAB, sets, sc, replicas=4, seed=1, executor="inline", workers=None)
    df = curves.scaling_table(rows, 1, {"cluster.nodes": "1", "cluster.market": "spot"})
    curves.scaling(df, sc.name, notes, tmp_path / "scaling.png")
    _png(tmp_path / "scaling.png")
    assert sorted(zip(df["gpus"], df["market"], strict=True)) == [(g, m) for g in (1, 2) for m in ("on_demand", "spot")]
    assert set(df.loc[df["gpus"] == 2, "micro_batch"]) == {32} and any("micro-batch 32" in n for n in notes)
    by = {(r["settings"]["cluster.nodes"], r["settings"]["cluster.market"]): r for r in rows}
    for r in df.itertuples():
        src = by[(str(r.nodes), r.market)]
        assert r.cost_p90_usd == src["cost_usd"]["p90"] and r.wall_p90_h == src["wall_h"]["p90"]
        assert r.eta_mean == src["eta"]["mean"]
    assert list(df["pareto"]) == planning.pareto(list(zip(df["cost_p90_usd"], df["wall_p90_h"], strict=True)))
    own = df[df["own"]].iloc[0]
    assert own["gpus"] == 1 and own["market"] == "spot" and own["pareto"]  # the cheapest, and as fast as any


# -- the diagnosis --------------------------------------------------------------------------------------------


def _same_as_run(path: Path, diag: Any, fix: dict[str, Any]) -> None:
    """What ``hsisim run --set ...`` gives (same seed, same replicas) is exactly what the diagnosis claims."""
    res = hsisim.simulate(path, overrides=fix["overrides"], replicas=diag.replicas, seed=diag.seed, executor="inline")
    m = res.summary()["metrics"]
    assert m["wall_h"]["mean"] == pytest.approx(fix["wall_h"]["after"], rel=1e-12)
    assert m["cost_usd"]["mean"] == pytest.approx(fix["cost_usd"]["after"], rel=1e-12, abs=1e-12)
    assert m["eta"]["mean"] == pytest.approx(fix["eta_points"]["after"], rel=1e-12)
    base = diag.baseline
    change = m["wall_h"]["mean"] - base["wall_h"]
    lo, hi = fix["wall_h"]["ci95"]
    assert lo - 1e-9 <= change <= hi + 1e-9
    assert change == pytest.approx(fix["wall_h"]["change"], rel=1e-9, abs=1e-12)


def test_diagnose_ranks_data_supply_first_on_the_lab_prototype() -> None:
    diag = hsisim.diagnose(LAB, replicas=4)
    assert diag.bottlenecks[0]["id"] == "data" and diag.bottlenecks[0]["share_of_time"] > 0.3
    top = diag.top(1)[0]
    assert top["bottleneck"] == "data" and top["lever"] and top["wall_h"]["change_pct"] < -30
    assert top["eta_points"]["change"] > 30
    assert {f["id"] for f in diag.fixes} == {"loader", "offline"}  # no spot, comm or memory fixes apply
    for fix in diag.fixes:
        _same_as_run(LAB, diag, fix)
    triggered = {t["id"] for t in diag.thresholds if t["triggered"]}
    assert {"data_wait", "workers", "getitem"} <= triggered and "scaling" not in triggered
    json.loads(dumps(diag.to_json()))


def test_diagnose_ranks_communication_first_over_25gbe() -> None:
    diag = hsisim.diagnose(MULTI, replicas=2, fast=True)
    assert diag.bottlenecks[0]["id"] == "comm"
    top = diag.top(1)[0]
    assert top["bottleneck"] == "comm" and top["wall_h"]["change_pct"] < -20
    _same_as_run(MULTI, diag, top)


def test_scaling_efficiency_threshold_triggers_over_25gbe() -> None:
    from hsisim.report import thresholds

    sc = Scenario.load(MULTI)
    prep = montecarlo.prepare(sc, 7)
    eff = thresholds.scaling_efficiency(prep, 7)
    assert 0 < eff < 0.7  # §6.2 step 1
    summary = montecarlo.run(sc, prep, replicas=2, seed=7, executor="inline").summary()
    got = {t["id"]: t for t in thresholds.evaluate(sc, prep, summary, 7)}
    assert got["scaling"]["triggered"] and got["scaling"]["value"] == eff
    assert got["interconnect"]["triggered"]  # 25 GbE TCP between the nodes


def test_diagnose_gains_are_paired_over_the_same_replicas_on_spot() -> None:
    diag = hsisim.diagnose(SPOT, replicas=16, fast=True)
    assert diag.bottlenecks[0]["id"] == "comm"
    scores = [f["score"] for f in diag.fixes if f["lever"]]
    assert scores == sorted(scores, reverse=True) and diag.top(2) == [f for f in diag.fixes if f["lever"]][:2]
    fix = next(f for f in diag.fixes if f["id"] == "hierarchical")
    base = hsisim.simulate(SPOT, replicas=16, executor="inline").df
    after = hsisim.simulate(SPOT, overrides=fix["overrides"], replicas=16, executor="inline").df
    delta = after["wall_h"].to_numpy() - base["wall_h"].to_numpy()
    assert fix["wall_h"]["change"] == pytest.approx(delta.mean(), rel=1e-12)
    assert fix["wall_h"]["ci95"][0] < fix["wall_h"]["change"] < fix["wall_h"]["ci95"][1]  # noise from the replicas
    assert fix["gain_ci95"][0] >= MIN_GAIN


def test_diagnose_proposes_only_fixes_that_apply() -> None:
    od = hsisim.diagnose(ROOT / "scenarios" / "ondemand_8x.yaml", replicas=2, fast=True)
    assert not [f for f in od.fixes + od.skipped if f["bottleneck"] in ("interruptions", "cost")]
    sc = Scenario.load(LAB, overrides=["memory.fragmentation=1.3"])
    assert fragmentation(sc) == (1.3, "scenario")
    diag = hsisim.diagnose(sc, replicas=2)
    frag = next(t for t in diag.thresholds if t["id"] == "fragmentation")
    assert frag["triggered"] and frag["value"] == 1.3  # §5.2: reserved/allocated > 1.15
    assert "fragmentation" in {f["id"] for f in diag.fixes}
    with pytest.raises(HsisimInputError, match="objective"):
        hsisim.diagnose(LAB, objective="speed")


# -- the report folder and the commands -----------------------------------------------------------------------


@pytest.mark.slow
def test_report_writes_every_figure_and_report_md_atomically(tmp_path: Path) -> None:
    out = tmp_path / "lab"
    rep = hsisim.write_report(LAB, out=out, replicas=4, sweep_replicas=2, executor="inline")
    assert sorted(p.name for p in out.iterdir()) == sorted(folder.FILES)
    for name in folder.FILES:
        if name.endswith(".png"):
            _png(out / name)
    md = (out / "report.md").read_text(encoding="utf-8")
    for fig in ("budget", "cost", "distribution", "checkpoint", "timeline", "scaling"):
        assert f"]({fig}.png)" in md
    assert "## 7. Diagnosis" in md and rep.results.manifest()["scenario_hash"][:16] in md
    assert "no checkpoint trade-off" in md
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert data["format"] == folder.FORMAT and data["diagnosis"]["bottlenecks"][0]["id"] == "data"
    assert data["warnings"] == [] and "Warning" not in md  # the lab scenario's step rests on no other model
    assert data["tables"]["budget"][0]["mean_h"] == rep.results.summary()["metrics"]["t_compute_h"]["mean"]
    again = hsisim.write_report(LAB, out=out, replicas=4, sweep_replicas=2, executor="inline", seed=3)  # replaces it
    assert again.data["manifest"]["seed"] == 3
    assert [p.name for p in tmp_path.iterdir()] == ["lab"]  # no staging folder left behind


def test_a_report_folder_replaces_only_a_previous_report(tmp_path: Path) -> None:
    out = tmp_path / "rep"

    def build(text: str) -> None:
        tmp = folder.staging(out)
        (tmp / "report.json").write_text(json.dumps({"format": folder.FORMAT}))
        (tmp / "report.md").write_text(text)
        folder.publish(tmp, out)

    build("one")
    assert folder.is_report(out) and (out / "report.md").read_text() == "one"
    build("two")
    assert (out / "report.md").read_text() == "two" and [p.name for p in tmp_path.iterdir()] == ["rep"]
    (out / "mine.txt").write_text("not the report's")
    with pytest.raises(HsisimInputError, match="not an hsisim report"):
        build("three")
    assert (out / "mine.txt").exists() and (out / "report.md").read_text() == "two"


def test_report_refuses_a_folder_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(HsisimInputError, match="not an hsisim report"):
        hsisim.write_report(LAB, out=tmp_path, replicas=2, executor="inline")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    res = CliRunner().invoke(app, ["report", str(LAB), "--out", str(tmp_path), "--replicas", "2"])
    assert res.exit_code == 2 and "--out" in res.stderr and "Traceback" not in res.stderr


def test_diagnose_command_prints_json_and_tables() -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["diagnose", str(LAB), "--replicas", "2", "--json"])
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["bottlenecks"][0]["id"] == "data" and data["fixes"][0]["overrides"]
    res = runner.invoke(app, ["diagnose", str(LAB), "--replicas", "2"])
    assert res.exit_code == 0 and "--set loader.num_workers=8" in res.stdout
    res = runner.invoke(app, ["diagnose", str(LAB), "--objective", "speed"])
    assert res.exit_code == 2 and "--objective" in res.stderr


def test_diagnose_and_the_report_carry_the_runs_warnings(tmp_path: Path) -> None:
    # the shipped 2-core profile (HybridSN 30x25x25) on a 15x9x9 model: the step is mostly its fixed part
    sets = ["--set", f"calibration={ROOT / 'calibration' / 'cpu-amd-epyc-2core.json'}"]
    scen = str(ROOT / "scenarios" / "validate" / "cpu_compute_bound.yaml")
    runner = CliRunner()
    res = runner.invoke(app, ["diagnose", scen, *sets, "--fast", "--replicas", "2", "--json"])
    assert res.exit_code == 0, res.stderr
    warned = json.loads(res.stdout)["warnings"]
    assert len(warned) == 1 and "is the profile's fixed part" in warned[0], warned
    res = runner.invoke(app, ["diagnose", scen, *sets, "--fast", "--replicas", "2"])
    assert res.exit_code == 0 and "warning: " in res.stdout and "hybridsn 30×25×25" in res.stdout
    assert json.loads(runner.invoke(app, ["diagnose", str(LAB), "--fast", "--replicas", "2", "--json"]
                                    ).stdout)["warnings"] == []
    ctx = {"name": "n", "description": "d", "command": "c", "sweep_replicas": 2, "notes": [], "warnings": warned,
           "manifest": {"calibration_fingerprint": None, "hsisim_version": "0", "seed": 1, "replicas": 2,
                        "scenario_hash": "0" * 64}}
    assert f"> **Warning:** {warned[0]}" in markdown._head(ctx)
    assert "Warning" not in markdown._head({**ctx, "warnings": []})


def test_report_and_diagnose_are_public() -> None:
    assert {"write_report", "diagnose"} <= set(hsisim.__all__)
    assert hsisim.write_report.__module__ == hsisim.diagnose.__module__ == "hsisim.api"


def test_step_status_shows_each_step_on_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from hsisim.cli_report import staged, step_status

    with step_status(quiet=True) as log:
        assert log is None
    with step_status(quiet=False) as log:  # not a terminal: plain lines, as before
        assert log is not None
        log("compute probe")
    assert "compute probe" in capsys.readouterr().err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with step_status(quiet=False) as log:
        assert log is not None
        log("compute probe")
        log("memory probe")
    err = capsys.readouterr().err
    assert "1. compute probe" in err and "2. memory probe" in err
    with staged(quiet=False) as (tick, stage):
        stage("baseline")
        tick(3, 10)
