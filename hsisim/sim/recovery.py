"""Recovery strategies: how a synchronous job gets its world back after spot capacity reclaims a node.

- ``Restart``: wait for replacement capacity (the scenario's delay law), boot, init, rendezvous,
  restore the newest persisted checkpoint.
- ``FallbackOnDemand``: as ``Restart``, but after ``fallback_after`` interruptions, or a capacity
  wait over ``fallback_wait_limit``, every spot node is replaced by on-demand capacity for good.
- ``Elastic`` (TorchElastic): the survivors rendezvous, restore and go on with fewer nodes (the
  global batch kept by accumulation) while a replacement boots; when it is ready the job writes a
  blocking checkpoint and every worker restarts at full size.

Each strategy drives the replica's shared phases (``advance``, ``bring_up``, ``end_nodes``).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import simpy

from hsisim.sim.cluster import Node

if TYPE_CHECKING:
    from hsisim.sim.replica import Loss, Replica

Proc = Generator[simpy.Event, Any, Any]


class Restart:
    """Replace what was lost, then bring the whole world up again."""

    def __init__(self, replica: Replica) -> None:
        self.r = replica

    def join_at(self) -> float:
        """When a replacement will be ready to join the running job (never, here)."""
        return math.inf

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
            if not fallback and sp.replacement is not None:
                wait = max(float(sp.replacement.sample(r.streams.delays)) for _ in missing)
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
            if fallback and not r.fell_back:
                missing += self._to_on_demand()
            for rank in sorted(set(missing)):
                r.cluster.launch(r.env.now, rank, spot=not r.fell_back)  # launched nodes are not up yet
            return

    def _to_on_demand(self) -> list[int]:
        """End every spot node for good; returns their ranks (to be relaunched on-demand)."""
        r = self.r
        r.fell_back = True
        spot_ranks = [n.rank for n in r.cluster.alive() if n.spot]
        r.end_nodes([n for n in r.cluster.alive() if n.spot], r.env.now, reclaimed=False)
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

    def request_replacement(self, rank: int) -> None:
        """A replacement node is granted after the capacity wait, boots, then joins."""
        r = self.r
        sp = r.spec.spot
        assert sp is not None
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


STRATEGIES: dict[str, type[Restart]] = {"restart": Restart, "fallback_on_demand": FallbackOnDemand,
                                        "elastic": Elastic}
