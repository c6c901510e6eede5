"""The checkpoint interval that minimises expected cost per useful GPU-hour (or wall time).

Every candidate interval is simulated with the same replica seeds (common random numbers: the
same node lifetimes, capacity waits and step noise), so differences between candidates are not
drowned by replica-to-replica noise. A log-spaced grid around Daly's interval brackets the
minimum; ``scipy.optimize.minimize_scalar`` refines it; a paired bootstrap over replicas gives
its 95 % confidence interval.
"""

from __future__ import annotations

import math
import os
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize

from hsisim.analytic import checkpoint as ckpt
from hsisim.errors import HsisimInputError
from hsisim.montecarlo import Executor, Prepared, open_executor, prepare, simulate, workload
from hsisim.scenario import Scenario
from hsisim.sim.policy import checkpoint_cost

OBJECTIVES = {"cost": "cost_per_useful_gpu_h", "time": "wall_h"}


@dataclass(frozen=True)
class OptimizeResult:
    objective: str
    optimal_interval_s: float
    ci95_s: tuple[float, float]
    young_interval_s: float
    daly_interval_s: float
    mtbf_s: float
    checkpoint_cost_s: float
    at_optimal: float
    at_young: float
    at_daly: float
    curve: list[tuple[float, float, float]]  # (interval s, mean objective, its 95 % half-width)
    replicas: int

    def to_json(self) -> dict[str, Any]:
        m = 60.0
        return {
            "objective": self.objective, "metric": OBJECTIVES[self.objective], "replicas": self.replicas,
            "optimal_interval_min": self.optimal_interval_s / m,
            "ci95_min": [self.ci95_s[0] / m, self.ci95_s[1] / m],
            "young_interval_min": self.young_interval_s / m, "daly_interval_min": self.daly_interval_s / m,
            "mtbf_h": self.mtbf_s / 3600, "checkpoint_write_min": self.checkpoint_cost_s / m,
            "objective_at_optimal": self.at_optimal, "objective_at_young": self.at_young,
            "objective_at_daly": self.at_daly,
            "curve": [{"interval_min": t / m, "mean": v, "ci95_halfwidth": h} for t, v, h in self.curve],
        }


class _Evaluator:
    """Mean objective per interval, with per-replica values kept for the paired bootstrap."""

    def __init__(self, sc: Scenario, prep: Prepared, metric: str, replicas: int, seed: int, pool: Executor) -> None:
        self.sc, self.prep, self.metric, self.n, self.seed, self.pool = sc, prep, metric, replicas, seed, pool
        self.values: dict[float, np.ndarray] = {}

    def __call__(self, tau: float) -> float:
        key = round(float(tau), 6)
        if key not in self.values:
            res = simulate(self.sc, replicas=self.n, seed=self.seed, interval_override=key, prepared=self.prep,
                           pool=self.pool)
            self.values[key] = res.df[self.metric].to_numpy(dtype=float)
        return float(self.values[key].mean())


def optimize_interval(sc: Scenario, *, objective: str = "cost", replicas: int = 200, seed: int | None = None,
                      workers: int | None = None, executor: str = "local", scheduler: str | None = None,
                      prep: Prepared | None = None, grid_points: int = 9, pool: Executor | None = None,
                      allow_long: bool = False, allow_code: bool = False) -> OptimizeResult:
    """Find the checkpoint interval (training progress) that minimises the objective's mean."""
    if objective not in OBJECTIVES:
        raise HsisimInputError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if sc.spot is None or sc.cluster.market != "spot":
        raise HsisimInputError("optimize needs a spot cluster: without interruptions no checkpoint pays off",
                               key="cluster.market")
    s = sc.simulation.seed if seed is None else seed
    prep = prep or prepare(sc, s, allow_code=allow_code)
    assert prep.spot is not None
    if pool is None:  # about grid_points + 8 candidates, each a run of `replicas` replicas
        procs = 1 if executor == "inline" else workers or os.cpu_count() or 1
        workload.check([prep], replicas, procs, allow_long=allow_long, repeats=grid_points + 8)
    delta = checkpoint_cost(sc, prep.job)
    mtbf = prep.spot.mtbf_s
    young, daly = ckpt.young_interval(delta, mtbf), ckpt.daly_interval(delta, mtbf)
    floor = max(prep.model.mu, 1e-3)  # at least one step between checkpoints
    with ExitStack() as stack:
        ex = pool or stack.enter_context(open_executor(executor, workers, scheduler))
        ev = _Evaluator(sc, prep, OBJECTIVES[objective], replicas, s, ex)
        grid = np.unique(np.maximum(floor, daly * np.logspace(-1.5, 1.5, grid_points)))
        means = np.array([ev(t) for t in grid])
        i = int(np.argmin(means))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
        if hi > lo:
            res = optimize.minimize_scalar(lambda x: ev(math.exp(x)), bounds=(math.log(lo), math.log(hi)),
                                           method="bounded", options={"xatol": 0.05, "maxiter": 6})
            best = math.exp(res.x) if res.fun <= means[i] else float(grid[i])
        else:
            best = float(grid[i])
        best = round(best, 6)
        at = (ev(best), ev(young), ev(daly))
    ci = _bootstrap(ev, np.random.default_rng(np.random.SeedSequence(s, spawn_key=(2,))))
    curve = []
    for t in sorted(ev.values):
        v = ev.values[t]
        finite = bool(np.isfinite(v).all()) and len(v) > 1
        half = 1.96 * float(v.std(ddof=1)) / math.sqrt(len(v)) if finite else math.inf
        curve.append((t, float(v.mean()), half))
    return OptimizeResult(objective, best, ci, young, daly, mtbf, delta, *at, curve, replicas)


def _bootstrap(ev: _Evaluator, rng: np.random.Generator, rounds: int = 400) -> tuple[float, float]:
    """95 % interval of the argmin: resample replicas (paired across intervals), refit a parabola in log τ."""
    taus = np.array(sorted(ev.values))
    table = np.vstack([ev.values[t] for t in taus])  # intervals × replicas
    n = table.shape[1]
    picks = []
    for _ in range(rounds):
        idx = rng.integers(0, n, n)
        means = table[:, idx].mean(axis=1)
        picks.append(_vertex(np.log(taus), means))
    lo, hi = np.percentile(picks, [2.5, 97.5])
    return float(math.exp(lo)), float(math.exp(hi))


def _vertex(x: np.ndarray, y: np.ndarray) -> float:
    """Minimum of a parabola through the lowest point and its neighbours (the point itself at an edge)."""
    i = int(np.argmin(y))
    if i == 0 or i == len(x) - 1:
        return float(x[i])
    xs, ys = x[i - 1:i + 2], y[i - 1:i + 2]
    a, b, _ = np.polyfit(xs, ys, 2)
    if a <= 0:
        return float(x[i])
    return float(np.clip(-b / (2 * a), xs[0], xs[-1]))


def optimal_interval(sc: Scenario, prep: Prepared, *, seed: int, pool: Executor) -> float:
    """The interval for ``checkpoint.policy: optimal`` (cost objective, 100 replicas per candidate)."""
    return optimize_interval(sc, prep=prep, seed=seed, pool=pool, replicas=100).optimal_interval_s
