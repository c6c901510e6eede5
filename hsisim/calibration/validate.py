"""``hsisim validate``: a real short training run on a device against the simulator's prediction.

The scenario's model, micro-batch, loader (workers, prefetch, pinned memory), preprocessing and
optimizer are trained for real on a synthetic cube of the scenario's dataset (real label map where
available). The prediction comes from the same scenario moved onto this device (``local-cpu``, or
the GPU's catalog entry), driven by a calibration profile (given, or measured on the spot), and
simulated by the micro simulation. On the CPU the real run trains with the intra-op threads the
user's own run would start with (``training.threads``, else PyTorch's default: one per physical core
in one process, and ``torchrun``'s one each with two), and the model is given that count. Where the
scenario sets ``dataset.blas_threads``, the whole run (its training process, its workers, the probes
between its segments) runs under that BLAS limit, as the user's script under ``OPENBLAS_NUM_THREADS`` does.

Step time and data wait are compared as 10 % trimmed means of the steps, measured and simulated
alike. With two CPU processes, a hook on DDP's all-reduce splits every measured step into its
computation, the wait for the slower rank and the all-reduce itself, and each is predicted too.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from hsisim import catalog
from hsisim.analytic import collectives
from hsisim.calibration import collectives as probe_comm
from hsisim.calibration import paired, probes
from hsisim.calibration.interference import InterferenceProbe, max_workers
from hsisim.calibration.models import forward_flops, param_count
from hsisim.calibration.run import Workload, catalog_gpu_for, dataset_for, parse_device, scene, workload
from hsisim.calibration.stepstats import summary, trimmed
from hsisim.calibration.threads import limit_blas, limited, worker_limit
from hsisim.errors import HsisimInputError
from hsisim.profile import FORMAT, document, load_profile
from hsisim.resolve import check_code_allowed, resolve_job
from hsisim.scenario import Scenario, load_scenario
from hsisim.sim.micro import MicroSim, gamma_draws


def segments(steps: int, rounds: int) -> list[int]:
    """``steps`` split into at most ``rounds`` near-equal segments."""
    k = max(1, min(rounds, steps))
    return [steps // k + (1 if i < steps % k else 0) for i in range(k)]


def local_instance(dev: torch.device, world: int) -> str:
    """The catalog instance standing for this machine."""
    if dev.type == "cpu":
        return "local-cpu" if world == 1 else "local-cpu-x2"
    gpu = catalog_gpu_for(dev)
    for name in catalog.names("instances"):
        inst = catalog.instance(name)
        if inst.gpu == gpu and inst.gpus == world:
            return name
    raise HsisimInputError(f"no catalog instance with {world} × {gpu} for the validation run")


@dataclass
class Trainable:
    """What a validation trains: the model (built-in or the user's factory) and its Dataset."""

    net: probes.Net
    dataset: Dataset
    mode: str  # the profile's data key: getitem / offline / factory
    model: dict[str, Any]


@contextmanager
def trainable(sc: Scenario) -> Iterator[Trainable]:
    """The scenario's model and data, for real (a temporary cube for a catalog dataset)."""
    aug = sc.dataset.augmentation != "none"
    if sc.dataset.factory is not None:
        from hsisim.calibration import factories as fx
        ds, shape = fx.make_dataset(fx.load_factory(sc.dataset.factory, "dataset.factory"), dict(sc.dataset.kwargs),
                                    batch=sc.training.micro_batch)
        net = _net(sc, shape, 0 if sc.model.factory is not None else fx.dataset_classes(ds))
        yield Trainable(net, ds, "factory", _describe(net))
        return
    assert sc.dataset.name is not None and sc.dataset.patch is not None
    if sc.model.name is not None:
        w = workload(sc.model.name, sc.dataset.name, sc.dataset.patch, sc.dataset.pca_components)
    else:
        info = catalog.dataset(sc.dataset.name)
        k = sc.dataset.pca_components
        w = Workload(str(sc.model.factory), sc.dataset.name, sc.dataset.patch, k or info.bands, info.bands,
                     info.classes, k)
    with scene(w) as s:
        ds = dataset_for(s, w, sc.dataset.preprocess, sc.training.repeats, aug)
        net = _net(sc, (w.bands, w.patch, w.patch), w.classes)
        model = _describe(net)
        model.update({"bands": w.bands, "patch": w.patch})
        yield Trainable(net, ds, sc.dataset.preprocess, model)


def _net(sc: Scenario, shape: tuple[int, ...], classes: int) -> probes.Net:
    if sc.model.factory is not None:
        from hsisim.calibration import factories as fx

        return fx.make_net(fx.load_factory(sc.model.factory, "model.factory"), dict(sc.model.kwargs), shape)
    assert sc.model.name is not None
    return probes.builtin_net(sc.model.name, shape[0], shape[1], classes)


def _amp(sc: Scenario) -> bool:
    """Whether the scenario trains with reduced precision (autocast where the device has it)."""
    return sc.model.precision.startswith("amp") or sc.model.precision in ("fp16", "bf16")


def _describe(net: probes.Net) -> dict[str, Any]:
    model = net.build()
    return {"name": net.name, "sample_shape": list(net.sample_shape), "classes": net.classes,
            "params": param_count(model), "fwd_flops": float(forward_flops(model, net.sample_shape))}


class Run:
    """The real training run: the scenario's model, loader and optimizer, stepped in segments."""

    def __init__(self, sc: Scenario, dev: torch.device, threads: int, t: Trainable, rank: int = 0,
                 world: int = 1) -> None:
        self.dev, self.threads = dev, threads
        torch.manual_seed(rank)
        amp = _amp(sc)
        model, self.opt, self.scaler, self.dtype = probes.make_training(t.net, dev, sc.model.optimizer, amp)
        if world > 1:
            from torch.nn.parallel import DistributedDataParallel

            model = DistributedDataParallel(model)
        # on CPU processes, the all-reduce each step waited for is timed (a hook that does DDP's own
        # averaging), which splits the measured step into computation and communication
        self.clock = probe_comm.CommClock(model) if world > 1 and dev.type == "cpu" else None
        self.model = model
        ds = t.dataset
        ld = sc.loader
        self.loader = DataLoader(ds, batch_size=sc.training.micro_batch, shuffle=True, num_workers=ld.num_workers,
                                 prefetch_factor=ld.prefetch_factor if ld.num_workers else None,
                                 pin_memory=ld.pin_memory and dev.type == "cuda",
                                 persistent_workers=ld.persistent_workers and ld.num_workers > 0, drop_last=True,
                                 worker_init_fn=worker_limit(sc.dataset.blas_threads))
        self.it = iter(self.loader)
        self.waits: list[float] = []
        self.totals: list[float] = []
        self.handed: list[float] = []  # per timed step: the last gradient bucket's hand-over ...
        self.done: list[float] = []  # ... and the all-reduce's completion (perf_counter, one clock per host)

    def segment(self, steps: int, warmup: int) -> None:
        """``warmup`` steps (the loader refills its queue) then ``steps`` timed optimizer steps."""
        torch.set_num_threads(self.threads)
        self.threads_seen = torch.get_num_threads()
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            try:
                x, y = next(self.it)
            except StopIteration:
                self.it = iter(self.loader)
                x, y = next(self.it)
            t1 = time.perf_counter()
            x = x.to(self.dev, non_blocking=True)
            y = y.to(self.dev, non_blocking=True)
            probes.training_step(self.model, self.opt, x, y, self.scaler, self.dtype)
            if self.dev.type == "cuda":
                torch.cuda.synchronize(self.dev)
            t2 = time.perf_counter()
            marks = self.clock.take() if self.clock is not None else None
            if i >= warmup:
                self.waits.append(t1 - t0)
                self.totals.append(t2 - t0)
                if marks is not None:
                    self.handed.append(marks[0])
                    self.done.append(marks[1])

    def result(self) -> dict[str, Any]:
        wa, to = np.array(self.waits), np.array(self.totals)
        return {**summary(to, wa), "steps": len(to), "training_threads": self.threads_seen}

    def split(self) -> dict[str, float]:
        """The computation around the gradients' all-reduce (CPU processes, timed by the hook)."""
        comp = np.array(self.totals) - np.array(self.waits) - (np.array(self.done) - np.array(self.handed))
        return {"compute_s": trimmed(comp), "compute_mean_s": float(comp.mean())}

    def close(self) -> None:
        del self.it


def _ddp_worker(rank: int, world: int, port: int, scenario: str, sets: list[str], device: str, steps: int,
                warmup: int, threads: int, rounds: int, probe_too: bool, out: str) -> None:
    """One rank of the distributed validation: run segments, and probe rounds on every rank at once."""
    import torch.distributed as dist

    sc = load_scenario(scenario, sets)
    dev = parse_device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", rank)
    torch.set_num_threads(threads)
    if sc.dataset.blas_threads is not None:  # this rank's process, for the rest of its life
        limit_blas(sc.dataset.blas_threads)
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    finished = False
    probe: paired.PairedProbe | None = None
    run: Run | None = None
    try:
        with trainable(sc) as t:
            # the probe runs in every process at once: compute and builds under the same sharing of
            # cores and memory bandwidth as the distributed run; on CPU processes its training steps
            # synchronise their gradients as the run's do, and the all-reduce is taken out of its compute
            probe = _paired(sc, dev, t, ddp=dev.type == "cpu") if probe_too else None
            run = Run(sc, dev, threads, t, rank, world)
            _alternate(run, probe, steps, rounds, warmup, sc.loader.num_workers * sc.loader.prefetch_factor + 1)
            res = _rank_result(run)
            fits = probe.fits() if probe is not None else None
            in_training = probe.allreduce() if probe is not None else None
            grad_bytes = 4 * int(t.model["params"])
        # between two all-reduces, a training step's computation (the probe's, at this micro-batch)
        busy = fits[0]["a_s"] + fits[0]["c_s_per_sample"] * sc.training.micro_batch if fits else 0.005
        coll = _allreduce_probe(dev, world, grad_bytes, busy, res)
        if in_training is not None:
            coll["in_training"] = in_training
        _gather(rank, world, res, {"fits": fits, "collectives": coll}, out)
        finished = True
    finally:
        probe = run = None  # their DDP models go before the group does
        probe_comm.end_group(finished)


def _alternate(run: Run, probe: paired.PairedProbe | None, steps: int, rounds: int, warmup: int,
               seg_warmup: int) -> None:
    """Segments of the real run between rounds of the probe, every rank at once."""
    import torch.distributed as dist

    for r, n in enumerate(segments(steps, rounds)):
        if probe is not None:
            dist.barrier()
            probe.round(pairs=5)
        dist.barrier()
        run.segment(n, warmup if r == 0 else seg_warmup)
    if probe is not None:  # a round after the last segment too, as on one process
        dist.barrier()
        probe.round(pairs=5)


def _rank_result(run: Run) -> dict[str, Any]:
    """One rank's measurement; with a hook, the step split into compute, wait and all-reduce."""
    res: dict[str, Any] = run.result()
    run.close()
    if run.clock is not None:
        # the all-reduce in the steps, split by the ranks' hand-over times: the wait for the
        # slowest rank, then the all-reduce itself (from the last hand-over to completion)
        waited, reduced = probe_comm.after_last_handover(run.handed, run.done)
        res.update(run.split(), barrier_wait_s=float(waited.mean()), allreduce_s=float(reduced.mean()))
    return res


def _allreduce_probe(dev: torch.device, world: int, grad_bytes: int, busy: float, res: dict[str, Any]
                     ) -> dict[str, Any]:
    """The all-reduce sweep (sizes around, not at, the gradient's; 48 times each) and the gradient's own
    size, alternated in the same processes (on CPU processes as DDP issues them); fills ``res``."""
    sizes = [2**k for k in range(14, 25) if not 0.8 < 2**k / grad_bytes < 1.25]
    sweep: dict[int, list[float]] = {n: [] for n in sizes}
    grad_ts: list[float] = []
    for _ in range(4):
        if dev.type == "cpu":
            got_sweep = probe_comm.time_allreduce_ddp(sizes, 12, busy)
            got_grad = probe_comm.time_allreduce_ddp([grad_bytes], 16, busy)
        else:
            got_sweep = probe_comm.time_allreduce(sizes, 12, dev, busy)
            got_grad = probe_comm.time_allreduce([grad_bytes], 16, dev, busy)
        for n, ts in got_sweep.items():
            sweep[n].extend(ts)
        grad_ts.extend(got_grad[grad_bytes])
    # the mean, like the prediction's: one all-reduce is heavy-tailed here (cv ~0.5-1), a step feels
    # the tail, and 64 of them put the mean within ~+-15 %
    res["allreduce_probe_s"] = statistics.fmean(grad_ts)
    res["allreduce_probe_median_s"] = statistics.median(grad_ts)
    coll = probe_comm.fit_allreduce(sweep, world, "nccl" if dev.type == "cuda" else "gloo", near=grad_bytes)
    coll["busy_s"] = busy
    return coll


def _gather(rank: int, world: int, res: dict[str, Any], extra: dict[str, Any], out: str) -> None:
    """Rank 0 writes the ranks' results merged (the slowest rank's step time, the means of the rest)."""
    import torch.distributed as dist

    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, res)
    if rank == 0:
        merged = {k: max(g[k] for g in gathered) if k == "step_time_s" else statistics.mean(g[k] for g in gathered)
                  for k in res}
        merged["step_time_by_rank_s"] = [g["step_time_s"] for g in gathered]
        Path(out).write_text(json.dumps({"measured": merged, **extra}))


