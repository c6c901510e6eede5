"""Monte Carlo over replicas: seeding, executors, the results table and its summary.

Replica i draws from ``SeedSequence(seed, spawn_key=(1, i))`` and the micro simulation from
``spawn_key=(0,)``, so results depend on the seed alone, never on how replicas are split over
worker processes.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

import hsisim
from hsisim.errors import HsisimInputError
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
CHUNK = 64  # replicas per task sent to a worker process
EXECUTORS = ("inline", "local")


def check_executor(executor: str) -> None:
    """Bad ``--executor`` values are input errors."""
    if executor not in EXECUTORS:
        raise HsisimInputError(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")


@dataclass
class Results:
    """The replicas table plus what produced it."""

    scenario: Scenario
    job: Job
    step_model: StepModel
    df: pd.DataFrame
    seed: int
    notes: tuple[str, ...] = field(default_factory=tuple)

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
        out["notes"] = list(self.notes)
        return out

    def write(self, outdir: str | Path) -> None:
        """Write replicas.parquet, summary.json, scenario.json and manifest.json atomically."""
        out = Path(outdir)
        out.mkdir(parents=True, exist_ok=True)
        summary = self.summary()
        _atomic(out / "replicas.parquet", lambda p: self.df.to_parquet(p, index=False))
        _atomic(out / "summary.json", lambda p: Path(p).write_text(json.dumps(summary, indent=2)))
        scen = self.scenario.model_dump(mode="json", by_alias=True)
        _atomic(out / "scenario.json", lambda p: Path(p).write_text(json.dumps(scen, indent=2)))
        manifest = {"hsisim_version": hsisim.__version__, "seed": self.seed, "replicas": len(self.df),
                    "scenario_hash": self.scenario.fingerprint(), "calibration_fingerprint": _calib_fp(self.scenario),
                    "step_model": asdict(self.step_model)}
        _atomic(out / "manifest.json", lambda p: Path(p).write_text(json.dumps(manifest, indent=2)))


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


def _atomic(path: Path, write: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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


def prepare(sc: Scenario, seed: int, interval_override: float | None = None) -> Prepared:
    """Resolve the scenario and run the micro simulation once for every world size it can take."""
    job = resolve(sc)
    model = step_model_for(job, seed)
    spot = resolve_spot(sc, job.on_demand_usd_per_node_hour)
    worlds = {job.nodes: (job, model)}
    if spot is not None and spot.recovery == "elastic":
        for n in range(1, job.nodes):
            small = resolve(sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"nodes": n})}))
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
             executor: str = "local", progress: Any = None, interval_override: float | None = None,
             prepared: Prepared | None = None) -> Results:
    """Run the Monte Carlo for scenario ``sc`` and return its ``Results``.

    ``prepared`` reuses a resolved job and micro simulation (``prepare``); ``interval_override``
    replaces the checkpoint interval (training progress, seconds), as ``optimize`` does.
    """
    n = replicas if replicas is not None else sc.simulation.replicas
    s = seed if seed is not None else sc.simulation.seed
    if n < 1:
        raise HsisimInputError("--replicas must be at least 1", key="simulation.replicas")
    check_executor(executor)
    prep = prepared or prepare(sc, s)
    if sc.checkpoint.policy == "optimal" and interval_override is None and prep.interval_override is None:
        from hsisim.optimize import optimal_interval

        interval_override = optimal_interval(sc, prep, seed=s, workers=workers, executor=executor)
    if interval_override is not None:
        prep = replace(prep, interval_override=interval_override)
    bounds = [(i, min(n, i + CHUNK)) for i in range(0, n, CHUNK)]
    rows: list[dict[str, float]] = []
    procs = workers if workers is not None else (os.cpu_count() or 1)
    if executor == "inline" or procs <= 1 or len(bounds) == 1:
        for a, b in bounds:
            rows.extend(_chunk(prep, s, a, b))
            if progress:
                progress(b - a)
    else:
        with cf.ProcessPoolExecutor(max_workers=procs) as pool:
            futures = [pool.submit(_chunk, prep, s, a, b) for a, b in bounds]
            for fut in futures:
                part = fut.result()
                rows.extend(part)
                if progress:
                    progress(len(part))
    df = pd.DataFrame(rows).sort_values("replica", kind="stable").reset_index(drop=True)
    df["replica"] = df["replica"].astype(int)
    return Results(sc, prep.job, prep.model, df, s, prep.job.notes)
