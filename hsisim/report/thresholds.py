"""The seed article's trigger thresholds, evaluated on a scenario, its calibration profile and its baseline run.

The article gives its thresholds as engineering starting points that trigger an investigation, not
verdicts (§3.2). Where it names a number (reserved/allocated > 1.15, §5.2; scaling efficiency
< 0.7, §6.2; num_workers at 50–75 % of the cores, §4.2) that number is used; where it names only
the check (the GPU waiting for data, §4.2 step 1; communication not overlapped, §6.2 step 2) the
limit is hsisim's and says so. ``triggered`` is None for figures that inform rather than trigger.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from hsisim import catalog
from hsisim.montecarlo.prepare import Prepared, StepModels, step_model_for
from hsisim.profile import load_profile
from hsisim.report.fixes import FRAGMENTATION_LIMIT, WORKER_SHARE
from hsisim.scenario import Scenario
from hsisim.sim.policy import interval_seconds

DATA_WAIT_LIMIT = 0.10  # hsisim's: the article names the check (§4.2 step 1), not a share
EXPOSED_LIMIT = 0.5  # hsisim's: more than half of the all-reduce on the critical path (§6.2 step 2)
ETA_EXAMPLE = 0.6  # §3.2: "a system with η = 0.6 whose cost is controlled beats one with η = 0.85 ..."
SCALING_LIMIT = 0.7  # §6.2 step 1


def _item(id_: str, check: str, section: str, value: Any, limit: str, triggered: bool | None, basis: str,
          detail: str = "") -> dict[str, Any]:
    return {"id": id_, "check": check, "section": section, "value": value, "limit": limit, "triggered": triggered,
            "basis": basis, "detail": detail}


def evaluate(sc: Scenario, prep: Prepared, summary: dict[str, Any], seed: int, models: StepModels | None = None,
             scaling: bool = True) -> list[dict[str, Any]]:
    """Every threshold of the article that applies to the scenario, with its value and whether it triggers
    (``scaling``: simulate one GPU alone for the scaling efficiency, one more micro simulation)."""
    m = summary["metrics"]
    wall = m["wall_h"]["mean"]
    share = {t: (m[f"t_{t}_h"]["mean"] / wall if wall else 0.0) for t in ("data", "comm")}
    eta = m["eta"]["mean"]
    out = [_item("eta", "η = t_compute / T", "§3.1, §3.2", eta, f"< {ETA_EXAMPLE} (the article's example)",
                 eta < ETA_EXAMPLE, "simulation")]
    out += _data(sc, share["data"])
    out += _memory(sc, prep)
    out += _comm(sc, prep, seed, models, scaling)
    out += _spot(sc, prep, summary)
    out += _cost(summary)
    return out


def _data(sc: Scenario, data_share: float) -> list[dict[str, Any]]:
    ld, inst = sc.loader, catalog.instance(sc.cluster.instance)
    out = [_item("data_wait", "GPU waiting for data (share of T)", "§4.2 step 1", data_share,
                 f"> {DATA_WAIT_LIMIT:.0%} (hsisim's limit)", data_share > DATA_WAIT_LIMIT, "simulation")]
    if inst.vcpus:
        used = ld.num_workers * inst.gpus / inst.vcpus
        out.append(_item("workers", "loader workers per node / vCPUs", "§4.2 step 3", used,
                         f"< {WORKER_SHARE:.0%} (the article: 50–75 % of the cores)", used < WORKER_SHARE, "scenario",
                         f"{ld.num_workers} worker(s) × {inst.gpus} GPU(s) on {inst.vcpus} vCPUs"))
    off = [k for k in ("pin_memory", "persistent_workers") if not getattr(ld, k)]
    out.append(_item("loader_flags", "pin_memory and persistent_workers on", "§4.2 step 3",
                     ", ".join(off) + " off" if off else "on", "either off", bool(off), "scenario"))
    out.append(_item("getitem", "preprocessing (normalisation, PCA) inside __getitem__", "§4.2 step 4",
                     sc.dataset.preprocess, "getitem", sc.dataset.preprocess == "getitem", "scenario"))
    return out


def fragmentation(sc: Scenario) -> tuple[float, str]:
    """reserved / allocated as the run uses it, and where it comes from: the scenario's when it sets one, else the
    calibration profile's memory probe when it measured this GPU, else the default."""
    frag, basis = sc.memory.fragmentation, "scenario" if "fragmentation" in sc.memory.model_fields_set else "default"
    if basis == "default" and sc.calibration is not None:
        prof = load_profile(sc.calibration)
        if prof.fragmentation is not None and prof.catalog_gpu == catalog.instance(sc.cluster.instance).gpu:
            return prof.fragmentation, "profile (memory probe)"
    return frag, basis


