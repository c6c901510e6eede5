"""Where segment durations come from: the step model (two-level) or the micro simulation (step)."""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from hsisim.sim.micro import MicroSim
from hsisim.sim.spec import Job
from hsisim.sim.stepmodel import TERMS, StepModel


class StepSource(Protocol):
    def epoch_start(self, first: bool) -> dict[str, float]: ...
    def segments(self, ns: np.ndarray) -> dict[str, np.ndarray]: ...


class TwoLevelSource:
    """n steps: (duration, busy) ~ bivariate Normal(n·(μ, μ_busy), n·Σ) from the step model.

    Busy time (compute + stall on the critical rank) is drawn jointly with the duration so that η
    varies as it does step by step. Exposed comm is a fixed time per step in the micro model, so it
    takes n·μ_comm of the rest and data takes the remainder (the queueing noise). With σ = 0 this
    is exact: n·μ and n·μ_busy.
    """

    def __init__(self, model: StepModel, rng: np.random.Generator) -> None:
        self.m, self.rng = model, rng
        m = model
        self.mu_busy = m.mean["compute"] + m.mean["stall"]
        self.stall_frac = m.mean["stall"] / self.mu_busy if self.mu_busy > 0 else 0.0

    def epoch_start(self, first: bool) -> dict[str, float]:
        """Extra seconds of an epoch start; ``first``: the workers must start (first epoch, restart)."""
        ex = self.m.excess_first if first else self.m.excess_next
        return {t: max(0.0, v) for t, v in ex.items()}

    def segments(self, ns: np.ndarray) -> dict[str, np.ndarray]:
        m = self.m
        d, busy = ns * m.mu, ns * self.mu_busy
        if m.sigma > 0 or m.sigma_busy > 0:
            root = np.sqrt(ns)
            z = self.rng.standard_normal((2, len(ns)))
            d = np.maximum(d + m.sigma * root * z[0], 0.0)
            corr = m.rho * z[0] + math.sqrt(max(0.0, 1 - m.rho**2)) * z[1]
            busy = np.minimum(np.maximum(busy + m.sigma_busy * root * corr, 0.0), d)
        rest = d - busy
        comm = np.minimum(rest, ns * m.mean["comm"])
        return {"compute": busy * (1 - self.stall_frac), "stall": busy * self.stall_frac,
                "data": rest - comm, "comm": comm}


class StepwiseSource:
    """The reference: every step of every epoch simulated by the micro model from a cold start."""

    def __init__(self, job: Job, rng: np.random.Generator) -> None:
        self.job, self.rng = job, rng
        self.sim: MicroSim | None = None

    def epoch_start(self, first: bool) -> dict[str, float]:
        start = first or not self.job.persistent_workers
        self.sim = MicroSim(self.job, self.rng, start_workers=start)
        return dict.fromkeys(TERMS, 0.0)

    def segments(self, ns: np.ndarray) -> dict[str, np.ndarray]:
        assert self.sim is not None
        traces = [self.sim.run(int(n)) for n in ns]
        return {t: np.array([getattr(tr, t).sum() for tr in traces]) for t in TERMS}
