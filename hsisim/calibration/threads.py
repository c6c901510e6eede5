"""The threads a user's batch build runs of its own, as a DataLoader worker runs it.

A worker sets torch to one intra-op thread, but the libraries inside a ``Dataset`` keep their own
thread pools: numpy's OpenBLAS starts one thread per core in every process, workers included, and
an SVD or a matrix product of a few hundred rows then runs on all of them. Beside the training's
threads they oversubscribe the cores and spin-wait on each other. On the 2-core VM (December 2026),
a per-patch PCA of 64 9x9 patches took a median 118 ms alone at OpenBLAS's 2 threads and 89 ms at
one, with spells at 240 ms; in a user's loop with one such worker, the 10-step blocks ran at about
260 or 430 ms, each pace for tens of seconds (300-step loops 313-334 ms), where the same loop with
``OPENBLAS_NUM_THREADS=1`` ran at 159-166 ms, its blocks within 140-192 ms. The two paces coincide
with two distances between the VM's cores: a cache line's round trip between them took about 94 or 370 ns, for
seconds to minutes at a time, and one patch's SVD 2.97 or 7.13 ms at two BLAS threads where it took 2.1 ms at one
either way (docs/model.md).

``worker_build`` measures the cores a build alone keeps busy (its process's CPU time over its wall
time, torch at one thread) and, where threadpoolctl finds a BLAS library with more than one thread,
the same build with those libraries limited to one.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from threadpoolctl import threadpool_info, threadpool_limits

from hsisim.profile import WorkerBuild

# the builds are timed back to back for at least this long, after untimed ones for as long, so that a build
# of a millisecond or less is not read from a CPU clock that a thread pool's spin after earlier work still
# moves (OpenBLAS's threads spin about 2^28 cycles, ~0.1 s, before they sleep; torch's OpenMP threads less)
MIN_TIMED_S = 0.2
# where it does, each of the interference probe's loops runs for at least this long (s): such a loop's pace
# swings between two for tens of seconds at a time, and a loop of 10 steps reads one of them (docs/model.md)
THREADED_LOOP_S = 20.0


def _clocked(fn: Callable[[], Any]) -> tuple[float, float]:
    """``fn``'s wall time and the CPU time its process spent meanwhile, every thread's (seconds)."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def _back_to_back(build: Callable[[], Any], reps: int) -> list[tuple[float, float]]:
    """Untimed builds for ``MIN_TIMED_S`` (at least one), then at least ``reps`` timed ones, and more until they
    have taken ``MIN_TIMED_S``. Other threads of this process count too (a progress display's, say)."""
    t0 = time.perf_counter()
    build()
    while time.perf_counter() - t0 < MIN_TIMED_S:
        build()
    timed: list[tuple[float, float]] = []
    wall = 0.0
    while len(timed) < reps or wall < MIN_TIMED_S:
        timed.append(_clocked(build))
        wall += timed[-1][0]
    return timed


def blas_threads() -> dict[str, int]:
    """The threads of each BLAS library loaded in this process, as threadpoolctl finds them (by name and version)."""
    return {f"{p.get('internal_api', '?')} {p.get('version') or ''}".strip(): int(p.get("num_threads", 1))
            for p in threadpool_info() if p.get("user_api") == "blas"}


def threaded_blas() -> list[str]:
    """The BLAS libraries loaded in this process that run more than one thread, as threadpoolctl finds them."""
    return [f"{name} ({n} threads)" for name, n in blas_threads().items() if n > 1]


def worker_build(build: Callable[[], Any], reps: int) -> dict[str, Any]:
    """A batch build alone, as a DataLoader worker runs it (torch at one intra-op thread, every other library at
    its own count): its median wall time (``build_s``), the cores it keeps busy (``cores``: CPU time over wall
    time, pooled), the threads each BLAS library ran (``blas_threads``, empty where none is loaded: a user who limited
    them to follow ``hsisim run``'s advice calibrates under the limit, and the run says it predicts a run under
    it), and where a BLAS library runs more than one thread (``blas``), its median with the BLAS libraries limited
    to one thread (``one_blas_thread_s``). Torch's thread count is restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        timed = _back_to_back(build, reps)
        out: dict[str, Any] = {"build_s": statistics.median(w for w, _ in timed),
                               "cores": sum(c for _, c in timed) / sum(w for w, _ in timed)}
        out["blas_threads"] = blas_threads()  # empty where none is loaded (absent: a profile before 520b717)
        blas = threaded_blas()
        if blas:
            with threadpool_limits(limits=1, user_api="blas"):
                out["one_blas_thread_s"] = statistics.median(w for w, _ in _back_to_back(build, reps))
            out["blas"] = blas
    finally:
        torch.set_num_threads(threads)
    return out


def limited(n: int | None) -> AbstractContextManager[Any]:
    """Every BLAS library loaded in this process limited to ``n`` threads while it lasts (nothing where ``n`` is
    None): a scenario's ``dataset.blas_threads``."""
    return threadpool_limits(limits=n, user_api="blas") if n is not None else nullcontext()


def limit_blas(n: int, _worker: int = 0) -> None:
    """Limit every BLAS library loaded in this process to ``n`` threads for the rest of its life: a DataLoader
    worker's ``worker_init_fn`` (a forked worker inherits its parent's limit too, but a spawned one does not)."""
    threadpool_limits(limits=n, user_api="blas")


def worker_limit(n: int | None) -> Callable[[int], None] | None:
    """A DataLoader's ``worker_init_fn`` that limits each worker's BLAS libraries to ``n`` threads (``limit_blas``;
    None where ``n`` is)."""
    return functools.partial(limit_blas, n) if n is not None else None


def threaded(rounds: list[dict[str, Any]]) -> bool:
    """Whether these ``worker_build`` measurements, pooled as the profile keeps them, kept ``THREADED_BUILD``
    cores or more busy: as ``hsisim run`` will decide whether to warn (``WorkerBuild.threaded``)."""
    return bool(rounds) and WorkerBuild.model_validate(pooled(rounds)).threaded


def pooled(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds' measurements (at least one): means of the times and of the rounds' cores; the time at one BLAS
    thread only where every round measured it (a library's threads are the same in every round), and the BLAS
    libraries' threads as the last round found them."""
    out: dict[str, Any] = {"build_s": statistics.fmean(r["build_s"] for r in rounds),
                           "cores": statistics.fmean(r["cores"] for r in rounds)}
    if "blas_threads" in rounds[-1]:
        out["blas_threads"] = rounds[-1]["blas_threads"]
    if all("one_blas_thread_s" in r for r in rounds):
        out["one_blas_thread_s"] = statistics.fmean(r["one_blas_thread_s"] for r in rounds)
        out["blas"] = rounds[-1]["blas"]
    return out
