"""The results of a Monte Carlo run: one row per replica, the summary, the manifest, and writing them."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hsisim import stats
from hsisim._version import __version__
from hsisim.resolve.assumptions import assumptions, scenario_warnings
from hsisim.scenario import Scenario
from hsisim.sim.spec import Job, RunSpec
from hsisim.sim.stepmodel import StepModel

SUMMARY_METRICS = ("wall_h", "t_compute_h", "t_data_h", "t_comm_h", "t_stall_h", "t_recover_h", "t_overhead_h",
                   "eta", "cost_usd", "useful_gpu_h", "billed_gpu_h", "cost_per_useful_gpu_h", "interruptions",
                   "checkpoints", "spot_node_h", "cost_compute_usd", "cost_data_usd", "cost_comm_usd", "cost_stall_usd",
                   "cost_recover_usd", "cost_overhead_usd", "cost_idle_usd", "cost_storage_usd", "cost_egress_usd",
                   "spot_gpu_h", "on_demand_gpu_h", "switches")


@dataclass
class Results:
    """The replicas table plus what produced it.

    ``replicas`` (the same table as ``df``) has one row per replica with the metrics of the
    ``hsisim run --json`` contract in hours, USD and counts; ``summary()`` describes each metric.
    """

    scenario: Scenario
    spec: RunSpec
    step_model: StepModel
    df: pd.DataFrame
    seed: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    stopping: dict[str, Any] | None = None

    @property
    def replicas(self) -> pd.DataFrame:
        """One row per replica (wall_h, t_*_h, eta, cost_usd, cost_*_usd, ...)."""
        return self.df

    @property
    def job(self) -> Job:
        """The resolved job (step level) of the scenario's own node count."""
        return self.spec.job

    @property
    def interval_override(self) -> float | None:
        """The checkpoint interval (training progress, s) found by optimisation, if one was used."""
        return self.spec.checkpoint.override_s

    def summary(self) -> dict[str, Any]:
        """The ``--json`` object of ``hsisim run``: every metric's mean, std, percentiles and 95 % CI."""
        metrics = {m: stats.describe(self.df[m].to_numpy(dtype=float)) for m in SUMMARY_METRICS}
        out: dict[str, Any] = {"scenario": self.scenario.name, "replicas": len(self.df), "seed": self.seed,
                               "metrics": metrics}
        sim = self.scenario.simulation
        if sim.deadline is not None:
            out["p_deadline"] = float((self.df["wall_h"] * 3600 <= sim.deadline).mean())
        if sim.budget_usd is not None:
            out["p_budget"] = float((self.df["cost_usd"] <= sim.budget_usd).mean())
        out["p_finished"] = float(self.df["finished"].mean())
        job = self.spec.job
        out["on_demand_usd_per_gpu_h"] = job.on_demand_usd_per_node_hour / job.gpus_per_node
        if self.stopping is not None:
            out["stopping"] = self.stopping
        out["notes"] = [*self.notes, *self._trace_notes()]
        out["assumptions"] = assumptions(self.scenario, self.spec)
        out["warnings"] = self.warnings
        return out

    @property
    def warnings(self) -> list[str]:
        """What makes these numbers doubtful: the scenario's likely unmeant choices, then the step's."""
        return [*scenario_warnings(self.scenario), *self.spec.warnings]

    def _trace_notes(self) -> list[str]:
        """Say so when replicas outlived the availability trace they replay (it wraps around)."""
        spot = self.spec.spot
        capacity = spot.availability if spot is not None else None
        if capacity is None:
            return []
        longer = float((self.df["wall_h"] * 3600 > capacity.span).mean())
        if longer == 0:
            return []
        return [f"the availability trace spans {capacity.span / 3600:,.1f} h: {longer:.0%} of replicas ran longer "
                "and replayed it from its start again (wrap-around)"]

    def manifest(self) -> dict[str, Any]:
        """Version, seed, replica count, scenario hash, calibration fingerprint and the step model."""
        return {"hsisim_version": __version__, "seed": self.seed, "replicas": len(self.df),
                "scenario_hash": self.scenario.fingerprint(), "calibration_fingerprint": _calib_fp(self.scenario),
                "step_model": asdict(self.step_model)}

    def write(self, folder: str | Path) -> Path:
        """Write ``replicas.parquet``, ``summary.json``, ``scenario.json`` and ``manifest.json`` into a
        new or empty ``folder`` (or the folder of this very run), each file atomically; returns the folder."""
        from hsisim.montecarlo.store import save

        return save(Path(folder), self)


def _calib_fp(sc: Scenario) -> str | None:
    if sc.calibration is None:
        return None
    return hashlib.sha256(Path(sc.calibration).read_bytes()).hexdigest()
