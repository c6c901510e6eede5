"""Short real PyTorch probes: compute, memory, data pipeline, checkpoint I/O and collectives.

Every timing is a median over repetitions after warm-up. On CUDA, compute is timed with CUDA
events around a synchronised region; on the CPU with ``time.perf_counter``. The probes write only
into temporary directories they remove.
"""

from __future__ import annotations

import functools
import json
import math
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from hsisim.analytic.compute import fit_line
from hsisim.calibration.data import Preprocess
from hsisim.calibration.models import build


class Timer:
    """Times a callable on a device: CUDA events (synchronised) on a GPU, perf_counter on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def __call__(self, fn: Callable[[], Any], reps: int, warmup: int) -> list[float]:
        for _ in range(warmup):
            fn()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            out = []
            for _ in range(reps):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                out.append(start.elapsed_time(end) / 1e3)
            return out
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out


def amp_dtype(device: torch.device) -> torch.dtype | None:
    """fp16 autocast on CUDA (bf16 where supported is not what the scenarios' amp_fp16 means); none on CPU."""
    return torch.float16 if device.type == "cuda" else None


def training_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                  scaler: Any, dtype: torch.dtype | None) -> None:
    """One forward + backward + optimizer step, as a training loop does it."""
    opt.zero_grad(set_to_none=True)
    with torch.autocast(x.device.type, dtype=dtype, enabled=dtype is not None):
        loss = nn.functional.cross_entropy(model(x), y)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()


class CommClock:
    """Times DDP's gradient all-reduce inside its training steps, through a communication hook.

    The hook does what DDP's default does (average the bucket over the ranks) and notes when each
    bucket is handed over and when its all-reduce completes. ``take()`` gives, for the step just
    run, when the backward pass handed over its last bucket and when the last all-reduce completed
    (``time.perf_counter``: one monotonic clock for every process of a host, so the ranks' times
    can be compared). The step minus the time between the two is the computation as it runs in a
    process that communicates, whose cores the other ranks' transport threads share.
    """

    def __init__(self, model: nn.Module) -> None:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        self.calls: list[float] = []
        self.done: list[float] = []

        def hook(state, bucket):  # no annotations: DDP rejects a bucket annotation it cannot compare
            self.calls.append(time.perf_counter())
            fut = default_hooks.allreduce_hook(state, bucket)

            def note(f: Any) -> Any:
                self.done.append(time.perf_counter())
                return f.value()

            return fut.then(note)

        model.register_comm_hook(None, hook)  # type: ignore[operator]

    def take(self) -> tuple[float, float]:
        """(last hand-over, last completion) of the step since the previous call."""
        if not self.calls or not self.done:
            raise RuntimeError("no gradient all-reduce since the last step: is the model wrapped in DDP?")
        out = (self.calls[-1], max(self.done))
        self.calls.clear()
        self.done.clear()
        return out


def rank_spread(per_rank: list[list[float]]) -> float:
    """The standard deviation of what differs between ranks on the same step, pooled over steps.

    ``per_rank[r][i]`` is rank r's time on step i. A shared machine's slow moments slow every rank
    at once and make no rank wait for another; only the part that differs between ranks does, and
    the simulator draws each rank's time independently with this spread.
    """
    rows = np.asarray(per_rank, dtype=float)
    if rows.shape[0] < 2 or rows.shape[1] == 0:
        return 0.0
    return float(np.sqrt(rows.var(axis=0, ddof=1).mean()))


def busy(seconds: float, work: torch.Tensor) -> None:
    """Keep this process computing for ``seconds`` (square matrix products), as a training step would."""
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        work @ work


def after_last_handover(handed: list[float], done: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Per step, split this rank's all-reduce by every rank's hand-over times (every rank calls it).

    ``handed[i]``/``done[i]``: this rank's hand-over and completion on step i (a :class:`CommClock`).
    Returns (the wait for the last rank to hand over, the all-reduce from that hand-over to completion).
    """
    import torch.distributed as dist

    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, list(handed))
    last = np.max(np.array(everyone), axis=0)
    return last - np.array(handed), np.maximum(0.0, np.array(done) - last)


RATIO_QUANTILES = 41  # every 2.5 %


def ratio_quantiles(ratios: np.ndarray) -> list[float]:
    """``RATIO_QUANTILES`` evenly spaced quantiles of one all-reduce's time / mean."""
    return [float(q) for q in np.quantile(ratios, np.linspace(0.0, 1.0, RATIO_QUANTILES))]


def make_optimizer(model: nn.Module, name: str) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    if name == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-3)
    return torch.optim.Adam(model.parameters(), lr=1e-3)


