"""Resolve a scenario against the catalog (and a calibration profile) into a ``RunSpec`` of plain numbers.

This is where the analytic component models meet the user's choices, one component at a time:
hardware, the model's workload, steps and compute, communication, the data pipeline,
checkpoints, prices, spot capacity. The simulation reads only the ``RunSpec`` it returns.
"""

from __future__ import annotations

from dataclasses import replace

from hsisim.errors import HsisimInputError
from hsisim.profile import Profile, load_profile
from hsisim.resolve.checkpoints import checkpoints, plan
from hsisim.resolve.comm import comm
from hsisim.resolve.compute import Compute, compute_time, steps
from hsisim.resolve.data import Data, data, loop_warnings
from hsisim.resolve.hardware import Hardware, hardware
from hsisim.resolve.prices import prices
from hsisim.resolve.spot import resolve_spot
from hsisim.resolve.workload import check_code_allowed, workload
from hsisim.scenario import Scenario
from hsisim.sim.cpu import shared
from hsisim.sim.spec import Billing, Job, Overheads, RunSpec

__all__ = ["check_code_allowed", "resolve", "resolve_job"]


def resolve(sc: Scenario, *, allow_code: bool = False) -> RunSpec:
    """The ``RunSpec`` of scenario ``sc``; raises ``HsisimInputError`` for impossible choices.

    A scenario that names the user's own model or dataset factory runs that code (it is imported
    and called to measure it): only with ``allow_code``, since a scenario file may come from anyone.
    """
    job = resolve_job(sc, allow_code=allow_code)
    oh, cost = sc.overhead, sc.cost
    try:
        spot = resolve_spot(sc, job.on_demand_usd_per_node_hour)
    except HsisimInputError as exc:
        raise sc.locate(exc) from None
    return RunSpec(
        name=sc.name, job=job, checkpoint=plan(sc),
        overhead=Overheads(oh.queue, oh.boot, oh.image_pull, oh.init, oh.rendezvous),
        billing=Billing(cost.min_billed, cost.storage_usd_per_gb_month, cost.egress, cost.egress_usd_per_gb),
        spot=spot,
        fidelity=sc.simulation.fidelity, max_wall_s=sc.simulation.max_wall, deadline_s=sc.simulation.deadline)


def resolve_job(sc: Scenario, *, nodes: int | None = None, allow_code: bool = False) -> Job:
    """The step-level ``Job`` of ``sc`` (on ``nodes`` nodes instead of the scenario's, for elastic runs)."""
    if nodes is not None:
        sc = sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"nodes": nodes})})
    try:
        return _job(sc, allow_code)
    except HsisimInputError as exc:  # point at the key's line in the scenario file
        raise sc.locate(exc) from None


def _job(sc: Scenario, allow_code: bool) -> Job:
    prof = load_profile(sc.calibration) if sc.calibration is not None else None
    hw = hardware(sc, prof)
    wl = workload(sc, prof, allow_code=allow_code)
    st = steps(sc, hw, wl, prof)
    cp = compute_time(sc, hw, wl, st, prof)
    cm = comm(sc, hw, wl, st, cp, prof)
    dp = data(sc, hw, wl, st, prof)
    ck = checkpoints(sc, hw, wl, prof)
    pr = prices(sc, hw)
    notes = (*wl.notes, *st.notes, *cp.notes, *cm.notes, *dp.notes, *ck.notes, *pr.notes)
    # the cores a rank keeps busy while it computes: its intra-op threads on a CPU device, the thread
    # launching kernels on a GPU
    demand = float(hw.threads) if hw.threads is not None else 1.0
    if prof is not None and hw.on_cpu and hw.instance.gpus > 1 and prof.compute_processes == hw.instance.gpus:
        # the profile timed every rank of this node computing at once: its steps already share the
        # cores between them, so each rank keeps only its part of them busy
        demand = min(demand, hw.vcpus / hw.instance.gpus)
    job = Job(
        nodes=hw.nodes, gpus_per_node=hw.instance.gpus, accumulation=st.accumulation, micro_batch=st.micro_batch,
        steps_per_epoch=st.steps_per_epoch, total_steps=st.total_steps,
        compute_s=cp.compute_s * _rescale(cp, dp, prof, hw) * dp.step_base, stall_share=cp.stall_share,
        compute_cv=cp.cost.cv,
        batch_build_s=dp.build_s, batch_build_cv=dp.build_cv, h2d_s=dp.h2d_s, handover_s=dp.handover_s,
        num_workers=sc.loader.num_workers, prefetch_factor=sc.loader.prefetch_factor,
        persistent_workers=sc.loader.persistent_workers, worker_start_s=hw.cpu.worker_start_s,
        comm_exposed_s=cm.exposed_s, comm_total_s=cm.total_s, comm_cv=cm.cv, comm_quantiles=cm.quantiles,
        ckpt_bytes=ck.bytes, ckpt_write_s=ck.write_s, ckpt_snapshot_s=ck.snapshot_s, ckpt_restore_s=ck.restore_s,
        oom_retry_s=cp.oom_retry_s, price_usd_per_node_hour=pr.usd_per_node_hour,
        cpu_cores=hw.vcpus if dp.paces is not None or shared(hw.vcpus, hw.instance.gpus, demand,
                                                              sc.loader.num_workers) else 0.0,
        paces=dp.paces, blas_lever=dp.blas_lever,
        compute_cpu_demand=demand, compute_slowdown=_slowdown(prof, hw),
        on_demand_usd_per_node_hour=pr.on_demand_usd_per_node_hour, notes=notes,
        warnings=cp.warnings + loop_warnings(sc, hw, wl, prof))
    return _timed(job, sc) if sc.timings is not None else job


def _rescale(cp: Compute, dp: Data, prof: Profile | None, hw: Hardware) -> float:
    """The compute fit rescaled to pass through the step the interference probe timed (1: none, or the
    scenario's model is not the one the profile measured: its fit was scaled)."""
    if dp.step_at is None or prof is None or cp.cost != prof.compute_fit(hw.threads)[0]:
        return 1.0
    seconds, batch = dp.step_at
    return seconds / cp.cost.time(batch)


def _slowdown(prof: Profile | None, hw: Hardware) -> tuple[float, ...]:
    """A step's measured slowdown beside busy cores, where the profile measured it on this machine and with
    these threads (elsewhere the processor-sharing share is all the model knows)."""
    c = prof.contention if prof is not None and hw.on_cpu else None
    if c is None or c.threads != hw.threads or (prof is not None and prof.cores != hw.vcpus):
        return ()
    return tuple(c.slowdown)


def _timed(job: Job, sc: Scenario) -> Job:
    """Use the scenario's measured per-step timings instead of the modelled components."""
    assert sc.timings is not None
    t = sc.timings
    return replace(job, accumulation=1, compute_s=t.compute_per_step, stall_share=0.0, compute_cv=t.cv,
                   comm_exposed_s=t.comm_per_step, comm_total_s=t.comm_per_step,
                   timed=True, num_workers=0, batch_build_s=t.data_wait_per_step, batch_build_cv=t.cv,
                   h2d_s=0.0, handover_s=0.0, worker_start_s=0.0, oom_retry_s=0.0, warnings=(),
                   notes=(*job.notes, "step components from the scenario's `timings` section"))

