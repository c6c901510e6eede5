"""Run-level SimPy model of one replica: queue, boot, epochs, checkpoints, interruptions, billing.

The job moves in blocks (an epoch, or up to the next outside event: a spot notice, a reclaim, a
replacement joining) and, inside a block, in segments between checkpoints: n steps take
Normal(n·μ, n·σ²) from the ``StepModel`` (two-level mode) or are simulated step by step by the
micro model (``fidelity: step``). Spot reclaim times are drawn when a node starts, so every block
knows how far it may run; a reclaim cuts it, and work after the last persisted checkpoint is lost.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from hsisim.resolve import Job
from hsisim.scenario import Scenario
from hsisim.sim.cluster import Cluster, Node
from hsisim.sim.ledger import TIME_TERMS, TRAINING_TERMS, Ledger, Snapshot
from hsisim.sim.policy import every_steps
from hsisim.sim.records import ReplicaResult
from hsisim.sim.sources import StepSource, StepwiseSource, TwoLevelSource
from hsisim.sim.stepmodel import TERMS, StepModel
from hsisim.sim.timeline import step_boundary, timeline
from hsisim.spot import SpotSetup

Proc = Generator[simpy.Event, Any, Any]
Worlds = Callable[[int], tuple[Job, StepModel]]  # active node count → (job, step model)
# Epochs planned in one block by the two-level source: an epoch boundary only adds the loader's
# epoch-start transient, so several epochs fit one vectorised block (fewer Python-level events).
EPOCHS_PER_BLOCK = 16
# A replica that needs more phases and blocks than this is stopped and counted unfinished: a guard
# against configurations whose work estimate was wrong (montecarlo.budget refuses the known ones).
MAX_EVENTS = 100_000


@dataclass(frozen=True)
class Ckpt:
    step: int
    persist: float  # when it becomes a restore point
    snap: Snapshot  # the ledger when training resumed after it
    nodes: tuple[int, ...]  # node ranks whose local disks hold it (local NVMe only)


@dataclass(frozen=True)
class Loss:
    time: float
    nodes: list[Node]
    correlated: bool


def _sorted_union(*arrays: np.ndarray) -> np.ndarray:
    """The sorted distinct values of sorted integer arrays (np.union1d's result, without its hashing,
    which is slow for the millions of checkpoints of a checkpoint-every-step policy)."""
    merged = np.sort(np.concatenate(arrays).astype(np.int64), kind="stable")
    if len(merged) < 2:
        return merged
    return merged[np.concatenate(([True], merged[1:] != merged[:-1]))]


def _members(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """np.isin(values, sorted_set) for a sorted ``sorted_set``, by binary search."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    idx = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[idx] == values


