"""Step-level SimPy model of synchronous data-parallel training with PyTorch DataLoader workers.

Per rank: ``num_workers`` worker processes build whole micro-batches; batch i goes to worker
i mod W; at most W × prefetch_factor batches are outstanding, and the main process hands out the
next index each time it consumes one (PyTorch's ``_try_put_index``). With ``num_workers = 0`` the
main process builds each batch itself. Each optimizer step is ``accumulation`` micro-steps; ranks
meet at the gradient all-reduce (a barrier), whose exposed part ends the step for everyone.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from hsisim.sim.cpu import SharedCPU
from hsisim.sim.spec import Job

Proc = Generator[simpy.Event, Any, None]


@dataclass(frozen=True)
class StepTrace:
    """Per optimizer step: duration and its critical-path decomposition (seconds)."""

    duration: np.ndarray
    compute: np.ndarray  # kept compute of the last rank to reach the barrier, without stall
    data: np.ndarray
    comm: np.ndarray
    stall: np.ndarray
    waited: np.ndarray  # per rank, on average: the time spent at the barrier waiting for the slowest

    def __len__(self) -> int:
        return len(self.duration)


def gamma_draws(rng: np.random.Generator, mean: float, cv: float, n: int) -> np.ndarray:
    """n draws with the given mean and coefficient of variation (gamma; constant when cv = 0)."""
    if cv <= 0 or mean <= 0:
        return np.full(n, mean)
    shape = 1.0 / cv**2
    return rng.gamma(shape, mean / shape, n)


class MicroSim:
    """One SimPy environment that can be advanced by any number of optimizer steps.

    ``cold`` starts with empty prefetch queues (every epoch in PyTorch); ``start_workers`` adds
    the worker start-up time (the first epoch, or every epoch without persistent workers).
    """

    def __init__(self, job: Job, rng: np.random.Generator, *, start_workers: bool = True,
                 log: list[tuple[float, str]] | None = None) -> None:
        self.job, self.rng, self.log = job, rng, log
        self.env = simpy.Environment()
        self.p, self.k, self.w = job.world, job.accumulation, job.num_workers
        self.depth = self.w * job.prefetch_factor
        self._records: list[tuple[float, float, float, float, float, float]] = []
        self._arrived: list[tuple[float, float, int]] = []  # (time, compute of this step, rank)
        self._all_arrived = self.env.event()
        self._step_done = self.env.event()
        self._limit = 0
        self._t_prev = 0.0
        self._start_delay = job.worker_start_s if (start_workers and self.w) else 0.0
        self.cpus = [SharedCPU(self.env, job.cpu_cores, job.compute_slowdown, job.paces) for _ in range(job.nodes)] \
            if job.cpu_cores > 0 else None
        for r in range(self.p):
            self.env.process(self._rank(r))
        self.env.process(self._coordinator())

    # -- processes -------------------------------------------------------------------------
    def _busy(self, r: int, seconds: float, demand: float, kind: str) -> simpy.Event:
        """``seconds`` of full-speed work by rank ``r``'s process or workers, on its node's shared cores
        (``kind``: step, build, handover or inline, a batch built by the training process)."""
        if self.cpus is None:
            return self.env.timeout(seconds)
        return self.cpus[r // self.job.gpus_per_node].run(seconds, demand, kind)

    def _note(self, what: str) -> None:
        if self.log is not None:
            self.log.append((self.env.now, what))

    def _rank(self, r: int) -> Proc:
        job, env = self.job, self.env
        ready: dict[int, simpy.Event] = {}
        stores = [simpy.Store(env) for _ in range(self.w)]
        for w, store in enumerate(stores):
            env.process(self._worker(r, w, store, ready))

        def dispatch(i: int) -> None:
            ready[i] = env.event()
            stores[i % self.w].put(i)

        if self.w:
            for i in range(self.depth):
                dispatch(i)
        i = 0
        step = 0
        while True:
            comp = 0.0
            for _ in range(self.k):
                if self.w == 0:
                    yield self._busy(r, self._draw_build(), 1.0, "inline")
                else:
                    yield ready[i]
                    del ready[i]
                    dispatch(i + self.depth)
                    if job.handover_s:
                        yield self._busy(r, job.handover_s, 1.0, "handover")
                self._note(f"rank{r} got batch {i}")
                yield env.timeout(job.h2d_s)
                c = self._draw_compute()
                t0 = env.now
                yield self._busy(r, c, job.compute_cpu_demand, "step")
                comp += env.now - t0 if self.cpus is not None else c  # slowed by sharing: all of it compute
                i += 1
            self._note(f"rank{r} at barrier step {step}")
            self._arrived.append((env.now, comp, r))
            if len(self._arrived) == self.p:
                self._all_arrived.succeed()
            yield self._step_done
            step += 1

    def _worker(self, r: int, w: int, store: simpy.Store, ready: dict[int, simpy.Event]) -> Proc:
        if self._start_delay:
            yield self.env.timeout(self._start_delay)
        while True:
            i = yield store.get()
            yield self._busy(r, self._draw_build(), 1.0, "build")
            self._note(f"rank{r} worker{w} built batch {i}")
            ready[i].succeed()

    def _coordinator(self) -> Proc:
        env, job = self.env, self.job
        while True:
            yield self._all_arrived
            self._all_arrived = env.event()
            last, comp, _ = max(self._arrived)  # the last rank to arrive is on the critical path
            waited = sum(last - t for t, _, _ in self._arrived) / self.p
            self._arrived = []
            comm = job.comm_exposed_s
            if comm > 0 and job.comm_quantiles:  # the measured shape, by its inverse distribution function
                q = job.comm_quantiles
                comm *= float(np.interp(self.rng.random(), np.linspace(0.0, 1.0, len(q)), q))
            elif job.comm_cv and comm > 0:
                comm = float(gamma_draws(self.rng, comm, job.comm_cv, 1)[0])
            yield env.timeout(comm)
            d = env.now - self._t_prev
            self._t_prev = env.now
            stall = comp * job.stall_share
            data = d - comp - comm
            self._records.append((d, comp - stall, max(0.0, data), comm, stall, waited))
            self._note(f"step {len(self._records) - 1} done")
            done, self._step_done = self._step_done, env.event()
            done.succeed()
            if len(self._records) >= self._limit:
                self._stop.succeed()

    # -- random draws (pre-drawn in blocks for speed) -------------------------------------------
    def _draw_compute(self) -> float:
        job = self.job
        return float(gamma_draws(self.rng, job.compute_s, job.compute_cv, 1)[0]) if job.compute_cv else job.compute_s

    def _draw_build(self) -> float:
        job = self.job
        if not job.batch_build_cv:
            return job.batch_build_s
        return float(gamma_draws(self.rng, job.batch_build_s, job.batch_build_cv, 1)[0])

    # -- driving ------------------------------------------------------------------------------
    def run(self, n_steps: int) -> StepTrace:
        """Advance by ``n_steps`` optimizer steps and return their trace."""
        start = len(self._records)
        self._limit = start + n_steps
        self._stop = self.env.event()
        self.env.run(until=self._stop)
        rec = np.asarray(self._records[start:self._limit], dtype=float).reshape(-1, 6)
        return StepTrace(*rec.T)
