"""Resolve a scenario against the catalog (and a calibration profile) into a ``Job`` of plain numbers.

This is where the analytic component models meet the user's choices. The simulation layer only
ever sees a ``Job``: it never reads YAML or the catalog.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from hsisim import catalog
from hsisim.analytic import checkpoint as ckpt
from hsisim.analytic import collectives, compute, datapipe, memory
from hsisim.errors import HsisimInputError
from hsisim.profile import Profile, load_profile
from hsisim.scenario import Price, Scenario

# A catalog-free module gets the median of the catalog models' prior efficiencies until calibrated.
GENERIC_EFFICIENCY = 0.10


@dataclass(frozen=True)
class Job:
    """Everything the simulator needs, in seconds, bytes and USD."""

    nodes: int
    gpus_per_node: int
    accumulation: int  # micro-steps per optimizer step
    micro_batch: int  # after any memory-driven shrink
    steps_per_epoch: int
    total_steps: int
    # step level (per micro-step unless stated)
    compute_s: float  # mean fwd+bwd(+opt share) of one micro-step, incl. any shrink penalty
    stall_share: float  # share of compute_s caused by a shrunk micro-batch (→ t_stall)
    compute_cv: float
    batch_build_s: float  # one worker building one micro-batch
    batch_build_cv: float
    h2d_s: float
    num_workers: int
    prefetch_factor: int
    persistent_workers: bool
    worker_start_s: float
    comm_exposed_s: float  # per optimizer step
    comm_total_s: float
    timed: bool = False  # step components given by `timings`, not modelled
    handover_s: float = 0.0  # training process receiving a worker's batch, on its critical path (CPU device)
    comm_cv: float = 0.0  # step-to-step spread of the exposed all-reduce (measured; 0 = constant)
    # the measured shape of the all-reduce: quantiles (evenly spaced in probability) of time / mean; drawn
    # instead of a gamma with comm_cv when given
    comm_quantiles: tuple[float, ...] = ()
    # run level
    ckpt_bytes: float = 0.0
    ckpt_write_s: float = 0.0
    ckpt_snapshot_s: float = 0.0
    ckpt_restore_s: float = 0.0
    oom_retry_s: float = 0.0  # one-time: failed attempts before the micro-batch was shrunk
    price_usd_per_node_hour: float = 0.0
    on_demand_usd_per_node_hour: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node


def resolve(sc: Scenario, *, allow_code: bool = False) -> Job:
    """Build the ``Job`` for scenario ``sc``; raises ``HsisimInputError`` for impossible choices.

    A scenario that names the user's own model or dataset factory runs that code (it is imported
    and called to measure it): only with ``allow_code``, since a scenario file may come from anyone.
    """
    inst = catalog.instance(sc.cluster.instance)
    gpu = catalog.gpu(inst.gpu)
    ds = catalog.dataset(sc.dataset.name) if sc.dataset.name is not None else None
    minfo = catalog.model(sc.model.name) if sc.model.name is not None else None
    cpu = catalog.cpu()
    notes: list[str] = []
    world = sc.cluster.nodes * inst.gpus
    prof = load_profile(sc.calibration) if sc.calibration is not None else None
    vcpus = inst.vcpus or (prof.cores if prof and prof.cores else os.cpu_count() or 1)
    # a CPU device: each training process gets the cores its loader workers leave free
    threads = datapipe.training_threads(vcpus, inst.gpus, sc.loader.num_workers) if gpu.name == "cpu" else None
    parts = None
    if ds is not None and minfo is not None:
        out_bands = _model_bands(sc, ds, minfo)
        assert sc.dataset.patch is not None
        patch = sc.dataset.patch
        stats = minfo.stats(out_bands, patch, ds.classes)
        labelled = ds.labelled
    else:  # the user's own module and/or Dataset (needs torch)
        check_code_allowed(sc, allow_code)
        parts = _factory_parts(sc, prof, ds, minfo)
        notes.extend(parts.notes)
        stats = catalog.ModelStats(sc.model.name or str(sc.model.factory), parts.params, parts.fwd_flops,
                                   parts.act_elems, parts.ops)
        out_bands = parts.sample_shape[0]
        patch = parts.sample_shape[1] if len(parts.sample_shape) > 1 else 1
        labelled = parts.samples if parts.samples is not None else (ds.labelled if ds is not None else 0)

    tr = sc.training
    if tr.global_batch % (tr.micro_batch * world):
        raise HsisimInputError(
            f"global batch {tr.global_batch} is not a multiple of micro_batch × GPUs = "
            f"{tr.micro_batch} × {world}", key="training.global_batch")
    micro, act_ckpt, retries = _fit_memory(sc, stats, gpu, world, notes)
    accumulation = tr.global_batch // (micro * world)
    samples = math.floor(labelled * sc.dataset.train_fraction) * tr.repeats
    steps_per_epoch = samples // tr.global_batch
    if steps_per_epoch < 1:
        raise HsisimInputError(f"an epoch of {samples} samples is smaller than one global batch of "
                               f"{tr.global_batch}", key="training.global_batch")
    total_steps = tr.steps if tr.steps is not None else steps_per_epoch * (tr.epochs or 1)

    precision = sc.model.precision
    states = memory.state_bytes_per_param(precision, sc.model.optimizer)
    opt_bytes = 3 * states["optimizer"] + 2 * states["weights"] + states["grads"]  # read p,g,m,v; write p,m,v
    act_bytes = stats.act_elems * memory.activation_bytes_per_element(precision)
    cost = compute.roofline_cost(
        fwd_flops=stats.fwd_flops, act_bytes=act_bytes, params=stats.params, ops=stats.ops,
        peak_flops=gpu.peak_flops[precision], efficiency=minfo.efficiency if minfo else GENERIC_EFFICIENCY,
        mem_bw_bytes_per_s=gpu.mem_bw_bytes_per_s, optimizer_bytes_per_param=opt_bytes,
        activation_checkpointing=act_ckpt)
    cost = _calibrated(sc, prof, cost, gpu, threads, stats.fwd_flops, notes)
    if sc.timings is None and (prof is None or prof.source == "spec" or prof.catalog_gpu not in (None, gpu.name)):
        notes.append(f"compute rests on catalog figures for {gpu.describe(precision)}: no measured calibration "
                     "of this GPU")
    requested = cost.time(tr.micro_batch) * (tr.global_batch // (tr.micro_batch * world))
    used = cost.time(micro) * accumulation
    stall_share = max(0.0, (used - requested) / used) if micro != tr.micro_batch else 0.0
    # the optimizer runs once per optimizer step; spread over micro-steps for the step model
    compute_s = used / accumulation

    intra, net = catalog.link(inst.intra), catalog.link(inst.network)
    intra_alpha, intra_bw = intra.latency_s, intra.effective_bytes_per_s
    comm_cv = 0.0
    comm_quantiles: tuple[float, ...] = ()
    # a profile's collectives hold for processes of the machine it measured, on one node
    here = prof if prof is not None and prof.catalog_gpu == gpu.name and sc.cluster.nodes == 1 else None
    if here is not None and here.collectives:
        intra_alpha, intra_bw = here.collectives["alpha_per_hop_s"], here.collectives["bus_bw_bytes_per_s"]
        comm_cv = here.collectives.get("cv", 0.0)
        comm_quantiles = here.allreduce_quantiles
        notes.append(f"all-reduce between the processes of this machine from the profile's probe: α "
                     f"{intra_alpha * 1e6:.0f} us per hop, {intra_bw / 1e9:.2f} GB/s bus bandwidth")
    # Inter-node bandwidth at this node count (measured busbw where the catalog has it), at the
    # baseline of "up to" sizes: hours of all-reduces outlast their network burst credits.
    inter_bw = net.effective_bytes_per_s_at(sc.cluster.nodes, sc.cluster.collective) * inst.network_sustained_fraction
    topo = collectives.Topology(sc.cluster.nodes, inst.gpus, intra_alpha, intra_bw, net.latency_s, inter_bw)
    grad_bytes = stats.params * states["grads"]
    backward = cost.time(micro) * 2.0 / 3.0
    # ZeRO-1/2 replace the all-reduce by reduce-scatter + all-gather: the same bytes on the wire
    comm_total, comm_exposed = collectives.ddp_exposed(
        grad_bytes, backward, lambda s: collectives.allreduce(s, topo, sc.cluster.collective))
    if gpu.name == "cpu" and world > 1:
        # gloo reduces on the CPU, in threads that need the cores the backward pass is using:
        # on a CPU device the all-reduce does not hide behind computation
        comm_exposed = comm_total
        own = here.allreduce_in_training if here is not None and here.allreduce_world == world else None
        if own is not None and abs(own[0] / grad_bytes - 1) < 0.01:
            # this model's own gradients, all-reduced in DDP training steps on this machine: what a step
            # waits for after the last rank's hand-over, with its measured shape
            comm_total = comm_exposed = own[1]
            comm_quantiles = own[2] or comm_quantiles
            notes.append(f"all-reduce of these {grad_bytes / 1e6:.3g} MB of gradients as measured in the profile's "
                         f"DDP training steps: {own[1] * 1e3:.2f} ms on average")
    if sc.model.zero_stage == 3:  # parameter all-gathers in forward and backward, not overlapped
        gather = 2 * collectives.allgather(stats.params * states["weights"], world,
                                           max(intra.latency_s, net.latency_s),
                                           min(intra.effective_bytes_per_s, net.effective_bytes_per_s_at(
                                               sc.cluster.nodes) * inst.network_sustained_fraction)
                                           if sc.cluster.nodes > 1 else intra.effective_bytes_per_s)
        comm_total += gather * accumulation
        comm_exposed += gather * accumulation

    # data pipeline
    fs = catalog.storage("nfs", key="dataset.storage")
    readers = max(1, sc.loader.num_workers) * world
    sample_bytes = patch**2 * out_bands * datapipe.FLOAT_BYTES
    if ds is not None:
        sample = datapipe.sample_cost(
            patch=patch, bands=ds.bands, out_bands=out_bands, preprocess=sc.dataset.preprocess,
            pca=minfo is not None and minfo.spectral_input == "pca", storage=sc.dataset.storage,
            augmentation=sc.dataset.augmentation, cpu=cpu, fs_latency_s=fs.latency_s,
            fs_share_bw=fs.read_bw_bytes_per_s / readers)
        build = datapipe.batch_build_seconds(sample.total, micro, sample_bytes, cpu)
    else:
        assert parts is not None
        sample_bytes = parts.sample_bytes
        build = (parts.per_sample_s or 0.0) * micro + parts.collate_s * micro / max(1, sc.training.micro_batch)
    build_cv = 0.0
    mode = "factory" if sc.dataset.factory is not None else sc.dataset.preprocess
    measured = prof.data.get(mode) if prof is not None else None
    if measured is not None and mode == "factory" and measured.get("dataset_factory") != sc.dataset.factory:
        measured = None
    if measured is not None and mode != "factory" and (measured["patch"], measured["out_bands"]) != (patch, out_bands):
        measured = None
    if measured is not None:
        build = measured["build"].time(micro)
        build_cv = measured["per_sample_cv"] / math.sqrt(micro)
        notes.append(f"batch build from the profile's DataLoader probe ({mode}): "
                     f"{build * 1e3:.2f} ms per micro-batch of {micro}")
    elif parts is not None and parts.per_sample_s is not None:
        build_cv = parts.per_sample_cv / math.sqrt(micro)
    elif prof is not None and prof.data:
        notes.append("batch build modelled: the profile's data probe used another patch or band count")
    if sc.loader.num_workers:
        # each rank's training threads keep their cores; workers share what is left
        kept = threads if threads is not None else 1
        build *= datapipe.core_slowdown(sc.loader.num_workers, inst.gpus, vcpus, kept)
    # On a CPU device the training process computes synchronously, so receiving each finished batch
    # from a worker is on its critical path. On a GPU it overlaps the asynchronous kernels of the
    # previous step and is left out (it matters only when the host is busier than the GPU).
    handover = 0.0
    if gpu.name == "cpu" and sc.loader.num_workers:
        ho = measured.get("handover") if measured is not None else None
        handover = ho.time(micro) if ho is not None else \
            cpu.ipc_handover_s + micro * sample_bytes / cpu.ipc_bw_bytes_per_s
    pcie = catalog.link(gpu.pcie)
    h2d = datapipe.h2d_seconds(sample_bytes * micro, pcie.effective_bytes_per_s, sc.loader.pin_memory,
                               cpu.copy_bw_bytes_per_s)

    # checkpoints
    cbytes = ckpt.checkpoint_bytes(stats.params, precision, sc.model.optimizer)
    store = catalog.storage(sc.checkpoint.storage)
    writers = sc.cluster.nodes if sc.model.zero_stage >= 1 else 1
    write_bw, read_bw = store.write_bw_bytes_per_s, store.read_bw_bytes_per_s
    if store.name == "ebs" and inst.ebs_baseline_bytes_per_s is not None:
        # A volume is no faster than the instance's own EBS link. Its baseline, not its burst: AWS
        # guarantees the burst of smaller sizes for 30 minutes per 24 h only, and a job that writes
        # checkpoints for hours (beside its dataset and log I/O) cannot count on the credits.
        write_bw = min(write_bw, inst.ebs_baseline_bytes_per_s)
        read_bw = min(read_bw, inst.ebs_baseline_bytes_per_s)
    write = sc.checkpoint.write_time if sc.checkpoint.write_time is not None else \
        ckpt.write_seconds(cbytes, write_bw, store.latency_s, writers)
    restore = sc.checkpoint.restore_time if sc.checkpoint.restore_time is not None else \
        ckpt.write_seconds(cbytes, read_bw, store.latency_s, writers)
    snapshot = cbytes / world ** (sc.model.zero_stage >= 1) / pcie.effective_bytes_per_s

    on_demand = _price(sc.cost.on_demand_price, inst.on_demand_usd_per_hour, inst.on_demand_usd_per_hour)
    price = on_demand
    if sc.cluster.market == "spot":
        assert sc.spot is not None
        price = _price(sc.cost.spot_price, on_demand, on_demand)
        if sc.cost.spot_price is None:
            notes.append(f"cost.spot_price is not set: spot nodes are billed at the on-demand price ({on_demand:.3f} "
                         "USD/h per node); give a fraction of on-demand (0.4), a price ('1.2 USD/h') or 'trace'")

    job = Job(
        nodes=sc.cluster.nodes, gpus_per_node=inst.gpus, accumulation=accumulation, micro_batch=micro,
        steps_per_epoch=steps_per_epoch, total_steps=total_steps,
        compute_s=compute_s, stall_share=stall_share, compute_cv=cost.cv,
        batch_build_s=build, batch_build_cv=build_cv, h2d_s=h2d, handover_s=handover,
        num_workers=sc.loader.num_workers, prefetch_factor=sc.loader.prefetch_factor,
        persistent_workers=sc.loader.persistent_workers, worker_start_s=cpu.worker_start_s,
        comm_exposed_s=comm_exposed, comm_total_s=comm_total, comm_cv=comm_cv if world > 1 else 0.0,
        comm_quantiles=comm_quantiles if world > 1 else (),
        ckpt_bytes=cbytes, ckpt_write_s=write, ckpt_snapshot_s=snapshot, ckpt_restore_s=restore,
        oom_retry_s=retries * cost.time(tr.micro_batch) / 3.0,
        price_usd_per_node_hour=price, on_demand_usd_per_node_hour=on_demand, notes=tuple(notes))
    if sc.timings is not None:
        job = _timed(job, sc)
    return job


def check_code_allowed(sc: Scenario, allow_code: bool) -> None:
    """Refuse to run factories named in a scenario unless the user allowed code."""
    named = [(k, v) for k, v in (("model.factory", sc.model.factory), ("dataset.factory", sc.dataset.factory)) if v]
    if named and not allow_code:
        key, spec = named[0]
        raise HsisimInputError(f"this scenario would import and run {spec!r} (Python code named in the file); "
                               "if you trust it, pass {allow_code}", key=key)


def _factory_parts(sc: Scenario, prof: Profile | None, ds: catalog.Dataset | None,
                   minfo: catalog.ModelInfo | None) -> Any:
    """Build the user's factories (imports torch) and take parameters, FLOPs, sizes from the real objects."""
    try:
        from hsisim.calibrate.factories import scenario_parts
    except ImportError:
        key = "model.factory" if sc.model.factory else "dataset.factory"
        raise HsisimInputError("model.factory / dataset.factory build your PyTorch code: pip install "
                               "'hsisim[torch]' torch==2.13.0", key=key) from None
    shape = classes = None
    if ds is not None:  # a catalog dataset feeding the user's model
        assert minfo is None and sc.dataset.patch is not None
        bands = sc.dataset.pca_components or ds.bands
        shape, classes = (bands, sc.dataset.patch, sc.dataset.patch), ds.classes

    def builtin(shape_: tuple[int, ...], classes_: int) -> catalog.ModelStats:
        assert minfo is not None
        return minfo.stats(shape_[0], shape_[1] if len(shape_) > 1 else 1, classes_)

    has_data = prof is not None and any(d.get("dataset_factory") == sc.dataset.factory for d in prof.data.values())
    return scenario_parts(sc, sc.training.micro_batch, shape, classes, builtin if minfo is not None else None,
                          measure_data=sc.dataset.factory is not None and not has_data)


