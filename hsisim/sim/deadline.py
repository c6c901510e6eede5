"""The arithmetic of the deadline-aware recovery policies: remaining work, changeovers, slack, the progress line.

Everything is in seconds of simulated time from the job's submission. Work is measured on the
whole world (every node of the scenario), as on-demand capacity would run it: the step model's
mean step time μ, plus the loader's epoch starts (and one cold start after a move).

- The **changeover** C is what moving the job to other nodes costs before it trains again: boot,
  image pull, init, rendezvous, the restore of the last checkpoint, and a checkpoint write (the
  move writes one so that no work is lost; work lost to a reclaim is counted separately, as the
  work since the restore point).
- The **slack** at time t, with the newest restore point at step s, is D − t − W(s) − 2C: the
  time left beyond what finishing on on-demand would take if spot capacity were lost now,
  with room for two changeovers (one spot restart that may be cut short, then the move).
- The **progress line** runs from (start, 0) to (D, W(0)): progress p = steps done × μ is
  *behind* when below it (Wu et al., "Can't Be Late: Optimizing Spot Instance Savings under
  Deadlines", NSDI 2024: Uniform Progress).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hsisim.sim.spec import Job, RunSpec
from hsisim.sim.stepmodel import StepModel


@dataclass(frozen=True)
class DeadlineClock:
    """The deadline and what the job needs to meet it (seconds)."""

    deadline_s: float
    total_steps: int
    steps_per_epoch: int
    step_s: float  # μ of the whole world
    epoch_s: float  # extra seconds of an epoch start with warm workers
    cold_s: float  # extra seconds of the first epoch after a (re)start
    changeover_s: float
    hysteresis_s: float  # uniform_progress: how far ahead of the line before returning to spot

    def remaining_s(self, step: int) -> float:
        """Seconds of training from ``step`` to the end on the whole world, after a restart."""
        left = self.total_steps - step
        if left <= 0:
            return 0.0
        epoch_starts = (self.total_steps - 1) // self.steps_per_epoch - step // self.steps_per_epoch
        return left * self.step_s + max(epoch_starts, 0) * self.epoch_s + self.cold_s

    def slack(self, now: float, restore_step: int) -> float:
        """D − now − W(restore point) − 2C: ≤ 0 means move to on-demand now."""
        return self.deadline_s - now - self.remaining_s(restore_step) - 2 * self.changeover_s

    def slope(self, start: float) -> float:
        """Work seconds the line asks for per second of wall time (≥ 1: spot can never get ahead)."""
        span = self.deadline_s - start
        return self.total_steps * self.step_s / span if span > 0 else math.inf

    def ahead_s(self, now: float, start: float, step: int) -> float:
        """Progress minus the line (work seconds): negative means behind."""
        slope = self.slope(start)
        line = (now - start) * slope if math.isfinite(slope) else math.inf
        return step * self.step_s - line


def clock(spec: RunSpec, job: Job, model: StepModel) -> DeadlineClock:
    """The deadline clock of a run whose whole world is ``job`` with step model ``model``."""
    assert spec.deadline_s is not None and spec.spot is not None
    oh, cp = spec.overhead, spec.checkpoint
    write = job.ckpt_write_s + (job.ckpt_snapshot_s if cp.asynchronous else 0.0)
    change = oh.start_s + oh.rendezvous_s + job.ckpt_restore_s + write
    first = sum(max(0.0, v) for v in model.excess_first.values())
    nxt = sum(max(0.0, v) for v in model.excess_next.values())
    hysteresis = spec.spot.hysteresis_s if spec.spot.hysteresis_s is not None else change
    return DeadlineClock(spec.deadline_s, job.total_steps, job.steps_per_epoch, model.mu, nxt, first, change,
                         hysteresis)
