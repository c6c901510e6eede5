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


@dataclass(frozen=True)
class Block:
    """A stretch of training whose timeline is planned at once: its length and its terms."""

    duration: float
    parts: dict[str, float]

    def book(self, ledger: Ledger) -> None:
        for term, secs in self.parts.items():
            if secs:
                ledger.spend(term, secs)


class StepSource(Protocol):
    def epoch_start(self, epoch: int) -> dict[str, float]: ...
    def segments(self, ns: np.ndarray) -> dict[str, np.ndarray]: ...


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

    def segments(self, ns: np.ndarray) -> dict[str, np.ndarray]:
        m = self.m
        d, busy = ns * m.mu, ns * self.mu_busy
        if m.sigma > 0 or m.sigma_busy > 0:
            root = np.sqrt(ns)
            z = self.rng.standard_normal((2, len(ns)))
            d = np.maximum(d + m.sigma * root * z[0], 0.0)
            corr = m.rho * z[0] + math.sqrt(max(0.0, 1 - m.rho**2)) * z[1]
            busy = np.minimum(np.maximum(busy + m.sigma_busy * root * corr, 0.0), d)
        rest = d - busy
        comm = np.minimum(rest, ns * m.mean["comm"])
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

    def segments(self, ns: np.ndarray) -> dict[str, np.ndarray]:
        assert self.sim is not None
        traces = [self.sim.run(int(n)) for n in ns]
        return {t: np.array([getattr(tr, t).sum() for tr in traces]) for t in TERMS}


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
        self._persist_end = -math.inf  # when the last async persist completes
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
        """Train epoch by epoch: each epoch (or its remainder) is one block of segments."""
        job = self.job
        while step < job.total_steps:
            epoch, pos = divmod(step, job.steps_per_epoch)
            end = min(job.total_steps, (epoch + 1) * job.steps_per_epoch)
            block = self._block(step, end, epoch if pos == 0 else None)
            yield self.env.timeout(block.duration)
            block.book(self.ledger)
            step = end

    def _block(self, start: int, end: int, epoch: int | None) -> Block:
        """Plan steps [start, end): epoch-start excess, segments between checkpoints, checkpoints.

        Nothing outside the job can happen inside a block (no interruption in on-demand runs), so
        the block's timeline is computed at once; an interruption will cut a block short.
        """
        now = self.env.now
        events: list[tuple[float, str]] = []
        parts = {t: 0.0 for t in TIME_TERMS}
        t = now
        if epoch is not None:
            for term, secs in self.source.epoch_start(epoch).items():
                parts[term] += secs
                t += secs
            events.append((t, f"epoch {epoch} started"))
        cuts = self._checkpoint_steps(start, end)
        bounds = np.append(cuts[cuts < end], end)
        ns = np.diff(np.concatenate(([start], bounds)))
        seg = self.source.segments(ns.astype(float))
        for term, arr in seg.items():
            parts[term] += float(arr.sum())
        durations: np.ndarray = np.sum(list(seg.values()), axis=0)
        timeline = None if self.log is not None else self._fast_timeline(t, durations, len(cuts))
        if timeline is None:
            recover, t = self._slow_timeline(t, bounds, durations, len(cuts), events)
        else:
            recover, t = timeline
        parts["recover"] += recover
        if self.log is not None:
            self.log.extend(sorted(events, key=lambda e: e[0]))
        return Block(t - now, parts)

    def _slow_timeline(self, t: float, bounds: np.ndarray, durations: np.ndarray, n_ckpt: int,
                       events: list[tuple[float, str]]) -> tuple[float, float]:
        """Walk the segments one by one (and log them): (seconds blocked by checkpoints, end time)."""
        recover = 0.0
        for i, (n_end, d) in enumerate(zip(bounds, durations, strict=True)):
            t += float(d)
            events.append((t, f"step {int(n_end)}"))
            if i < n_ckpt:
                blocked = self._checkpoint(t, int(n_end), events)
                recover += blocked
                t += blocked
        return recover, t

    def _fast_timeline(self, t: float, durations: np.ndarray, n_ckpt: int) -> tuple[float, float] | None:
        """The same timeline vectorised, when no snapshot has to wait for a previous persist.

        Returns None when some snapshot would wait; the caller then walks the segments one by one.
        """
        job = self.job
        if n_ckpt == 0:
            return 0.0, t + float(durations.sum())
        async_ = self.sc.checkpoint.async_
        block = job.ckpt_snapshot_s if async_ else job.ckpt_write_s
        blocked = np.zeros(len(durations))
        blocked[:n_ckpt] = block
        ends = t + np.cumsum(durations + blocked)  # end of each segment's checkpoint, if any
        ckpt_ends = ends[:n_ckpt]
        if async_:
            seg_ends = ckpt_ends - block
            persist = ckpt_ends + job.ckpt_write_s
            previous = np.concatenate(([self._persist_end], persist[:-1]))
            if np.any(previous > seg_ends):
                return None
            self._persist_end = float(persist[-1])
            self._persisted.extend(persist.tolist())
        else:
            self._persisted.extend(ckpt_ends.tolist())
        self.checkpoints += n_ckpt
        return n_ckpt * block, float(ends[-1])

    def _checkpoint_steps(self, start: int, end: int) -> np.ndarray:
        """Steps in (start, end] after which a periodic checkpoint is taken (never after the last)."""
        if not self.every:
            return np.empty(0, dtype=np.int64)
        first = (start // self.every + 1) * self.every
        last = min(end, self.job.total_steps - 1)
        return np.arange(first, last + 1, self.every, dtype=np.int64)

    def _checkpoint(self, t: float, step: int, events: list[tuple[float, str]]) -> float:
        """Take a checkpoint at time ``t``; return the seconds it blocks training."""
        job = self.job
        self.checkpoints += 1
        k = self.checkpoints
        if not self.sc.checkpoint.async_:
            self._persisted.append(t + job.ckpt_write_s)
            events.append((t + job.ckpt_write_s, f"checkpoint {k} written"))
            return job.ckpt_write_s
        wait = max(0.0, self._persist_end - t)  # the next snapshot waits for the previous persist
        snap_end = t + wait + job.ckpt_snapshot_s
        self._persist_end = snap_end + job.ckpt_write_s
        self._persisted.append(self._persist_end)
        events.append((snap_end, f"checkpoint {k} snapshot at step {step}"))
        events.append((self._persist_end, f"checkpoint {k} persisted"))
        return wait + job.ckpt_snapshot_s

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
