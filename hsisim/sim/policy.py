"""Checkpoint policies: how many optimizer steps between periodic checkpoints."""

from __future__ import annotations

import math

from hsisim.analytic import checkpoint as ckpt
from hsisim.resolve import Job
from hsisim.scenario import Scenario
from hsisim.sim.stepmodel import StepModel
from hsisim.spot import SpotSetup


def checkpoint_cost(sc: Scenario, job: Job) -> float:
    """δ: seconds a checkpoint blocks training (the snapshot when async, else the write)."""
    return job.ckpt_snapshot_s if sc.checkpoint.async_ else job.ckpt_write_s


def interval_seconds(sc: Scenario, job: Job, spot: SpotSetup | None, override: float | None = None) -> float | None:
    """Training progress (seconds) between periodic checkpoints, or None for none.

    ``fixed`` uses ``checkpoint.interval``; ``young`` and ``daly`` use the job's MTBF and δ;
    ``optimal`` needs ``override`` (found by ``hsisim optimize``); ``none``/``on_notice``: none.
    Without interruptions (on-demand) the MTBF is infinite and so are Young's, Daly's and the
    optimal interval: no periodic checkpoints.
    """
    cp = sc.checkpoint
    if override is not None:
        return override
    if cp.policy in ("none", "on_notice") or (cp.policy == "fixed" and cp.interval is None):
        return None
    if cp.policy == "fixed":
        return cp.interval
    if spot is None or not math.isfinite(spot.mtbf_s):  # nothing interrupts the job: τ → ∞
        return None
    if cp.policy == "optimal":
        raise ValueError("policy 'optimal' needs the interval found by optimize")
    fn = ckpt.young_interval if cp.policy == "young" else ckpt.daly_interval
    return fn(checkpoint_cost(sc, job), spot.mtbf_s)


def every_steps(sc: Scenario, job: Job, model: StepModel, spot: SpotSetup | None,
                override: float | None = None) -> int | None:
    """Optimizer steps between periodic checkpoints (progress seconds / mean step time)."""
    if sc.checkpoint.every_steps is not None and override is None:
        return sc.checkpoint.every_steps
    tau = interval_seconds(sc, job, spot, override)
    if tau is None:
        return None
    return max(1, round(tau / model.mu))
