"""Deadline-aware recovery: the safety net's guarantee, uniform progress, and the policies side by side."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, assert_budget_identities
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hsisim.api import plan, simulate
from hsisim.errors import HsisimInputError
from hsisim.montecarlo import prepare, run_replica
from hsisim.scenario import load_scenario, parse_scenario
from hsisim.sim.deadline import DeadlineClock

HOUR = 3600.0

JOB = """
name: deadline-1
dataset: {name: xiongan, patch: 15, pca_components: 30}
model: {name: hybridsn}
training: {steps: %(steps)d, global_batch: %(batch)d, micro_batch: 64}
cluster: {instance: g5.xlarge, nodes: %(nodes)d, market: %(market)s}
timings: {compute_per_step: 1 min}
spot:
  availability: {trace: %(trace)s}
  notice: 0 s
  recovery: %(recovery)s
checkpoint: {policy: fixed, every_steps: %(every)d, write_time: %(write)s, restore_time: %(restore)s}
overhead: {boot: %(boot)s}
cost: {spot_price: 0.4}
simulation: {replicas: %(replicas)d, seed: %(seed)d, deadline: %(deadline)s}
"""


def scenario(tmp_path: Path, data: list[int], gap_s: float, **kw: object):  # type: ignore[no-untyped-def]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"metadata": {"gap_seconds": gap_s}, "data": data}))
    base: dict[str, object] = dict(steps=300, nodes=1, market="spot", trace=str(trace), recovery="deadline_safety_net",
                                   every=1, write="0 s", restore="0 s", boot="10 min", replicas=1, seed=3,
                                   deadline="6 h")
    base.update(kw)
    base["batch"] = 64 * int(base["nodes"])  # type: ignore[call-overload]
    return parse_scenario(JOB % base)


def test_the_clock_arithmetic() -> None:
    c = DeadlineClock(deadline_s=10 * HOUR, total_steps=600, steps_per_epoch=100, step_s=60.0, epoch_s=2.0,
                      cold_s=5.0, changeover_s=600.0, hysteresis_s=600.0)
    # 600 − 150 steps of a minute, the epoch starts at 200, 300, 400, 500, one cold start
    assert c.remaining_s(150) == pytest.approx(450 * 60 + 4 * 2 + 5)
    assert c.remaining_s(600) == 0.0
    assert c.slack(HOUR, 150) == pytest.approx(9 * HOUR - c.remaining_s(150) - 1200)
    # the line: 600 min of work over the 9.5 h from a start at 0:30
    assert c.slope(1800) == pytest.approx(36000 / (9.5 * HOUR))
    assert c.ahead_s(1800 + 950, 1800, 30) == pytest.approx(30 * 60 - 950 * c.slope(1800))


# -- the safety net's guarantee ---------------------------------------------------------------------------


@st.composite
def traces(draw: st.DrawFn) -> tuple[list[int], float]:
    gap = draw(st.sampled_from([600.0, 1800.0, 3600.0, 7200.0]))
    if draw(st.booleans()):  # periodic: up for a ticks, down for b
        a, b = draw(st.integers(1, 12)), draw(st.integers(1, 12))
        data = [2] * a + [draw(st.integers(0, 1))] * b
    else:
        data = draw(st.lists(st.integers(0, 3), min_size=2, max_size=60))
    if max(data) < 2:
        data[0] = 2
    return data, gap


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trace=traces(), steps=st.integers(30, 900), boot_min=st.integers(2, 30), restore_min=st.integers(0, 5),
       write_s=st.integers(0, 60), every=st.integers(1, 240), margin_min=st.integers(0, 600),
       nodes=st.integers(1, 2), recovery=st.sampled_from(["deadline_safety_net", "uniform_progress"]))
def test_the_safety_net_never_misses_a_deadline_that_on_demand_alone_meets(
        tmp_path: Path, trace: tuple[list[int], float], steps: int, boot_min: int, restore_min: int, write_s: int,
        every: int, margin_min: int, nodes: int, recovery: str) -> None:
    """Property: with deterministic steps (σ = 0), if on-demand capacity alone (no interruption, the same
    boot and checkpoints) finishes by D, the safety net finishes by D on any availability trace; so does
    uniform progress, which keeps the safety net underneath and returns to spot only with slack left.

    Why it holds: the policy keeps D − t ≥ W(restore point) + 2C on spot (C: boot + restore + a
    checkpoint write); it moves when that runs out, during a capacity wait or in training (at the
    next step boundary, then a checkpoint write), and on-demand then needs C − write + W. One
    changeover of the margin pays for the move, the other for a spot restart the move may cut short
    and for the step and checkpoint write in progress when the slack ran out, as long as a boot and
    a restore take at least a step (here: boot ≥ 2 min, steps of 1 min).
    """
    data, gap = trace
    kw = dict(steps=steps, boot=f"{boot_min} min", restore=f"{restore_min} min", write=f"{write_s} s", every=every,
              nodes=nodes)
    od = run_replica(prepare(scenario(tmp_path, data, gap, market="on_demand", deadline="1000 d", **kw), 3), 3, 0)
    deadline = od.wall + 60 * margin_min
    sc = scenario(tmp_path, data, gap, deadline=f"{deadline} s", replicas=6, recovery=recovery, **kw)
    df = simulate(sc, executor="inline").df
    assert (df["finished"] == 1).all()
    assert (df["wall_h"] * HOUR <= deadline * (1 + 1e-12)).all(), (df["wall_h"].max() * HOUR, deadline)
    assert_budget_identities(df)


def test_a_hopeless_deadline_starts_on_demand(tmp_path: Path) -> None:
    # 300 min of work and a 10-minute boot in 5 h: no slack for spot at all
    r = run_replica(prepare(scenario(tmp_path, [1, 1, 1, 0], HOUR, deadline="5 h"), 3), 3, 0)
    assert r.spot_gpu_h == 0.0 and r.switches == 0 and r.fell_back
    assert r.wall == pytest.approx(10 * 60 + 300 * 60)
    assert r.checkpoints == 0  # nothing interrupts on-demand nodes: no periodic checkpoints


def test_the_safety_net_moves_in_the_middle_of_training(tmp_path: Path) -> None:
    # always available, but checkpoints only every 100 steps: W counts from the restore point, so the
    # slack runs out while training between checkpoints and the job moves (with a checkpoint first)
    sc = scenario(tmp_path, [1], HOUR, every=100, deadline="6 h")
    log: list[tuple[float, str]] = []
    r = run_replica(prepare(sc, 3), 3, 0, log=log)
    events = [e for _, e in log]
    assert "moving to on-demand" in events and any(e.startswith("checkpoint at step") for e in events)
    assert r.switches == 1 and r.interruptions == 0 and r.finished and r.wall <= 6 * HOUR
    assert r.spot_gpu_h > 0 and r.on_demand_gpu_h > 0


# -- uniform progress -------------------------------------------------------------------------------------------


def test_uniform_progress_goes_to_on_demand_when_behind_and_back_when_ahead(tmp_path: Path) -> None:
    # available 2 h, then 2 h without; 600 min of work, deadline 14 h: the line asks for 43 min of work
    # per hour. At the reclaim the job is ahead; the wait puts it behind, so it moves to on-demand, gets
    # ahead again by the hysteresis (one changeover) and returns to spot when the trace has capacity.
    sc = scenario(tmp_path, [1, 1, 0, 0], HOUR, steps=600, recovery="uniform_progress", deadline="14 h")
    log: list[tuple[float, str]] = []
    r = run_replica(prepare(sc, 3), 3, 0, log=log)
    events = [e for _, e in log]
    assert "falling back to on-demand" in events and "back on spot" in events
    assert r.switches >= 2 and r.finished and r.wall <= 14 * HOUR
    assert r.spot_gpu_h > 0 and r.on_demand_gpu_h > 0
    # on this trace it needs fewer on-demand hours than the safety net, which waits until the slack is
    # gone and then stays on on-demand to the end
    net = run_replica(prepare(scenario(tmp_path, [1, 1, 0, 0], HOUR, steps=600, deadline="14 h"), 3), 3, 0)
    assert net.wall <= 14 * HOUR and net.switches == 1
    assert r.on_demand_gpu_h < net.on_demand_gpu_h


def test_hysteresis_only_for_uniform_progress_and_deadline_policies_need_a_deadline(tmp_path: Path) -> None:
    spot8 = ROOT / "scenarios" / "spot_8x.yaml"
    with pytest.raises(HsisimInputError, match="only applies") as exc:
        load_scenario(spot8, ["spot.hysteresis=1 h"])
    assert exc.value.key == "spot.hysteresis"
    with pytest.raises(HsisimInputError, match=r"set simulation\.deadline") as exc:
        load_scenario(spot8, ["spot.recovery=deadline_safety_net", "simulation.deadline=null"])
    assert exc.value.key == "spot.recovery"
    with pytest.raises(HsisimInputError, match="not local_nvme"):
        load_scenario(spot8, ["spot.recovery=uniform_progress", "checkpoint.storage=local_nvme"])


@pytest.mark.parametrize("recovery", ["deadline_safety_net", "uniform_progress"])
def test_deadline_policies_keep_the_identities_with_a_lifetime_law(recovery: str) -> None:
    # no trace: reclaims from a per-node hazard, replacement waits from the delay law
    sc = load_scenario(ROOT / "scenarios" / "spot_8x.yaml", [
        f"spot.recovery={recovery}", "spot.hazard={dist: exponential, rate_per_hour: 0.3}",
        "simulation.deadline=12 h", "training.epochs=40"])
    df = simulate(sc, replicas=32, executor="inline").df
    assert_budget_identities(df)
    assert (df["finished"] == 1).all() and df["switches"].max() >= 1
    assert np.allclose(df["spot_gpu_h"] + df["on_demand_gpu_h"] > 0, True)


def test_plan_compares_the_policies_on_the_trace_scenario() -> None:
    res = plan(ROOT / "scenarios" / "deadline_8x.yaml", replicas=16, executor="inline",
               sweeps=["spot.recovery=restart,deadline_safety_net,uniform_progress"])
    rows = {r["settings"]["spot.recovery"]: r for r in res.to_json()["combinations"]}
    assert rows["restart"]["on_demand_gpu_h"]["mean"] == 0 and rows["restart"]["switches"]["mean"] == 0
    assert rows["deadline_safety_net"]["p_deadline"] == 1.0 and rows["uniform_progress"]["p_deadline"] == 1.0
    assert rows["deadline_safety_net"]["on_demand_gpu_h"]["mean"] > 0
    assert rows["restart"]["cost_usd"]["mean"] < rows["deadline_safety_net"]["cost_usd"]["mean"]
    for run in res.runs:
        assert_budget_identities(run.df)