@dataclass(frozen=True)
class Net:
    """A model to calibrate: how to build it, the shape of one sample and the number of classes."""

    name: str
    build: Callable[[], nn.Module]
    sample_shape: tuple[int, ...]
    classes: int

    def batch(self, b: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.randn(b, *self.sample_shape, device=device),
                torch.randint(0, self.classes, (b,), device=device))


def builtin_net(model_name: str, bands: int, patch: int, classes: int) -> Net:
    return Net(model_name, functools.partial(build, model_name, bands, patch, classes), (bands, patch, patch), classes)


def make_training(net: Net, device: torch.device, optimizer: str = "adam", amp: bool = True,
                  ) -> tuple[nn.Module, torch.optim.Optimizer, Any, torch.dtype | None]:
    model = net.build().to(device)
    opt = make_optimizer(model, optimizer)
    dtype = amp_dtype(device) if amp else None
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 else None
    return model, opt, scaler, dtype


def compute_probe(net: Net, device: torch.device, batches: list[int], reps: int = 7, warmup: int = 3,
                  threads: int | None = None, optimizer: str = "adam", amp: bool = True) -> dict[str, Any]:
    """t(b) = a + c·b for one training step over micro-batch sizes; R² and the step-to-step cv."""
    old = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        model, opt, scaler, dtype = make_training(net, device, optimizer, amp)
        timer = Timer(device)
        points: list[dict[str, Any]] = []
        for b in batches:
            x, y = net.batch(b, device)
            ts = timer(functools.partial(training_step, model, opt, x, y, scaler, dtype), reps, warmup)
            med = statistics.median(ts)
            mad = statistics.median(abs(t - med) for t in ts)
            points.append({"batch": b, "median_s": med, "cv": 1.4826 * mad / med if med > 0 else 0.0,
                           "times_s": ts})
    finally:
        torch.set_num_threads(old)
    a, c, r2 = fit_line([p["batch"] for p in points], [p["median_s"] for p in points])
    cv = statistics.median(float(p["cv"]) for p in points)
    return {"a_s": a, "c_s_per_sample": c, "cv": cv, "r2": r2, "threads": threads or old,
            "precision": "amp_fp16" if dtype == torch.float16 else "fp32", "points": points}


