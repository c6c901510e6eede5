"""Run-level SimPy model of one replica: queue, boot, epochs, checkpoints, billing.

The job moves in segments between events (epoch boundaries, checkpoints, the end); n steps take
Normal(n·μ, n·σ²) from the ``StepModel`` (two-level mode) or are simulated step by step by the
micro model (``fidelity: step``, the reference). Processes are written so that spot interruptions
can interrupt the training process and a recovery process can restart it.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import simpy

from hsisim.analytic import checkpoint as ckpt
from hsisim.resolve import Job
from hsisim.scenario import Scenario
from hsisim.sim.ledger import MONEY_CATEGORIES, TIME_TERMS, Ledger
from hsisim.sim.micro import MicroSim
from hsisim.sim.stepmodel import TERMS, StepModel

Proc = Generator[simpy.Event, Any, None]


@dataclass(frozen=True)
class ReplicaResult:
    """One replica's outcome. Times in seconds, money in USD."""

    replica: int
    wall: float
    time: dict[str, float]
    money: dict[str, float]
    useful_gpu_h: float
    billed_gpu_h: float
    interruptions: int
    checkpoints: int

    @property
    def cost(self) -> float:
        return sum(self.money.values())

    def row(self) -> dict[str, float]:
        """Flat metrics for the results table (the names of the CLI contract)."""
        h = 3600.0
        out: dict[str, float] = {"replica": self.replica, "wall_h": self.wall / h}
        out.update({f"t_{t}_h": self.time[t] / h for t in TIME_TERMS})
        out["eta"] = self.time["compute"] / self.wall if self.wall > 0 else 0.0
        out.update({f"cost_{c}_usd": self.money[c] for c in MONEY_CATEGORIES})
        out["cost_usd"] = self.cost
        out["useful_gpu_h"] = self.useful_gpu_h
        out["billed_gpu_h"] = self.billed_gpu_h
        out["cost_per_useful_gpu_h"] = self.cost / self.useful_gpu_h if self.useful_gpu_h > 0 else math.inf
        out["interruptions"] = self.interruptions
        out["checkpoints"] = self.checkpoints
        return out


class StepSource(Protocol):
    def epoch_start(self, epoch: int) -> dict[str, float]: ...
    def segment(self, n: int) -> dict[str, float]: ...


class TwoLevelSource:
    """n steps: (duration, busy) ~ bivariate Normal(n·(μ, μ_busy), n·Σ) from the step model.

    Busy time (compute + stall on the critical rank) is drawn jointly with the duration so that η
    varies as it does step by step. Exposed comm is a fixed time per step in the micro model, so it
    takes n·μ_comm of the rest and data takes the remainder (the queueing noise). With σ = 0 this
    is exact: n·μ and n·μ_busy.
    """

    def __init__(self, model: StepModel, job: Job, rng: np.random.Generator) -> None:
        self.m, self.job, self.rng = model, job, rng
        m = model
        self.mu_busy = m.mean["compute"] + m.mean["stall"]
        self.stall_frac = m.mean["stall"] / self.mu_busy if self.mu_busy > 0 else 0.0

    def epoch_start(self, epoch: int) -> dict[str, float]:
        ex = self.m.excess_first if epoch == 0 or not self.job.persistent_workers else self.m.excess_next
        return {t: max(0.0, v) for t, v in ex.items()}

    def segment(self, n: int) -> dict[str, float]:
        m, root = self.m, math.sqrt(n)
        d, busy = n * m.mu, n * self.mu_busy
        if m.sigma > 0 or m.sigma_busy > 0:
            z1, z2 = self.rng.standard_normal(2)
            d += m.sigma * root * z1
            busy += m.sigma_busy * root * (m.rho * z1 + math.sqrt(max(0.0, 1 - m.rho**2)) * z2)
            d = max(d, 0.0)
            busy = min(max(busy, 0.0), d)
        rest = d - busy
        comm = min(rest, n * m.mean["comm"])
        return {"compute": busy * (1 - self.stall_frac), "stall": busy * self.stall_frac,
                "data": rest - comm, "comm": comm}


class StepwiseSource:
    """The reference: every step of every epoch simulated by the micro model from a cold start."""

    def __init__(self, job: Job, rng: np.random.Generator) -> None:
        self.job, self.rng = job, rng
        self.sim: MicroSim | None = None

    def epoch_start(self, epoch: int) -> dict[str, float]:
        start = epoch == 0 or not self.job.persistent_workers
        self.sim = MicroSim(self.job, self.rng, start_workers=start)
        return dict.fromkeys(TERMS, 0.0)

    def segment(self, n: int) -> dict[str, float]:
        assert self.sim is not None
        tr = self.sim.run(n)
        return {t: float(getattr(tr, t).sum()) for t in TERMS}


def checkpoint_every_steps(sc: Scenario, job: Job, model: StepModel) -> int | None:
    """Optimizer steps between periodic checkpoints, or None for no periodic checkpoints."""
    cp = sc.checkpoint
    if cp.policy == "none":
        return None
    if cp.every_steps is not None:
        return cp.every_steps
    tau = cp.interval if cp.policy == "fixed" else checkpoint_interval(sc, job)
    assert tau is not None
    return max(1, round(tau / model.mu))


def checkpoint_cost(sc: Scenario, job: Job) -> float:
    """δ: seconds a checkpoint blocks training (the snapshot when async, else the write)."""
    return job.ckpt_snapshot_s if sc.checkpoint.async_ else job.ckpt_write_s