class Replica:
    """One run of the job; ``run()`` returns its ``ReplicaResult``."""

    def __init__(self, sc: Scenario, job: Job, model: StepModel, seed: np.random.SeedSequence, index: int,
                 log: list[tuple[float, str]] | None = None, spot: SpotSetup | None = None,
                 worlds: Worlds | None = None, interval_override: float | None = None) -> None:
        self.sc, self.job, self.index, self.log, self.spot = sc, job, index, log, spot
        self.worlds = worlds or (lambda n: (job, model))
        ss = seed.spawn(6)
        self.rng_queue = np.random.default_rng(ss[0])
        self.rng_steps = np.random.default_rng(ss[1])
        self.rng_delay = np.random.default_rng(ss[4])
        self.env = simpy.Environment()
        self.ledger = Ledger()
        self.cluster = Cluster(job, spot, sc.cost.min_billed, ss[2], np.random.default_rng(ss[3]),
                               np.random.default_rng(ss[5]))
        self.every = every_steps(sc, job, model, spot, interval_override)
        self.local_ckpt = sc.checkpoint.storage == "local_nvme"
        self.checkpoints = self.interruptions = 0
        self.fell_back = False
        self.finished = False
        self._persist_end = -math.inf
        self._persisted: list[float] = []
        self._ckpts: list[Ckpt] = []
        self._resume: Ckpt | None = None  # where training last (re)started, with the ledger then
        self._origin: Ckpt | None = None  # step 0: the restore point when no checkpoint survives
        self._cold = True  # the next block starts with an empty loader (first epoch / after a restart)
        self._join: tuple[float, Node] | None = None  # elastic: a replacement that will join
        self._noticed = math.nan  # the reclaim whose notice was already handled
        self._events = 0
        self._set_world(job.nodes)

    # -- helpers ------------------------------------------------------------------------------
    def _note(self, what: str, t: float | None = None) -> None:
        if self.log is not None:
            self.log.append((self.env.now if t is None else t, what))

    def _set_world(self, nodes: int) -> None:
        self.active_nodes = nodes
        job, model = self.worlds(nodes)
        self.cur_job, self.cur_model = job, model
        self.source: StepSource = StepwiseSource(job, self.rng_steps) if self.sc.simulation.fidelity == "step" \
            else TwoLevelSource(model, self.rng_steps)

    def _spend(self, term: str, t0: float, t1: float, up_category: str, boot_category: str = "overhead") -> None:
        self.ledger.add_time(term, t1 - t0)
        self.ledger.add_money(up_category, self.cluster.cost(t0, t1, up=True))
        self.ledger.add_money(boot_category, self.cluster.cost(t0, t1, up=False))

    def _advance(self, term: str, seconds: float, what: str, up_category: str | None = None,
                 boot_category: str = "overhead") -> Proc:
        """Spend ``seconds`` on a non-training phase; return the ``Loss`` that cut it short, if any."""
        now = self.env.now
        self._events += 1
        seconds = min(seconds, max(0.0, self.sc.simulation.max_wall - now))  # a wait never runs past max_wall
        t_loss, nodes, corr = self.cluster.next_loss(self.env.now)
        end = now + seconds
        if t_loss < end:
            yield self.env.timeout(t_loss - now)
            self._spend(term, now, t_loss, up_category or term, boot_category)
            self.cluster.consume(corr, t_loss)
            return Loss(t_loss, nodes, corr)
        yield self.env.timeout(seconds)
        self._spend(term, now, end, up_category or term, boot_category)
        self._note(what)
        return None

    # -- the job ------------------------------------------------------------------------------
    def _job(self) -> Proc:
        sc, job = self.sc, self.job
        oh = sc.overhead
        queue = float(oh.queue.sample(self.rng_queue)) if oh.queue is not None else 0.0
        queue = min(queue, sc.simulation.max_wall)
        yield self.env.timeout(queue)
        self.ledger.add_time("overhead", queue)
        if self._give_up():  # never granted within simulation.max_wall: nothing was started or billed
            self.finished = False
            self._note("gave up: simulation.max_wall reached in the queue")
            return
        self._note("capacity granted")
        n_spot = self.spot.spot_nodes if self.spot else 0
        for rank in range(job.nodes):
            self.cluster.launch(self.env.now, rank, spot=rank >= job.nodes - n_spot)
        step = yield from self._bring_up(first=True)
        while step < job.total_steps and not self._give_up():
            step, loss = yield from self._train(step)
            if loss is not None:
                step = yield from self._lost(loss)
        self.finished = step >= job.total_steps
        if self.finished:
            self._note("done")
        else:
            restore = self._restore_point(self.env.now)
            if restore is not None:  # the job is abandoned: what was not persisted is lost
                self.ledger.lose_since(restore.snap)
            self._note("gave up: " + ("simulation.max_wall reached" if self.env.now >= self.sc.simulation.max_wall
                                      else f"more than {MAX_EVENTS:,} events"))

    def _give_up(self) -> bool:
        return self.env.now >= self.sc.simulation.max_wall or self._events > MAX_EVENTS

    def _bring_up(self, first: bool) -> Proc:
        """Boot missing nodes, init, rendezvous, restore; retry on any loss. Returns the start step."""
        oh = self.sc.overhead
        phases = [("boot", oh.boot), ("image pull", oh.image_pull), ("init", oh.init)]
        while True:
            if self._give_up():
                return 0
            loss = None
            for name, secs in phases:
                loss = yield from self._advance("overhead", secs, f"{name} done", up_category="idle")
                if loss or self._give_up():
                    break
            if self._give_up():
                return 0
            if loss is None:
                for n in self.cluster.alive():
                    n.up = True
                loss = yield from self._advance("overhead", oh.rendezvous, "rendezvous done")
            if loss is None and first and self.job.oom_retry_s:
                loss = yield from self._advance("stall", self.job.oom_retry_s, "OOM retries done")
            restore = self._restore_point(self.env.now)
            if loss is None and restore is not None and restore.step > 0:
                loss = yield from self._advance("recover", self.job.ckpt_restore_s, f"restored step {restore.step}")
            if loss is None:
                self._set_world(len([n for n in self.cluster.alive() if n.up]))
                self._cold = True
                self._resume = Ckpt(restore.step if restore else 0, -math.inf, self.ledger.snapshot(),
                                    restore.nodes if restore else ())
                if self._origin is None:
                    self._origin = self._resume
                return self._resume.step
            yield from self._replace(loss)

    # -- training -----------------------------------------------------------------------------
    def _train(self, step: int) -> Proc:
        """Train until done or until an outside event; returns (step reached, Loss or None)."""
        cp = self.sc.checkpoint
        on_notice = self.spot is not None and (cp.on_notice or cp.policy == "on_notice")
        while step < self.cur_job.total_steps:
            job = self.cur_job
            t_loss, nodes, corr = self.cluster.next_loss(self.env.now)
            notice_at = t_loss - self.spot.notice_s if on_notice and self.spot and self._noticed != t_loss \
                else math.inf
            join_at = self._join[0] if self._join else math.inf
            epoch, pos = divmod(step, job.steps_per_epoch)
            span = EPOCHS_PER_BLOCK if isinstance(self.source, TwoLevelSource) else 1
            end = min(job.total_steps, (epoch + span) * job.steps_per_epoch)
            first = self._cold
            limit = self.sc.simulation.max_wall
            step, cut = yield from self._block(step, end, epoch if (pos == 0 or first) else None,
                                               soft=min(notice_at, join_at), hard=min(t_loss, limit))
            if cut is None:
                continue
            if cut == "hard" and t_loss > limit:  # stopped by simulation.max_wall, not by a reclaim
                return step, None
            if cut == "soft" and join_at <= notice_at:
                yield from self._grow(step)
            elif cut == "soft":
                self._noticed = t_loss
                yield from self._emergency(step, t_loss)
            elif all(not n.up for n in nodes) and not corr:
                # a booting replacement was reclaimed before it joined: training goes on
                self.cluster.consume(corr, t_loss)
                self._end_nodes(nodes, t_loss, reclaimed=True)
                self._request_replacement(nodes[0].rank)
            else:
                self.cluster.consume(corr, t_loss)
                return step, Loss(t_loss, nodes, corr)
        return step, None

    def _block(self, start: int, end: int, epoch: int | None, soft: float, hard: float) -> Proc:
        """Run steps [start, end) (one or more epochs) unless an outside event comes first.

        A ``soft`` event (a notice, a replacement ready to join) lets the current step, or the
        checkpoint being written, finish; a ``hard`` one (a reclaim) stops everything at once.
        Returns (step reached, None | "soft" | "hard").
        """
        now, spe = self.env.now, self.cur_job.steps_per_epoch
        self._events += 1
        cuts = self._checkpoint_steps(start, end)
        epochs = np.arange((start // spe + 1) * spe, end, spe, dtype=np.int64)
        bounds = _sorted_union(cuts[cuts < end], epochs, np.array([end], dtype=np.int64))
        is_ck = _members(bounds, cuts)
        starts = np.concatenate(([start], bounds[:-1]))
        ns = (bounds - starts).astype(float)
        # the loader's epoch-start transient opens every segment that starts an epoch (asked for
        # first: the step-by-step source starts its loader there)
        opens = starts % spe == 0
        if epoch is not None:
            opens[0] = True
        excess_rows: list[tuple[int, dict[str, float]]] = []
        for k in np.flatnonzero(opens):
            excess_rows.append((int(k), self.source.epoch_start(self._cold)))
            self._cold = False
        self._cold = False
        seg = self.source.segments(ns)
        for i, ex in excess_rows:
            for t, v in ex.items():
                seg[t][i] += v
        dur = np.sum([seg[t] for t in TERMS], axis=0)
        persist_before = self._persist_end
        job = self.cur_job
        block = job.ckpt_snapshot_s if self.sc.checkpoint.async_ else job.ckpt_write_s
        seg_end, ck_end, blocked, persist, self._persist_end = timeline(
            now, dur, is_ck, block, job.ckpt_write_s if self.sc.checkpoint.async_ else None, self._persist_end)
        total_end = float(ck_end[-1])
        stop, cut = total_end, None
        if soft < total_end:
            stop, cut = step_boundary(max(soft, now), now, ns, dur, seg_end, ck_end), "soft"
        if hard < stop:
            stop, cut = max(now, hard), "hard"
        j = int(np.searchsorted(ck_end, stop, side="right")) if cut else len(ns)
        parts = {t: 0.0 for t in TIME_TERMS}
        reached = start
        if j > 0:
            for t in TERMS:
                parts[t] += float(seg[t][:j].sum())
            parts["recover"] += float(blocked[:j].sum())
            reached = int(bounds[j - 1])
        if j < len(ns):
            seg_start = float(ck_end[j - 1]) if j > 0 else now
            if stop <= seg_end[j]:
                f = (stop - seg_start) / dur[j] if dur[j] > 0 else 0.0
                for t in TERMS:
                    parts[t] += float(seg[t][j]) * f
                reached += math.floor(f * ns[j] + 1e-9)
            else:
                for t in TERMS:
                    parts[t] += float(seg[t][j])
                parts["recover"] += stop - float(seg_end[j])
                reached = int(bounds[j])
        done = np.flatnonzero(is_ck[:j])
        if len(done) < int(is_ck.sum()):  # persists of checkpoints that were never taken do not happen
            self._persist_end = float(persist[done[-1]]) if len(done) else persist_before
        yield self.env.timeout(float(stop - now))
        self._book(now, stop, parts, seg, done, bounds, persist)
        if self.log is not None:
            self._log_block(now, starts, excess_rows, bounds, seg_end, ck_end, persist, done, stop)
        return reached, cut

    def _book(self, t0: float, t1: float, parts: dict[str, float], seg: dict[str, np.ndarray], done: np.ndarray,
              bounds: np.ndarray, persist: np.ndarray) -> None:
        led, span = self.ledger, t1 - t0
        before = led.snapshot()
        money_up = self.cluster.cost(t0, t1, up=True)
        rate = money_up / span if span > 0 else 0.0
        for t, secs in parts.items():
            if secs:
                led.add_time(t, secs)
                led.add_money(t, secs * rate)
        led.add_money("overhead", self.cluster.cost(t0, t1, up=False))
        gpus = self.active_nodes * self.job.gpus_per_node
        led.useful_gpu_s += parts["compute"] * gpus
        if len(done) == 0:
            return
        self.checkpoints += len(done)
        self._persisted.extend(persist[done].tolist())
        if self.spot is None:
            return
        # restore points: the ledger when training resumed after each of the last checkpoints
        holders = self._holders()
        cum = {t: np.cumsum(seg[t]) for t in TRAINING_TERMS}
        for i in done[-3:]:
            times = {t: before.time[t] + float(cum[t][i]) for t in TRAINING_TERMS}
            money = {t: before.money[t] + float(cum[t][i]) * rate for t in TRAINING_TERMS}
            useful = before.useful_gpu_s + float(cum["compute"][i]) * gpus
            self._ckpts.append(Ckpt(int(bounds[i]), float(persist[i]), Snapshot(times, money, useful), holders))
        safe = [c for c in self._ckpts if c.persist <= t1]
        self._ckpts = ([safe[-1]] if safe else []) + [c for c in self._ckpts if c.persist > t1]

    def _log_block(self, t0: float, starts: np.ndarray, excess_rows: list[tuple[int, dict[str, float]]],
                   bounds: np.ndarray, seg_end: np.ndarray, ck_end: np.ndarray, persist: np.ndarray,
                   done: np.ndarray, stop: float) -> None:
        assert self.log is not None
        events: list[tuple[float, str]] = []
        spe = self.cur_job.steps_per_epoch
        opening = dict(excess_rows)
        numbers = {int(i): self.checkpoints - len(done) + k + 1 for k, i in enumerate(done)}
        sync = not self.sc.checkpoint.async_
        for i in range(len(bounds)):
            if i in opening:
                begin = float(ck_end[i - 1]) if i > 0 else t0
                at = begin + sum(opening[i].values())
                if at <= stop + 1e-12:
                    events.append((min(at, stop), f"epoch {int(starts[i]) // spe} started"))
            if seg_end[i] > stop + 1e-12:
                break
            events.append((float(seg_end[i]), f"step {int(bounds[i])}"))
            k = numbers.get(i)
            if k is None:
                continue
            if sync:
                events.append((float(ck_end[i]), f"checkpoint {k} written"))
            else:
                events.append((float(ck_end[i]), f"checkpoint {k} snapshot at step {int(bounds[i])}"))
                events.append((float(persist[i]), f"checkpoint {k} persisted"))
        self.log.extend(sorted(events, key=lambda e: e[0]))

    def _checkpoint_steps(self, start: int, end: int) -> np.ndarray:
        """Steps in (start, end] after which a periodic checkpoint is taken (never after the last)."""
        if not self.every:
            return np.empty(0, dtype=np.int64)
        first = (start // self.every + 1) * self.every
        last = min(end, self.cur_job.total_steps - 1)
        return np.arange(first, last + 1, self.every, dtype=np.int64)

    # -- interruptions ----------------------------------------------------------------------------
    def _emergency(self, step: int, t_loss: float) -> Proc:
        """On a notice: write a checkpoint if it can persist before the reclaim; training then goes on
        until the reclaim (work after the emergency checkpoint is lost if the job is not done by then)."""
        job, now = self.cur_job, self.env.now
        write = job.ckpt_write_s + (job.ckpt_snapshot_s if self.sc.checkpoint.async_ else 0.0)
        wait_prev = max(0.0, self._persist_end - now)
        if now + wait_prev + write > t_loss:
            self._note(f"notice at step {step}: no time for an emergency checkpoint")
            return
        yield self.env.timeout(wait_prev + write)
        self._spend("recover", now, self.env.now, "recover")
        self.checkpoints += 1
        self._persisted.append(self.env.now)
        self._ckpts.append(Ckpt(step, self.env.now, self.ledger.snapshot(), self._holders()))
        self._persist_end = self.env.now
        self._note(f"emergency checkpoint at step {step}")

    def _holders(self) -> tuple[int, ...]:
        """Node ranks whose local NVMe a checkpoint taken now lives on: rank 0's node, or every
        node when ZeRO shards the state; nothing for remote storage."""
        if not self.local_ckpt:
            return ()
        if self.sc.model.zero_stage == 0:
            return (0,)
        return tuple(n.rank for n in self.cluster.alive() if n.up)

    def _restore_point(self, t: float) -> Ckpt | None:
        """The newest checkpoint persisted by ``t``, else where training last started (None before)."""
        done = [c for c in self._ckpts if c.persist <= t]
        newest = done[-1] if done else None
        base = self._resume
        if base is None:
            return None
        return newest if newest is not None and newest.step > base.step else base

    def _lost(self, loss: Loss) -> Proc:
        """A reclaim during training: lose the work since the restore point, then recover."""
        del self._persisted[bisect.bisect_right(self._persisted, loss.time):]  # persist times only grow
        restore = self._restore_point(loss.time)
        assert restore is not None and self._origin is not None
        if set(restore.nodes) & {n.rank for n in loss.nodes}:
            self._note("the checkpoint on local NVMe went with the node")
            self._ckpts.clear()
            restore = self._origin
        # the ledger's training terms return to the restore point's; the difference was lost work
        self.ledger.lose_since(restore.snap)
        self._resume = Ckpt(restore.step, -math.inf, restore.snap, restore.nodes)
        self._ckpts = [c for c in self._ckpts if c.step <= restore.step]
        self._persist_end = -math.inf
        self._note(f"reclaimed {len(loss.nodes)} node(s); restore from step {restore.step}")
        mode = self.spot.recovery if self.spot else "restart"
        survivors = len([n for n in self.cluster.alive() if n.up]) - len([n for n in loss.nodes if n.up])
        if mode == "elastic" and survivors > 0:
            return (yield from self._shrink(loss))
        yield from self._replace(loss)
        return (yield from self._bring_up(first=False))

    def _end_nodes(self, nodes: list[Node], t: float, reclaimed: bool) -> None:
        for n in nodes:
            if n.end is not None:
                continue
            billed, extra = self.cluster.terminate(n, t)
            self.ledger.billed_node_seconds += billed
            self.ledger.add_money("overhead", extra)
            if n.spot:
                self.ledger.spot_node_seconds += t - n.start
        if reclaimed:
            self.interruptions += len(nodes)

    def _replace(self, loss: Loss) -> Proc:
        """Wait for replacement capacity (or fall back to on-demand) and launch the new nodes."""
        sp = self.spot
        assert sp is not None
        self._end_nodes(loss.nodes, loss.time, reclaimed=True)
        missing = sorted({n.rank for n in loss.nodes})
        while True:
            if not sp.bill_survivors:
                for n in self.cluster.alive():
                    missing.append(n.rank)
                self._end_nodes(self.cluster.alive(), self.env.now, reclaimed=False)
            fallback = sp.recovery == "fallback_on_demand" and sp.fallback_after is not None \
                and self.interruptions >= sp.fallback_after
            if not fallback and sp.replacement is not None:
                wait = max(float(sp.replacement.sample(self.rng_delay)) for _ in missing)
                limit = sp.fallback_wait_limit_s if sp.recovery == "fallback_on_demand" else None
                if limit is not None and wait > limit:
                    wait, fallback = limit, True
                more = yield from self._advance("overhead", wait, "replacement capacity", up_category="idle")
                if self._give_up():
                    return
                if more:
                    self._end_nodes(more.nodes, more.time, reclaimed=True)
                    missing += [n.rank for n in more.nodes]
                    continue
            if fallback and not self.fell_back:
                self.fell_back = True
                spot_ranks = [n.rank for n in self.cluster.alive() if n.spot]
                self._end_nodes([n for n in self.cluster.alive() if n.spot], self.env.now, reclaimed=False)
                missing += spot_ranks
                self._note("falling back to on-demand")
            for rank in sorted(set(missing)):
                self.cluster.launch(self.env.now, rank, spot=not self.fell_back)
            for n in self.cluster.alive():
                n.up = False
            return

    def _shrink(self, loss: Loss) -> Proc:
        """Elastic: survivors rendezvous, restore and continue; a replacement is requested."""
        sp = self.spot
        assert sp is not None
        self._end_nodes(loss.nodes, loss.time, reclaimed=True)
        yield from self._advance("overhead", self.sc.overhead.rendezvous, "rendezvous (shrink)")
        restore = self._resume
        assert restore is not None
        if restore.step > 0:
            yield from self._advance("recover", self.cur_job.ckpt_restore_s, "restored (shrink)")
        self._set_world(len([n for n in self.cluster.alive() if n.up]))
        self._cold = True
        self._resume = Ckpt(restore.step, -math.inf, self.ledger.snapshot(), restore.nodes)
        self._request_replacement(loss.nodes[0].rank)
        return self._resume.step

    def _request_replacement(self, rank: int) -> None:
        """Elastic: a replacement node is granted after the capacity wait, boots, then joins."""
        sp = self.spot
        assert sp is not None
        wait = float(sp.replacement.sample(self.rng_delay)) if sp.replacement is not None else 0.0
        oh = self.sc.overhead
        node = self.cluster.launch(self.env.now + wait, rank, spot=True)
        self._join = (self.env.now + wait + oh.boot + oh.image_pull + oh.init, node)

    def _grow(self, step: int) -> Proc:
        """Elastic: a replacement is ready; checkpoint, rendezvous, restore, continue at full size.

        TorchElastic restarts every worker on a membership change, so the job writes a blocking
        checkpoint first and every worker restores from it.
        """
        assert self._join is not None
        _, node = self._join
        self._join = None
        now = self.env.now
        yield self.env.timeout(self.cur_job.ckpt_write_s)
        self._spend("recover", now, self.env.now, "recover")
        self.checkpoints += 1
        self._persisted.append(self.env.now)
        node.up = True
        yield from self._advance("overhead", self.sc.overhead.rendezvous, "rendezvous (grow)")
        yield from self._advance("recover", self.cur_job.ckpt_restore_s, "restored (grow)")
        self._set_world(len([n for n in self.cluster.alive() if n.up]))
        self._cold = True
        self._ckpts.clear()
        self._persist_end = -math.inf
        self._resume = Ckpt(step, -math.inf, self.ledger.snapshot(), self._holders())

    # -- result -------------------------------------------------------------------------------
    def run(self) -> ReplicaResult:
        proc = self.env.process(self._job())
        self.env.run(until=proc)
        end = self.env.now
        self._end_nodes(self.cluster.alive(), end, reclaimed=False)
        led = self.ledger
        self._bill_storage(end)
        led.money["egress"] += self.sc.cost.egress / 1e9 * self.sc.cost.egress_usd_per_gb
        billed = led.billed_node_seconds * self.job.gpus_per_node / 3600.0
        return ReplicaResult(self.index, end, dict(led.time), dict(led.money), led.useful_gpu_s / 3600.0, billed,
                             led.spot_node_seconds / 3600.0, self.interruptions, self.checkpoints, self.fell_back,
                             self.finished)

    def _bill_storage(self, end: float) -> None:
        """Each persisted checkpoint is kept until ``keep_last`` newer ones exist, or the job ends."""
        keep = self.sc.checkpoint.keep_last
        gb = self.job.ckpt_bytes / 1e9
        times = np.asarray(self._persisted, dtype=float)
        times = np.sort(times[times <= end])
        if len(times) == 0:
            return
        until = np.append(times[keep:], np.full(min(keep, len(times)), end))
        self.ledger.store(gb, float((until - times).sum()), self.sc.cost.storage_usd_per_gb_month)