def _profile(sc: Scenario, dev: torch.device, threads: int, fits: Any, t: Trainable,
             collectives: dict[str, Any] | None, paces: dict[str, Any] | None = None) -> dict[str, Any]:
    comp, build_fit, handover = fits
    each = probes.data_probe(t.dataset, sc.training.micro_batch, [], pin_memory=False, samples=300, batches=3)
    data: dict[str, Any] = {"batch_build": build_fit, "per_sample_s": each["per_sample_s"],
                            "per_sample_cv": each["per_sample_cv"]}
    if t.mode == "factory":
        data["dataset_factory"] = sc.dataset.factory
    else:
        data.update({"patch": t.model["patch"], "out_bands": t.model["bands"]})
    prof: dict[str, Any] = {
        "format": FORMAT, "source": "measured", "method": "paired probe: batch builds alternating with training "
        "steps on a fixed batch, each timed alone (per-sample costs under load), in every training process at once",
        "device": {"kind": dev.type, "catalog_gpu": catalog_gpu_for(dev), "cores": os.cpu_count(),
                   "torch_threads": threads if dev.type == "cpu" else None},
        "model": t.model,
        "compute": {"by_threads": {str(threads): comp},
                    "contention": probes.contention_probe(t.net, sc.training.micro_batch, rounds=2),
                    "processes": int(collectives["world_size"]) if collectives else 1}
        if dev.type == "cpu" else comp,
        "data": {"modes": {t.mode: data}},
    }
    if handover is not None:
        prof["data"]["modes"][t.mode]["handover"] = handover
    if paces is not None:
        prof["data"]["modes"][t.mode]["interference"] = paces
    if collectives is not None:
        prof["collectives"] = collectives
    return prof


