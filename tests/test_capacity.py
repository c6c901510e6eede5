"""Spot capacity replayed from availability traces: the file formats, exact timelines, and equivalences."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, assert_budget_identities

from hsisim.api import simulate
from hsisim.errors import HsisimInputError
from hsisim.montecarlo import prepare, run_replica
from hsisim.pricing.availability import read_availability
from hsisim.scenario import load_scenario, parse_scenario

HOUR = 3600.0


def write_trace(path: Path, data: list[int], gap_s: float) -> str:
    path.write_text(json.dumps({"metadata": {"gap_seconds": gap_s}, "data": data}))
    return str(path)


def identities(df) -> None:  # type: ignore[no-untyped-def]
    assert_budget_identities(df)
    assert np.all(df["billed_gpu_h"] >= df["useful_gpu_h"] - 1e-9)


# -- the trace -----------------------------------------------------------------------------------------------


def test_json_and_csv_traces_replay_the_same_capacity(tmp_path: Path) -> None:
    data = [2, 2, 1, 0, 3, 2]
    js = read_availability(write_trace(tmp_path / "t.json", data, 600))
    csv = tmp_path / "t.csv"
    csv.write_text("t_s,available\n" + "".join(f"{600 * i},{n}\n" for i, n in enumerate(data)))
    stamps = tmp_path / "s.csv"
    stamps.write_text("timestamp_utc,available\n" + "".join(
        f"2024-01-01T00:{10 * i:02d}:00Z,{n}\n" for i, n in enumerate(data)))
    for other in (read_availability(csv), read_availability(stamps)):
        assert other.span == js.span == 3600
        assert other.counts.tolist() == js.counts.tolist() and other.t.tolist() == js.t.tolist()


def test_the_trace_answers_when_capacity_falls_and_returns(tmp_path: Path) -> None:
    tr = read_availability(write_trace(tmp_path / "t.json", [2, 2, 1, 0, 3, 2], 600))
    assert tr.available(0, 0) == 2 and tr.available(0, 1199.9) == 2 and tr.available(0, 1200) == 1
    assert tr.next_below(0, 0, 2) == (1200, 1)
    assert tr.next_below(0, 0, 1) == (1800, 0)
    assert tr.next_below(0, 1900, 3) == (1900, 0)  # already short: now
    assert tr.next_at_least(0, 1300, 2) == 2400
    assert tr.next_at_least(0, 2500, 3) == 2500
    # wrap-around: from 3000 s (count 2) the next shortage of 2 is in the next lap, at 3600 + 1200
    assert tr.next_below(0, 3000, 2) == (4800, 1)
    assert tr.next_at_least(300, 2700, 3) == pytest.approx(3600 + 2400 - 300)  # offset 300 s into the trace
    assert tr.next_below(0, 0, 4)[0] == 0 and tr.next_at_least(0, 0, 4) == float("inf")
    assert tr.share_at_least(2) == pytest.approx(4 / 6)
    assert tr.drops_per_second(2) == pytest.approx(1 / 3600)  # once per lap, from 2 to 1


@pytest.mark.parametrize(("text", "match"), [
    ('{"data": [1, 0]}', "spot-traces JSON"),
    ('{"metadata": {"gap_seconds": 0}, "data": [1, 0]}', "gap_seconds"),
    ('{"metadata": {"gap_seconds": 60}, "data": [1, -1]}', "whole numbers"),
    ('{"metadata": {"gap_seconds": 60}, "data": [1.5]}', "whole numbers"),
    ('{"metadata": {"gap_seconds": 60}, "data": [0, 0]}', "no instance is ever available"),
    ('{"metadata": {"gap_seconds": 60}, "data": []}', "no availability records"),
])
def test_bad_traces_are_clear_errors(tmp_path: Path, text: str, match: str) -> None:
    (tmp_path / "t.json").write_text(text)
    with pytest.raises(HsisimInputError, match=match) as exc:
        read_availability(tmp_path / "t.json")
    assert exc.value.key == "spot.availability.trace"


def test_bad_csv_traces_are_clear_errors(tmp_path: Path) -> None:
    for body, match in (("t_s,n\n0,1\n", "needs an 'available' column"), ("t_s,available\n0,1\n", "two rows"),
                        ("t_s,available\n0,1\n0,2\n", "increase strictly")):
        (tmp_path / "t.csv").write_text(body)
        with pytest.raises(HsisimInputError, match=match):
            read_availability(tmp_path / "t.csv")
    with pytest.raises(HsisimInputError, match="not found"):
        read_availability(tmp_path / "none.json")


# -- hand-made traces, exact answers -------------------------------------------------------------------------

JOB = """
name: trace-1
dataset: {name: xiongan, patch: 15, pca_components: 30}
model: {name: hybridsn}
training: {steps: %(steps)d, global_batch: 64, micro_batch: 64}
cluster: {instance: g5.xlarge, nodes: %(nodes)d, market: spot}
timings: {compute_per_step: 1 min}
spot:
  availability: {trace: %(trace)s, offset: %(offset)s}
  notice: 0 s
  recovery: %(recovery)s
