"""How much work a Monte Carlo run is, before it starts: refuse the ones that would not end.

A replica's cost grows with its events: blocks of epochs, interruptions (each re-plans a block
and runs a recovery), and the checkpoint and segment arrays of every planned block; in
``fidelity: step`` every step is a run of the micro simulation. The estimate is rough (a factor
of two either way) but it separates a run of seconds from one of days: a scenario whose job
never finishes (interruptions faster than recovery), a checkpoint after every step, a billion
replicas. Runs estimated above ``LIMIT_S`` seconds, or whose results would fill more than half
of this machine's memory, are refused unless the caller allows long runs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hsisim.analytic.checkpoint import daly_interval
from hsisim.errors import HsisimInputError
from hsisim.sim.policy import checkpoint_cost, every_steps
from hsisim.sim.replica import EPOCHS_PER_BLOCK

LIMIT_S = 600.0  # estimated wall seconds beyond which a run needs allow_long
# Costs per unit of a two-level replica, measured on a 2-vCPU AMD EPYC VM (2026-12-03, CPython 3.11,
# benchmarks/fit_workload.py): 8 replicas of spot_8x as written, with checkpoints every 1, 10 and
# 100 steps and with its hazard raised to 2 reclaims an hour; non-negative least squares on
# relative errors, every run fitted within 15 %. (A reclaim's own cost is its block's.)
BLOCK_S = 3.5e-4  # one block of up to EPOCHS_PER_BLOCK epochs (event loop, booking, sampling)
ELEMENT_S = 1.7e-7  # one planned checkpoint or epoch boundary (numpy arrays of a block)
REPLANNED_S = 4.5e-8  # one element of a block re-planned after a reclaim
ROW_BYTES = 800  # one replica's row in memory (36 float columns, the chunk lists, the concat copy)


@dataclass(frozen=True)
class Work:
    """Estimated work of one replica."""

    seconds: float
    interruptions: float
    checkpoints: float


def estimate(prep: Any) -> Work:
    """The work of one replica of a prepared run."""
    job, model, spec = prep.job, prep.model, prep.spec
    every = _every(prep)
    checkpoints = job.total_steps / every if every else 0.0
    interruptions = _interruptions(prep, every)
    if spec.fidelity == "step":
        steps_per_s = model.steps_per_second if math.isfinite(model.steps_per_second) else 1e4
        per = job.total_steps * (1 + interruptions) / max(steps_per_s, 1.0)
    else:
        blocks, elements, replanned = units(prep, interruptions, every)
        per = BLOCK_S * blocks + ELEMENT_S * elements + REPLANNED_S * replanned
    return Work(per, interruptions, checkpoints)


def units(prep: Any, interruptions: float, every: int | None = None) -> tuple[float, float, float]:
    """A two-level replica's (blocks, planned elements, re-planned elements) given its interruptions:
    every checkpoint and epoch boundary is an element of a block's arrays, and each reclaim starts
    a block that re-plans what was left of the one it cut."""
    job = prep.job
    every = every if every is not None else _every(prep)
    epochs = job.total_steps / job.steps_per_epoch
    checkpoints = job.total_steps / every if every else 0.0
    blocks = epochs / EPOCHS_PER_BLOCK + interruptions + 1
    per_block = min(EPOCHS_PER_BLOCK, epochs) * job.steps_per_epoch / every if every else 0.0
    return blocks, checkpoints + epochs, interruptions * per_block


def _every(prep: Any) -> int | None:
    plan, spot = prep.spec.checkpoint, prep.spec.spot
    if plan.override_s is None and plan.policy == "optimal" and spot is not None and math.isfinite(spot.mtbf_s):
        # the optimum is not known yet: it is near Daly's interval
        plan = replace(plan, override_s=daly_interval(checkpoint_cost(plan, prep.job), spot.mtbf_s))
    return every_steps(plan, prep.job, prep.model, spot)


def _interruptions(prep: Any, every: int | None) -> float:
    """Expected reclaims per replica: the job's failure rate over its expected wall time.

    The wall time uses the expected completion time of work W split in segments of τ with
    checkpoint cost δ and downtime D after each failure (Bougeret et al., SC'11, Prop. 1):
    (W/τ)(1/λ + D)(e^{λ(τ+δ)} − 1), capped at ``simulation.max_wall``.
    """
    spot, spec, job = prep.spec.spot, prep.spec, prep.job
    if spot is None or not math.isfinite(spot.mtbf_s):
        return 0.0
    lam = 1.0 / spot.mtbf_s
    work = job.total_steps * prep.model.mu
    tau = min(work, every * prep.model.mu) if every else work
    delta = job.ckpt_write_s if every else 0.0
    oh = spec.overhead
    down = oh.start_s + oh.rendezvous_s + job.ckpt_restore_s
    down += spot.replacement.mean if spot.replacement is not None else spot.capacity_wait_mean_s
    try:
        wall = (work / max(tau, 1e-9)) * (1 / lam + down) * math.expm1(lam * (tau + delta))
    except OverflowError:
        wall = math.inf
    return lam * min(wall, spec.max_wall_s)


def check(preps: Sequence[Any], replicas: int, processes: int, *, allow_long: bool, repeats: int = 1) -> None:
    """Refuse ``repeats`` runs of ``replicas`` replicas of each prepared run (a sweep holds all of
    their results) if they would take longer than ``LIMIT_S`` or not fit in memory."""
    works = [estimate(p) for p in preps]
    total = replicas * len(works) * repeats
    memory = ROW_BYTES * replicas * len(works)
    ram = _physical_memory()
    if ram and memory > ram / 2:
        raise HsisimInputError(f"{total:,} replicas need about {memory / 1e9:,.0f} GB for their results; this "
                               f"machine has {ram / 1e9:,.0f} GB: lower {{replicas}}")
    seconds = sum(w.seconds for w in works) * replicas * repeats / max(1, processes)
    if seconds <= LIMIT_S or allow_long:
        return
    worst = max(works, key=lambda w: w.seconds)
    why = []
    if worst.checkpoints > 1e5:
        why.append(f"{worst.checkpoints:,.0f} checkpoints per replica")
    if worst.interruptions > 1e3:
        why.append(f"{worst.interruptions:,.0f} interruptions per replica (the job barely progresses between "
                   "reclaims)")
    detail = f" ({'; '.join(why)})" if why else ""
    raise HsisimInputError(
        f"this would take about {_human(seconds)} on {processes} process(es): {total:,} replicas at up to "
        f"~{_human(worst.seconds)} each{detail}; lower {{replicas}} or pass {{allow_long}} to run it anyway "
        f"(the limit is {LIMIT_S / 60:.0f} min)")


def affordable(prep: Any, processes: int) -> int:
    """The most replicas of ``prep`` that fit in ``LIMIT_S`` on ``processes`` processes (at least 2)."""
    per = estimate(prep).seconds
    return max(2, int(LIMIT_S * max(1, processes) / per)) if per > 0 else 10**12


def _physical_memory() -> float | None:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _human(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "forever"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.0f} days"
