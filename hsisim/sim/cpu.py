"""A node's CPU cores shared the way the operating system shares them: processor sharing.

Whatever is runnable on a node (a training process's intra-op threads while it computes, a loader
worker while it builds a batch, the main process receiving one) competes for the node's cores.
While the runnable threads demand no more than the cores, each runs at full speed; beyond that,
every one of them runs at cores / demand of a core (Linux's CFS gives runnable threads of equal
weight equal shares). A piece of work is given as the seconds it takes at full speed.
A process that sleeps (a worker whose prefetch queue is full, a training process waiting for
its batch) demands nothing.

A multi-threaded computation can suffer more than its share: its parallel regions wait at each
barrier for the thread the scheduler took away (OpenMP threads also spin while they wait). Where a
calibration measured the slowdown of a training step beside k busy competitors, a step runs at the
lesser of its share and that measured slowdown beside the other work's cores (loader workers and
hand-overs: the busy competitors calibration measured beside). Other ranks' training steps count
only through the share: measured beside two spinning cores, a 2-process gloo run on this 2-core VM
was predicted 2.5-10x slower than it ran.

Where calibration measured the user's own batch builds and training step meeting in a DataLoader
loop on this machine (one training process per node), those measured paces replace the share: a
step runs at 1 / ``step_ratio`` while n workers build, a worker at 1 / ``build_ratio_busy`` while the
training process works and 1 / ``build_ratio_idle`` while it waits. Processor sharing is wrong in
both directions there: a worker whose NumPy spins two BLAS threads takes far more than its share
from an OpenMP training step, and the scheduler favours the training process after it has slept.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from hsisim.sim.spec import Paces


@dataclass
class _Work:
    left: float  # seconds of full-speed work still to do
    demand: float  # cores it would use at full speed
    done: simpy.Event = field(repr=False)
    measured: bool = False  # slowed by the measured slowdown (a training step), not by the share
    kind: str = "other"  # step | build | handover | inline | other
    rate: float = 1.0


class SharedCPU:
    """Processor sharing of ``cores`` among the pieces of work running on them."""

    def __init__(self, env: simpy.Environment, cores: float, slowdown: tuple[float, ...] = (),
                 paces: Paces | None = None) -> None:
        self.env, self.cores, self.paces = env, cores, paces
        # a training step's measured slowdown beside 0, 1, 2, ... busy cores' worth of other work
        self.slowdown = slowdown
        self.running: list[_Work] = []
        self._since = 0.0
        self._version = 0

    def run(self, seconds: float, demand: float, kind: str = "other") -> simpy.Event:
        """An event that fires when ``seconds`` of full-speed work using ``demand`` cores is done
        (``kind``: step, build, handover, inline or other; a step is slowed by the calibrated slowdown
        where there is one, and every kind has its measured pace where there are paces)."""
        done = self.env.event()
        if seconds <= 0:
            done.succeed()
            return done
        self._progress()
        self.running.append(_Work(seconds, demand, done, kind == "step" and bool(self.slowdown), kind))
        self._reschedule()
        return done

    def _progress(self) -> None:
        dt = self.env.now - self._since
        if dt > 0:
            for w in self.running:
                w.left -= dt * w.rate
        self._since = self.env.now

    def _slowdown(self, others: float) -> float:
        """The measured slowdown beside ``others`` cores of busy work (linear between and beyond the points)."""
        s = self.slowdown
        k = min(int(others), len(s) - 2) if len(s) > 1 else 0
        if len(s) == 1:
            return s[0]
        return max(1.0, s[k] + (others - k) * (s[k + 1] - s[k]))

    def _reschedule(self) -> None:
        finished = [w for w in self.running if w.left <= 1e-12]
        self.running = [w for w in self.running if w.left > 1e-12]
        for w in finished:
            w.done.succeed()
        if self.paces is not None:
            self._paced(self.paces)
        else:
            self._shared()
        self._version += 1
        if self.running:
            first = min(w.left / w.rate for w in self.running)
            self.env.process(self._wake(first, self._version))

    def _paced(self, p: Paces) -> None:
        n = sum(1 for w in self.running if w.kind == "build")
        main = any(w.kind in ("step", "handover") for w in self.running)
        step = 1.0 / p.of(p.step, n, grow=False)
        build = 1.0 / p.of(p.build_busy if main else p.build_idle, n, grow=True)
        for w in self.running:
            w.rate = step if w.kind == "step" else build if w.kind == "build" else 1.0

    def _shared(self) -> None:
        demand = sum(w.demand for w in self.running)
        share = min(1.0, self.cores / demand) if demand > 0 else 1.0
        # a training step gets at most its share, and loses at least what calibration measured beside
        # as many cores of other work (workers, hand-overs); other ranks' steps, which wait for each
        # other at every all-reduce rather than spin, take only their share
        other = sum(w.demand for w in self.running if not w.measured)
        for w in self.running:
            w.rate = min(share, 1.0 / self._slowdown(other)) if w.measured else share

    def _wake(self, delay: float, version: int) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(max(0.0, delay))
        if version != self._version:  # the set of running work changed since: a newer wake-up holds
            return
        self._progress()
        for w in self.running:  # the one that was due is done (guard against rounding)
            if w.left <= 1e-9 * max(1.0, abs(delay)):
                w.left = 0.0
        self._reschedule()


def shared(cores: float, ranks_per_node: int, compute_demand: float, workers: int) -> bool:
    """Whether a node's cores can be oversubscribed (else every piece of work runs at full speed).

    A rank computes or receives or builds a batch (one at a time), and each of its workers builds
    batches concurrently.
    """
    return math.isfinite(cores) and cores > 0 and ranks_per_node * (max(compute_demand, 1.0) + workers) > cores
