"""Short real PyTorch probes: compute, memory, data pipeline, checkpoint I/O and collectives.

Every timing is a median over repetitions after warm-up. On CUDA, compute is timed with CUDA
events around a synchronised region; on the CPU with ``time.perf_counter``. The probes write only
into temporary directories they remove.
"""

from __future__ import annotations

import functools
import os
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
from hsisim.calibration.models import build
from hsisim.errors import HsisimInputError


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


def busy(seconds: float, work: torch.Tensor) -> None:
    """Keep this process computing for ``seconds`` (square matrix products), as a training step would."""
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        work @ work


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


def _spin(stop: Any, parent: int, started: Any = None) -> None:
    """A busy competitor: one core of pure-Python and NumPy work, like a loader worker building a batch,
    until ``stop`` is set or its parent (pid ``parent``) is gone: a calibration killed by a signal sets
    nothing, and its competitors spun on, each taking a core from whatever ran next (one took half of
    this 2-core VM for 6 minutes and slowed a user's training loop from 0.45 to 0.96 s a step)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    a = np.random.default_rng(0).random((128, 128))
    if started is not None:
        started.set()  # imported and about to spin
    while not stop.is_set() and os.getppid() == parent:
        for _ in range(20):
            a = np.tanh(a)


def _dead_competitor(code: int | None) -> RuntimeError:
    return RuntimeError(f"the contention probe's competitor process exited (code {code}) before the step beside it "
                        "was timed: multiprocessing could not start it (is the main module a file it can import "
                        "again? run calibrate from a script or `hsisim calibrate`)")


def _await_competitors(procs: list[Any], started: list[Any], timeout_s: float = 120.0) -> None:
    """Until every competitor spins (spawned, each imports numpy and torch first, 3.3-3.6 s on the 2-core VM,
    where a fixed 0.2 s wait had timed the step beside processes still importing), or one has exited."""
    deadline = time.monotonic() + timeout_s
    for proc, ready in zip(procs, started, strict=True):
        while not ready.wait(0.05):
            if not proc.is_alive():
                raise _dead_competitor(proc.exitcode)
            if time.monotonic() > deadline:
                raise RuntimeError(f"the contention probe's competitor did not start within {timeout_s:.0f} s")
    time.sleep(0.05)  # each is past its first spin


def contention_probe(net: Net, batch: int, rounds: int = 3, reps: int = 9, optimizer: str = "adam") -> dict[str, Any]:
    """A CPU training step's slowdown beside k busy single-core competitors (k = 1 … cores), at the
    process's thread count: how much of its share a multi-threaded step loses to the scheduler.

    Rounds alternate alone and beside competitors, so a shared machine's drift weighs on both;
    ``slowdown[k]`` is the median of the rounds' ratios (``slowdown[0]`` = 1).
    """
    import multiprocessing as mp

    dev = torch.device("cpu")
    model, opt, scaler, dtype = make_training(net, dev, optimizer, amp=False)
    x, y = net.batch(batch, dev)
    step = functools.partial(training_step, model, opt, x, y, scaler, dtype)
    timer = Timer(dev)
    cores = os.cpu_count() or 1
    ctx = mp.get_context("spawn")
    ratios: dict[int, list[float]] = {k: [] for k in range(1, cores + 1)}
    for _ in range(rounds):
        for k in ratios:
            alone = statistics.median(timer(step, reps, 2))
            stop = ctx.Event()
            started = [ctx.Event() for _ in range(k)]  # named: an Event made in the call can be gone too soon
            procs = [ctx.Process(target=_spin, args=(stop, os.getpid(), s), daemon=True) for s in started]
            for proc in procs:
                proc.start()
            try:
                _await_competitors(procs, started)
                beside = statistics.median(timer(step, reps, 1))
                dead = [proc.exitcode for proc in procs if not proc.is_alive()]
            finally:
                stop.set()
                for proc in procs:
                    proc.join()
            if dead:  # the step was timed beside fewer competitors than k: no measurement of k
                raise _dead_competitor(dead[0])
            ratios[k].append(beside / alone)
    return {"threads": torch.get_num_threads(), "batch": batch,
            "slowdown": [1.0, *(max(1.0, statistics.median(ratios[k])) for k in ratios)],
            "method": "training step beside k processes spinning on one core each, alternated with the step alone"}


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
        it = forever(DataLoader(ds, batch_size=b, shuffle=True, num_workers=0, drop_last=True))
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
        it = forever(loader)
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


def no_whole_batch(n: int, batch: int | None) -> HsisimInputError:
    """The error for a dataset smaller than one batch: the probes time whole batches only."""
    return HsisimInputError(f"a dataset of {n} samples has no whole batch of {batch}: the probes' DataLoaders "
                            "take whole batches only")


def end_workers(it: Any) -> None:
    """End a DataLoader iterator's workers now, not when it is collected: a traceback that holds it (or the frame
    that holds its loader, whose persistent workers outlive it) keeps them alive. A loader without workers has
    none to end."""
    shutdown = getattr(it, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()


def forever(loader: DataLoader) -> Any:
    """The loader's batches, epoch after epoch (a dataset of fewer batches than a probe takes is read again).

    Its workers end where a build raises, or where the batches are closed or dropped: a traceback holds this
    frame and so the loader, whose persistent workers would live on until it was collected."""
    if len(loader) == 0:  # it would yield nothing, for ever
        raise no_whole_batch(len(loader.dataset), loader.batch_size)  # type: ignore[arg-type]
    it = None
    try:
        while True:
            it = iter(loader)
            yield from it
    except BaseException:  # GeneratorExit too: not at an epoch's end, where persistent workers go on
        end_workers(it)
        raise


def handover_probe(ds: Dataset, batches: list[int], build: dict[str, Any], fetches: int = 20,
                   work_s: float = 0.02) -> dict[str, Any]:
    """What ``next()`` costs the training process for a batch a worker has already finished.

    Before each fetch the process sleeps 1.5x the in-process build of the batch (``build``: the data
    probe's fit a + c·b), so that the worker is surely done (else the probe times the build, not the
    hand-over: 258 ms instead of a few at batch 64 of a per-patch PCA), then stays busy ``work_s``
    (arithmetic, as training would); fit t(b) = a + c·b over batch sizes.
    """
    a_mat = torch.randn(256, 256)
    pts = []
    for b in batches:
        ahead = 1.5 * max(0.0, build["a_s"] + build["c_s_per_sample"] * b)
        loader = DataLoader(ds, batch_size=b, shuffle=True, num_workers=1, prefetch_factor=2,
                            persistent_workers=True, drop_last=True)
        it = forever(loader)
        next(it)
        ts = []
        for _ in range(fetches):
            time.sleep(ahead)
            busy(work_s, a_mat)
            t0 = time.perf_counter()
            next(it)
            ts.append(time.perf_counter() - t0)
        del it, loader
        pts.append({"batch": b, "median_s": statistics.median(ts)})
    a, c, r2 = fit_line([p["batch"] for p in pts], [p["median_s"] for p in pts])
    return {"a_s": a, "c_s_per_sample": c, "r2": r2, "points": pts}