def checkpoint_interval(sc: Scenario, job: Job) -> float:
    """Young's or Daly's interval (training progress, seconds) for the job's MTBF."""
    assert sc.spot is not None
    mtbf = ckpt.job_mtbf(job.nodes, sc.spot.hazard.mean)
    delta = checkpoint_cost(sc, job)
    fn = ckpt.young_interval if sc.checkpoint.policy == "young" else ckpt.daly_interval
    return fn(delta, mtbf)


class Replica:
    """One run of the job; ``run()`` returns its ``ReplicaResult``."""

    def __init__(self, sc: Scenario, job: Job, model: StepModel, seed: np.random.SeedSequence, index: int,
                 log: list[tuple[float, str]] | None = None) -> None:
        self.sc, self.job, self.model, self.index, self.log = sc, job, model, index, log
        queue_ss, steps_ss = seed.spawn(2)
        self.rng_queue = np.random.default_rng(queue_ss)
        steps_rng = np.random.default_rng(steps_ss)
        self.source: StepSource = StepwiseSource(job, steps_rng) if sc.simulation.fidelity == "step" \
            else TwoLevelSource(model, job, steps_rng)
        self.env = simpy.Environment()
        self.ledger = Ledger(job.gpus_per_node)
        self.every = checkpoint_every_steps(sc, job, model)
        self.checkpoints = 0
        self._persisting: simpy.Process | None = None
        self._persisted: list[float] = []

    def _note(self, what: str) -> None:
        if self.log is not None:
            self.log.append((self.env.now, what))

    def _wait(self, term: str, seconds: float, what: str) -> Proc:
        yield self.env.timeout(seconds)
        self.ledger.spend(term, seconds)
        self._note(what)

    def _job(self) -> Proc:
        sc, job, env = self.sc, self.job, self.env
        oh = sc.overhead
        queue = float(oh.queue.sample(self.rng_queue)) if oh.queue is not None else 0.0
        yield from self._wait("overhead", queue, "capacity granted")
        self.ledger.start_nodes(env.now, job.nodes, job.price_usd_per_node_hour)
        for phase, secs in (("boot", oh.boot), ("image pull", oh.image_pull), ("init", oh.init),
                            ("rendezvous", oh.rendezvous)):
            yield from self._wait("overhead", secs, f"{phase} done")
        if job.oom_retry_s:
            yield from self._wait("stall", job.oom_retry_s, "OOM retries done")
        yield from self._train(0)
        self._note("done")

    def _train(self, step: int) -> Proc:
        job = self.job
        while step < job.total_steps:
            epoch, pos = divmod(step, job.steps_per_epoch)
            if pos == 0:
                yield from self._terms(self.source.epoch_start(epoch), f"epoch {epoch} started")
            to_epoch_end = job.steps_per_epoch - pos
            to_ckpt = self.every - step % self.every if self.every else math.inf
            n = int(min(to_epoch_end, to_ckpt, job.total_steps - step))
            yield from self._terms(self.source.segment(n), f"step {step + n}")
            step += n
            if self.every and step % self.every == 0 and step < job.total_steps:
                yield from self._checkpoint(step)

    def _terms(self, parts: dict[str, float], what: str) -> Proc:
        total = sum(parts.values())
        yield self.env.timeout(total)
        for term, secs in parts.items():
            self.ledger.spend(term, secs)
        self._note(what)

    def _checkpoint(self, step: int) -> Proc:
        self.checkpoints += 1
        if self.sc.checkpoint.async_:
            start = self.env.now
            if self._persisting is not None and self._persisting.is_alive:
                yield self._persisting  # the next snapshot waits for the previous persist
            yield self.env.timeout(self.job.ckpt_snapshot_s)
            self.ledger.spend("recover", self.env.now - start)
            self._note(f"checkpoint {self.checkpoints} snapshot at step {step}")
            self._persisting = self.env.process(self._persist(self.checkpoints))
        else:
            yield from self._wait("recover", self.job.ckpt_write_s, f"checkpoint {self.checkpoints} written")
            self._persisted.append(self.env.now)

    def _persist(self, n: int) -> Proc:
        yield self.env.timeout(self.job.ckpt_write_s)
        self._persisted.append(self.env.now)
        self._note(f"checkpoint {n} persisted")

    def run(self) -> ReplicaResult:
        proc = self.env.process(self._job())
        self.env.run(until=proc)
        end = self.env.now
        led = self.ledger
        led.stop_all(end, self.sc.cost.min_billed)
        self._bill_storage(end)
        led.money["egress"] += self.sc.cost.egress / 1e9 * self.sc.cost.egress_usd_per_gb
        useful = led.time["compute"] * self.job.world / 3600.0
        billed = led.billed_node_seconds * self.job.gpus_per_node / 3600.0
        return ReplicaResult(self.index, end, dict(led.time), dict(led.money), useful, billed, 0, self.checkpoints)

    def _bill_storage(self, end: float) -> None:
        """Each persisted checkpoint is kept until ``keep_last`` newer ones exist, or the job ends."""
        keep = self.sc.checkpoint.keep_last
        gb = self.job.ckpt_bytes / 1e9
        times = [t for t in self._persisted if t <= end]
        for i, t in enumerate(times):
            until = times[i + keep] if i + keep < len(times) else end
            self.ledger.store(gb, until - t, self.sc.cost.storage_usd_per_gb_month)
