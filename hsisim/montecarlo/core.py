"""Monte Carlo over replicas: seeding, executors, the results table and its summary.

Replica i draws from ``SeedSequence(seed, spawn_key=(1, i))`` and the micro simulation from
``spawn_key=(0,)``, so results depend on the seed alone, never on how replicas are split over
worker processes.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

import hsisim
from hsisim.errors import HsisimInputError
from hsisim.montecarlo import workload
from hsisim.montecarlo.executors import Executor, check_executor, open_executor
from hsisim.montecarlo.store import ResultStore, run_identity
from hsisim.resolve import Job, resolve
from hsisim.scenario import Scenario
from hsisim.sim.macro import Replica
from hsisim.sim.records import ReplicaResult
from hsisim.sim.stepmodel import StepModel, estimate
from hsisim.spot import SpotSetup, resolve_spot

SUMMARY_METRICS = ("wall_h", "t_compute_h", "t_data_h", "t_comm_h", "t_stall_h", "t_recover_h", "t_overhead_h",
                   "eta", "cost_usd", "useful_gpu_h", "billed_gpu_h", "cost_per_useful_gpu_h", "interruptions",
                   "checkpoints", "spot_node_h", "cost_compute_usd", "cost_data_usd", "cost_comm_usd", "cost_stall_usd",
                   "cost_recover_usd", "cost_overhead_usd", "cost_idle_usd", "cost_storage_usd", "cost_egress_usd")
CHUNK = 64  # replicas per task sent to a worker
FIRST_WAVE = 256  # replicas before the first --ci-halfwidth check
Progress = Callable[[int, int], None]  # (replicas just finished, replicas planned so far)


@dataclass
class Results:
    """The replicas table plus what produced it."""

    scenario: Scenario
    job: Job
    step_model: StepModel
    df: pd.DataFrame
    seed: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    stopping: dict[str, Any] | None = None
    interval_override: float | None = None

    def summary(self) -> dict[str, Any]:
        """The ``--json`` object of ``hsisim run``."""
        metrics = {m: describe(self.df[m].to_numpy(dtype=float)) for m in SUMMARY_METRICS}
        out: dict[str, Any] = {"scenario": self.scenario.name, "replicas": len(self.df), "seed": self.seed,
                               "metrics": metrics}
        sim = self.scenario.simulation
        if sim.deadline is not None:
            out["p_deadline"] = float((self.df["wall_h"] * 3600 <= sim.deadline).mean())
        if sim.budget_usd is not None:
            out["p_budget"] = float((self.df["cost_usd"] <= sim.budget_usd).mean())
        out["p_finished"] = float(self.df["finished"].mean())
        out["on_demand_usd_per_gpu_h"] = self.job.on_demand_usd_per_node_hour / self.job.gpus_per_node
        if self.stopping is not None:
            out["stopping"] = self.stopping
        out["notes"] = list(self.notes)
        return out

    def manifest(self) -> dict[str, Any]:
        return {"hsisim_version": hsisim.__version__, "seed": self.seed, "replicas": len(self.df),
                "scenario_hash": self.scenario.fingerprint(), "calibration_fingerprint": _calib_fp(self.scenario),
                "step_model": asdict(self.step_model)}


def describe(x: np.ndarray) -> dict[str, Any]:
    """mean, std, percentiles and the 95 % confidence interval of the mean (Student t)."""
    n = len(x)
    finite = x[np.isfinite(x)]
    if len(finite) == 0:
        nan = float("nan")
        return {"mean": nan, "std": nan, "p5": nan, "p50": nan, "p90": nan, "p95": nan, "p99": nan, "ci95": [nan, nan]}
    mean = float(finite.mean())
    std = float(finite.std(ddof=1)) if len(finite) > 1 else 0.0
    half = float(stats.t.ppf(0.975, n - 1) * std / math.sqrt(n)) if n > 1 else 0.0
    p = np.percentile(finite, [5, 50, 90, 95, 99])
    return {"mean": mean, "std": std, "p5": float(p[0]), "p50": float(p[1]), "p90": float(p[2]),
            "p95": float(p[3]), "p99": float(p[4]), "ci95": [mean - half, mean + half]}


def _calib_fp(sc: Scenario) -> str | None:
    if sc.calibration is None:
        return None
    return hashlib.sha256(Path(sc.calibration).read_bytes()).hexdigest()


@dataclass(frozen=True)
class Prepared:
    """What every replica of a run shares: the job, its step model, spot setup, smaller worlds."""

    scenario: Scenario
    job: Job
    model: StepModel
    spot: SpotSetup | None
    worlds: dict[int, tuple[Job, StepModel]]
    interval_override: float | None = None

    def world(self, nodes: int) -> tuple[Job, StepModel]:
        return self.worlds.get(nodes, (self.job, self.model))


def prepare(sc: Scenario, seed: int, interval_override: float | None = None, *, allow_code: bool = False
            ) -> Prepared:
    """Resolve the scenario and run the micro simulation once for every world size it can take."""
    job = resolve(sc, allow_code=allow_code)
    model = step_model_for(job, seed)
    spot = resolve_spot(sc, job.on_demand_usd_per_node_hour)
    worlds = {job.nodes: (job, model)}
    if spot is not None and spot.recovery == "elastic":
        for n in range(1, job.nodes):
            small = resolve(sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"nodes": n})}),
                            allow_code=allow_code)
            worlds[n] = (small, step_model_for(small, seed))
    return Prepared(sc, job, model, spot, worlds, interval_override)


def run_replica(prep: Prepared, seed: int, i: int, log: list[tuple[float, str]] | None = None) -> ReplicaResult:
    """Replica ``i`` of a prepared run."""
    return Replica(prep.scenario, prep.job, prep.model, np.random.SeedSequence(seed, spawn_key=(1, i)), i, log=log,
                   spot=prep.spot, worlds=prep.world, interval_override=prep.interval_override).run()


def _chunk(prep: Prepared, seed: int, start: int, stop: int) -> list[dict[str, float]]:
    return [run_replica(prep, seed, i).row() for i in range(start, stop)]


def step_model_for(job: Job, seed: int) -> StepModel:
    """The micro simulation's summary for ``job`` (seeded from the scenario seed)."""
    return estimate(job, np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,))))