def _paired(sc: Scenario, dev: torch.device, t: Trainable, ddp: bool = False) -> paired.PairedProbe:
    b = sc.training.micro_batch
    amp = _amp(sc)
    return paired.PairedProbe(t.net, dev, t.dataset, sorted({max(1, b // 4), max(1, b // 2), b}), sc.model.optimizer,
                              amp, handover=sc.loader.num_workers > 0, ddp=ddp)


def _default_threads(world: int) -> int:
    """A training process's intra-op threads as it starts: PyTorch's default in one; with several,
    ``torchrun``'s ``OMP_NUM_THREADS=1`` unless it is set (as ``resolve.hardware.default_threads``)."""
    if world > 1 and "OMP_NUM_THREADS" not in os.environ:
        return 1
    return torch.get_num_threads()


def predict(scenario: Path, sets: list[str], dev: torch.device, world: int, profile: Path, steps: int,
            threads: int | None = None) -> tuple[dict[str, float], list[str]]:
    """The simulator's step time, data-wait fraction (and exposed all-reduce) for this device; on a
    CPU, for training processes of ``threads`` intra-op threads (the count the real run had)."""
    base = load_scenario(scenario, sets)
    micro = base.training.micro_batch
    local = [*sets, *([f"training.threads={threads}"] if threads is not None else []),
             f"cluster.instance={local_instance(dev, world)}", "cluster.nodes=1", "cluster.market=on_demand",
             "cluster.on_demand_nodes=0", f"training.steps={steps}", "training.epochs=null",
             f"training.global_batch={micro * world}", f"calibration={profile}", "checkpoint.policy=none",
             "checkpoint.every_steps=null", "checkpoint.on_notice=false", "overhead.queue=null", "overhead.boot=0",
             "overhead.image_pull=0", "overhead.init=0", "spot=null", "timings=null"]
    sc = load_scenario(scenario, local)
    job = resolve_job(sc, allow_code=True)  # validate() checked that the user allowed the scenario's code
    # the same statistics as the measurement, over 4,000 steady-state steps of the micro simulation
    sim = MicroSim(job, np.random.default_rng(1), start_workers=False)
    sim.run(64)
    tr = sim.run(4000)
    draws = gamma_draws(np.random.default_rng(2), job.compute_s, job.compute_cv, 4000)
    pred = {**summary(tr.duration, tr.data), "compute_s": trimmed(draws), "compute_mean_s": job.compute_s,
            "comm_s": float(tr.comm.mean())}
    if world > 1:  # one all-reduce of every gradient, as the measurement times it
        inst = catalog.instance(sc.cluster.instance)
        link = catalog.link(inst.intra)
        prof = load_profile(profile)
        coll = prof.collectives or {}
        pred["allreduce_probe_s"] = collectives.ring_allreduce(
            4.0 * prof.model["params"], world, coll.get("alpha_per_hop_s", link.latency_s),
            coll.get("bus_bw_bytes_per_s", link.effective_bytes_per_s))
        # in a training step: the all-reduce itself, and the ranks' wait for the slowest before it
        pred["allreduce_s"] = float(tr.comm.mean())
        pred["barrier_wait_s"] = float(tr.waited.mean())
    return pred, list(job.notes)


def validate(scenario: Path, *, sets: list[str], device: str, steps: int = 100, warmup: int | None = None,
             profile: Path | None = None, world_size: int = 1, rounds: int = 8, log: Any = None,
             allow_code: bool = False) -> dict[str, Any]:
    """Measure a real run and predict it; returns measured, predicted and the errors in %.

    Factories named in the scenario are the user's code: they run only with ``allow_code``.
    """
    dev = parse_device(device)
    if steps < 5:
        raise HsisimInputError(f"{{steps}} must be at least 5, got {steps}")
    if world_size not in (1, 2):
        raise HsisimInputError(f"{{world_size}} must be 1 or 2, got {world_size}")
    sc = load_scenario(scenario, sets)
    check_code_allowed(sc, allow_code)
    say = log or (lambda m: None)
    # the threads the user's code trains with: the scenario's, else what its processes start with
    threads = (sc.training.threads or _default_threads(world_size)) if dev.type == "cpu" else 1
    wu = warmup if warmup is not None else max(5, sc.loader.num_workers * sc.loader.prefetch_factor + 2)
    with tempfile.TemporaryDirectory(prefix="hsisim-validate-") as d, trainable(sc) as t:
        say(f"training {wu} + {steps} steps for real" + ("" if profile is not None else
            f", in {rounds} segments between rounds of the calibration probe ({threads} training thread(s))"))
        old = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            with limited(sc.dataset.blas_threads):  # the run, its workers and its probes under the scenario's limit
                if world_size == 1:  # one process: the paces of its workers; several: their collectives
                    measured, fits, paces = _measure_one(sc, dev, threads, t, steps, rounds, wu, profile is None)
                    coll = None
                else:
                    measured, fits, coll = _measure_ddp(scenario, sets, device, world_size, steps, wu, threads,
                                                        rounds, profile is None, Path(d))
                    paces = None
                prof_path = profile if profile is not None else \
                    document(_profile(sc, dev, threads, fits, t, coll, paces)).write(Path(d) / "profile.json")
        finally:
            torch.set_num_threads(old)
        predicted, notes = predict(scenario, sets, dev, world_size, prof_path, steps,
                                   threads if dev.type == "cpu" else None)
    return _report(sc, dev, world_size, threads, steps, wu, measured, predicted, notes)


def _measure_one(sc: Scenario, dev: torch.device, threads: int, t: Trainable, steps: int, rounds: int, wu: int,
                 probe_too: bool) -> tuple[dict[str, Any], Any, dict[str, Any] | None]:
    """One process: segments of the real run between rounds of the paired probe and, on a CPU with
    loader workers, of the interference probe: how the workers' builds and the step slow each other in
    a DataLoader loop, as ``hsisim calibrate`` measures it for a user's CPU run (without it the step
    beside one worker was predicted 8-14 % low). Without workers the paired probe's own DataLoader loop
    of builds and steps is the regime the interference probe's loop without workers would time again,
    with fewer samples (their step moved 1.02-1.11x its time alone from one run to the next)."""
    probe = _paired(sc, dev, t) if probe_too else None
    workers = min(max_workers(), sc.loader.num_workers)
    meet = InterferenceProbe(t.net, t.dataset, sc.training.micro_batch, workers, steps=10,
                             optimizer=sc.model.optimizer) if probe_too and dev.type == "cpu" and workers else None
    run = Run(sc, dev, threads, t)
    seg_warmup = sc.loader.num_workers * sc.loader.prefetch_factor + 1
    for r, n in enumerate(segments(steps, rounds)):
        if probe is not None:
            probe.round()
        if meet is not None:
            meet.round()
        run.segment(n, wu if r == 0 else seg_warmup)
    fits = None
    if probe is not None:
        probe.round()
        fits = probe.fits()
    measured = run.result()
    run.close()
    return measured, fits, meet.result() if meet is not None else None


def _measure_ddp(scenario: Path, sets: list[str], device: str, world: int, steps: int, wu: int, threads: int,
                 rounds: int, probe_too: bool, folder: Path) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """``world`` processes with DDP; rank 0 writes what they measured."""
    import torch.multiprocessing as mp

    out = str(folder / "measured.json")
    try:
        mp.spawn(_ddp_worker, args=(world, probe_comm.free_port(), str(scenario), sets, device, steps, wu, threads,
                                    rounds, probe_too, out), nprocs=world, join=True)
    except mp.ProcessRaisedException as exc:  # a rank failed: its last line says why
        last = [ln for ln in str(exc).strip().splitlines() if ln.strip()][-1]
        raise HsisimInputError(f"a validation process failed: {last}") from None
    got = json.loads(Path(out).read_text())
    return got["measured"], got["fits"], got["collectives"]


def _report(sc: Scenario, dev: torch.device, world: int, threads: int, steps: int, wu: int, measured: dict[str, Any],
            predicted: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """Measured against predicted, with the errors in % (and the data-wait share in points)."""
    # the all-reduce in a step is measured by a hook on CPU processes (on a GPU its kernels run
    # asynchronously, and only the all-reduce alone is timed)
    keys = [k for k in ("step_time_s", "data_wait_fraction", "allreduce_s", "barrier_wait_s", "allreduce_probe_s")
            if k in measured]
    errors = {k: 100.0 * (predicted[k] - measured[k]) / measured[k] if measured[k] > 0 else math.nan for k in keys}
    # a fraction near zero has no meaningful relative error: also give the difference in points
    points = {"data_wait_fraction": 100.0 * (predicted["data_wait_fraction"] - measured["data_wait_fraction"])}
    return {"scenario": sc.name, "device": str(dev), "world_size": world, "threads": threads,
            "threads_seen": {"training": measured.get("training_threads"), "cores": os.cpu_count(),
                             "loader_workers": sc.loader.num_workers},
            "steps": steps, "warmup": wu, "measured": measured, "predicted": predicted, "error_pct": errors,
            "error_points": points, "notes": notes,
            "config": {"model": sc.model.name or sc.model.factory, "micro_batch": sc.training.micro_batch,
                       "num_workers": sc.loader.num_workers, "preprocess": sc.dataset.preprocess,
                       "patch": sc.dataset.patch, "bands": sc.dataset.pca_components}}
