"""The step-level SimPy model: exact event order, closed forms, and statistics against theory."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_job
from scipy import integrate, stats

from hsisim.sim.micro import MicroSim
from hsisim.sim.stepmodel import estimate


def test_event_order_with_fixed_durations() -> None:
    # 1 rank, 2 workers, prefetch 1: batch 1.0 s per worker, compute 0.4 s, exposed comm 0.1 s
    log: list[tuple[float, str]] = []
    trace = MicroSim(make_job(), np.random.default_rng(0), start_workers=False, log=log).run(3)
    assert [(round(t, 9), e) for t, e in log] == [
        (1.0, "rank0 worker0 built batch 0"),
        (1.0, "rank0 worker1 built batch 1"),
        (1.0, "rank0 got batch 0"),
        (1.4, "rank0 at barrier step 0"),
        (1.5, "step 0 done"),
        (1.5, "rank0 got batch 1"),
        (1.9, "rank0 at barrier step 1"),
        (2.0, "rank0 worker0 built batch 2"),
        (2.0, "step 1 done"),
        (2.0, "rank0 got batch 2"),
        (2.4, "rank0 at barrier step 2"),
        (2.5, "rank0 worker1 built batch 3"),
        (2.5, "step 2 done"),
        (2.5, "rank0 got batch 3"),
    ]
    assert trace.duration.tolist() == pytest.approx([1.5, 0.5, 0.5])
    assert trace.data.tolist() == pytest.approx([1.0, 0.0, 0.0])
    assert trace.compute.tolist() == pytest.approx([0.4] * 3)
    assert trace.comm.tolist() == pytest.approx([0.1] * 3)


def test_worker_start_delays_the_first_batch() -> None:
    job = make_job(worker_start_s=0.25)
    trace = MicroSim(job, np.random.default_rng(0), start_workers=True).run(2)
    assert trace.duration.tolist() == pytest.approx([1.75, 0.5])


def test_no_workers_means_no_overlap() -> None:
    job = make_job(num_workers=0, batch_build_s=0.3, h2d_s=0.05)
    trace = MicroSim(job, np.random.default_rng(0)).run(5)
    assert trace.duration == pytest.approx(np.full(5, 0.3 + 0.05 + 0.4 + 0.1))
    assert trace.data == pytest.approx(np.full(5, 0.35))


@pytest.mark.parametrize(("workers", "build", "compute", "comm"), [
    (1, 1.0, 0.4, 0.1), (2, 1.0, 0.4, 0.1), (4, 1.0, 0.4, 0.1), (4, 3.0, 0.4, 0.1), (8, 0.5, 0.4, 0.0),
    (3, 2.0, 0.2, 0.3),
])
def test_deterministic_period_is_max_of_compute_and_work_per_worker(workers: int, build: float, compute: float,
                                                                    comm: float) -> None:
    job = make_job(num_workers=workers, prefetch_factor=2, batch_build_s=build, compute_s=compute,
                   comm_exposed_s=comm, h2d_s=0.0)
    trace = MicroSim(job, np.random.default_rng(0), start_workers=False).run(200)
    period = max(compute + comm, build / workers)
    # workers in lock-step deliver in bursts, so single steps vary; whole cycles (120 steps is a
    # multiple of every W here) take exactly the period on average
    assert trace.duration[80:].mean() == pytest.approx(period)
    # the decomposition: data is what is neither compute nor comm
    assert trace.data[80:].mean() == pytest.approx(period - compute - comm, abs=1e-12)
    assert np.all(trace.data >= 0)


def test_accumulation_all_reduces_once_per_optimizer_step() -> None:
    job = make_job(accumulation=4, num_workers=8, prefetch_factor=2, batch_build_s=0.1, compute_s=0.1,
                   comm_exposed_s=0.05)
    trace = MicroSim(job, np.random.default_rng(0), start_workers=False).run(50)
    assert trace.duration[10:] == pytest.approx(np.full(40, 4 * 0.1 + 0.05))


def test_exponential_work_single_worker_runs_at_its_mean() -> None:
    # one worker that always has work queued: the step period's mean is the mean batch time
    job = make_job(num_workers=1, prefetch_factor=4, batch_build_s=1.0, batch_build_cv=1.0, compute_s=0.05,
                   comm_exposed_s=0.0)
    d = MicroSim(job, np.random.default_rng(7), start_workers=False).run(20_000).duration[100:]
    half = 3.29 * d.std(ddof=1) / math.sqrt(len(d))  # steps are independent here: the worker never idles
    assert abs(d.mean() - 1.0) <= half


def test_exponential_work_respects_the_throughput_bound() -> None:
    # W workers cannot deliver more than W / E[b] batches per second; in-order consumption with a
    # finite prefetch window loses some of it, and a deeper window loses less
    base = dict(num_workers=4, batch_build_s=1.0, batch_build_cv=1.0, compute_s=0.01, comm_exposed_s=0.0)
    shallow = estimate(make_job(prefetch_factor=1, **base), np.random.default_rng(1), rel_halfwidth=5e-3)
    deep = estimate(make_job(prefetch_factor=16, **base), np.random.default_rng(2), rel_halfwidth=5e-3)
    bound = 1.0 / 4
    assert shallow.mu >= bound - shallow.ci95_halfwidth
    assert deep.mu >= bound - deep.ci95_halfwidth
    assert deep.mu < shallow.mu


def test_barrier_waits_for_the_slowest_rank() -> None:
    # p ranks with gamma compute (cv 0.3) and no data wait: E[step] = E[max of p draws] + comm
    p, mean, cv = 8, 0.1, 0.3
    job = make_job(nodes=2, gpus_per_node=4, num_workers=0, batch_build_s=0.0, compute_s=mean, compute_cv=cv,
                   comm_exposed_s=0.02)
    d = MicroSim(job, np.random.default_rng(11)).run(5000)
    shape = 1 / cv**2
    dist = stats.gamma(shape, scale=mean / shape)
    e_max = integrate.quad(lambda x: 1 - dist.cdf(x) ** p, 0, np.inf)[0]
    half = 3.29 * d.duration.std(ddof=1) / math.sqrt(len(d))
    assert abs(d.duration.mean() - (e_max + 0.02)) <= half
    # the critical path's compute is that of the slowest rank
    assert abs(d.compute.mean() - e_max) <= half
    # and the others wait for it: on average E[max] - E[one draw] per rank
    w_half = 3.29 * d.waited.std(ddof=1) / math.sqrt(len(d))
    assert abs(d.waited.mean() - (e_max - mean)) <= w_half
    single = MicroSim(make_job(num_workers=0, batch_build_s=0.0, compute_cv=cv), np.random.default_rng(2)).run(50)
    assert np.all(single.waited == 0.0)  # one rank waits for nobody


def test_step_model_deterministic_is_exact_with_epoch_excess() -> None:
    job = make_job(steps_per_epoch=50, worker_start_s=0.25, persistent_workers=True)
    m = estimate(job, np.random.default_rng(0))
    assert m.mu == pytest.approx(0.5) and m.sigma == pytest.approx(0.0, abs=1e-12)
    assert m.mean["compute"] == pytest.approx(0.4) and m.mean["comm"] == pytest.approx(0.1)
    assert m.excess_first["data"] == pytest.approx(1.25)  # empty queue + worker start
    assert m.excess_next["data"] == pytest.approx(1.0)  # persistent workers: queue refills only
    np_ = estimate(make_job(steps_per_epoch=50, worker_start_s=0.25, persistent_workers=False),
                   np.random.default_rng(0))
    assert np_.excess_next["data"] == pytest.approx(1.25)


def test_step_model_sigma_predicts_the_spread_of_sums() -> None:
    # σ from batch means must predict the variance of a sum of n consecutive steps
    job = make_job(num_workers=2, prefetch_factor=2, batch_build_s=0.9, batch_build_cv=0.5, compute_s=0.4,
                   compute_cv=0.2, comm_exposed_s=0.05)
    m = estimate(job, np.random.default_rng(3), rel_halfwidth=2e-3)
    sim = MicroSim(job, np.random.default_rng(4), start_workers=False)
    sim.run(200)
    n = 100
    sums = np.array([sim.run(n).duration.sum() for _ in range(400)])
    assert sums.mean() == pytest.approx(n * m.mu, rel=0.01)
    # the sample std of 400 sums has ~3.5 % relative error at 1 sigma; allow 4 sigma
    assert sums.std(ddof=1) == pytest.approx(m.sigma * math.sqrt(n), rel=0.15)


def test_same_seed_same_trace() -> None:
    job = make_job(batch_build_cv=0.5, compute_cv=0.2)
    a = MicroSim(job, np.random.default_rng(5)).run(100).duration
    b = MicroSim(job, np.random.default_rng(5)).run(100).duration
    assert np.array_equal(a, b)


def test_random_all_reduce_keeps_its_mean_and_spread() -> None:
    # a measured heavy-tailed all-reduce (comm_cv): gamma draws with the fitted mean, on the critical path
    job = make_job(comm_exposed_s=0.1, comm_total_s=0.1, comm_cv=0.5)
    tr = MicroSim(job, np.random.default_rng(3), start_workers=False).run(4000)
    n = len(tr.comm)
    assert abs(tr.comm.mean() - 0.1) <= 3.29 * tr.comm.std(ddof=1) / np.sqrt(n)
    assert 0.45 <= tr.comm.std(ddof=1) / tr.comm.mean() <= 0.55
    np.testing.assert_allclose(tr.duration, tr.compute + tr.data + tr.comm + tr.stall, rtol=1e-9, atol=1e-12)
    fixed = MicroSim(make_job(comm_exposed_s=0.1, comm_total_s=0.1), np.random.default_rng(3),
                     start_workers=False).run(100)
    assert np.all(fixed.comm == 0.1)


def test_measured_all_reduce_shape_is_drawn_by_its_inverse_distribution() -> None:
    from hsisim.profile import normalised as _quantiles

    q = _quantiles([0.2] * 20 + [1.8] * 21)  # two modes, as gloo on a shared CPU host shows
    job = make_job(comm_exposed_s=0.1, comm_total_s=0.1, comm_cv=0.5, comm_quantiles=q)
    tr = MicroSim(job, np.random.default_rng(8), start_workers=False).run(4000)
    n = len(tr.comm)
    assert abs(tr.comm.mean() - 0.1) <= 3.29 * tr.comm.std(ddof=1) / math.sqrt(n)
    # below the ramp between the modes: u < 19.5 / 40 (the draw interpolates between quantiles)
    fast = float(np.mean(tr.comm < 0.1))
    assert abs(fast - 19.5 / 40) <= 4 * math.sqrt(0.25 / n)
    assert tr.comm.min() == pytest.approx(0.1 * q[0]) and tr.comm.max() == pytest.approx(0.1 * q[-1])


# --- a node's cores shared by computation, workers and hand-overs (processor sharing) ---


def test_ample_cores_change_nothing() -> None:
    job = make_job(num_workers=2, batch_build_s=1.0, compute_s=0.4, compute_cv=0.3, batch_build_cv=0.2)
    free = MicroSim(job, np.random.default_rng(5)).run(200)
    roomy = MicroSim(make_job(num_workers=2, batch_build_s=1.0, compute_s=0.4, compute_cv=0.3, batch_build_cv=0.2,
                              cpu_cores=64.0, compute_cpu_demand=2.0), np.random.default_rng(5)).run(200)
    assert roomy.duration.tolist() == pytest.approx(free.duration.tolist(), rel=1e-9)
    assert roomy.data.tolist() == pytest.approx(free.data.tolist(), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("build", "compute"), [(0.3, 0.5), (0.8, 0.2), (0.5, 0.5)])
def test_one_core_one_worker_serialises_build_and_step(build: float, compute: float) -> None:
    # one core: the worker's batch and the training step cannot overlap in CPU time, whatever the
    # prefetch queue does, so in the steady state every step costs both
    job = make_job(num_workers=1, prefetch_factor=2, batch_build_s=build, compute_s=compute, comm_exposed_s=0.0,
                   comm_total_s=0.0, cpu_cores=1.0, compute_cpu_demand=1.0)
    trace = MicroSim(job, np.random.default_rng(0), start_workers=False).run(400)
    assert trace.duration[50:].mean() == pytest.approx(build + compute, rel=1e-6)


def test_oversubscribed_cores_slow_everything_in_proportion() -> None:
    # 2 cores; the training process's 2 threads and one busy worker demand 3: while both run, each
    # progresses at 2/3 of full speed. Compute 0.6 s, build 0.9 s, the worker always building (the
    # queue drains): the compute takes 0.6 / (2/3) = 0.9 s, in which the build advances 0.6 s; the
    # build's last 0.3 s runs alone at full speed while the training process waits: 1.2 s a step
    job = make_job(num_workers=1, prefetch_factor=2, batch_build_s=0.9, compute_s=0.6, comm_exposed_s=0.0,
                   comm_total_s=0.0, cpu_cores=2.0, compute_cpu_demand=2.0)
    trace = MicroSim(job, np.random.default_rng(0), start_workers=False).run(300)
    assert trace.duration[50:].mean() == pytest.approx(0.6 / (2 / 3) + (0.9 - 0.6), rel=1e-6)
    assert trace.data[50:].mean() == pytest.approx(0.3, rel=1e-6)


# --- measured paces: the user's builds and the training step meeting in a DataLoader loop ---


def _paced(paces_busy: tuple[float, ...] = (4.0, 6.0), **kw: float) -> MicroSim:
    from hsisim.sim.spec import Paces

    paces = Paces(step=(2.0, 3.0), build_idle=(1.0, 1.5), build_busy=paces_busy)
    job = make_job(prefetch_factor=2, comm_exposed_s=0.0, comm_total_s=0.0, cpu_cores=2.0, compute_cpu_demand=2.0,
                   paces=paces, **kw)
    return MicroSim(job, np.random.default_rng(0), start_workers=False, log=[])


def test_paces_one_worker_event_order() -> None:
    # build 1.0 s alone, step 1.0 s alone; beside a build a step takes 2x, a build beside a step 4x.
    # Batch 0 and 1 are both asked for at t = 0 (prefetch 2), one worker builds them in turn:
    # batch 0 alone, 0 → 1.0. Step 0 runs 1.0 → 3.0 (2x) while batch 1 gets 2 / 4 = 0.5 of its work;
    # its other 0.5 runs alone while the training process waits: 3.0 → 3.5. Step 1: 3.5 → 5.5, and so on
    sim = _paced(num_workers=1, batch_build_s=1.0, compute_s=1.0)
    trace = sim.run(3)
    assert [(round(t, 9), e) for t, e in sim.log or [] if "built" in e or "barrier" in e][:4] == [
        (1.0, "rank0 worker0 built batch 0"), (3.0, "rank0 at barrier step 0"),
        (3.5, "rank0 worker0 built batch 1"), (5.5, "rank0 at barrier step 1")]
    assert trace.duration.tolist() == pytest.approx([3.0, 2.5, 2.5])
    assert trace.data.tolist() == pytest.approx([1.0, 0.5, 0.5])
    assert trace.compute.tolist() == pytest.approx([2.0, 2.0, 2.0])


def test_paces_two_workers_use_the_two_worker_paces() -> None:
    # two workers always building (data-bound): beside them a step takes 3x; beside a step each build
    # runs at 1/8, alone at 1/1.5. Each worker owes half a build per step: 3.0 / 8 = 0.375 of it while
    # the step runs, the other 0.125 while the training process waits, at 1.5x: 0.1875 s a step
    sim = _paced(num_workers=2, batch_build_s=1.0, compute_s=1.0, paces_busy=(4.0, 8.0))
    trace = sim.run(200)
    assert trace.duration[100:].mean() == pytest.approx(3.0 + 0.1875, rel=1e-6)
    assert trace.data[100:].mean() == pytest.approx(0.1875, rel=1e-6)
    assert trace.compute[100:].mean() == pytest.approx(3.0, rel=1e-6)


def test_paces_without_workers_do_nothing() -> None:
    sim = _paced(num_workers=0, batch_build_s=0.3, compute_s=0.4)
    trace = sim.run(5)
    assert trace.duration == pytest.approx(np.full(5, 0.7))