def _memory(sc: Scenario, prep: Prepared) -> list[dict[str, Any]]:
    frag, basis = fragmentation(sc)
    job = prep.job
    shrunk = job.micro_batch < sc.training.micro_batch or job.stall_share > 0
    return [_item("fragmentation", "reserved / allocated memory", "§5.2 step 1", frag, f"> {FRAGMENTATION_LIMIT}",
                  frag > FRAGMENTATION_LIMIT, basis),
            _item("shrunk", "micro-batch forced down (or activation checkpointing forced) by memory", "§5.2 step 3",
                  f"{job.micro_batch} of {sc.training.micro_batch} asked", "smaller than asked", shrunk, "scenario")]


def scaling_efficiency(prep: Prepared, seed: int, models: StepModels | None = None) -> float:
    """Throughput on the job's N GPUs / (N × throughput on one of them): the optimizer step of one GPU alone
    (the same per-GPU compute and loader, all the accumulation, no all-reduce and no waiting for other ranks)
    simulated by the micro model against the job's own step."""
    job = prep.job
    if job.world == 1 or job.timed:
        return 1.0
    solo = replace(job, nodes=1, gpus_per_node=1, accumulation=job.accumulation * job.world, comm_exposed_s=0.0,
                   comm_total_s=0.0, comm_cv=0.0, comm_quantiles=())
    mu_1 = step_model_for(solo, seed, models).mu
    return mu_1 / (job.world * prep.model.mu)


def _comm(sc: Scenario, prep: Prepared, seed: int, models: StepModels | None, scaling: bool) -> list[dict[str, Any]]:
    job = prep.job
    if job.world == 1:
        return []
    out = []
    if scaling:
        eff = scaling_efficiency(prep, seed, models)
        out.append(_item("scaling", f"scaling efficiency on {job.world} GPUs", "§6.2 step 1", eff,
                         f"< {SCALING_LIMIT}", eff < SCALING_LIMIT, "simulation",
                         "throughput(N) / (N × throughput(1)), step times of the micro simulation"))
    if job.comm_total_s > 0:
        exposed = job.comm_exposed_s / job.comm_total_s
        out.append(_item("overlap", "all-reduce not hidden by the backward pass (exposed / total)", "§6.2 step 2",
                         exposed, f"> {EXPOSED_LIMIT:.0%} (hsisim's limit)", exposed > EXPOSED_LIMIT, "simulation"))
    if sc.cluster.nodes > 1:
        net = catalog.instance(sc.cluster.instance).network
        out.append(_item("interconnect", "inter-node traffic over plain Ethernet (TCP)", "§6.2 step 3", net,
                         "Ethernet", net.startswith("eth"), "scenario"))
    return out


def _spot(sc: Scenario, prep: Prepared, summary: dict[str, Any]) -> list[dict[str, Any]]:
    spot = prep.spec.spot
    if spot is None or sc.cluster.market != "spot":
        return []
    m = summary["metrics"]
    wall_s = m["wall_h"]["mean"] * 3600
    p = 1 - math.exp(-wall_s / spot.mtbf_s) if math.isfinite(spot.mtbf_s) else 0.0
    out = [_item("interrupted", "P(at least one interruption) over the mean wall time, 1 − exp(−T/M)", "§7.1", p,
                 "", None, "scenario", f"job MTBF M = {spot.mtbf_s / 3600:,.1f} h; {m['interruptions']['mean']:.2f} "
                 "interruptions per replica simulated")]
    tau = interval_seconds(prep.spec.checkpoint, prep.job, spot)
    if tau is not None:
        out.append(_item("interval", "checkpoint interval (minutes of training)", "§7.2", tau / 60,
                         "10–30 min is common; tune by measurement (checkpoint.png)", None, "scenario"))
    return out


def _cost(summary: dict[str, Any]) -> list[dict[str, Any]]:
    m = summary["metrics"]
    total = m["cost_usd"]["mean"]
    if not total:
        return []
    idle = m["cost_idle_usd"]["mean"] / total
    spread = m["cost_usd"]["p90"] / m["cost_usd"]["p50"] if m["cost_usd"]["p50"] else math.nan
    return [_item("effective_price", "effective cost per useful GPU-hour / on-demand list price per GPU-hour",
                  "§7.1, §8.1", m["cost_per_useful_gpu_h"]["mean"] / summary["on_demand_usd_per_gpu_h"]
                  if summary["on_demand_usd_per_gpu_h"] else math.nan, "", None, "simulation"),
            _item("idle", "idle GPU cost (share of the bill)", "§8.1", idle, "", None, "simulation"),
            _item("predictable", "cost P90 / P50 (how predictable the bill is)", "§3.2", spread, "", None,
                  "simulation")]
