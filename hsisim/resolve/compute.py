"""Steps and compute: the memory fit of the micro-batch, the optimizer steps, and the time of one.

The compute time of a micro-batch is a roofline over the catalog's GPU figures, replaced by a
calibration profile's measured t(b) = a + c·b when one is given (extrapolated by roofline ratio
from another GPU, scaled by forward FLOPs for another model or input shape).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hsisim import catalog
from hsisim.analytic import compute, memory
from hsisim.errors import HsisimInputError
from hsisim.profile import Profile
from hsisim.resolve.hardware import Hardware
from hsisim.resolve.workload import Workload
from hsisim.scenario import Scenario

# A catalog-free module gets the median of the catalog models' prior efficiencies until calibrated.
GENERIC_EFFICIENCY = 0.10
# a fit scaled to a model at least 1 / LIGHTER_SCALE times lighter warns when its unscaled fixed part is
# more than FIXED_PART_SHARE of the step
LIGHTER_SCALE = 0.5
FIXED_PART_SHARE = 0.5


@dataclass(frozen=True)
class Steps:
    """Micro-batch after the memory fit, accumulation, and the length of the run in optimizer steps."""

    micro_batch: int
    activation_checkpointing: bool
    oom_retries: int  # failed attempts before the micro-batch fitted
    accumulation: int
    steps_per_epoch: int
    total_steps: int
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Compute:
    """Seconds of compute per micro-step, and the memory stall inside them."""

    cost: compute.LinearCost  # one micro-batch of b samples
    compute_s: float  # mean of one micro-step (the optimizer spread over the micro-steps)
    stall_share: float  # share of compute_s caused by a shrunk micro-batch (→ t_stall)
    oom_retry_s: float
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # what makes the step itself doubtful (printed as warnings)


def steps(sc: Scenario, hw: Hardware, wl: Workload, prof: Profile | None = None) -> Steps:
    """The micro-batch that fits the GPU's memory, and how many optimizer steps the job takes."""
    tr = sc.training
    if tr.global_batch % (tr.micro_batch * hw.world):
        raise HsisimInputError(
            f"global batch {tr.global_batch} is not a multiple of micro_batch × GPUs = "
            f"{tr.micro_batch} × {hw.world}", key="training.global_batch")
    notes: list[str] = []
    micro, act_ckpt, retries = _fit_memory(sc, wl.stats, hw.gpu, hw.world, _fragmentation(sc, hw, prof, notes),
                                           notes)
    samples = math.floor(wl.labelled * sc.dataset.train_fraction) * tr.repeats
    per_epoch = samples // tr.global_batch
    if per_epoch < 1:
        raise HsisimInputError(f"an epoch of {samples} samples is smaller than one global batch of "
                               f"{tr.global_batch}", key="training.global_batch")
    total = tr.steps if tr.steps is not None else per_epoch * (tr.epochs or 1)
    return Steps(micro, act_ckpt, retries, tr.global_batch // (micro * hw.world), per_epoch, total, tuple(notes))


def compute_time(sc: Scenario, hw: Hardware, wl: Workload, st: Steps, prof: Profile | None) -> Compute:
    """Compute per micro-step: the roofline, or the profile's measurement.

    What the memory fit forced (a smaller micro-batch, activation checkpointing the scenario did
    not ask for) makes the step slower than the configuration asked for: that extra share is the
    memory stall.
    """
    tr = sc.training
    notes: list[str] = []
    scaled: list[tuple[float, str]] = []
    asked = _cost(sc, hw, wl, prof, sc.model.activation_checkpointing, notes, scaled)
    cost = asked if st.activation_checkpointing == sc.model.activation_checkpointing else \
        _cost(sc, hw, wl, prof, st.activation_checkpointing, [], [])
    warnings = [w for scale, on in scaled for w in _fixed_part_warning(cost, scale, st.micro_batch, on)]
    if sc.timings is None and (prof is None or prof.source == "spec" or prof.catalog_gpu not in (None, hw.gpu.name)):
        notes.append(f"compute rests on catalog figures for {hw.gpu.describe(sc.model.precision)}: no measured "
                     "calibration of this GPU")
    requested = asked.time(tr.micro_batch) * (tr.global_batch // (tr.micro_batch * hw.world))
    used = cost.time(st.micro_batch) * st.accumulation
    forced = st.micro_batch != tr.micro_batch or cost is not asked
    stall_share = max(0.0, (used - requested) / used) if forced else 0.0
    return Compute(cost, used / st.accumulation, stall_share, st.oom_retries * asked.time(tr.micro_batch) / 3.0,
                   tuple(notes), tuple(warnings))


def _fixed_part_warning(cost: compute.LinearCost, scale: float, micro: int, measured_on: str) -> list[str]:
    """A fit scaled down to a lighter model keeps its fixed part as measured: where that part is most of
    the step it predicts, the step rests on the other model's overheads more than on this one's work.
    (The shipped 2-core CPU profile's fit, HybridSN 30×25×25, has such a fixed part: scaled to a 15×9×9
    model it predicts twice the step measured, about 17 ms; calibration/README.md gives its figures.)"""
    step = cost.time(micro)
    if scale > LIGHTER_SCALE or step <= 0 or cost.a_s <= FIXED_PART_SHARE * step:
        return []
    return [f"{cost.a_s / step:.0%} of the {step * 1e3:.3g} ms compute step at micro-batch {micro} is the profile's "
            f"fixed part ({cost.a_s * 1e3:.3g} ms), measured on {measured_on}, a model {1 / scale:.3g}x heavier, and "
            "kept as it was: the step may be far off. Calibrate this model at this shape (hsisim calibrate --model "
            "with --patch and --pca, or --model-factory) and name that profile"]


def _cost(sc: Scenario, hw: Hardware, wl: Workload, prof: Profile | None, act_ckpt: bool,
          notes: list[str], scaled: list[tuple[float, str]]) -> compute.LinearCost:
    """One micro-batch of b samples: the roofline, or the profile's fit (plus activation checkpointing's
    recompute, which a profile measured without it does not hold)."""
    precision, stats = sc.model.precision, wl.stats
    states = memory.state_bytes_per_param(precision, sc.model.optimizer)
    opt_bytes = 3 * states["optimizer"] + 2 * states["weights"] + states["grads"]  # read p,g,m,v; write p,m,v
    cost = compute.roofline_cost(
        fwd_flops=stats.fwd_flops, act_bytes=stats.act_elems * memory.activation_bytes_per_element(precision),
        params=stats.params, ops=stats.ops, peak_flops=hw.gpu.peak_flops[precision],
        efficiency=wl.model.efficiency if wl.model else GENERIC_EFFICIENCY,
        mem_bw_bytes_per_s=hw.gpu.mem_bw_bytes_per_s, optimizer_bytes_per_param=opt_bytes,
        activation_checkpointing=act_ckpt)
    if prof is None:
        return cost
    measured = _calibrated(sc, prof, cost, hw.gpu, hw.threads, stats.fwd_flops, notes, scaled)
    if act_ckpt:
        measured = compute.LinearCost(measured.a_s, measured.c_s_per_sample * (1 + compute.RECOMPUTE_OVERHEAD),
                                      measured.cv)
    return measured


def _fragmentation(sc: Scenario, hw: Hardware, prof: Profile | None, notes: list[str]) -> float:
    """reserved / allocated: the scenario's, else the one a profile measured on this GPU, else the default."""
    if "fragmentation" in sc.memory.model_fields_set or prof is None or prof.fragmentation is None \
            or prof.catalog_gpu != hw.gpu.name:
        return sc.memory.fragmentation
    notes.append(f"memory fragmentation (reserved / allocated) {prof.fragmentation:.2f} from the profile's probe")
    return prof.fragmentation


def _fit_memory(sc: Scenario, stats: catalog.ModelStats, gpu: catalog.GPU, world: int, fragmentation: float,
                notes: list[str]) -> tuple[int, bool, int]:
    """(micro_batch, activation_checkpointing, OOM retries) after applying ``memory.on_oom``."""
    micro, act_ckpt = sc.training.micro_batch, sc.model.activation_checkpointing

    def need(b: int, ac: bool) -> float:
        return memory.breakdown(
            params=stats.params, act_elems=stats.act_elems, layers=stats.ops, micro_batch=b,
            precision=sc.model.precision, optimizer=sc.model.optimizer, zero_stage=sc.model.zero_stage,
            world=world, activation_checkpointing=ac, workspace=sc.memory.workspace,
            context=sc.memory.context, fragmentation=fragmentation).total

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


def _calibrated(sc: Scenario, prof: Profile | None, cost: compute.LinearCost, gpu: catalog.GPU,
                threads: int | None, fwd_flops: float, notes: list[str], scaled: list[tuple[float, str]]
                ) -> compute.LinearCost:
    """Replace the roofline by a calibration profile's measured t(b) = a + c·b, if one is given (``scaled``
    gets the FLOP ratio and the profile's model where the fit was scaled to another model)."""
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
        dims = prof.model.get("sample_shape") or [prof.model.get(k) for k in ("bands", "patch", "patch")]
        shape = "×".join(str(d) for d in dims)
        notes.append(f"the profile measured {prof.model.get('name')} {shape}; per-sample compute scaled by the "
                     f"forward-FLOP ratio {scale:.3g}")
        measured = compute.LinearCost(measured.a_s, measured.c_s_per_sample * scale, measured.cv)
        scaled.append((scale, f"{prof.model.get('name')} {shape}"))
    if prof.device_kind == "cpu" and gpu.name != "cpu":
        notes.append("a CPU profile applied to a GPU: the roofline ratio between them is only a rough guide")
    return measured
