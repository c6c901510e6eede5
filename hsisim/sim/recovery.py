"""Recovery strategies: how a synchronous job gets its world back after spot capacity reclaims a node.

- ``Restart``: wait for replacement capacity (the scenario's delay law), boot, init, rendezvous,
  restore the newest persisted checkpoint.
- ``FallbackOnDemand``: as ``Restart``, but after ``fallback_after`` interruptions, or a capacity
  wait over ``fallback_wait_limit``, every spot node is replaced by on-demand capacity for good.
- ``Elastic`` (TorchElastic): the survivors rendezvous, restore and go on with fewer nodes (the
  global batch kept by accumulation) while a replacement boots; when it is ready the job writes a
  blocking checkpoint and every worker restarts at full size.
- ``DeadlineSafetyNet``: as ``Restart`` while the deadline leaves slack; when it does not (see
  ``deadline``), the job moves to on-demand for good.
- ``UniformProgress``: on-demand whenever progress falls behind the straight line to the job at
  the deadline, back to spot once ahead of it by the hysteresis (the safety net underneath).

With an availability trace, a replacement waits until the trace holds the spot nodes the job
needs, instead of a draw from the delay law. Each strategy drives the replica's shared phases
(``advance``, ``bring_up``, ``end_nodes``).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import simpy

from hsisim.sim import deadline
from hsisim.sim.cluster import Node
from hsisim.sim.restore import Ckpt

if TYPE_CHECKING:
    from hsisim.sim.replica import Loss, Replica

Proc = Generator[simpy.Event, Any, Any]
# A deadline policy looks again at least this long after now when it declines to move, so that a
# decision that rounding keeps just short of its threshold never stops the clock.
TOLERANCE_S = 1e-6


class Restart:
    """Replace what was lost, then bring the whole world up again."""

    def __init__(self, replica: Replica) -> None:
        self.r = replica

    def join_at(self) -> float:
        """When a replacement will be ready to join the running job (never, here)."""
        return math.inf

    def switch_at(self, step: int) -> float:
        """When to consider moving the job between spot and on-demand while it trains (never, here)."""
        return math.inf

    def switch(self, step: int) -> Proc:
        """Move the job (or decide not to, after all); returns (step, Loss or None)."""
        yield from ()
        return step, None

    def grow(self, step: int) -> Proc:
        """Nodes that were booting join the running job; returns a Loss that cut it short, or None."""
        raise NotImplementedError(f"{type(self).__name__} never has nodes joining")
        yield  # pragma: no cover

    def absorbs(self, nodes: list[Node], correlated: bool) -> bool:
        """Whether losing ``nodes`` leaves the running job alone (booting nodes that had not joined)."""
        return False

    def joiner_lost(self, nodes: list[Node], t: float, correlated: bool) -> None:
        raise NotImplementedError(f"{type(self).__name__} never has nodes joining")

    def on_demand(self) -> bool:
        """Whether the nodes launched now are on-demand ones."""
        return self.r.fell_back

    def start(self) -> Proc:
        """Launch every node: spot ones once an availability trace holds them (unless the wait limit says
        on-demand), the rest on-demand."""
        r = self.r
        sp = r.spec.spot
        n_spot = sp.spot_nodes if sp is not None else 0
        od = self.start_on_demand()
        if not od and sp is not None and sp.availability is not None and n_spot:
            wait, limit = r.cluster.capacity_wait(r.env.now, n_spot), self.wait_limit()
            if limit is not None and wait > limit:
                wait, od = limit, True
            if wait > 0:
                yield from r.advance("overhead", wait, "spot capacity available")
        if od and n_spot:
            self.begin_on_demand()
        for rank in range(r.job.nodes):
            r.cluster.launch(r.env.now, rank, spot=rank >= r.job.nodes - n_spot and not od)

    def start_on_demand(self) -> bool:
        """Whether the job should not even start on spot (never, here)."""
        return False

    def begin_on_demand(self) -> None:
        """The job moves to (or starts on) on-demand capacity."""
        self.r.fell_back = True

    def recover(self, loss: Loss) -> Proc:
        """After the work since the restore point was lost: returns the step training restarts at."""
        yield from self.replace(loss)
        return (yield from self.r.bring_up(first=False))

    def fall_back_now(self) -> bool:
        """Move to on-demand capacity before waiting for spot (never, here)."""
        return False

    def wait_limit(self) -> float | None:
        """The longest capacity wait before moving to on-demand (none, here)."""
        return None

    def replace(self, loss: Loss) -> Proc:
        """Wait for replacement capacity (or fall back to on-demand) and launch the new nodes."""
        r = self.r
        sp = r.spec.spot
        assert sp is not None
        r.end_nodes(loss.nodes, loss.time, reclaimed=True)
        missing = sorted({n.rank for n in loss.nodes})
        while True:
            if not sp.bill_survivors:
                for n in r.cluster.alive():
                    missing.append(n.rank)
                r.end_nodes(r.cluster.alive(), r.env.now, reclaimed=False)
            fallback = self.fall_back_now()
            if not fallback and (sp.replacement is not None or sp.availability is not None):
                wait = self.capacity_wait(missing)
                limit = self.wait_limit()
                if limit is not None and wait > limit:
                    wait, fallback = limit, True
                more = yield from r.advance("overhead", wait, "replacement capacity", up_category="idle")
                if r.give_up():
                    return
                if more:
                    r.end_nodes(more.nodes, more.time, reclaimed=True)
                    missing += [n.rank for n in more.nodes]
                    continue
            if fallback and not self.on_demand():
                missing += self._to_on_demand()
            for rank in sorted(set(missing)):
                r.cluster.launch(r.env.now, rank, spot=not self.on_demand())  # launched nodes are not up yet
            return

    def capacity_wait(self, missing: list[int]) -> float:
        """The wait for the capacity of ``missing`` ranks: until the availability trace holds every spot node
        the job needs, else the longest of one draw from the delay law per rank."""
        r = self.r
        sp = r.spec.spot
        assert sp is not None
        if sp.availability is None:
            assert sp.replacement is not None
            return max(float(sp.replacement.sample(r.streams.delays)) for _ in missing)
        needed = len([n for n in r.cluster.alive() if n.spot]) + len(set(missing))
        return r.cluster.capacity_wait(r.env.now, needed)

    def _to_on_demand(self) -> list[int]:
        """End every spot node; returns their ranks (to be relaunched on-demand)."""
        r = self.r
        spot_ranks = [n.rank for n in r.cluster.alive() if n.spot]
        r.end_nodes([n for n in r.cluster.alive() if n.spot], r.env.now, reclaimed=False)
        self.begin_on_demand()
        r.switches += 1
        r.note("falling back to on-demand")
        return spot_ranks


class FallbackOnDemand(Restart):
    """Restart on spot until the interruptions or a capacity wait say to move to on-demand."""

    def fall_back_now(self) -> bool:
        sp = self.r.spec.spot
        assert sp is not None
        return sp.fallback_after is not None and self.r.interruptions >= sp.fallback_after

    def wait_limit(self) -> float | None:
        sp = self.r.spec.spot
        assert sp is not None
        return sp.fallback_wait_limit_s


class Elastic(Restart):
    """Continue on the survivors; grow back when the replacement is ready."""

    def __init__(self, replica: Replica) -> None:
        super().__init__(replica)
        self.joining: tuple[float, Node] | None = None  # a replacement that will join, and when

    def join_at(self) -> float:
        return self.joining[0] if self.joining else math.inf

    def recover(self, loss: Loss) -> Proc:
        r = self.r
        survivors = len([n for n in r.cluster.alive() if n.up]) - len([n for n in loss.nodes if n.up])
        if survivors <= 0:
            return (yield from super().recover(loss))
        r.end_nodes(loss.nodes, loss.time, reclaimed=True)
        yield from r.advance("overhead", r.spec.overhead.rendezvous_s, "rendezvous (shrink)")
        restore = r.restore.resume
        assert restore is not None
        if restore.step > 0:
            yield from r.advance("recover", r.cur_job.ckpt_restore_s, "restored (shrink)")
        r.set_world(len([n for n in r.cluster.alive() if n.up]))
        r.cold = True
        resumed = r.restore.started(restore.step, r.ledger.snapshot(), restore.nodes)
        self.request_replacement(loss.nodes[0].rank)
        return resumed.step

    def absorbs(self, nodes: list[Node], correlated: bool) -> bool:
        return all(not n.up for n in nodes) and not correlated

    def joiner_lost(self, nodes: list[Node], t: float, correlated: bool) -> None:
        """The booting replacement was reclaimed before it joined: training goes on, another is requested."""
        r = self.r
        r.cluster.consume(correlated, t)
        r.end_nodes(nodes, t, reclaimed=True)
        self.request_replacement(nodes[0].rank)

    def request_replacement(self, rank: int) -> None:
        """A replacement node is granted after the capacity wait, boots, then joins."""
        r = self.r
        sp = r.spec.spot
        assert sp is not None
        if sp.availability is not None:  # until the trace holds one more spot node than are running
            wait = r.cluster.capacity_wait(r.env.now, len([n for n in r.cluster.alive() if n.spot]) + 1)
        else:
            wait = float(sp.replacement.sample(r.streams.delays)) if sp.replacement is not None else 0.0
        oh = r.spec.overhead
        node = r.cluster.launch(r.env.now + wait, rank, spot=True)
        self.joining = (r.env.now + wait + oh.boot_s + oh.image_pull_s + oh.init_s, node)

    def grow(self, step: int) -> Proc:
        """A replacement is ready; checkpoint, rendezvous, restore, continue at full size.

        TorchElastic restarts every worker on a membership change, so the job writes a blocking
        checkpoint first and every worker restores from it.
        """
        r = self.r
        assert self.joining is not None
        _, node = self.joining
        self.joining = None
        now = r.env.now
        yield r.env.timeout(r.cur_job.ckpt_write_s)
        r.spend("recover", now, r.env.now, "recover")
        r.checkpoints += 1
        r.restore.persisted.append(r.env.now)
        node.up = True
        yield from r.advance("overhead", r.spec.overhead.rendezvous_s, "rendezvous (grow)")
        yield from r.advance("recover", r.cur_job.ckpt_restore_s, "restored (grow)")
        r.set_world(len([n for n in r.cluster.alive() if n.up]))
        r.cold = True
        r.restore.regrouped(step, r.ledger.snapshot(), r.holders())


class DeadlineSafetyNet(Restart):
    """Restart on spot while the deadline leaves slack; when it does not, move to on-demand for good.

    The slack (``deadline.DeadlineClock.slack``) shrinks while the job waits, restarts or trains
    past its last restore point. At a reclaim, a capacity wait is cut where the slack runs out;
    while training, the job stops at the next step boundary once it has, writes a checkpoint and
    moves. On on-demand nothing interrupts the job, so it takes no more periodic checkpoints.
    """

    def __init__(self, replica: Replica) -> None:
        super().__init__(replica)
        job, model = replica.worlds(replica.spec.job.nodes)
        self.clock = deadline.clock(replica.spec, job, model)
        self.spot_every = replica.every
        self.for_good = False

    def on_demand(self) -> bool:
        return self.for_good

    def restore_step(self) -> int:
        newest = self.r.restore.newest(self.r.env.now)
        return newest.step if newest is not None else 0

    def slack(self, step: int | None = None) -> float:
        return self.clock.slack(self.r.env.now, self.restore_step() if step is None else step)

    def start_on_demand(self) -> bool:
        return self.slack(0) <= 0

    def fall_back_now(self) -> bool:
        return self.slack() <= 0

    def wait_limit(self) -> float | None:
        return max(0.0, self.slack())

    def begin_on_demand(self) -> None:
        super().begin_on_demand()
        self.for_good = True
        self.r.every = None  # nothing interrupts on-demand nodes: no periodic checkpoints

    def wants_switch(self, step: int) -> bool:
        """Whether to move now (one predicate for ``switch_at`` and ``switch``, so they never disagree)."""
        return not self.on_demand() and self.slack() <= 0

    def switch_at(self, step: int) -> float:
        if self.on_demand():
            return math.inf
        if self.wants_switch(step):
            return self.r.env.now
        # the slack shrinks by at most one second per second: look again when it may have run out
        return self.r.env.now + max(TOLERANCE_S, self.slack())

    def switch(self, step: int) -> Proc:
        if not self.wants_switch(step):  # e.g. a checkpoint persisted meanwhile: slack again
            return step, None
        lost = yield from self._checkpoint(step)
        if lost is not None:
            return step, lost
        self.for_good = True
        return (yield from self._move_to_on_demand()), None

    def _checkpoint(self, step: int) -> Proc:
        """A blocking checkpoint at ``step`` (after any persist in progress) so that a move loses no work;
        returns the Loss that cut it short, or None."""
        r = self.r
        job, now = r.cur_job, r.env.now
        newest = r.restore.newest(now)
        if newest is not None and newest.step >= step:
            return None
        write = job.ckpt_write_s + (job.ckpt_snapshot_s if r.spec.checkpoint.asynchronous else 0.0)
        wait = max(0.0, r.restore.persist_end - now)
        lost = yield from r.advance("recover", wait + write, f"checkpoint at step {step} before a move")
        if lost is None:
            r.checkpoints += 1
            r.restore.add(Ckpt(step, r.env.now, r.ledger.snapshot(), r.holders()))
        return lost

    def _move_to_on_demand(self) -> Proc:
        """End the spot nodes, launch on-demand ones in their place, bring the world up; returns the start step."""
        r = self.r
        spot = [n for n in r.cluster.alive() if n.spot]
        r.end_nodes(spot, r.env.now, reclaimed=False)
        self.begin_on_demand()
        r.switches += 1
        r.note("moving to on-demand")
        for n in spot:
            r.cluster.launch(r.env.now, n.rank, spot=False)
        return (yield from r.bring_up(first=False))


class UniformProgress(DeadlineSafetyNet):
    """On-demand while progress is behind the line to the job at the deadline; back to spot once ahead of it
    by the hysteresis (spot nodes boot while on-demand trains, and take over at a checkpoint). The safety
    net stays underneath: when the slack runs out, on-demand for good."""

    def __init__(self, replica: Replica) -> None:
        super().__init__(replica)
        self.od = False
        self.joining: tuple[float, list[Node]] | None = None  # spot nodes booting to take over, and when

    def on_demand(self) -> bool:
        return self.od

    def _ahead(self, step: int) -> float:
        return self.clock.ahead_s(self.r.env.now, self.r.started_at, step)

    def start_on_demand(self) -> bool:
        self.for_good = self.slack(0) <= 0
        return self.for_good

    def fall_back_now(self) -> bool:
        if self.slack() <= 0:
            self.for_good = True
        return self.for_good or self._ahead(self.restore_step()) < 0

    def wait_limit(self) -> float | None:
        slope = self.clock.slope(self.r.started_at)
        until_behind = self._ahead(self.restore_step()) / slope if slope > 0 else math.inf
        return max(0.0, min(self.slack(), until_behind))

    def begin_on_demand(self) -> None:
        self.od = True
        self.r.fell_back = True
        self.r.every = None

    def join_at(self) -> float:
        return self.joining[0] if self.joining else math.inf

    def wants_switch(self, step: int) -> bool:
        if not self.od:
            return super().wants_switch(step)
        sp = self.r.spec.spot
        assert sp is not None
        return (not self.for_good and self.joining is None and self._ahead(step) >= self.clock.hysteresis_s
                and self.slack(step) > 0 and self.r.cluster.capacity_wait(self.r.env.now, sp.spot_nodes) == 0)

    def switch_at(self, step: int) -> float:
        if not self.od:
            return super().switch_at(step)
        if self.slack(step) <= 0:
            self.for_good = True
        slope = self.clock.slope(self.r.started_at)
        if self.for_good or self.joining or slope >= 1:
            return math.inf
        if self.wants_switch(step):
            return self.r.env.now
        # on on-demand, progress gains on the line at (1 − slope) per second
        t = self.r.env.now + max(TOLERANCE_S, (self.clock.hysteresis_s - self._ahead(step)) / (1 - slope))
        sp = self.r.spec.spot
        assert sp is not None
        return t + self.r.cluster.capacity_wait(t, sp.spot_nodes)

    def switch(self, step: int) -> Proc:
        if not self.od:
            return (yield from super().switch(step))
        r = self.r
        sp = r.spec.spot
        assert sp is not None
        if not self.wants_switch(step):
            return step, None
        first = r.job.nodes - sp.spot_nodes
        wait = max((float(sp.replacement.sample(r.streams.delays)) for _ in range(sp.spot_nodes)), default=0.0) \
            if sp.replacement is not None and sp.availability is None else 0.0
        nodes = [r.cluster.launch(r.env.now + wait, rank, spot=True) for rank in range(first, r.job.nodes)]
        self.joining = (r.env.now + wait + r.spec.overhead.start_s, nodes)
        r.note("ahead of the line: spot nodes launched to take over")
        return step, None

    def absorbs(self, nodes: list[Node], correlated: bool) -> bool:
        return self.joining is not None and all(not n.up for n in nodes)

    def joiner_lost(self, nodes: list[Node], t: float, correlated: bool) -> None:
        self.r.cluster.consume(correlated, t)
        self._cancel(nodes, t)

    def _cancel(self, lost: list[Node], t: float) -> None:
        """Spot nodes were reclaimed before they took over: end the others too; on-demand goes on."""
        r = self.r
        assert self.joining is not None
        r.end_nodes(lost, t, reclaimed=True)
        r.end_nodes([n for n in self.joining[1] if n.end is None], t, reclaimed=False)
        self.joining = None
        r.note("spot nodes reclaimed before they took over: staying on on-demand")

    def grow(self, step: int) -> Proc:
        """The spot nodes are ready: checkpoint on on-demand, end it, rendezvous and restore on spot."""
        r = self.r
        assert self.joining is not None
        nodes = self.joining[1]
        lost = yield from self._checkpoint(step)
        if lost is not None:  # only the booting spot nodes can be reclaimed here
            self._cancel(lost.nodes, lost.time)
            return None
        self.joining = None
        ranks = {n.rank for n in nodes}
        r.end_nodes([n for n in r.cluster.alive() if not n.spot and n.rank in ranks], r.env.now, reclaimed=False)
        for n in nodes:
            n.up = True
        self.od = False
        r.every = self.spot_every
        r.switches += 1
        r.note("back on spot")
        lost = yield from r.advance("overhead", r.spec.overhead.rendezvous_s, "rendezvous (back on spot)")
        if lost is None:
            lost = yield from r.advance("recover", r.cur_job.ckpt_restore_s, "restored (back on spot)")
        if lost is not None:
            return lost
        r.set_world(len([n for n in r.cluster.alive() if n.up]))
        r.cold = True
        r.restore.regrouped(step, r.ledger.snapshot(), r.holders())
        return None


STRATEGIES: dict[str, type[Restart]] = {"restart": Restart, "fallback_on_demand": FallbackOnDemand,
                                        "elastic": Elastic, "deadline_safety_net": DeadlineSafetyNet,
                                        "uniform_progress": UniformProgress}