def simulate(sc: Scenario, *, replicas: int | None = None, seed: int | None = None, workers: int | None = None,
             executor: str = "local", scheduler: str | None = None, progress: Progress | None = None,
             interval_override: float | None = None, prepared: Prepared | None = None,
             out: str | Path | None = None, resume: bool = False, overwrite: bool = False,
             ci_halfwidth: float | None = None, max_replicas: int = 100_000, pool: Executor | None = None,
             allow_long: bool = False, allow_code: bool = False) -> Results:
    """Run the Monte Carlo for scenario ``sc`` and return its ``Results``.

    ``replicas`` fixes the count; ``ci_halfwidth`` (relative, e.g. 0.01) instead runs waves of
    replicas until the 95 % confidence interval of the mean cost is that tight, or ``max_replicas``.
    ``out`` streams chunks to a result store (``resume`` continues one, ``overwrite`` replaces a
    finished one). ``prepared`` reuses a resolved job and micro simulation; ``interval_override``
    replaces the checkpoint interval (training progress, seconds), as ``optimize`` does; ``pool``
    reuses an open executor. Runs estimated to take over ``workload.LIMIT_S`` are refused unless
    ``allow_long``; the user's factories named in the scenario run only with ``allow_code``.
    """
    n = replicas if replicas is not None else sc.simulation.replicas
    s = seed if seed is not None else sc.simulation.seed
    if n < 1:
        raise HsisimInputError(f"{{replicas}} must be at least 1, got {n}", key="simulation.replicas")
    if ci_halfwidth is not None and not 0 < ci_halfwidth < 1:
        raise HsisimInputError(f"{{ci_halfwidth}} must be a fraction of the mean in (0, 1), got {ci_halfwidth}")
    if max_replicas < 2:
        raise HsisimInputError(f"{{max_replicas}} must be at least 2, got {max_replicas}")
    if resume and out is None:
        raise HsisimInputError("{resume} needs {out} (the folder of the run to continue)")
    check_executor(executor, scheduler)
    prep = prepared or prepare(sc, s, allow_code=allow_code)
    planned = max_replicas if ci_halfwidth is not None else n
    procs = _processes(executor, workers, planned)
    if pool is None:  # an adaptive run is checked on its first wave, and later waves stop at the limit
        workload.check([prep], min(planned, FIRST_WAVE) if ci_halfwidth is not None else n, procs,
                       allow_long=allow_long)
    if ci_halfwidth is not None and not allow_long:
        max_replicas = min(max_replicas, workload.affordable(prep, procs))
    with ExitStack() as stack:
        ex = pool or stack.enter_context(open_executor(executor, procs, scheduler))
        if (sc.checkpoint.policy == "optimal" and prep.spot is not None and interval_override is None
                and prep.interval_override is None):
            from hsisim.optimize import optimal_interval

            interval_override = optimal_interval(sc, prep, seed=s, pool=ex)
        if interval_override is not None:
            prep = replace(prep, interval_override=interval_override)
        store = (ResultStore.open(Path(out), run_identity(sc, s, CHUNK, prep.interval_override), resume=resume,
                                  overwrite=overwrite) if out is not None else None)
        if store is not None:
            stack.callback(store.close)
        notes = list(prep.job.notes) + (store.notes if store is not None else [])
        if store is not None and store.complete and store.target(replicas, n) == store.saved_end \
                and ci_halfwidth is None:
            df = pd.concat([store.done[k] for k in sorted(store.done)], ignore_index=True)
            notes.append(f"{out} already holds {len(df)} replicas of this run; reported as they are "
                         f"(asked for {n})")
            return Results(sc, prep.job, prep.model, df, s, tuple(notes), None, prep.interval_override)
        if store is not None:
            n = store.target(replicas, n)
            store.begin(max_replicas if ci_halfwidth is not None else n)
        runner = _Waves(prep, s, ex, store, progress)
        if ci_halfwidth is None:
            df = runner.to(n)
            stopping = None
        else:
            df, stopping = _adaptive(runner, ci_halfwidth, max_replicas)
        res = Results(sc, prep.job, prep.model, df, s, tuple(notes), stopping, prep.interval_override)
        if store is not None:
            store.finish(df, res.summary(), sc.model_dump(mode="json", by_alias=True), res.manifest())
    return res