checkpoint: {policy: fixed, every_steps: 1, write_time: 0 s, restore_time: 0 s}
overhead: {boot: 10 min}
cost: {spot_price: 0.4}
simulation: {replicas: 1, seed: 3%(deadline)s}
"""


def job(tmp_path: Path, data: list[int], gap_s: float, *, steps: int = 300, nodes: int = 1, recovery: str = "restart",
        offset: str = "0 s", deadline: str | None = None, sets: list[str] | None = None):  # type: ignore[no-untyped-def]
    trace = write_trace(tmp_path / "trace.json", data, gap_s)
    text = JOB % {"steps": steps, "nodes": nodes, "trace": trace, "offset": offset, "recovery": recovery,
                  "deadline": f", deadline: {deadline}" if deadline else ""}
    if nodes > 1:
        text = text.replace("global_batch: 64", f"global_batch: {64 * nodes}")
    return parse_scenario(text, sets or [])


def test_a_periodic_trace_gives_the_wall_time_computed_by_hand(tmp_path: Path) -> None:
    # 3 h available, 1 h not (one 1-hour tick each); 300 one-minute steps, every step checkpointed for
    # free, a 10-minute boot. Boot 0:00–0:10, train 170 steps to 3:00, reclaimed; capacity is back at
    # 4:00, boot to 4:10, the last 130 steps end at 6:20.
    sc = job(tmp_path, [1, 1, 1, 0], HOUR)
    log: list[tuple[float, str]] = []
    r = run_replica(prepare(sc, 3), 3, 0, log=log)
    assert r.finished and r.wall == pytest.approx(6 * HOUR + 20 * 60)
    assert r.time["compute"] == pytest.approx(300 * 60) and r.time["recover"] == pytest.approx(0.0)
    assert r.time["overhead"] == pytest.approx(10 * 60 + HOUR + 10 * 60)
    assert r.interruptions == 1 and r.switches == 0 and r.on_demand_gpu_h == 0.0
    assert r.spot_gpu_h == pytest.approx(3 + 2 + 1 / 3)  # node 1 from 0:00 to 3:00, node 2 from 4:00 to 6:20
    events = [(round(t / 60, 6), e) for t, e in log if not e.startswith(("step", "checkpoint", "epoch"))]
    assert (180.0, "reclaimed 1 node(s); restore from step 170") in events
    assert (240.0, "replacement capacity") in events


def test_a_trace_that_starts_without_capacity_delays_the_start(tmp_path: Path) -> None:
    # offset 3 h: the replay starts in the hour without capacity; the job launches at 1:00
    sc = job(tmp_path, [1, 1, 1, 0], HOUR, steps=60, offset="3 h")
    r = run_replica(prepare(sc, 3), 3, 0)
    assert r.wall == pytest.approx(HOUR + 10 * 60 + HOUR)
    assert r.spot_gpu_h == pytest.approx(1 + 1 / 6)  # nothing is billed while waiting for capacity


def test_two_nodes_lose_one_when_capacity_falls_to_one(tmp_path: Path) -> None:
    # capacity 2, 2, 1, 2 per hour: at 2:00 the newest node goes; the survivor waits (billed idle) until 3:00
    sc = job(tmp_path, [2, 2, 1, 2], HOUR, steps=200, nodes=2)
    log: list[tuple[float, str]] = []
    r = run_replica(prepare(sc, 3), 3, 0, log=log)
    assert r.interruptions == 1
    # boot to 0:10, 110 steps to 2:00, wait to 3:00, boot to 3:10, 90 steps to 4:40
    assert r.wall == pytest.approx(4 * HOUR + 40 * 60)
    price = prepare(sc, 3).job.price_usd_per_node_hour
    assert r.money["idle"] == pytest.approx(price * (HOUR + 10 * 60) / HOUR)


def test_safety_net_split_between_spot_and_on_demand_by_hand(tmp_path: Path) -> None:
    # 3 h available, 3 h not; 300 steps of 1 min; boot 10 min, free checkpoints and restores: a changeover
    # C is 10 min. Deadline 6 h. Slack D − t − W(restore point) − 2C: 40 min at 0:00, 30 from 0:10 on
    # (training keeps it). Reclaimed at 3:00 with 130 steps left: wait at most the 30 min of slack, move
    # to on-demand at 3:30, boot to 3:40, 130 steps end at 5:50. Restart would wait to 6:00, end at 8:20.
    sc = job(tmp_path, [1, 1, 1, 0, 0, 0], HOUR, recovery="deadline_safety_net", deadline="6 h")
    r = run_replica(prepare(sc, 3), 3, 0)
    assert r.finished and r.wall == pytest.approx(5 * HOUR + 50 * 60)
    assert r.spot_gpu_h == pytest.approx(3.0)
    assert r.on_demand_gpu_h == pytest.approx(2 + 1 / 3)
    assert r.switches == 1 and r.fell_back
    assert r.time["overhead"] == pytest.approx(10 * 60 + 30 * 60 + 10 * 60)
    restart = run_replica(prepare(job(tmp_path, [1, 1, 1, 0, 0, 0], HOUR, deadline="6 h"), 3), 3, 0)
    assert restart.wall == pytest.approx(8 * HOUR + 20 * 60)


def test_elastic_runs_on_what_the_trace_has(tmp_path: Path) -> None:
    sc = job(tmp_path, [2, 2, 1, 2], HOUR, steps=200, nodes=2, recovery="elastic")
    log: list[tuple[float, str]] = []
    r = run_replica(prepare(sc, 3), 3, 0, log=log)
    events = [e for _, e in log]
    assert "rendezvous (shrink)" in events and "rendezvous (grow)" in events
    assert r.finished and r.wall < 4 * HOUR + 40 * 60  # faster than restart's wait (test above)
    assert r.money["idle"] == 0.0


# -- equivalences ---------------------------------------------------------------------------------------------


def test_an_always_available_trace_equals_the_run_without_interruptions(tmp_path: Path) -> None:
    spot8 = ROOT / "scenarios" / "spot_8x.yaml"
    common = ["checkpoint.policy=fixed", "checkpoint.interval=30 min", "spot.replacement_delay=null"]
    trace = write_trace(tmp_path / "full.json", [2, 3, 2, 4], 6 * HOUR)
    a = simulate(load_scenario(spot8, [*common, "spot.hazard=null", f"spot.availability={{trace: {trace}}}"]),
                 replicas=24, executor="inline").df
    b = simulate(load_scenario(spot8, [*common, "spot.hazard={dist: constant, value: 1000 d}"]),
                 replicas=24, executor="inline").df
    assert (a["interruptions"] == 0).all()
    assert list(a.columns) == list(b.columns)
    for col in a.columns:
        assert np.array_equal(a[col].to_numpy(), b[col].to_numpy()), col


def test_trace_scenarios_keep_the_identities_and_say_when_the_trace_wraps(tmp_path: Path) -> None:
    sc = load_scenario(ROOT / "scenarios" / "spot_8x.yaml", [
        "spot.hazard={dist: exponential, rate_per_hour: 0.05}", "spot.replacement_delay=null",
        f"spot.availability={{trace: {write_trace(tmp_path / 't.json', [2, 2, 2, 0, 1, 2, 3], HOUR)}}}"])
    res = simulate(sc, replicas=40, executor="inline")
    identities(res.df)
    assert res.df["interruptions"].mean() > 5  # the trace (7 h loop) and the hazard both reclaim
    assert any("availability trace spans 7.0 h" in n and "100%" in n for n in res.summary()["notes"])


def test_availability_with_a_replacement_delay_is_refused() -> None:
    with pytest.raises(HsisimInputError, match="remove replacement_delay") as exc:
        load_scenario(ROOT / "scenarios" / "spot_trace_8x.yaml",
                      ["spot.replacement_delay={dist: constant, value: 1 min}"])
    assert exc.value.key == "spot.replacement_delay"


def test_a_trace_that_never_holds_the_job_is_refused(tmp_path: Path) -> None:
    from hsisim.resolve.spot import resolve_spot

    sc = job(tmp_path, [1, 1, 0], HOUR, nodes=2)
    with pytest.raises(HsisimInputError, match="never shows 2 instances"):
        resolve_spot(sc, 1.0)


def test_daly_sees_the_traces_reclaims_in_the_mtbf(tmp_path: Path) -> None:
    from hsisim.resolve.spot import resolve_spot

    # one drop below 1 per 4-hour lap, 3 h of which can run: M = 3 h
    sc = job(tmp_path, [1, 1, 1, 0], HOUR)
    setup = resolve_spot(sc, 1.0)
    assert setup is not None and setup.mtbf_s == pytest.approx(3 * HOUR)
    assert setup.capacity_wait_mean_s == pytest.approx(HOUR)
