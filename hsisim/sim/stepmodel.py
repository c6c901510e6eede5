"""From the micro simulation to a ``StepModel``: the step-time distribution and its decomposition.

The window grows in batches of steps until the 95 % confidence interval of the mean step time
(batch means, which absorb the autocorrelation of a queueing system) is within ``rel_halfwidth``.
σ is the asymptotic standard deviation per step, so n steps take Normal(n·μ, n·σ²).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from hsisim.sim.micro import MicroSim, StepTrace
from hsisim.sim.spec import Job
from hsisim.stats import halfwidth as ci_halfwidth

TERMS = ("compute", "data", "comm", "stall")


@dataclass(frozen=True)
class StepModel:
    """Steady-state optimizer step and the one-off excess of an epoch start (seconds)."""

    mu: float
    sigma: float
    sigma_busy: float  # asymptotic std per step of compute + stall (the critical rank's GPU time)
    rho: float  # correlation of busy time with step duration (batch means)
    mean: dict[str, float]  # per-step mean of each term; sums to mu
    excess_first: dict[str, float]  # extra seconds of an epoch whose workers must start
    excess_next: dict[str, float]  # extra seconds of an epoch with persistent workers
    window_steps: int
    ci95_halfwidth: float
    wall_seconds: float  # how long the micro simulation took

    @property
    def steps_per_second(self) -> float:
        """Simulated optimizer steps per second of the micro simulation."""
        return self.window_steps / self.wall_seconds if self.wall_seconds > 0 else float("inf")


def _means(trace: StepTrace) -> dict[str, float]:
    return {t: float(getattr(trace, t).mean()) for t in TERMS}


def _excess(trace: StepTrace, steady: dict[str, float]) -> dict[str, float]:
    return {t: float(getattr(trace, t).sum() - len(trace) * steady[t]) for t in TERMS}


def transient_steps(job: Job) -> int:
    """Steps that cover the fill of the prefetch queues at an epoch start."""
    per_step = job.accumulation
    fill = (job.num_workers * job.prefetch_factor) // per_step + 1
    return max(16, 4 * fill)


def estimate(job: Job, rng: np.random.Generator, *, batch: int = 200, min_batches: int = 5,
             max_steps: int = 50_000, rel_halfwidth: float = 2e-3, cold_runs: int = 32) -> StepModel:
    """Run the micro simulation for ``job`` and summarise it as a ``StepModel``."""
    t0 = time.perf_counter()
    warm = transient_steps(job)
    sim = MicroSim(job, rng, start_workers=False)
    sim.run(warm)
    batches: list[StepTrace] = []
    half = float("inf")
    while sum(map(len, batches)) < max_steps:
        batches.append(sim.run(batch))
        if len(batches) >= min_batches:
            bm = np.array([b.duration.mean() for b in batches])
            half = ci_halfwidth(bm)
            if half <= rel_halfwidth * bm.mean():
                break
    steady = _merge(batches)
    mean = _means(steady)
    mu = float(steady.duration.mean())
    bm = np.array([b.duration.mean() for b in batches])
    busy = np.array([(b.compute + b.stall).mean() for b in batches])
    sigma = float(bm.std(ddof=1) * np.sqrt(batch)) if len(bm) > 1 else 0.0
    sigma_busy = float(busy.std(ddof=1) * np.sqrt(batch)) if len(bm) > 1 else 0.0
    rho = float(np.corrcoef(bm, busy)[0, 1]) if sigma > 0 and sigma_busy > 0 else 0.0
    n_ep = min(warm, job.steps_per_epoch)
    if job.num_workers == 0:  # the main process builds every batch: nothing to fill at an epoch start
        first = nxt = [dict.fromkeys(TERMS, 0.0)]
        cold_runs = 0
    else:
        first = [_excess(MicroSim(job, rng, start_workers=True).run(n_ep), mean) for _ in range(cold_runs)]
        nxt = [_excess(MicroSim(job, rng, start_workers=not job.persistent_workers).run(n_ep), mean)
               for _ in range(cold_runs)]
    simulated = warm + len(steady) + 2 * cold_runs * n_ep
    return StepModel(mu, sigma, sigma_busy, rho, mean, _avg(first), _avg(nxt), simulated, half,
                     time.perf_counter() - t0)


def _merge(traces: list[StepTrace]) -> StepTrace:
    return StepTrace(*(np.concatenate([getattr(t, f) for t in traces]) for f in ("duration", *TERMS, "waited")))


def _avg(rows: list[dict[str, float]]) -> dict[str, float]:
    return {t: float(np.mean([r[t] for r in rows])) for t in TERMS}
