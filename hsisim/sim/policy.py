"""Checkpoint policies: how many optimizer steps between periodic checkpoints."""

from __future__ import annotations

import math

from hsisim.analytic import checkpoint as ckpt
from hsisim.sim.spec import CheckpointPlan, Job, SpotSetup
from hsisim.sim.stepmodel import StepModel


def checkpoint_cost(plan: CheckpointPlan, job: Job) -> float:
    """δ: seconds a checkpoint blocks training (the snapshot when async, else the write)."""
    return job.ckpt_snapshot_s if plan.asynchronous else job.ckpt_write_s


def interval_seconds(plan: CheckpointPlan, job: Job, spot: SpotSetup | None) -> float | None:
    """Training progress (seconds) between periodic checkpoints, or None for none.

    An interval chosen by optimisation (``override_s``) comes first; ``fixed`` uses its
    interval; ``young`` and ``daly`` use the job's MTBF and δ; ``optimal`` needs the interval
    found by ``hsisim optimize`` (resolved before the simulation); ``none``/``on_notice``: none.
    Without interruptions (on-demand) the MTBF is infinite and so are Young's, Daly's and the
    optimal interval: no periodic checkpoints.
    """
    if plan.override_s is not None:
        return plan.override_s
    if plan.policy in ("none", "on_notice") or (plan.policy == "fixed" and plan.interval_s is None):
        return None
    if plan.policy == "fixed":
        return plan.interval_s
    if spot is None or not math.isfinite(spot.mtbf_s):  # nothing interrupts the job: τ → ∞
        return None
    if plan.policy == "optimal":
        raise ValueError("policy 'optimal' needs the interval found by optimize")
    fn = ckpt.young_interval if plan.policy == "young" else ckpt.daly_interval
    return fn(checkpoint_cost(plan, job), spot.mtbf_s)


def every_steps(plan: CheckpointPlan, job: Job, model: StepModel, spot: SpotSetup | None) -> int | None:
    """Optimizer steps between periodic checkpoints (progress seconds / mean step time)."""
    if plan.every_steps is not None and plan.override_s is None:
        return plan.every_steps
    tau = interval_seconds(plan, job, spot)
    if tau is None:
        return None
    return max(1, round(tau / model.mu))
