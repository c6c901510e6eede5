"""Run-level SimPy model of one replica: queue, boot, blocks of training, checkpoints, reclaims, billing.

The job moves in blocks (several epochs, or up to the next outside event: a spot notice, a
reclaim, a replacement joining; see ``blocks``) and, inside a block, in segments between
checkpoints: n steps take Normal(n·μ, n·σ²) from the ``StepModel`` (two-level mode) or are
simulated step by step by the micro model (``fidelity: step``). Spot reclaim times are drawn
when a node starts, so every block knows how far it may run; a reclaim cuts it, work after the
last persisted checkpoint is lost (``restore``), and a recovery strategy brings the world back
(``recovery``). The replica reads only its ``RunSpec``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from hsisim.sim import blocks
from hsisim.sim.cluster import Cluster, Node
from hsisim.sim.ledger import Ledger
from hsisim.sim.policy import every_steps
from hsisim.sim.records import ReplicaResult
from hsisim.sim.recovery import STRATEGIES, Restart
from hsisim.sim.restore import Ckpt, RestorePoints
from hsisim.sim.sources import StepSource, StepwiseSource, TwoLevelSource
from hsisim.sim.spec import Job, RunSpec
from hsisim.sim.stepmodel import StepModel
from hsisim.sim.streams import Streams
from hsisim.sim.trace import Trace

Proc = Generator[simpy.Event, Any, Any]
Worlds = Callable[[int], tuple[Job, StepModel]]  # active node count → (job, step model)
# Epochs planned in one block by the two-level source: an epoch boundary only adds the loader's
# epoch-start transient, so several epochs fit one vectorised block (fewer Python-level events).
EPOCHS_PER_BLOCK = 16
# A replica that needs more phases and blocks than this is stopped and counted unfinished: a guard
# against configurations whose work estimate was wrong (montecarlo.workload refuses the known ones).
MAX_EVENTS = 100_000


@dataclass(frozen=True)
class Loss:
    time: float
    nodes: list[Node]
    correlated: bool


class Replica:
    """One run of the job; ``run()`` returns its ``ReplicaResult``."""

    def __init__(self, spec: RunSpec, model: StepModel, seed: np.random.SeedSequence, index: int,
                 log: list[tuple[float, str]] | None = None, worlds: Worlds | None = None,
                 trace: Trace | None = None) -> None:
        self.spec, self.job, self.index, self.log, self.trace = spec, spec.job, index, log, trace
        self.worlds = worlds or (lambda n: (spec.job, model))
        self.streams = Streams.spawn(seed)
        self.env = simpy.Environment()
        self.ledger = Ledger()
        self.cluster = Cluster(spec.job, spec.spot, spec.billing.min_billed_s, self.streams.lifetimes,
                               self.streams.correlated, self.streams.trace, self.streams.availability)
        self.every = every_steps(spec.checkpoint, spec.job, model, spec.spot)
        self.restore = RestorePoints()
        self.recovery: Restart = STRATEGIES[spec.spot.recovery if spec.spot else "restart"](self)
        self.checkpoints = self.interruptions = self.switches = 0  # switches: moves between spot and on-demand
        self.fell_back = self.finished = False
        self.started_at = 0.0  # when capacity was granted (the end of the queue wait)
        self.cold = True  # the next block starts with an empty loader (first epoch / after a restart)
        self._noticed = math.nan  # the reclaim whose notice was already handled
        self._events = 0
        self.set_world(spec.job.nodes)

    # -- shared phases (recovery strategies use these) ----------------------------------------
    def note(self, what: str, t: float | None = None) -> None:
        if self.log is not None:
            self.log.append((self.env.now if t is None else t, what))

    def set_world(self, nodes: int) -> None:
        self.active_nodes = nodes
        job, model = self.worlds(nodes)
        self.cur_job, self.cur_model = job, model
        self.source: StepSource = StepwiseSource(job, self.streams.steps) if self.spec.fidelity == "step" \
            else TwoLevelSource(model, self.streams.steps)

    def spend(self, term: str, t0: float, t1: float, up_category: str, boot_category: str = "overhead",
              what: str = "") -> None:
        if self.trace is not None:
            self.trace.phase(term, what, t0, t1, self.cluster.alive())
        self.ledger.add_time(term, t1 - t0)
        self.ledger.add_money(up_category, self.cluster.cost(t0, t1, up=True))
        self.ledger.add_money(boot_category, self.cluster.cost(t0, t1, up=False))

    def advance(self, term: str, seconds: float, what: str, up_category: str | None = None,
                boot_category: str = "overhead") -> Proc:
        """Spend ``seconds`` on a non-training phase; return the ``Loss`` that cut it short, if any."""
        now = self.env.now
        self._events += 1
        seconds = min(seconds, max(0.0, self.spec.max_wall_s - now))  # a wait never runs past max_wall
        t_loss, nodes, corr = self.cluster.next_loss(self.env.now)
        end = now + seconds
        if t_loss < end:
            yield self.env.timeout(t_loss - now)
            self.spend(term, now, t_loss, up_category or term, boot_category, what)
            self.cluster.consume(corr, t_loss)
            return Loss(t_loss, nodes, corr)
        yield self.env.timeout(seconds)
        self.spend(term, now, end, up_category or term, boot_category, what)
        self.note(what)
        return None

    def give_up(self) -> bool:
        return self.env.now >= self.spec.max_wall_s or self._events > MAX_EVENTS

    def end_nodes(self, nodes: list[Node], t: float, reclaimed: bool) -> None:
        for n in nodes:
            if n.end is not None:
                continue
            billed, extra = self.cluster.terminate(n, t)
            self.ledger.billed_node_seconds += billed
            self.ledger.add_money("overhead", extra)
            if n.spot:
                self.ledger.spot_node_seconds += t - n.start
            else:
                self.ledger.on_demand_node_seconds += t - n.start
        if reclaimed:
            self.interruptions += len(nodes)

    def holders(self) -> tuple[int, ...]:
        """Node ranks whose local disk a checkpoint taken now lives on: rank 0's node, or every node
        when ZeRO shards the state; nothing for remote storage."""
        cp = self.spec.checkpoint
        if not cp.local:
            return ()
        if not cp.sharded:
            return (0,)
        return tuple(n.rank for n in self.cluster.alive() if n.up)

    def bring_up(self, first: bool) -> Proc:
        """Boot missing nodes, init, rendezvous, restore; retry on any loss. Returns the start step."""
        oh = self.spec.overhead
        phases = [("boot", oh.boot_s), ("image pull", oh.image_pull_s), ("init", oh.init_s)]
        while True:
            if self.give_up():
                return 0
            loss = None
            for name, secs in phases:
                loss = yield from self.advance("overhead", secs, f"{name} done", up_category="idle")
                if loss or self.give_up():
                    break
            if self.give_up():
                return 0
            if loss is None:
                for n in self.cluster.alive():
                    n.up = True
                loss = yield from self.advance("overhead", oh.rendezvous_s, "rendezvous done")
            if loss is None and first and self.job.oom_retry_s:
                loss = yield from self.advance("stall", self.job.oom_retry_s, "OOM retries done")
            restore = self.restore.newest(self.env.now)
            if loss is None and restore is not None and restore.step > 0:
                loss = yield from self.advance("recover", self.job.ckpt_restore_s, f"restored step {restore.step}")
            if loss is None:
                self.set_world(len([n for n in self.cluster.alive() if n.up]))
                self.cold = True
                resumed = self.restore.started(restore.step if restore else 0, self.ledger.snapshot(),
                                               restore.nodes if restore else ())
                return resumed.step
            yield from self.recovery.replace(loss)

    # -- the job ------------------------------------------------------------------------------
    def _job(self) -> Proc:
        spec, job = self.spec, self.job
        queue = float(spec.overhead.queue.sample(self.streams.queue)) if spec.overhead.queue is not None else 0.0
        queue = min(queue, spec.max_wall_s)
        yield self.env.timeout(queue)
        self.ledger.add_time("overhead", queue)
        if self.trace is not None:
            self.trace.phase("overhead", "queue", 0.0, queue, ())
        if self.give_up():  # never granted within simulation.max_wall: nothing was started or billed
            self.note("gave up: simulation.max_wall reached in the queue")
            return
        self.note("capacity granted")
        self.started_at = self.env.now
        yield from self.recovery.start()  # launch every node (after the capacity a trace asks for)
        if self.give_up():
            self.note("gave up: simulation.max_wall reached waiting for spot capacity")
            return
        step = yield from self.bring_up(first=True)
        while step < job.total_steps and not self.give_up():
            step, loss = yield from self._train(step)
            if loss is not None:
                step = yield from self._lost(loss)
        self.finished = step >= job.total_steps
        if self.finished:
            self.note("done")
            return
        restore = self.restore.newest(self.env.now)
        if restore is not None:  # the job is abandoned: what was not persisted is lost
            self.ledger.lose_since(restore.snap)
        self.note("gave up: " + ("simulation.max_wall reached" if self.env.now >= spec.max_wall_s
                                 else f"more than {MAX_EVENTS:,} events"))

    def _train(self, step: int) -> Proc:
        """Train until done or until an outside event; returns (step reached, Loss or None)."""
        spot, limit = self.spec.spot, self.spec.max_wall_s
        on_notice = spot is not None and self.spec.checkpoint.emergency
        while step < self.cur_job.total_steps:
            job = self.cur_job
            t_loss, nodes, corr = self.cluster.next_loss(self.env.now)
            notice_at = t_loss - spot.notice_s if on_notice and spot and self._noticed != t_loss else math.inf
            join_at = self.recovery.join_at()
            switch_at = self.recovery.switch_at(step)  # a deadline-aware move between spot and on-demand
            epoch, pos = divmod(step, job.steps_per_epoch)
            span = EPOCHS_PER_BLOCK if isinstance(self.source, TwoLevelSource) else 1
            end = min(job.total_steps, (epoch + span) * job.steps_per_epoch)
            step, cut = yield from self._block(step, end, pos == 0 or self.cold,
                                               soft=min(notice_at, join_at, switch_at), hard=min(t_loss, limit))
            if cut is None:
                continue
            if cut == "hard" and t_loss > limit:  # stopped by simulation.max_wall, not by a reclaim
                return step, None
            lost: Loss | None = None
            if cut == "soft" and switch_at <= min(notice_at, join_at):
                step, lost = yield from self.recovery.switch(step)
            elif cut == "soft" and join_at <= notice_at:
                lost = yield from self.recovery.grow(step)
            elif cut == "soft":
                self._noticed = t_loss
                yield from self._emergency(step, t_loss)
            elif self.recovery.absorbs(nodes, corr):
                # a booting replacement was reclaimed before it joined: training goes on
                self.recovery.joiner_lost(nodes, t_loss, corr)
            else:
                self.cluster.consume(corr, t_loss)
                return step, Loss(t_loss, nodes, corr)
            if lost is not None:
                return step, lost
        return step, None

    def _block(self, start: int, end: int, opens_epoch: bool, soft: float, hard: float) -> Proc:
        """Run steps [start, end) unless an outside event comes first; returns (step reached, cut)."""
        now, job, cp = self.env.now, self.cur_job, self.spec.checkpoint
        self._events += 1
        before = self.restore.persist_end
        b = blocks.plan(self.source, start=start, end=end, t0=now, opens_epoch=opens_epoch, cold=self.cold,
                        steps_per_epoch=job.steps_per_epoch,
                        cuts=blocks.checkpoint_steps(start, end, self.every, job.total_steps),
                        block_s=job.ckpt_snapshot_s if cp.asynchronous else job.ckpt_write_s,
                        persist_s=job.ckpt_write_s if cp.asynchronous else None, persist_end=before)
        self.cold = False
        p = blocks.cut(b, soft, hard)
        self.restore.persist_end = blocks.persist_end_after(b, p, before)
        yield self.env.timeout(float(p.stop - now))
        self._book(b, p)
        if self.trace is not None:
            self.trace.block(b, p, self.cluster.alive())
        if self.log is not None:
            self.log.extend(blocks.events(b, p, self.checkpoints - len(p.done) + 1, job.steps_per_epoch,
                                          sync=not cp.asynchronous))
        return p.reached, p.cut

    def _book(self, b: blocks.Block, p: blocks.Progress) -> None:
        """Book a block's time and money, its useful GPU-seconds and its checkpoints."""
        led, span = self.ledger, p.stop - b.t0
        before = led.snapshot()
        rate = self.cluster.cost(b.t0, p.stop, up=True) / span if span > 0 else 0.0
        for t, secs in p.parts.items():
            if secs:
                led.add_time(t, secs)
                led.add_money(t, secs * rate)
        led.add_money("overhead", self.cluster.cost(b.t0, p.stop, up=False))
        gpus = self.active_nodes * self.job.gpus_per_node
        led.useful_gpu_s += p.parts["compute"] * gpus
        if len(p.done) == 0:
            return
        self.checkpoints += len(p.done)
        holders = self.holders() if self.spec.spot is not None else None
        self.restore.add_block(before, b.seg, p.done, b.bounds, b.persist, rate, gpus, holders, p.stop)

    # -- interruptions ----------------------------------------------------------------------------
    def _emergency(self, step: int, t_loss: float) -> Proc:
        """On a notice: write a checkpoint if it can persist before the reclaim; training then goes on
        until the reclaim (work after the emergency checkpoint is lost if the job is not done by then)."""
        job, now = self.cur_job, self.env.now
        write = job.ckpt_write_s + (job.ckpt_snapshot_s if self.spec.checkpoint.asynchronous else 0.0)
        wait_prev = max(0.0, self.restore.persist_end - now)
        if now + wait_prev + write > t_loss:
            self.note(f"notice at step {step}: no time for an emergency checkpoint")
            return
        yield self.env.timeout(wait_prev + write)
        self.spend("recover", now, self.env.now, "recover", what="emergency checkpoint")
        self.checkpoints += 1
        self.restore.add(Ckpt(step, self.env.now, self.ledger.snapshot(), self.holders()))
        self.note(f"emergency checkpoint at step {step}")

    def _lost(self, loss: Loss) -> Proc:
        """A reclaim during training: lose the work since the restore point, then recover."""
        restore, gone = self.restore.lose(loss.time, {n.rank for n in loss.nodes})
        if gone:
            self.note("the checkpoint on local NVMe went with the node")
        # the ledger's training terms return to the restore point's; the difference was lost work
        self.ledger.lose_since(restore.snap)
        if self.trace is not None:
            self.trace.lost(loss.time, loss.nodes, restore.step)
        self.note(f"reclaimed {len(loss.nodes)} node(s); restore from step {restore.step}")
        return (yield from self.recovery.recover(loss))

    # -- result -------------------------------------------------------------------------------
    def run(self) -> ReplicaResult:
        proc = self.env.process(self._job())
        self.env.run(until=proc)
        end = self.env.now
        self.end_nodes(self.cluster.alive(), end, reclaimed=False)
        led, billing = self.ledger, self.spec.billing
        self._bill_storage(end)
        led.money["egress"] += billing.egress_bytes / 1e9 * billing.egress_usd_per_gb
        billed = led.billed_node_seconds * self.job.gpus_per_node / 3600.0
        gpus = self.job.gpus_per_node / 3600.0
        return ReplicaResult(self.index, end, dict(led.time), dict(led.money), led.useful_gpu_s / 3600.0, billed,
                             led.spot_node_seconds / 3600.0, self.interruptions, self.checkpoints, self.fell_back,
                             self.finished, led.spot_node_seconds * gpus, led.on_demand_node_seconds * gpus,
                             self.switches)

    def _bill_storage(self, end: float) -> None:
        """Each persisted checkpoint is kept until ``keep_last`` newer ones exist, or the job ends."""
        keep = self.spec.checkpoint.keep_last
        gb = self.job.ckpt_bytes / 1e9
        times = np.asarray(self.restore.persisted, dtype=float)
        times = np.sort(times[times <= end])
        if len(times) == 0:
            return
        until = np.append(times[keep:], np.full(min(keep, len(times)), end))
        self.ledger.store(gb, float((until - times).sum()), self.spec.billing.storage_usd_per_gb_month)
