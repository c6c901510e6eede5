"""Collective probes: all-reduce times between processes (gloo on the CPU, nccl on GPUs), inside DDP too.

A training step's all-reduce follows a burst of computation, and on a CPU host the transport's
threads sleep through it: the probes time every all-reduce after ``busy_s`` of arithmetic, as DDP
issues it. ``CommClock`` times DDP's own all-reduce inside training steps through a
communication hook.
"""

from __future__ import annotations

import json
import math
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from hsisim.analytic.compute import fit_line
from hsisim.calibration.probes import busy


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


def rank_difference(per_rank: list[list[float]]) -> float:
    """The mean absolute difference between two ranks' times on the same step, over pairs and steps.

    ``per_rank[r][i]`` is rank r's time on step i. A shared machine's slow moments slow every rank
    at once and make no rank wait for another; only the part that differs between ranks does. Two
    ranks at a barrier wait, on average, half this difference for the later one; a rare long stall
    counts in it as often as it happens (in a standard deviation it would count squared).
    """
    rows = np.asarray(per_rank, dtype=float)
    if rows.shape[0] < 2 or rows.shape[1] == 0:
        return 0.0
    pairs = [np.abs(rows[i] - rows[j]).mean() for i in range(len(rows)) for j in range(i + 1, len(rows))]
    return float(np.mean(pairs))


def compute_difference(handed: list[list[float]], built: list[list[float]]) -> float:
    """The mean absolute difference between ranks' computations, as the gradients' barrier sees it.

    ``handed[r][i]``: when rank r handed its last gradient bucket over on step i (one clock for every
    process of a host); ``built[r][i]``: how long its batch build before that step took. Every rank
    left the previous step's all-reduce at about the same moment, so the hand-over times differ by
    what each did since: the build and the computation. The build's difference is taken out in
    quadrature (the simulator draws the build on its own; for independent normal parts the mean
    absolute differences add as standard deviations do).

    Not the difference of each rank's timed computation: on a shared host a rank that starts
    computing later, while another still builds, computes faster while it has the cores to itself,
    and catches up (the timed computations differed 2-3x as much as the hand-over times did).
    """
    total = rank_difference(handed)
    build = rank_difference(built) if built else 0.0
    return math.sqrt(max(0.0, total * total - build * build))


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


def free_port() -> int:
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
        mp.spawn(_allreduce_worker, args=(world, free_port(), backend, sizes, reps, busy_s, out), nprocs=world,
                 join=True)
        times = {int(n): ts for n, ts in json.loads(Path(out).read_text()).items()}
    return {**fit_allreduce(times, world, backend, near=near), "busy_s": busy_s}
