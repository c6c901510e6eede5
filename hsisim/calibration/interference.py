"""How a CPU training step and the user's own batch builds slow each other, measured as they meet.

``interference_probe`` measures two ways they meet:

* ``inline`` (no workers): the training process builds each batch itself, then steps. Each slows (or
  speeds) the other even though they never overlap (one library's thread pool still spinning when
  the other's starts, caches): each one's mean time in a DataLoader loop without workers, as the
  user's loop runs (``build_s``: the wait for ``next()``; ``step_s``), and its ratio to its time alone
  (``step_alone_s``; ``build_alone_s``: builds back to back, as a worker builds them). The loop, not a
  build called by hand: in one process at the same moments, hand-called builds alternated with steps
  took 268 ms where the DataLoader's took 311 ms, a wait share of 53.6 % where the loop's was 56.9 %;
  and in two checks interleaved with calibration, the user's loops waited 62.6 and 63.3 % of their
  step where the hand-called pairs predicted 58.6 and 58.4 % (batch 64, per-patch PCA, 11x11, this
  2-core VM, December 2026).
* ``workers`` (k = 1 … ``max_workers``): a real DataLoader with k workers feeding training steps, its
  workers' batch builds and the steps timed on one clock. ``step_ratio``: a step's slowdown over the
  time a build ran beside it; ``step_base``: its ratio over the whole step where the builds covered
  too little of it to explain the loop's step (exactly 1 where they did; with 2 workers of 0.6 ms
  builds beside a 11 ms step, the step took 1.11x its time alone while builds covered under a tenth
  of it, batch 100 of 5x5 patches on this 2-core VM; under 1 where the machine's pace moved between
  the loop and the step alone); ``build_ratio_busy``: a build's slowdown over the
  time a step ran beside it; ``build_ratio_idle``: k workers' builds while the training process only
  takes batches. Each over the in-process build or the step alone. ``handover_s``: the mean wait for
  a batch whose build had ended before the training process asked for it, the hand-over as the loop
  sees it (a stand-alone probe, after a sleep, overstated it: 2.6-3.0 ms where this loop waited
  2.0-2.2 ms and the user's own loop 1.8-1.9 ms, batch 100 of 5x5 patches, 2 workers, this 2-core
  VM). Measured in the loop, not with both kept busy: the scheduler favours a process that has
  slept (the training process waiting for its batch), and thread pools spinning beside each other
  slow each other far more than their shares; side by side without pause both lost about 2x more
  than in a loop (a per-patch PCA on this 2-core VM).

Where a build runs threads of its own (``calibration.threads``), a full calibration lengthens each loop
(``InterferenceProbe``); every loop's 10-step blocks are kept, the fastest and slowest as ``block_step_s``. Such a
loop runs at one of two paces, each for seconds to minutes (``calibration.state``): where the loop without workers'
steps fall in two, each pace's build and step are kept (``near``, ``far``), and the machine's state is read before
each loop and after the last (``machine_state``), so that the prediction can mix the two paces at the share of a
span longer than the loop's own seconds.

Rounds repeat everything, alone and beside, so that a shared machine's drift weighs on both; the
ratios pool the rounds' times (sums), and the times alone are their means, so that the model
multiplies each ratio by the times it was measured against.
"""

from __future__ import annotations

import bisect
import functools
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, default_collate

from hsisim.calibration import state, threads
from hsisim.calibration.probes import Net, end_workers, forever, make_training, no_whole_batch, training_step
from hsisim.profile import BLOCK

Span = tuple[float, float]
# steps before the loop without workers is timed: the step and the build have just run alone in the
# round, so only the loop's own start (its sampler, the first alternation) is left to pass
INLINE_WARMUP = 2
# batches each worker keeps ready (the DataLoader's default prefetch_factor, as the user's loop): when a
# loop ends, up to this many per worker may have been built beside its last steps
PREFETCH = 2
# before each look at the machine's state between loops (s): the thread pools of what ran before stop spinning
STATE_PAUSE_S = 0.2