def _model_bands(sc: Scenario, ds: catalog.Dataset, minfo: catalog.ModelInfo) -> int:
    if minfo.spectral_input == "pca":
        if sc.dataset.pca_components is None:
            raise HsisimInputError(f"{minfo.display} takes PCA components: set dataset.pca_components",
                                   key="dataset.pca_components")
        if sc.dataset.pca_components > ds.bands:
            raise HsisimInputError(f"{sc.dataset.pca_components} PCA components exceed the {ds.bands} bands "
                                   f"of {ds.display}", key="dataset.pca_components")
        return sc.dataset.pca_components
    return sc.dataset.pca_components or ds.bands


def _fit_memory(sc: Scenario, stats: catalog.ModelStats, gpu: catalog.GPU, world: int,
                notes: list[str]) -> tuple[int, bool, int]:
    """(micro_batch, activation_checkpointing, OOM retries) after applying ``memory.on_oom``."""
    micro, act_ckpt = sc.training.micro_batch, sc.model.activation_checkpointing

    def need(b: int, ac: bool) -> float:
        return memory.breakdown(
            params=stats.params, act_elems=stats.act_elems, layers=stats.ops, micro_batch=b,
            precision=sc.model.precision, optimizer=sc.model.optimizer, zero_stage=sc.model.zero_stage,
            world=world, activation_checkpointing=ac, workspace=sc.memory.workspace,
            context=sc.memory.context, fragmentation=sc.memory.fragmentation).total

    gib = 2**30
    if need(micro, act_ckpt) <= gpu.memory_bytes:
        return micro, act_ckpt, 0
    first = need(micro, act_ckpt)
    if sc.memory.on_oom == "activation_checkpointing" and not act_ckpt and need(micro, True) <= gpu.memory_bytes:
        notes.append(f"activation checkpointing enabled: {first / gib:.1f} GiB needed at micro-batch {micro}, "
                     f"{gpu.display} has {gpu.memory_bytes / gib:.1f} GiB")
        return micro, True, 1
    if sc.memory.on_oom == "shrink":
        retries = 0
        while micro > 1 and need(micro, act_ckpt) > gpu.memory_bytes:
            micro //= 2
            retries += 1
        if need(micro, act_ckpt) <= gpu.memory_bytes and sc.training.global_batch % (micro * world) == 0:
            notes.append(f"micro-batch shrunk from {sc.training.micro_batch} to {micro} to fit "
                         f"{gpu.memory_bytes / gib:.1f} GiB (global batch kept by accumulation)")
            return micro, act_ckpt, retries
    raise HsisimInputError(
        f"out of memory: {first / gib:.1f} GiB needed at micro-batch {sc.training.micro_batch} on "
        f"{gpu.display} ({gpu.memory_bytes / gib:.1f} GiB); set memory.on_oom to 'shrink' or "
        "'activation_checkpointing', or lower training.micro_batch", key="training.micro_batch")