def memory_probe(net: Net, device: torch.device, batches: list[int], limit: int = 1 << 16) -> dict[str, Any]:
    """CUDA only: peak allocated/reserved per batch, activation bytes per sample, the largest batch that fits."""
    model, opt, scaler, dtype = make_training(net, device)
    rows = []

    def attempt(b: int) -> tuple[int, int] | None:
        try:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            x, y = net.batch(b, device)
            training_step(model, opt, x, y, scaler, dtype)
            torch.cuda.synchronize(device)
            return torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device)
        except torch.cuda.OutOfMemoryError:
            opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            return None

    for b in batches:
        got = attempt(b)
        if got is None:
            break
        rows.append({"batch": b, "peak_allocated": got[0], "peak_reserved": got[1],
                     "fragmentation": got[1] / got[0] if got[0] else 1.0})
    largest, b = (rows[-1]["batch"] if rows else 0), max(batches)
    while b < limit:  # double until it fails, then bisect
        b *= 2
        if attempt(b) is None:
            lo, hi = b // 2, b
            while hi - lo > max(1, lo // 16):
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if attempt(mid) is not None else (lo, mid)
            largest = lo
            break
        largest = b
    per_sample = fit_line([r["batch"] for r in rows], [r["peak_allocated"] for r in rows])[1] if len(rows) > 1 else 0
    return {"points": rows, "activation_bytes_per_sample": per_sample, "largest_batch": largest,
            "largest_batch_capped": largest >= limit,
            "fragmentation": statistics.median(r["fragmentation"] for r in rows) if rows else None,
            "total_bytes": torch.cuda.get_device_properties(device).total_memory}


def data_probe(ds: Dataset, batch: int, workers: list[int], pin_memory: bool, samples: int = 400,
               batches: int = 12) -> dict[str, Any]:
    """Per-sample __getitem__ cost and spread, the in-process batch build t(b) = a + c·b, throughput vs workers."""
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(ds), samples)  # type: ignore[arg-type]
    for i in idx[:20]:
        ds[int(i)]
    each = []
    for i in idx:
        t0 = time.perf_counter()
        ds[int(i)]
        each.append(time.perf_counter() - t0)
    arr = np.array(each)
    sizes = sorted({max(1, batch // 4), max(1, batch // 2), batch})
    build = []
    for b in sizes:
        loader = DataLoader(ds, batch_size=b, shuffle=True, num_workers=0, drop_last=True)
        it = iter(loader)
        next(it)
        ts = []
        for _ in range(batches):
            t0 = time.perf_counter()
            next(it)
            ts.append(time.perf_counter() - t0)
        build.append({"batch": b, "median_s": statistics.median(ts)})
    a, c, r2 = fit_line([p["batch"] for p in build], [p["median_s"] for p in build])
    loaders = []
    for w in workers:
        loader = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=w, drop_last=True,
                            pin_memory=pin_memory, persistent_workers=w > 0)
        it = iter(loader)
        next(it)
        t0 = time.perf_counter()
        for _ in range(batches):
            next(it)
        dt = time.perf_counter() - t0
        loaders.append({"num_workers": w, "pin_memory": pin_memory, "samples_per_s": batches * batch / dt})
        del it, loader
    return {"per_sample_s": float(arr.mean()), "per_sample_p50_s": float(np.median(arr)),
            "per_sample_p90_s": float(np.percentile(arr, 90)), "per_sample_cv": float(arr.std(ddof=1) / arr.mean()),
            "batch_build": {"a_s": a, "c_s_per_sample": c, "r2": r2, "points": build}, "loader": loaders}


def checkpoint_probe(model: nn.Module, opt: torch.optim.Optimizer, target: Path | None, reps: int = 3
                     ) -> dict[str, Any]:
    """torch.save (flushed and fsynced) and torch.load of model + optimizer state in ``target``."""
    state = {"model": model.state_dict(), "optimizer": opt.state_dict()}
    with tempfile.TemporaryDirectory(dir=target) as d:
        path = Path(d) / "probe.pt"
        writes, reads = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            with open(path, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            writes.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            torch.load(path, map_location="cpu", weights_only=True)
            reads.append(time.perf_counter() - t0)
        size = path.stat().st_size
    w, r = statistics.median(writes), statistics.median(reads)
    return {"bytes": size, "write_s": w, "read_s": r, "write_bw_bytes_per_s": size / w, "read_bw_bytes_per_s": size / r,
            "dir": str(target) if target else tempfile.gettempdir()}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def time_allreduce(sizes: list[int], reps: int, dev: torch.device, busy_s: float = 0.005) -> dict[int, list[float]]:
    """Seconds of ``reps`` single all-reduces per message size, in an initialised process group (every rank calls it).

    Each timed all-reduce follows ``busy_s`` of arithmetic on every rank, as DDP's follows the backward
    pass: the transport's threads have gone to sleep and must be woken, which on a CPU host costs
    milliseconds that back-to-back all-reduces never see.
    """
    import torch.distributed as dist

    work = torch.randn(256, 256)
    times: dict[int, list[float]] = {}
    for n in sizes:
        x = torch.ones(max(1, n // 4), dtype=torch.float32, device=dev)
        for _ in range(2):
            dist.all_reduce(x)
        ts = []
        for _ in range(reps):
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            dist.barrier()
            busy(busy_s, work)
            t0 = time.perf_counter()
            dist.all_reduce(x)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            ts.append(time.perf_counter() - t0)
        times[n] = ts
    return times


class _Gradient(nn.Module):
    """One parameter of ``n`` floats behind ``busy_s`` of arithmetic: DDP all-reduces 4n bytes a step."""

    def __init__(self, n: int, busy_s: float) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(n))
        self.busy_s = busy_s
        self.work = torch.randn(256, 256)

    def forward(self) -> torch.Tensor:
        busy(self.busy_s, self.work)
        return self.w.sum()


def time_allreduce_ddp(sizes: list[int], reps: int, busy_s: float = 0.005) -> dict[int, list[float]]:
    """Seconds of the gradient all-reduce as DDP issues it on CPU processes, per message size.

    Every rank of an initialised (gloo) group calls it. Each size is one parameter behind ``busy_s``
    of arithmetic, wrapped in DDP and timed by a :class:`CommClock`: from the last rank's hand-over
    of the gradient to the completion, as a training step waits for it. The ranks arrive at
    slightly different times, as they do in training, and the first to arrive has begun its part.
    """
    from torch.nn.parallel import DistributedDataParallel

    times: dict[int, list[float]] = {}
    for n in sizes:
        model = DistributedDataParallel(_Gradient(max(1, n // 4), busy_s))
        clock = CommClock(model)
        handed, done = [], []
        for i in range(2 + reps):
            model().backward()
            h, d = clock.take()
            if i >= 2:
                handed.append(h)
                done.append(d)
        times[n] = [float(x) for x in after_last_handover(handed, done)[1]]
        del model, clock
    return times


def fit_allreduce(times: dict[int, list[float]], world: int, backend: str, near: int | None = None) -> dict[str, Any]:
    """t = α + (2(p−1)/p)·S/B (ring) over mean times; α per hop = α / (2(p−1)).

    Means, not medians: on a shared host the all-reduce has a heavy tail, and the step time feels it.
    ``cv`` is the spread of one all-reduce (std/mean), over the four sizes nearest ``near`` bytes
    (every size when None).
    """
    rows = sorted((n, statistics.fmean(ts)) for n, ts in times.items())
    factor = 2 * (world - 1) / world
    a, inv_bw, r2 = fit_line([factor * n for n, _ in rows], [t for _, t in rows])
    pick = sorted(times, key=lambda n: abs(math.log(n / near)))[:4] if near else list(times)
    spreads = [statistics.stdev(times[n]) / statistics.fmean(times[n]) for n in pick if len(times[n]) > 1]
    cv = statistics.median(spreads) if spreads else 0.0
    # the shape of one all-reduce's time around its mean, over the same sizes: on a CPU host it is
    # bimodal (transport threads still awake: a fraction of a millisecond; asleep: milliseconds), which
    # no one-parameter spread describes, and the median of a step follows the shape
    ratios = np.concatenate([np.asarray(times[n]) / statistics.fmean(times[n]) for n in pick if times[n]])
    return {"backend": backend, "world_size": world, "alpha_s": a, "alpha_per_hop_s": a / (2 * (world - 1)),
            "bus_bw_bytes_per_s": 1 / inv_bw if inv_bw > 0 else math.inf, "r2": r2, "cv": cv,
            "ratio_quantiles": ratio_quantiles(ratios),
            "points": [{"bytes": n, "mean_s": t} for n, t in rows]}


def end_group(finished: bool) -> None:
    """Destroy the process group; when every rank finished, only after DDP models are freed and every
    rank is here (a DDP reducer or a hook's future outliving the group aborts the process at exit)."""
    import gc

    import torch.distributed as dist

    if finished:
        gc.collect()
        dist.barrier()
    dist.destroy_process_group()


def _allreduce_worker(rank: int, world: int, port: int, backend: str, sizes: list[int], reps: int, busy_s: float,
                      out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    finished = False
    try:
        if backend == "nccl":
            times = time_allreduce(sizes, reps, torch.device("cuda", rank), busy_s)
        else:  # CPU processes: the all-reduce as DDP issues it, timed by a hook
            times = time_allreduce_ddp(sizes, reps, busy_s)
        if rank == 0:
            Path(out).write_text(json.dumps({str(n): ts for n, ts in times.items()}))
        finished = True
    finally:
        end_group(finished)


def collective_probe(world: int, backend: str, sizes: list[int] | None = None, reps: int = 24,
                     busy_s: float = 0.005, near: int | None = None) -> dict[str, Any]:
    """All-reduce times over message sizes with ``world`` spawned processes; fit t = α + (2(p−1)/p)·S/B.

    ``busy_s``: the computation between two all-reduces (a training step's): how long the transport
    threads sleep decides how long waking them takes. ``near``: the gradient's bytes, whose
    neighbouring sizes give the spread and shape of one all-reduce.
    """
    import torch.multiprocessing as mp

    sizes = sizes or [2**k for k in range(12, 25, 2)]  # 4 KiB … 16 MiB
    with tempfile.TemporaryDirectory() as d:
        out = str(Path(d) / "allreduce.txt")
        mp.spawn(_allreduce_worker, args=(world, _free_port(), backend, sizes, reps, busy_s, out), nprocs=world,
                 join=True)
        times = {int(n): ts for n, ts in json.loads(Path(out).read_text()).items()}
    return {**fit_allreduce(times, world, backend, near=near), "busy_s": busy_s}


def preprocess_summary(pre: Preprocess | None) -> dict[str, Any] | None:
    if pre is None:
        return None
    return {"bands": len(pre.mean), "out_bands": pre.out_bands, "pca": pre.components is not None}


class PairedProbe:
    """Alternates a real batch build (``DataLoader``, no workers) and a training step on a fixed batch.

    Each is timed on its own, and each runs with the caches the other leaves behind, as they do in a
    training loop: the per-sample cost "under load" rather than in isolation. Rounds can be spread
    over time (``round``) so that a shared machine's slow and fast moments weigh on the probe and on
    a run measured between the rounds alike.
    """

    def __init__(self, net: Net, device: torch.device, ds: Dataset, batches: list[int],
                 optimizer: str = "adam", amp: bool = True, handover: bool = False, ddp: bool = False) -> None:
        self.device, self.batches = device, batches
        self.model, self.opt, self.scaler, self.dtype = make_training(net, device, optimizer, amp)
        # ddp (CPU processes in an initialised group): the training step synchronises its gradients as
        # the real run's does, and its computation is the step minus the all-reduce it waited for
        self.clock: CommClock | None = None
        if ddp:
            from torch.nn.parallel import DistributedDataParallel

            self.model = DistributedDataParallel(self.model)
            self.clock = CommClock(self.model)
        self.marks: list[tuple[float, float]] = []  # (hand-over, completion) of the largest batch's all-reduces
        self.inputs = {b: net.batch(b, device) for b in batches}
        self.loaders = {b: iter(_forever(DataLoader(ds, batch_size=b, shuffle=True, num_workers=0, drop_last=True)))
                        for b in batches}
        self.build: dict[int, list[float]] = {b: [] for b in batches}
        self.step: dict[int, list[float]] = {b: [] for b in batches}
        # one worker per batch size, always ahead: what receiving its finished batch costs
        self.workers = {b: iter(_forever(DataLoader(ds, batch_size=b, shuffle=True, num_workers=1, prefetch_factor=2,
                                                    persistent_workers=True, drop_last=True)))
                        for b in batches} if handover else {}
        self.handover: dict[int, list[float]] = {b: [] for b in self.workers}
        self.timer = Timer(device)

    def round(self, pairs: int = 3, warmup: int = 1) -> None:
        for b in self.batches:
            x, y = self.inputs[b]
            for i in range(warmup + pairs):
                t0 = time.perf_counter()
                next(self.loaders[b])
                t_build = time.perf_counter() - t0
                t_step = self.timer(functools.partial(training_step, self.model, self.opt, x, y, self.scaler,
                                                      self.dtype), 1, 0)[0]
                mark = self.clock.take() if self.clock is not None else None
                if mark is not None:
                    t_step -= max(0.0, mark[1] - mark[0])
                t_hand = 0.0
                if self.workers:
                    t0 = time.perf_counter()
                    next(self.workers[b])
                    t_hand = time.perf_counter() - t0
                if i >= warmup:
                    self.build[b].append(t_build)
                    self.step[b].append(t_step)
                    if mark is not None and b == self.batches[-1]:
                        # the all-reduce after the largest batch's computation: the threads that carry
                        # it sleep as long as in training at that micro-batch (after a shorter
                        # computation they are more often still awake, and it is faster)
                        self.marks.append(mark)
                    if self.workers:
                        self.handover[b].append(t_hand)

    def fits(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
        """(compute, batch build, hand-over or None) fits a + c·b over the medians per batch size."""
        out: list[dict[str, Any] | None] = []
        for table in (self.step, self.build, self.handover):
            if not table:
                out.append(None)
                continue
            pts = [{"batch": b, "median_s": statistics.median(ts), "n": len(ts)} for b, ts in table.items()]
            a, c, r2 = fit_line([p["batch"] for p in pts], [p["median_s"] for p in pts])
            # the spread as the ranks feel it at a barrier: the standard deviation, tails included (a robust
            # spread would hide the shared machine's stalls that make one rank wait for another)
            cvs = [statistics.stdev(ts) / statistics.fmean(ts) for ts in table.values() if len(ts) > 1]
            fit = {"a_s": a, "c_s_per_sample": c, "r2": r2, "cv": statistics.median(cvs) if cvs else 0.0,
                   "points": pts}
            if self.clock is not None and table is not self.handover:
                # every rank ran the same pairs in step: the spread between ranks is the one that
                # makes a rank wait at the barrier (what slows all of them at once is in the medians)
                import torch.distributed as dist

                everyone: list[Any] = [None] * dist.get_world_size()
                dist.all_gather_object(everyone, table)
                between = [rank_spread([ranks[b] for ranks in everyone]) / statistics.fmean(ts)
                           for b, ts in table.items() if ts]
                fit["cv_total"], fit["cv"] = fit["cv"], statistics.median(between)
            out.append(fit)
        assert out[0] is not None and out[1] is not None
        return out[0], out[1], out[2]

    def allreduce(self) -> dict[str, Any] | None:
        """The gradients' all-reduce in the probe's DDP steps (every rank calls it): from the last rank's
        hand-over to the completion, its mean, spread and shape (quantiles of time / mean)."""
        if self.clock is None or not self.marks:
            return None
        ts = after_last_handover([h for h, _ in self.marks], [d for _, d in self.marks])[1]
        grad_bytes = sum(4 * p.numel() for p in self.model.parameters() if p.requires_grad)
        mean = float(ts.mean())
        return {"bytes": int(grad_bytes), "mean_s": mean, "median_s": float(np.median(ts)), "n": len(ts),
                "cv": float(ts.std(ddof=1) / mean) if mean > 0 and len(ts) > 1 else 0.0,
                "ratio_quantiles": ratio_quantiles(ts / mean) if mean > 0 else [],
                "method": "DDP training steps of the model on a fixed batch, timed by a communication hook"}


def _forever(loader: DataLoader) -> Any:
    while True:
        yield from loader


def handover_probe(ds: Dataset, batches: list[int], fetches: int = 20, work_s: float = 0.02) -> dict[str, Any]:
    """What ``next()`` costs the training process for a batch a worker has already finished.

    Between fetches the process stays busy (``work_s`` of arithmetic, as training would), so the
    worker is always ahead; fit t(b) = a + c·b over batch sizes.
    """
    a_mat = torch.randn(256, 256)
    pts = []
    for b in batches:
        loader = DataLoader(ds, batch_size=b, shuffle=True, num_workers=1, prefetch_factor=2,
                            persistent_workers=True, drop_last=True)
        it = iter(loader)
        next(it)
        ts = []
        for _ in range(fetches):
            busy(work_s, a_mat)
            t0 = time.perf_counter()
            next(it)
            ts.append(time.perf_counter() - t0)
        del it, loader
        pts.append({"batch": b, "median_s": statistics.median(ts)})
    a, c, r2 = fit_line([p["batch"] for p in pts], [p["median_s"] for p in pts])
    return {"a_s": a, "c_s_per_sample": c, "r2": r2, "points": pts}
