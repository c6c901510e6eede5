"""Spot interruptions and recovery against event order, closed forms and real lifetime data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import ROOT, SHARED_DATA, assert_budget_identities
from scipy import stats

from hsisim.api import simulate
from hsisim.montecarlo import prepare, run_replica
from hsisim.pricing import hazard as hz
from hsisim.scenario import load_scenario, parse_scenario

ONE_NODE = """
name: spot-1
dataset: {name: xiongan, patch: 15, pca_components: 30}
model: {name: hybridsn}
training: {steps: %(steps)d, global_batch: 64, micro_batch: 64}
cluster: {instance: g5.xlarge, nodes: 1, market: spot}
timings: {compute_per_step: %(step)s}
spot:
  hazard: %(hazard)s
  notice: 0 s
  replacement_delay: %(delay)s
checkpoint: {policy: fixed, every_steps: %(every)d, write_time: %(write)s, restore_time: %(restore)s}
overhead: {boot: %(boot)s}
cost: {spot_price: 0.4}
simulation: {replicas: %(replicas)d, seed: 11}
"""


def _scenario(**kw: object):  # type: ignore[no-untyped-def]
    base = dict(steps=5, step="100 s", hazard="{dist: constant, value: 250 s}", delay="{dist: constant, value: 30 s}",
                every=1, write="10 s", restore="5 s", boot="20 s", replicas=1)
    base.update(kw)
    return parse_scenario(ONE_NODE % base)


def test_event_order_of_two_reclaims_and_restarts() -> None:
    sc = _scenario()
    prep = prepare(sc, 11)
    log: list[tuple[float, str]] = []
    r = run_replica(prep, 11, 0, log=log)
    assert [(round(t, 6), e) for t, e in log] == [
        (0.0, "capacity granted"), (20.0, "boot done"), (20.0, "image pull done"), (20.0, "init done"),
        (20.0, "rendezvous done"), (20.0, "epoch 0 started"), (120.0, "step 1"), (130.0, "checkpoint 1 written"),
        (230.0, "step 2"), (240.0, "checkpoint 2 written"),
        (250.0, "reclaimed 1 node(s); restore from step 2"), (280.0, "replacement capacity"),
        (300.0, "boot done"), (300.0, "image pull done"), (300.0, "init done"), (300.0, "rendezvous done"),
        (305.0, "restored step 2"), (305.0, "epoch 0 started"), (405.0, "step 3"), (415.0, "checkpoint 3 written"),
        (515.0, "step 4"), (525.0, "checkpoint 4 written"),
        (530.0, "reclaimed 1 node(s); restore from step 4"), (560.0, "replacement capacity"),
        (580.0, "boot done"), (580.0, "image pull done"), (580.0, "init done"), (580.0, "rendezvous done"),
        (585.0, "restored step 4"), (585.0, "epoch 0 started"), (685.0, "step 5"), (685.0, "done"),
    ]
    assert r.wall == pytest.approx(685.0)
    assert r.interruptions == 2
    assert r.time["compute"] == pytest.approx(500.0)  # only kept work
    assert r.time["recover"] == pytest.approx(4 * 10 + 10 + 5 + 2 * 5)  # writes, lost work, restores
    assert r.time["overhead"] == pytest.approx(3 * 20 + 2 * 30)  # boots, capacity waits
    assert sum(r.time.values()) == pytest.approx(r.wall)
    # billed: three nodes, 250 s + 250 s + 125 s (each rounded up to the 60 s minimum is not needed)
    assert r.spot_node_h * 3600 == pytest.approx(250 + 250 + 125)


def test_a_job_that_cannot_finish_stops_at_max_wall_with_all_work_lost() -> None:
    # no checkpoint, and every node lives 250 s: 500 s of training can never be kept
    sc = parse_scenario(ONE_NODE % dict(steps=5, step="100 s", hazard="{dist: constant, value: 250 s}",
                                         delay="{dist: constant, value: 30 s}", every=1000, write="10 s",
                                         restore="5 s", boot="20 s", replicas=1), ["simulation.max_wall=2 h"])
    r = run_replica(prepare(sc, 11), 11, 0)
    assert not r.finished
    assert 2 * 3600 <= r.wall < 2 * 3600 + 300
    assert r.time["compute"] == 0.0 and r.useful_gpu_h == 0.0
    # 230 s of training lost per node, and the training under way when max_wall stopped the job
    in_flight = r.time["recover"] - r.interruptions * 230.0
    assert 0.0 <= in_flight < 230.0
    assert sum(r.time.values()) == pytest.approx(r.wall)
    assert r.wall == pytest.approx(2 * 3600)  # a job stopped by max_wall stops at max_wall


def _identities(df) -> None:  # type: ignore[no-untyped-def]
    assert_budget_identities(df)
    assert np.all((df["eta"] > 0) & (df["eta"] <= 1))


@pytest.mark.slow
def test_expected_completion_time_matches_the_exact_formula() -> None:
    # Exponential failures (rate λ), work split in segments of τ each followed by a checkpoint of C,
    # a downtime D after each failure (no node alive, no failure possible) and no recovery cost:
    # E[segment] = (1/λ + D)(e^{λ(τ+C)} − 1)  (Bougeret, Casanova, Rabie, Robert, Vivien,
    # "Checkpointing strategies for parallel jobs", SC'11, Prop. 1 with R = 0). The last segment
    # has no checkpoint after it.
    lam, tau, c, d, segments = 0.5 / 3600, 3600.0, 120.0, 600.0, 10
    sc = _scenario(steps=int(segments * tau), step="1 s", hazard="{dist: exponential, rate_per_hour: 0.5}",
                   delay="{dist: constant, value: 10 min}", every=int(tau), write="2 min", restore="0 s", boot="0 s",
                   replicas=3000)
    res = simulate(sc, executor="inline")
    _identities(res.df)
    per = (1 / lam + d)
    expected = (segments - 1) * per * math.expm1(lam * (tau + c)) + per * math.expm1(lam * tau)
    wall = res.df["wall_h"].to_numpy() * 3600
    half = 3.29 * wall.std(ddof=1) / math.sqrt(len(wall))
    assert abs(wall.mean() - expected) <= half, (wall.mean(), expected, half)


@pytest.mark.slow
def test_interruptions_are_poisson_in_exposed_node_hours() -> None:
    sc = _scenario(steps=20 * 3600, step="1 s", hazard="{dist: exponential, rate_per_hour: 0.3}",
                   delay="{dist: exponential, mean: 5 min}", every=600, write="10 s", restore="30 s",
                   boot="2 min", replicas=2000)
    df = simulate(sc, executor="inline").df
    _identities(df)
    n, h = df["interruptions"].to_numpy(), df["spot_node_h"].to_numpy()
    resid = n - 0.3 * h  # E[N − λH] = 0 for a Poisson process observed over a stopping time
    assert abs(resid.mean()) <= 3.29 * resid.std(ddof=1) / math.sqrt(len(resid))


def test_at_least_one_interruption_in_a_day_seed_article_7_1() -> None:
    # p = 0.02/h over 24 h: the article's discrete 1 − 0.98^24 ≈ 0.384; a constant hazard gives
    # 1 − e^{−0.48} ≈ 0.381. A job with free checkpoints and instant recovery is exposed exactly 24 h.
    assert pytest.approx(0.384, abs=5e-4) == 1 - 0.98**24
    sc = _scenario(steps=24 * 60, step="1 min", hazard="{dist: exponential, rate_per_hour: 0.02}", delay="null",
                   every=1, write="0 s", restore="0 s", boot="0 s", replicas=4000)
    df = simulate(sc, executor="inline").df
    # exposure: 24 h, plus at most the partial step lost at each interruption
    extra = df["spot_node_h"] - 24.0
    assert (extra >= -1e-9).all() and (extra <= df["interruptions"] / 60 + 1e-9).all()
    p_hat = float((df["interruptions"] >= 1).mean())
    p = 1 - math.exp(-0.48)
    assert abs(p_hat - p) <= 3.29 * math.sqrt(p * (1 - p) / len(df))


def test_a_replica_without_interruption_costs_the_on_demand_arithmetic_at_the_spot_price() -> None:
    sc = _scenario(steps=3600, step="1 s", hazard="{dist: exponential, rate_per_hour: 0.5}", every=600,
                   replicas=200)
    res = simulate(sc, executor="inline")
    df = res.df[res.df["interruptions"] == 0]
    assert len(df) > 20
    price = res.job.price_usd_per_node_hour
    assert price == pytest.approx(0.4 * 1.006)
    node = df["cost_usd"] - df["cost_storage_usd"] - df["cost_egress_usd"]
    assert node.to_numpy() == pytest.approx((df["billed_gpu_h"] * price).to_numpy(), rel=1e-9)


SPOT8 = """
name: s8
dataset: {name: indian_pines, patch: 15, pca_components: 30}
model: {name: hybridsn, precision: amp_fp16}
training: {epochs: 400, global_batch: 512, micro_batch: 64}
loader: {num_workers: 2, persistent_workers: true}
cluster: {instance: g5.12xlarge, nodes: 2, market: spot}
spot: {hazard: {dist: exponential, rate_per_hour: 3.0}, replacement_delay: {dist: exponential, mean: 3 min}}
checkpoint: {policy: daly, storage: s3, async: true}
overhead: {boot: 1 min, init: 30 s}
simulation: {replicas: 60, seed: 2}
"""


@pytest.mark.parametrize("sets", [
    [], ["spot.recovery=elastic"], ["spot.recovery=fallback_on_demand", "spot.fallback_after=2"],
    ["spot.recovery=fallback_on_demand", "spot.fallback_wait_limit=1 min"], ["checkpoint.on_notice=true"],
    ["checkpoint.policy=on_notice"], ["spot.correlated_rate_per_hour=2"], ["spot.bill_survivors=false"],
    ["checkpoint.storage=local_nvme"], ["cluster.on_demand_nodes=1"], ["checkpoint.async=false"],
    ["spot.hazard={dist: weibull, shape: 0.6, scale: 20 min}"], ["spot.hazard={dist: advisor, band: '>20%'}"],
], ids=lambda s: ",".join(s) or "restart")
def test_identities_hold_under_every_recovery_mode(sets: list[str]) -> None:
    res = simulate(parse_scenario(SPOT8, sets), executor="inline")
    _identities(res.df)
    assert (res.df["useful_gpu_h"] > 0).all()


def test_elastic_keeps_training_while_restart_waits() -> None:
    restart = simulate(parse_scenario(SPOT8), executor="inline").df
    elastic = simulate(parse_scenario(SPOT8, ["spot.recovery=elastic"]), executor="inline").df
    assert elastic["t_overhead_h"].mean() < restart["t_overhead_h"].mean()
    assert elastic["cost_idle_usd"].max() == 0.0 and restart["cost_idle_usd"].mean() > 0


def test_fallback_moves_to_on_demand() -> None:
    df = simulate(parse_scenario(SPOT8, ["spot.recovery=fallback_on_demand", "spot.fallback_after=1"]),
                  executor="inline").df
    # after the first reclaim every node is on-demand: no second interruption can happen
    assert ((df["fell_back"] == 1) == (df["interruptions"] >= 1)).all()
    assert df["interruptions"].max() <= 2  # two nodes can be reclaimed at the same instant at most
    assert 0 < df["fell_back"].mean() < 1
    assert (df["switches"] == df["fell_back"]).all()  # one move to on-demand, for good
    assert ((df["on_demand_gpu_h"] > 0) == (df["fell_back"] == 1)).all()


def test_emergency_checkpoint_on_notice_saves_work() -> None:
    # every node lives 250 s; 3 steps of 100 s; a 60 s notice. Without checkpoints the job never
    # finishes; with on_notice the job finishes the step in progress at the notice (190 s → 220 s),
    # writes 10 s, trains on until the reclaim (20 s lost), restores step 2 on a new node and ends.
    text = ONE_NODE % dict(steps=3, step="100 s", hazard="{dist: constant, value: 250 s}",
                           delay="{dist: constant, value: 30 s}", every=1, write="10 s", restore="5 s",
                           boot="20 s", replicas=1)
    text = text.replace("notice: 0 s", "notice: 60 s")
    none = run_replica(prepare(parse_scenario(text, ["checkpoint.policy=none", "checkpoint.every_steps=null",
                                                     "simulation.max_wall=1 h"]), 1), 1, 0)
    log: list[tuple[float, str]] = []
    notice = run_replica(prepare(parse_scenario(text, ["checkpoint.policy=on_notice", "checkpoint.every_steps=null"]),
                                 1), 1, 0, log=log)
    assert not none.finished
    assert notice.finished and notice.wall == pytest.approx(405.0)
    assert (230.0, "emergency checkpoint at step 2") in [(round(t, 6), e) for t, e in log]
    assert notice.time["compute"] == pytest.approx(300.0)
    assert notice.time["recover"] == pytest.approx(10 + 20 + 5)
    assert notice.time["overhead"] == pytest.approx(20 + 30 + 20)


def test_local_nvme_checkpoints_die_with_their_node() -> None:
    s3 = simulate(parse_scenario(SPOT8), executor="inline").df
    nvme = simulate(parse_scenario(SPOT8, ["checkpoint.storage=local_nvme"]), executor="inline").df
    assert nvme["t_recover_h"].mean() > 2 * s3["t_recover_h"].mean()


# --- hazards from data ----------------------------------------------------------------------

LIFETIMES = SHARED_DATA / "spot" / "aws_spot_gpu_lifetimes_2020-03-15.csv"


def _sample() -> hz.LifetimeSample:
    if not LIFETIMES.is_file():
        pytest.skip("../shared/data/spot/aws_spot_gpu_lifetimes_2020-03-15.csv is absent")
    return hz.read_lifetimes(LIFETIMES)


def test_censored_exponential_fit_of_the_real_lifetimes() -> None:
    s = _sample()
    assert len(s.hours) == 39 and s.events == 32
    fit = hz.fit_exponential(s)
    # independent computation: the censored MLE of a constant hazard is events / total exposure
    assert fit.rate_per_hour == pytest.approx(32 / s.hours.sum())
    # and it maximises the censored log-likelihood numerically
    grid = np.linspace(0.5, 1.5, 201) * fit.rate_per_hour
    ll = 32 * np.log(grid) - grid * s.hours.sum()
    assert grid[np.argmax(ll)] == pytest.approx(fit.rate_per_hour, rel=0.01)
    lo, hi = fit.rate_ci95  # type: ignore[misc]
    assert lo < fit.rate_per_hour < hi


def test_censored_weibull_fit_agrees_with_scipy() -> None:
    s = _sample()
    fit = hz.fit_weibull(s)
    data = stats.CensoredData(uncensored=s.hours[s.observed], right=s.hours[~s.observed])
    shape, _, scale = stats.weibull_min.fit(data, floc=0)
    assert fit.shape == pytest.approx(shape, rel=1e-3)
    assert fit.scale_hours == pytest.approx(scale, rel=1e-3)
    lo, hi = fit.shape_ci95  # type: ignore[misc]
    assert lo < fit.shape < hi < 1  # a decreasing hazard: young spot instances are reclaimed sooner
    # the Weibull fits the sample better than the constant hazard (likelihood-ratio test, 1 dof)
    assert 2 * (fit.log_likelihood - hz.fit_exponential(s).log_likelihood) > stats.chi2.ppf(0.95, 1)


def test_censored_fit_recovers_a_known_hazard() -> None:
    rng = np.random.default_rng(3)
    life = rng.exponential(10.0, 4000)
    seen = np.minimum(life, 15.0)
    fit = hz.fit_exponential(hz.LifetimeSample(seen, life < 15.0))
    lo, hi = fit.rate_ci95  # type: ignore[misc]
    assert lo <= 0.1 <= hi


def test_advisor_bands_map_to_monthly_probabilities() -> None:
    for band, p in hz.ADVISOR_BANDS.items():
        assert 1 - math.exp(-hz.advisor_rate_per_hour(band) * 730) == pytest.approx(p)


def test_a_scenario_can_use_the_real_lifetime_sample() -> None:
    _sample()
    sc = parse_scenario(SPOT8, [f"spot.hazard={{dist: lifetimes, file: {LIFETIMES}, fit: weibull}}"])
    res = simulate(sc, replicas=20, executor="inline")
    _identities(res.df)
    from hsisim.resolve.spot import resolve_spot

    setup = resolve_spot(sc, 5.672)
    assert setup is not None and setup.fit is not None and setup.fit.shape == pytest.approx(0.432, abs=1e-3)
    assert setup.lifetime.mean == pytest.approx(setup.fit.mean_hours * 3600)


def test_missing_lifetimes_file_is_a_clear_error() -> None:
    from hsisim.errors import HsisimInputError
    from hsisim.resolve.spot import resolve_spot

    sc = parse_scenario(SPOT8, ["spot.hazard={dist: lifetimes, file: nowhere.csv}"])
    with pytest.raises(HsisimInputError, match="not found"):
        resolve_spot(sc, 1.0)


def test_kept_compute_is_exactly_the_job_whatever_the_checkpoint_losses() -> None:
    # two nodes, local NVMe checkpoints on rank 0's node: losing rank 1 restores from the
    # checkpoint, losing rank 0 restarts from step 0 and every earlier kept step becomes lost work
    text = ONE_NODE % dict(steps=20000, step="1 s", hazard="{dist: exponential, rate_per_hour: 0.5}",
                           delay="{dist: constant, value: 1 min}", every=600, write="5 s", restore="5 s",
                           boot="0 s", replicas=200)
    sc = parse_scenario(text.replace("nodes: 1", "nodes: 2").replace("global_batch: 64", "global_batch: 128")
                        .replace("every_steps: 600,", "every_steps: 600, storage: local_nvme,"))
    df = simulate(sc, executor="inline").df
    _identities(df)
    assert (df["interruptions"] >= 2).mean() > 0.5
    assert df["t_compute_h"].to_numpy() == pytest.approx(20000 / 3600, rel=1e-9)
    assert df["useful_gpu_h"].to_numpy() == pytest.approx(2 * 20000 / 3600, rel=1e-9)


def test_job_mtbf_of_independent_nodes_and_zone_events() -> None:
    # N nodes with hazard λ each: M = 1/(Nλ); zone-wide reclaims at rate c add to the job's rate
    from hsisim.resolve.spot import resolve_spot

    spot8 = ROOT / "scenarios" / "spot_8x.yaml"
    two = resolve_spot(load_scenario(spot8, ["spot.hazard.rate_per_hour=0.02"]), 1.0)
    assert two is not None and two.mtbf_s == pytest.approx(3600 / (2 * 0.02))
    zone = resolve_spot(load_scenario(spot8, ["spot.hazard.rate_per_hour=0.02",
                                              "spot.correlated_rate_per_hour=0.01"]), 1.0)
    assert zone is not None and zone.mtbf_s == pytest.approx(3600 / (2 * 0.02 + 0.01))


def test_survivors_are_billed_idle_while_a_replacement_arrives_and_boots() -> None:
    # rank 0 on-demand, rank 1 spot reclaimed at 250 s; the survivor waits 30 s for capacity, then
    # 20 s of the replacement's boot: 50 s of an on-demand node billed as idle, nothing else idle
    sc = _scenario(steps=5, every=1).with_overrides(
        ["cluster.nodes=2", "cluster.on_demand_nodes=1", "training.global_batch=128"])
    prep = prepare(sc, 11)
    log: list[tuple[float, str]] = []
    r = run_replica(prep, 11, 0, log=log)
    od_usd_per_s = prep.job.on_demand_usd_per_node_hour / 3600
    reclaims = [t for t, e in log if e.startswith("reclaimed")]
    assert reclaims and r.money["idle"] == pytest.approx(len(reclaims) * (30 + 20) * od_usd_per_s)