def _price(spec: Price | None, on_demand: float, default: float) -> float:
    """USD/h per node; a replayed trace is billed as it goes (this is then the on-demand price)."""
    if spec is None or spec.trace:
        return default
    if spec.fraction_of_on_demand is not None:
        return on_demand * spec.fraction_of_on_demand
    assert spec.usd_per_hour is not None
    return spec.usd_per_hour


def _calibrated(sc: Scenario, prof: Profile | None, cost: compute.LinearCost, gpu: catalog.GPU,
                threads: int | None, fwd_flops: float, notes: list[str]) -> compute.LinearCost:
    """Replace the roofline by a calibration profile's measured t(b) = a + c·b, if one is given."""
    if prof is None:
        return cost
    measured, used = prof.compute_fit(threads)
    if threads is not None and used:
        notes.append(f"compute from the profile measured with {used} training thread(s)"
                     + ("" if used == threads else f" ({threads} wanted: nearest measured)"))
    if prof.catalog_gpu and prof.catalog_gpu != gpu.name:
        src = catalog.gpu(prof.catalog_gpu, key="calibration")
        ratio = compute.roofline_ratio(src.peak_flops[sc.model.precision], src.mem_bw_bytes_per_s,
                                       gpu.peak_flops[sc.model.precision], gpu.mem_bw_bytes_per_s, True)
        notes.append(f"calibration from {src.display} extrapolated to {gpu.display} by roofline ratio {ratio:.2f}")
        measured = compute.LinearCost(measured.a_s, measured.c_s_per_sample * ratio, measured.cv)
    if prof.model and prof.model.get("fwd_flops") and prof.model.get("fwd_flops") != fwd_flops:
        # another model or input shape: scale the per-sample part by forward FLOPs, keep the fixed part
        scale = fwd_flops / float(prof.model["fwd_flops"])
        shape = f"{prof.model.get('bands')}×{prof.model.get('patch')}×{prof.model.get('patch')}"
        notes.append(f"the profile measured {prof.model.get('name')} {shape}; per-sample compute scaled by the "
                     f"forward-FLOP ratio {scale:.3g}")
        measured = compute.LinearCost(measured.a_s, measured.c_s_per_sample * scale, measured.cv)
    if prof.device_kind == "cpu" and gpu.name != "cpu":
        notes.append("a CPU profile applied to a GPU: the roofline ratio between them is only a rough guide")
    return measured


def _timed(job: Job, sc: Scenario) -> Job:
    """Use the scenario's measured per-step timings instead of the modelled components."""
    assert sc.timings is not None
    t = sc.timings
    from dataclasses import replace
    return replace(job, accumulation=1, compute_s=t.compute_per_step, stall_share=0.0, compute_cv=t.cv,
                   comm_exposed_s=t.comm_per_step, comm_total_s=t.comm_per_step,
                   timed=True, num_workers=0, batch_build_s=t.data_wait_per_step, batch_build_cv=t.cv,
                   h2d_s=0.0, handover_s=0.0, worker_start_s=0.0, oom_retry_s=0.0,
                   notes=(*job.notes, "step components from the scenario's `timings` section"))
