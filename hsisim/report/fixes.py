"""The seed article's standard fixes, bottleneck by bottleneck, as scenario overrides.

Each ``Fix`` is what a user would change, written as the ``--set KEY=VALUE`` overrides that
``hsisim run`` takes, so a claimed gain can be reproduced exactly. Only fixes that apply to the
scenario are proposed (no offline preprocessing when it already is offline, no spot fixes on
on-demand capacity, loader workers only up to the node's vCPUs per GPU).

Effort, from the article's own ordering (§3.2: data loading and memory management are low
investment, communication and fault tolerance medium, cost scheduling systemic), is scored by the
kind of change a fix needs:

- 1, configuration: a setting in the launcher or the job's config (DataLoader arguments, the
  collective, the micro-batch, the checkpoint policy, the market, the node count);
- 2, code change: the training script changes (preprocessing moved out of ``__getitem__``, data
  materialised to a memory-mapped array, activation checkpointing, ZeRO/FSDP, an asynchronous or
  emergency checkpoint writer, elastic training);
- 3, infrastructure change: other machines or images (a bigger instance, a baked machine image).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hsisim import catalog
from hsisim.profile import BLAS_LEVER
from hsisim.scenario import Scenario
from hsisim.sim.spec import Job

EFFORT = {1: "configuration", 2: "code change", 3: "infrastructure change"}
# bottleneck → (label, article section); the order is the article's checklist (§4–§8)
BOTTLENECKS = {
    "data": ("data supply", "§4"),
    "memory": ("memory / fragmentation", "§5"),
    "comm": ("communication", "§6"),
    "interruptions": ("interruptions / recovery", "§7"),
    "overhead": ("overhead (queue, boot, image, init)", "§3.1"),
    "cost": ("cost (market, idle, storage)", "§7.1, §8"),
}
# each term of the time budget and each money category belongs to one bottleneck (compute to none)
TIME_TERMS = {"data": "data", "stall": "memory", "comm": "comm", "recover": "interruptions", "overhead": "overhead"}
MONEY = {"data": "data", "stall": "memory", "comm": "comm", "recover": "interruptions", "overhead": "overhead",
         "idle": "cost", "storage": "cost", "egress": "cost"}
WORKER_SHARE = 0.5  # §4.2 step 3: num_workers at 50–75 % of the cores; the low end leaves the training process room
FRAGMENTATION_LIMIT = 1.15  # §5.2 step 1


@dataclass(frozen=True)
class Fix:
    """A standard fix: what to do, as overrides, how much effort it takes and where the article says so."""

    id: str
    bottleneck: str
    title: str
    overrides: tuple[str, ...]
    effort: int
    source: str


def candidates(sc: Scenario, job: Job, stalled: bool) -> list[Fix]:
    """Every standard fix that applies to ``sc`` (resolved as ``job``); ``stalled``: the memory model forced
    a smaller micro-batch or activation checkpointing (there is a memory stall to remove)."""
    if sc.timings is not None:  # measured step components: the component models (and their fixes) are off
        return _market(sc) + _interruptions(sc, job) + _overhead(sc)
    return (_data(sc, job) + _memory(sc, job, stalled) + _comm(sc, job) + _interruptions(sc, job) + _overhead(sc)
            + _market(sc))


def _data(sc: Scenario, job: Job) -> list[Fix]:
    out = []
    ld, inst = sc.loader, catalog.instance(sc.cluster.instance)
    vcpus = inst.vcpus or os.cpu_count() or 1  # vcpus 0: this machine (as resolve.hardware reads it)
    want = max(1, int(WORKER_SHARE * vcpus // max(1, inst.gpus)))
    sets = []
    if want > ld.num_workers:
        sets.append(f"loader.num_workers={want}")
    if want > 0 or ld.num_workers > 0:
        sets += [f"loader.{k}=true" for k in ("pin_memory", "persistent_workers") if not getattr(ld, k)]
    if sets:
        flags = "".join(f", {k}" for k in ("pin_memory", "persistent_workers") if f"loader.{k}=true" in sets)
        out.append(Fix("loader", "data", f"DataLoader: {max(want, ld.num_workers)} workers per GPU (half the node's "
                       f"{vcpus} vCPUs over {inst.gpus} GPU(s)){flags}", tuple(sets), 1, "§4.2 step 3"))
    if job.blas_lever:
        n = BLAS_LEVER
        out.append(Fix("blas_threads", "data", f"the Dataset's BLAS at {n} thread: OPENBLAS_NUM_THREADS={n} (or "
                       f"MKL_NUM_THREADS={n}) before the script starts limits the training process and its workers; "
                       "its threads oversubscribe the cores beside the training's (calibration measured both runs)",
                       (f"dataset.blas_threads={n}",), 1, "§4.2 step 3 (workers contend for CPU)"))
    if sc.dataset.preprocess == "getitem":
        out.append(Fix("offline", "data", "compute normalisation and PCA once, before training (offline), not in "
                       "__getitem__", ("dataset.preprocess=offline",), 2, "§4.2 step 4"))
    if sc.dataset.storage in ("envi", "hdf5", "zarr", "network_fs"):
        out.append(Fix("memmap", "data", f"materialise the cube as a memory-mapped array on local disk (now "
                       f"{sc.dataset.storage})", ("dataset.storage=memmap",), 2, "§4.2 step 2, §4.3"))
    return out


def _memory(sc: Scenario, job: Job, stalled: bool) -> list[Fix]:
    out = []
    frag = sc.memory.fragmentation
    if (stalled and frag > 1.0) or frag > FRAGMENTATION_LIMIT:
        out.append(Fix("fragmentation", "memory", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and fixed tensor "
                       "shapes: reserved/allocated to 1.0 (the bound of the gain)", ("memory.fragmentation=1.0",), 1,
                       "§5.2 step 1, §5.3 (2)(3)"))
    if stalled and not sc.model.activation_checkpointing:
        out.append(Fix("activation_checkpointing", "memory", "activation checkpointing: recompute instead of storing "
                       "activations, so the requested micro-batch fits", ("model.activation_checkpointing=true",), 2,
                       "§5.3 (1)"))
    if stalled and job.world > 1 and sc.model.zero_stage < 2:
        out.append(Fix("zero", "memory", f"ZeRO stage {sc.model.zero_stage + 1} (shard optimizer state"
                       + (" and gradients" if sc.model.zero_stage == 1 else "") + " over the GPUs)",
                       (f"model.zero_stage={sc.model.zero_stage + 1}",), 2, "§5.3 (4), §6.3 (2)"))
    if not stalled and job.accumulation > 1:
        out.append(Fix("micro_batch", "memory", f"a micro-batch of {2 * job.micro_batch} (fewer micro-steps per "
                       "optimizer step, if memory allows)", (f"training.micro_batch={2 * job.micro_batch}",), 1,
                       "§5.2 step 3, §6.1"))
    return out


def _comm(sc: Scenario, job: Job) -> list[Fix]:
    out = []
    n = sc.cluster.nodes
    if n > 1 and sc.cluster.collective != "hierarchical":
        out.append(Fix("hierarchical", "comm", "hierarchical all-reduce (NVLink/PCIe inside a node, one NIC ring "
                       "between nodes)", ("cluster.collective=hierarchical",), 1, "§6.2 step 3, §6.3 (3)"))
    if n > 1:
        half = n // 2
        out.append(Fix("fewer_gpus", "comm", f"{half * job.gpus_per_node} GPUs instead of {job.world}, the global "
                       "batch kept by gradient accumulation", (f"cluster.nodes={half}",), 1, "§6.3 (1)"))
        gpu = catalog.instance(sc.cluster.instance).gpu
        bigger = [name for name in catalog.names("instances") if _one_node(name, gpu, job.world)]
        if bigger:
            out.append(Fix("one_node", "comm", f"one {bigger[0]} with all {job.world} GPUs (one NVLink/PCIe domain, "
                           "no inter-node traffic)", (f"cluster.instance={bigger[0]}", "cluster.nodes=1"), 3,
                           "§6.3 (3)"))
    return out


def _one_node(name: str, gpu: str, world: int) -> bool:
    inst = catalog.instance(name)
    return inst.gpu == gpu and inst.gpus == world


def _interruptions(sc: Scenario, job: Job) -> list[Fix]:
    if sc.cluster.market != "spot" or sc.spot is None:
        return []
    cp, out = sc.checkpoint, []
    if cp.policy in ("none", "fixed", "young", "on_notice"):
        sets = ["checkpoint.policy=daly"] + [f"checkpoint.{k}=null" for k in ("interval", "every_steps")
                                             if getattr(cp, k) is not None]
        out.append(Fix("daly", "interruptions", "checkpoint at Daly's interval (expected loss balanced against the "
                       "checkpoint's cost)", tuple(sets), 1, "§7.2"))
    if not cp.async_:
        out.append(Fix("async", "interruptions", "asynchronous checkpoints (snapshot to host, persist in the "
                       "background)", ("checkpoint.async=true",), 2, "§7.2"))
    if not (cp.on_notice or cp.policy == "on_notice"):
        out.append(Fix("on_notice", "interruptions", f"an emergency checkpoint on the {sc.spot.notice:.0f} s spot "
                       "notice", ("checkpoint.on_notice=true",), 2, "§7.1"))
    if sc.spot.recovery == "restart" and sc.cluster.nodes > 1:
        out.append(Fix("elastic", "interruptions", "elastic training (TorchElastic): continue on the survivors "
                       "while a replacement boots", ("spot.recovery=elastic",), 2, "§7.2"))
    if cp.storage == "local_nvme":
        out.append(Fix("remote_storage", "interruptions", "checkpoints to S3 (local NVMe is lost with a reclaimed "
                       "node)", ("checkpoint.storage=s3",), 2, "§7.2"))
    return out


def _overhead(sc: Scenario) -> list[Fix]:
    if sc.overhead.image_pull <= 0:
        return []
    return [Fix("image", "overhead", f"bake the container image into the machine image (no {sc.overhead.image_pull:.0f}"
                " s pull at every start)", ("overhead.image_pull=0",), 3, "§3.1")]


def _market(sc: Scenario) -> list[Fix]:
    cl, out = sc.cluster, []
    if cl.market == "spot":
        out.append(Fix("on_demand", "cost", "on-demand capacity instead of spot", ("cluster.market=on_demand",), 1,
                       "§7.1"))
        if cl.nodes > 1 and cl.on_demand_nodes == 0:
            out.append(Fix("mixed", "cost", "one node on-demand, the rest spot (mixed)", ("cluster.on_demand_nodes=1",),
                           1, "§7.2"))
        if cl.on_demand_nodes > 0:
            out.append(Fix("all_spot", "cost", "every node on spot", ("cluster.on_demand_nodes=0",), 1, "§7.1"))
    elif sc.spot is not None:
        out.append(Fix("spot", "cost", "spot capacity (the scenario's spot section) instead of on-demand",
                       ("cluster.market=spot",), 1, "§7.1"))
    return out