class _TimedBuilds(Dataset):
    """The user's Dataset as a DataLoader worker sees it, with each batch's build start time attached."""

    def __init__(self, ds: Dataset) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return len(self.ds)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> Any:
        return self.ds[i]

    def __getitems__(self, idx: list[int]) -> tuple[float, list[Any]]:
        t0 = time.perf_counter()
        return t0, [self.ds[int(i)] for i in idx]


class _Endless(Sampler[int]):
    """Shuffled epochs of indices one after another, never ending, for the loops with workers: a DataLoader
    ends at each epoch and, without persistent workers, starts its workers again at the next, so a dataset
    of a few batches timed worker start-ups instead of the steady loop the paces stand for (the model adds
    the workers' start where the user's loader starts them: each epoch, or the first with
    ``persistent_workers``)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return sys.maxsize

    def __iter__(self) -> Iterator[int]:
        while True:
            yield from torch.randperm(self.n).tolist()


def _timed_collate(data: Any) -> tuple[Any, float, float]:
    """The default collate, returning the build's (start, end) with the batch (perf_counter: the system's
    monotonic clock, the same in every process)."""
    t0, samples = data
    return default_collate(samples), t0, time.perf_counter()


def overlap(spans: list[Span], windows: list[Span]) -> list[float]:
    """How much of each window [a, b] at least one of ``spans`` covers (seconds). The spans are merged once
    and each window finds its first by bisection: a loop of thousands of short steps (20 s of 5 ms steps
    beside a threaded build) would otherwise sort every span for every step."""
    merged: list[list[float]] = []
    for s, e in sorted(spans):
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    starts = [s for s, _ in merged]
    out = []
    for a, b in windows:
        i, cover = max(0, bisect.bisect_right(starts, a) - 1), 0.0
        while i < len(merged) and merged[i][0] < b:
            cover += max(0.0, min(b, merged[i][1]) - max(a, merged[i][0]))
            i += 1
        out.append(cover)
    return out


def blocks(times: list[float]) -> list[float]:
    """The mean of each whole ``BLOCK`` of consecutive times, in order (a shorter rest is left out)."""
    return [statistics.fmean(times[i:i + BLOCK]) for i in range(0, len(times) - BLOCK + 1, BLOCK)]


def _block_range(values: list[float]) -> dict[str, Any]:
    """The fastest and slowest block and how many there were, where there are two or more."""
    return {"block_step_s": [min(values), max(values)], "block_n": len(values)} if len(values) > 1 else {}


def _two_paces(parts: list[tuple[float, float]]) -> dict[str, Any]:
    """The loop without workers at each of two paces, where its steps' (build, step) fall in two by their sum
    (``state.two``): each pace's mean build and step and how many steps ran at it. Steps, not blocks: a spell of
    either pace lasts seconds, and a 10-step block of half-second steps that straddles two spells reads between
    them (the blocks of one full calibration of getitem11 spread over 400-723 ms without two groups 1.5x apart, where
    the user's loop runs at about 376 or 650 ms; 2-core VM, December 2026)."""
    slow = state.two([b + s for b, s in parts])
    if slow is None:
        return {}
    return {name: {"build_s": statistics.fmean(b for (b, _), x in zip(parts, slow, strict=True) if x == far),
                   "step_s": statistics.fmean(s for (_, s), x in zip(parts, slow, strict=True) if x == far),
                   "steps": slow.count(far)} for name, far in (("near", False), ("far", True))}


def _machine_state(readings: list[tuple[float, float]]) -> dict[str, Any]:
    """The machine's state as ``state.reading`` read it between the loops (two readings or more): how many
    readings, over how long, how many read the slow state and each state's median, where they fell in two."""
    if len(readings) < 2:
        return {}
    values = [v for _, v in readings]
    slow = state.two(values)
    # every reading too, in order (milliseconds; the model reads the counts and medians only)
    out = {"readings": len(values), "span_s": readings[-1][0] - readings[0][0],
           "values_ms": [round(v * 1e3, 3) for v in values]}
    if slow is None:
        return {"machine_state": {**out, "near_s": statistics.median(values)}}
    return {"machine_state": {**out, "far": slow.count(True),
                              "near_s": statistics.median(v for v, x in zip(values, slow, strict=True) if not x),
                              "far_s": statistics.median(v for v, x in zip(values, slow, strict=True) if x)}}


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class _Steps:
    """Which of a loop's steps are measured: ``warmup`` steps, then ``steps`` measured ones, and more until the
    loop has run ``min_s`` seconds, its warm-up included. After ``cap_s`` seconds the measured steps end where two
    have been measured, and the warm-up where half of ``cap_s`` has passed (the next step is measured)."""

    def __init__(self, warmup: int, steps: int, cap_s: float, min_s: float = 0.0) -> None:
        self.warmup, self.steps, self.cap_s, self.min_s = warmup, steps, cap_s, min_s
        self.start, self.taken, self.measured, self.end = time.perf_counter(), 0, 0, -math.inf

    def more(self) -> bool:
        """Whether the loop takes another step."""
        short = self.measured < self.steps or self.end - self.start < self.min_s
        return short and not (self.measured >= 2 and self.end - self.start > self.cap_s)

    def counts(self, end: float) -> bool:
        """A step has ended at ``end``: whether it is a measured one."""
        j, self.taken, self.end = self.taken, self.taken + 1, end
        if j < self.warmup:
            if end - self.start > self.cap_s / 2:
                self.warmup = j + 1  # the warm-up is cut short: the next step is measured
            return False
        self.measured += 1
        return True


def _loop(it: Iterator[Any], step: Callable[[], Any], k: int, warmup: int, steps: int, reps: int,
          cap_s: float = math.inf, min_s: float = 0.0
          ) -> tuple[list[Span], list[Span], list[Span], list[float], list[float], list[tuple[Any, float, float]]]:
    """The DataLoader loop with k workers: ``warmup`` steps to reach its steady state (the first steps after the
    training process has slept run faster, and the builds slower, than the rest: a 12-step loop gave 1.8x for the
    step where 40 steps of the user's own loop gave 2.8x; a round warms up as many steps as it measures: after 5,
    its steps 5-14 ran 1.055x its later ones, median of 8 loops, and a fresh process of the user's loop 1.11x, batch
    100 of 5x5 patches, 2 workers, 2-core VM, December 2026), then ``steps`` measured ones, and more until it has
    run ``min_s`` seconds (the warm-up included). After ``cap_s`` seconds the measured steps end where two have been
    measured, and the warm-up where half of them have passed: two workers' per-patch SVDs (a second BLAS thread
    each) beside the step's two threads on this 2-core VM once ran an 18-step loop of 0.5 s steps for over 10
    minutes, and another time 15 steps in 25 s (December 2026). The builds taken after the loop stop where half of
    ``cap_s`` has passed since the (PREFETCH x k + 2)-th: the same two workers once built at 139x a build's time
    alone, 40 s a batch, and took 9 of them in each of two rounds of a --quick calibration that ran for 12 minutes
    (11x11 patches). Returns the measured steps, every step, the builds of the measured steps' batches, the waits,
    the waits for batches a worker had finished building before the training process asked (the hand-over as the
    loop sees it), and the builds taken after the loop (the first ``PREFETCH`` x k may have run beside the last
    steps, the rest beside no step)."""
    computing: list[Span] = []
    every: list[Span] = []
    spans: list[Span] = []
    waits: list[float] = []
    ready: list[float] = []
    rule = _Steps(warmup, steps, cap_s, min_s)
    while rule.more():
        t_w = time.perf_counter()
        _, s0, e0 = next(it)
        t0 = time.perf_counter()
        step()
        every.append((t0, time.perf_counter()))
        if rule.counts(every[-1][1]):
            spans.append((s0, e0))
            computing.append(every[-1])
            waits.append(t0 - t_w)
            if e0 < t_w:
                ready.append(t0 - t_w)
    lead = PREFETCH * k  # built, or building, when the loop ended: beside its last steps
    after = [next(it) for _ in range(lead + 2)]  # the training process only takes batches: at least 2 beside no step
    t_after = time.perf_counter()
    while len(after) < lead + max(reps, 2 * k) and time.perf_counter() - t_after <= cap_s / 2:
        after.append(next(it))
    return computing, every, spans, waits, ready, after


def _inline_loop(it: Iterator[Any], step: Callable[[], Any], warmup: int, steps: int, cap_s: float = math.inf,
                 min_s: float = 0.0) -> tuple[list[float], list[float]]:
    """No workers: the training process builds each batch (``next(it)``), then steps, as a plain loop does,
    its steps counted and cut short as in ``_loop`` (``_Steps``). Returns each measured build and step
    (seconds)."""
    builds: list[float] = []
    stepped: list[float] = []
    rule = _Steps(warmup, steps, cap_s, min_s)
    while rule.more():
        t0 = time.perf_counter()
        next(it)
        t1 = time.perf_counter()
        step()
        t2 = time.perf_counter()
        if rule.counts(t2):
            builds.append(t1 - t0)
            stepped.append(t2 - t1)
    return builds, stepped


def new_row() -> dict[str, list[float]]:
    """What the rounds with k workers keep, each round's (``_workers_round``), empty."""
    return {key: [] for key in ("covered", "owed", "idle_s", "busy_t", "left", "spanned", "built", "loop_step_s",
                                "loop_wait_s", "ready_wait_s", "step_alone_s", "steps", "blocks")}


def _workers_round(row: dict[str, list[float]], ds: Dataset, batch: int, k: int, step: Callable[[], Any],
                   step_alone: float, build_alone: float, warmup: int, steps: int, reps: int, cap_s: float,
                   min_s: float = 0.0, init: Callable[[int], None] | None = None) -> None:
    """One round with k workers: the loop's times, and what the paces must have been. ``init``: the loader's
    ``worker_init_fn``."""
    if len(ds) < batch:  # type: ignore[arg-type]
        raise no_whole_batch(len(ds), batch)  # type: ignore[arg-type]
    # batches run on across the epochs' ends, as the sampler never ends
    loader = DataLoader(_TimedBuilds(ds), batch_size=batch, sampler=_Endless(len(ds)),  # type: ignore[arg-type]
                        num_workers=k, collate_fn=_timed_collate, prefetch_factor=PREFETCH, worker_init_fn=init)
    it = iter(loader)
    try:
        for _ in range(k + 1):  # the workers are up
            next(it)
        computing, every, spans, waits, ready, after = _loop(it, step, k, warmup, steps, reps, cap_s, min_s)
    finally:  # the workers end with the round, also where a step or a build raised (its traceback holds them)
        end_workers(it)
    idle = statistics.median(e - s for _, s, e in after[PREFETCH * k:])
    row["step_alone_s"].append(step_alone)
    row["steps"].append(len(computing))
    paced = [w + b - a for w, (a, b) in zip(waits, computing, strict=True)]
    row["loop_step_s"].append(statistics.fmean(paced))
    row["blocks"].extend(blocks(paced))
    row["loop_wait_s"].append(statistics.fmean(waits))
    row["ready_wait_s"].extend(ready)
    # a step: at full pace for the part no build covered, so the covered time did the rest of its work
    # (every build taken after the loop that overlapped its last steps: with one worker and 2 batches ready,
    # counting only the first left the last step's cover out, 0.0-0.47 of it where the second covered 0.83-1.0,
    # and the step's slowdown beside builds read 3.24-3.46x where it was 2.65-2.94x; 4 loops, per-patch PCA at one
    # BLAS thread, 9x9, 2-core VM, December 2026)
    covered = sum(overlap(spans + [(s, e) for _, s, e in after], computing))
    total = sum(b - a for a, b in computing)
    row["covered"].append(covered)
    row["owed"].append(len(computing) * step_alone - (total - covered))
    # a build: at the idle pace for the time no step ran beside it, so the time beside steps did the rest
    beside = [(s, e) for s, e in spans if e - s > 0]
    busy_t = sum(overlap(every, beside))
    done_idle = (sum(e - s for s, e in beside) - busy_t) * build_alone / idle
    row["idle_s"].append(idle)
    row["busy_t"].append(busy_t)
    row["left"].append(len(beside) * build_alone - done_idle)
    row["spanned"].append(sum(e - s for s, e in beside))  # the builds' own time in the loop, and how many
    row["built"].append(len(beside))


def _pooled(k: int, row: dict[str, list[float]], step_alone: float, build_alone: float) -> dict[str, Any]:
    """k workers' paces from the rounds' times pooled."""
    idle_ratio = statistics.fmean(row["idle_s"]) / build_alone
    cov, owed, busy_t, left = (sum(row[key]) for key in ("covered", "owed", "busy_t", "left"))
    loop_step, loop_wait = statistics.fmean(row["loop_step_s"]), statistics.fmean(row["loop_wait_s"])
    ready = row["ready_wait_s"]
    handover = {"handover_s": statistics.fmean(ready), "handover_n": len(ready)} if ready else {}
    # the builds' spans explain the loop's step (it lost its time while they ran) or they do not (they
    # covered too little of it): then the step is slowed throughout, by what the workers do outside a
    # build's span (sending, waking) and by the loop itself, and its ratio holds for the whole step.
    # The work done while covered is the difference of two large sums (the steps alone, the time no
    # build covered): within twice its noise from the step alone moving between rounds it explains
    # nothing (beside one worker's 2 ms builds the covered time once owed 1/18 of itself, and the step
    # was predicted 8.6 % short of the loop's; 2-core VM, December 2026). The whole-step slowdown is not
    # held at 1 or more: the step alone and the loop are timed seconds apart, and where the machine's
    # pace moved between them the loop is the one to trust (held at 1, a loop's 22.2 ms of compute
    # over a step alone of 23.7 ms was predicted 6 % over its own loop, 26.1 over 30.4 ms 16 % over)
    alone = row["step_alone_s"]
    noise = sum(row["steps"]) * statistics.stdev(alone) / math.sqrt(len(alone)) if len(alone) > 1 else 0.0
    # Nor does it where it owes more than the covered time itself (a ratio under 1: the step ran faster beside
    # builds than alone, so the pace moved between the loop and the step alone): held at 1, two workers' short
    # builds left the step alone's 17.8 ms where the loop's compute was 15.6 ms, a prediction 12.9 % over its own
    # loop (batch 100 of 5x5 patches, 2-core VM, December 2026)
    explained = cov >= owed > max(0.05 * cov, 2.0 * noise) and cov > 0
    # A build: its time beside no step did its work at the pace builds ran after the loop, and its time beside
    # steps the rest. Where the work left for the time beside steps is 5 % of that time or less (a pace there of
    # 20x or more, or none at all: a stall, or the pace after the loop not the loop's), that pace is no
    # measurement, and the pace after the loop alone does not give the loop back: beside one worker's threaded
    # per-patch PCA, builds after the loop took 1.76x a build alone where the loop's took its whole 427 ms step
    # (3.7x) and its training process waited 197 ms for each; with the pace after the loop for both, the model
    # gave 213 ms (9x9, 2-core VM, December 2026). Then the builds' own time in the loop, over their time alone, is
    # both paces: the loop's builds take the time they took. With k >= 2 that is a mean over moments when fewer
    # than k built at once, where the simulator applies it to k at once
    split = left > 0.05 * busy_t > 0
    built = sum(row["built"])
    in_loop = sum(row["spanned"]) / (built * build_alone) if built else idle_ratio
    return {"workers": k,
            "step_ratio": max(1.0, cov / owed) if explained else 1.0,
            "step_base": 1.0 if explained else (loop_step - loop_wait) / step_alone,
            "build_ratio_idle": idle_ratio if split else in_loop,
            "build_ratio_busy": max(idle_ratio, busy_t / left) if split else in_loop,
            "loop_step_s": loop_step, "loop_wait_s": loop_wait, **handover, **_block_range(row["blocks"])}


def max_workers() -> int:
    """The most workers the probe feeds a step with on this machine: 1 … 4, at most one per core."""
    return min(4, os.cpu_count() or 1)


class InterferenceProbe:
    """The user's batch builds and a CPU training step in a DataLoader loop with 0 … k workers (module doc),
    one round at a time: a caller interleaves the rounds with other work (``hsisim validate`` with
    segments of the real run) so that a shared machine's drift weighs on both. Each loop, with workers or
    without, stops after ``cap_s`` seconds (``_loop``, ``_inline_loop``). Where the rounds' builds so far,
    pooled, kept ``THREADED_BUILD`` cores or more busy (``threads.threaded``), each loop runs ``threaded_s`` or
    longer, its warm-up included: such a loop swings between two paces for tens of seconds at a time. Every
    loop's ``BLOCK``-step blocks are kept, and the fastest and slowest over the rounds are ``block_step_s``; the
    machine's state is then read before each loop and after the last (``state.reading``), except under ``blas_limit``
    (the state shows at the BLAS libraries' own threads).

    ``blas_limit``: every round runs with each BLAS library limited to that many threads, in this process
    (``threadpool_limits``) and in each DataLoader worker (its ``worker_init_fn``), as a user's script runs under
    ``OPENBLAS_NUM_THREADS`` or the limit in its ``worker_init_fn``: the run ``hsisim run`` advises where a build
    runs BLAS threads of its own (``dataset.blas_threads``)."""

    def __init__(self, net: Net, ds: Dataset, batch: int, max_workers: int, reps: int = 7, steps: int = 12,
                 optimizer: str = "adam", cap_s: float = 90.0, threaded_s: float = 0.0,
                 blas_limit: int | None = None) -> None:
        model, opt, scaler, dtype = make_training(net, torch.device("cpu"), optimizer, amp=False)
        x, y = net.batch(batch, torch.device("cpu"))
        self.step = functools.partial(training_step, model, opt, x, y, scaler, dtype)
        self.ds, self.batch, self.reps, self.steps, self.cap_s = ds, batch, reps, steps, cap_s
        self.threaded_s = threaded_s  # how long each loop runs at least once a build has run threads of its own
        self.blas_limit = blas_limit
        self.threads = torch.get_num_threads()  # the training threads the rounds run with
        rng = np.random.default_rng(1)
        n = len(ds)  # type: ignore[arg-type]

        def build() -> None:
            default_collate([ds[int(i)] for i in rng.integers(0, n, batch)])

        self.build = build
        for warm in (build, self.step, self.step):
            warm()
        self.alone: dict[str, list[float]] = {"step_alone_s": [], "build_alone_s": [], "build_s": [], "step_s": []}
        self.starts: list[float] = []  # when each round began
        self.worker_builds: list[dict[str, Any]] = []  # each round's build as a worker runs it (threads.worker_build)
        self.inline_blocks: list[float] = []  # the loop without workers: its blocks' build and step (``blocks``)
        # and each measured step's build and step, in the rounds that read the machine's state
        self.inline_steps: list[tuple[float, float]] = []
        self.readings: list[tuple[float, float]] = []  # (when, ``state.reading``) between the loops, where taken
        self.table = {k: new_row() for k in range(1, max_workers + 1)}

    def round(self) -> None:
        """Each alone, the DataLoader loop without workers, then with 1 … ``max_workers`` workers. Once a build
        has run threads of its own (``threads.threaded``), each loop runs ``threaded_s`` or longer. Under
        ``blas_limit`` where one is set."""
        with threads.limited(self.blas_limit):
            self._round(threads.worker_limit(self.blas_limit))

    def _round(self, init: Callable[[int], None] | None) -> None:
        reps, start = self.reps, time.perf_counter()
        torch.set_num_threads(self.threads)
        step_alone = statistics.median(_timed(self.step) for _ in range(reps))
        build_alone = statistics.median(_timed(self.build) for _ in range(reps))
        self.worker_builds.append(threads.worker_build(self.build, reps))
        threaded = threads.threaded(self.worker_builds)
        min_s = self.threaded_s if threaded else 0.0
        read = threaded and self.blas_limit is None  # the machine's state, at the BLAS libraries' own threads
        if read:
            self._read()
        loader = DataLoader(self.ds, batch_size=self.batch, shuffle=True, num_workers=0, drop_last=True)
        builds, steps = _inline_loop(forever(loader), self.step, INLINE_WARMUP, self.steps, self.cap_s, min_s)
        paced = list(zip(builds, steps, strict=True))
        self.inline_blocks.extend(blocks([b + t for b, t in paced]))
        if read:  # its two paces are kept where the state is read: a threaded build at the libraries' own threads
            self.inline_steps.extend(paced)
        for key, v in zip(self.alone, (step_alone, build_alone, statistics.fmean(builds), statistics.fmean(steps)),
                          strict=True):
            self.alone[key].append(v)
        for k, row in self.table.items():
            if read:
                self._read()
            _workers_round(row, self.ds, self.batch, k, self.step, step_alone, build_alone, self.steps,
                           self.steps, reps, self.cap_s, min_s, init)
        if read:
            self._read()
        self.starts.append(start)  # a whole round

    def _read(self) -> None:
        """The machine's state now (``state.reading``), after a pause for the thread pools of what ran before to
        stop spinning (OpenBLAS's spin about 0.1 s)."""
        time.sleep(STATE_PAUSE_S)
        self.readings.append((time.perf_counter(), state.reading()))

    def unsteadiness(self) -> float:
        """How far the rounds disagree: the largest standard error of the in-process build and step and of
        each k-worker loop's step, over the rounds, relative to its mean (infinite before two rounds)."""
        series = [self.alone["build_s"], self.alone["step_s"], *(row["loop_step_s"] for row in self.table.values())]
        if len(series[0]) < 2:
            return math.inf
        return max(statistics.stdev(x) / math.sqrt(len(x)) / statistics.fmean(x) for x in series)

    def result(self) -> dict[str, Any]:
        """The rounds pooled (at least one)."""
        mean = {key: statistics.fmean(v) for key, v in self.alone.items()}
        return {"threads": self.threads, "cores": os.cpu_count() or 1, "batch": self.batch,
                "step_alone_s": mean["step_alone_s"], "build_alone_s": mean["build_alone_s"],
                "inline": {"build_ratio": mean["build_s"] / mean["build_alone_s"],
                           "step_ratio": mean["step_s"] / mean["step_alone_s"],
                           "build_s": mean["build_s"], "step_s": mean["step_s"],
                           **_block_range(self.inline_blocks), **_two_paces(self.inline_steps)},
                "workers": [_pooled(k, row, mean["step_alone_s"], mean["build_alone_s"])
                            for k, row in self.table.items()],
                "worker_build": threads.pooled(self.worker_builds),
                "rounds": len(self.starts), "span_s": self.starts[-1] - self.starts[0],
                **({"rounds_se": self.unsteadiness()} if len(self.starts) > 1 else {}), **_machine_state(self.readings),
                "method": "the user's batch builds and a training step in a DataLoader loop without workers, "
                          "and with k workers (an endless sampler) timed on one clock; each over its time alone; "
                          f"pooled over {len(self.alone['step_s'])} rounds"}


def interference_probe(net: Net, ds: Dataset, batch: int, max_workers: int, rounds: int = 2, reps: int = 7,
                       steps: int = 12, optimizer: str = "adam") -> dict[str, Any]:
    """``rounds`` rounds of the interference probe back to back."""
    probe = InterferenceProbe(net, ds, batch, max_workers, reps, steps, optimizer)
    for _ in range(rounds):
        probe.round()
    return probe.result()