def _processes(executor: str, workers: int | None, replicas: int) -> int:
    """Worker processes: as asked (default every core), never more than there are chunks of work."""
    if workers is not None and workers < 1:
        raise HsisimInputError(f"{{workers}} must be at least 1, got {workers}")
    if executor == "inline":
        return 1
    procs = workers if workers is not None else (os.cpu_count() or 1)
    return max(1, min(procs, math.ceil(replicas / CHUNK)))


class _Waves:
    """Runs replicas [0, n) in chunks of ``CHUNK``, reusing chunks already finished (store or earlier waves)."""

    def __init__(self, prep: Prepared, seed: int, ex: Executor, store: ResultStore | None,
                 progress: Progress | None) -> None:
        self.prep, self.seed, self.ex, self.store, self.progress = prep, seed, ex, store, progress
        self.have: dict[tuple[int, int], pd.DataFrame] = {}

    def to(self, n: int) -> pd.DataFrame:
        bounds = [(i, min(n, i + CHUNK)) for i in range(0, n, CHUNK)]
        todo, reused = [], 0
        for a, b in bounds:
            if (a, b) in self.have:
                continue
            got = self.store.get(a, b) if self.store is not None else None
            if got is None:
                todo.append((a, b))
            else:
                self.have[(a, b)] = got
                reused += b - a
        if self.progress:
            self.progress(reused, n)
        for a, b, rows in self.ex.run(_chunk, self.prep, self.seed, todo):
            part = pd.DataFrame(rows)
            part["replica"] = part["replica"].astype(np.int64)
            if self.store is not None:
                self.store.put(a, b, part)
            self.have[(a, b)] = part
            if self.progress:
                self.progress(b - a, n)
        return pd.concat([self.have[k] for k in bounds], ignore_index=True)


def _adaptive(runner: _Waves, target: float, max_n: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Waves of replicas until the relative 95 % half-width of the mean cost is at most ``target``.

    Wave sizes depend only on the replicas' values, never on timing or worker count, so a seed
    gives the same replicas on any executor (and a resumed run the same waves).
    """
    n = min(FIRST_WAVE, max_n)
    while True:
        df = runner.to(n)
        rel = relative_halfwidth(df["cost_usd"].to_numpy(dtype=float))
        if rel <= target or n >= max_n:
            return df, {"metric": "cost_usd", "ci_halfwidth_target": target, "ci_halfwidth": rel,
                        "replicas": n, "max_replicas": max_n, "reached_max": bool(rel > target)}
        want = math.ceil(n * (rel / target) ** 2 * 1.1)
        n = min(max_n, 8 * n, max(n + CHUNK, -(-want // CHUNK) * CHUNK))


def relative_halfwidth(x: np.ndarray) -> float:
    """Half-width of the 95 % Student-t interval of the mean, as a fraction of the mean."""
    finite = x[np.isfinite(x)]
    n = len(finite)
    if n < 2:
        return math.inf
    mean = float(finite.mean())
    half = float(stats.t.ppf(0.975, n - 1) * finite.std(ddof=1) / math.sqrt(n))
    return 0.0 if half == 0 else (half / abs(mean) if mean != 0 else math.inf)
