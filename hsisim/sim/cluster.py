"""The nodes of one replica: their lifetimes (spot), their roles, and what they cost."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hsisim.sim.spec import Job, SpotSetup


@dataclass
class Node:
    rank: int  # node rank: 0 holds rank 0 (and a zero-stage-0 local checkpoint)
    spot: bool
    start: float  # billing starts (boot begins)
    reclaim: float  # when spot capacity takes it back (inf: never)
    up: bool = False  # booted and part of, or ready for, the training world
    end: float | None = None


class Cluster:
    """Nodes with their own interruption clocks, correlated reclaim events, and per-node prices."""

    def __init__(self, job: Job, spot: SpotSetup | None, min_billed_s: float, life_seed: np.random.SeedSequence,
                 rng_corr: np.random.Generator, rng_trace: np.random.Generator, rng_avail: np.random.Generator) -> None:
        self.job, self.spot, self.min_billed = job, spot, min_billed_s
        self.life_seed, self.rng_corr = life_seed, rng_corr
        self.nodes: list[Node] = []
        self.spot_price = job.price_usd_per_node_hour
        self.od_price = job.on_demand_usd_per_node_hour
        self.trace_offset = float(rng_trace.uniform(0, spot.trace.span)) if spot and spot.trace else 0.0
        self.next_correlated = self._draw_correlated(0.0)
        self.capacity = spot.availability if spot is not None else None
        self.capacity_offset = 0.0
        if spot is not None and self.capacity is not None:
            fixed = spot.availability_offset_s
            self.capacity_offset = fixed if fixed is not None else float(rng_avail.uniform(0, self.capacity.span))

    # -- capacity ------------------------------------------------------------------------------
    def _draw_correlated(self, now: float) -> float:
        rate = self.spot.correlated_rate_per_s if self.spot else 0.0
        return now + float(self.rng_corr.exponential(1 / rate)) if rate > 0 else math.inf

    def launch(self, t: float, rank: int, spot: bool) -> Node:
        """Start billing a node at ``t``; a spot node's reclaim time is drawn from its lifetime law.

        Every launched node draws from its own random stream (the n-th launch of a replica always
        uses the same stream), so candidates compared with common random numbers see the same
        lifetimes node for node.
        """
        reclaim = math.inf
        (stream,) = self.life_seed.spawn(1)
        if spot:
            assert self.spot is not None
            if self.spot.lifetime is not None:
                reclaim = t + float(self.spot.lifetime.sample(np.random.default_rng(stream)))
        node = Node(rank, spot, t, reclaim)
        self.nodes.append(node)
        return node

    def alive(self) -> list[Node]:
        return [n for n in self.nodes if n.end is None]

    def next_loss(self, now: float) -> tuple[float, list[Node], bool]:
        """(time, nodes lost, correlated?) of the next reclaim among live nodes.

        Zone-wide events that fell while no node was running (e.g. during the queue wait) are skipped.
        """
        if self.next_correlated < now:  # memoryless: the next one after now, in one draw (any rate)
            self.next_correlated = self._draw_correlated(now)
        live = self.alive()
        t_node = min((n.reclaim for n in live), default=math.inf)
        if self.capacity is not None:
            t_cap, taken = self._capacity_loss(now, live)
            if t_cap < min(t_node, self.next_correlated):
                return t_cap, taken, False
        if self.next_correlated < t_node:
            victims = [n for n in live if n.spot]
            return self.next_correlated, victims, True
        return t_node, [n for n in live if n.reclaim == t_node], False

    def _capacity_loss(self, now: float, live: list[Node]) -> tuple[float, list[Node]]:
        """The next time the availability trace falls below the spot nodes holding capacity, and the nodes it
        takes: the most recently launched first (a replacement that has not started yet holds none)."""
        assert self.capacity is not None
        spot = [n for n in live if n.spot]
        bounds = [now, *sorted({n.start for n in spot if n.start > now})]
        for i, a in enumerate(bounds):
            b = bounds[i + 1] if i + 1 < len(bounds) else math.inf
            using = [n for n in spot if n.start <= a]
            if not using:
                continue
            t, level = self.capacity.next_below(self.capacity_offset, a, len(using))
            if t < b:
                newest = sorted(using, key=lambda n: (n.start, n.rank), reverse=True)
                return t, newest[:len(using) - level]
        return math.inf, []

    def capacity_wait(self, now: float, needed: int) -> float:
        """Seconds from ``now`` until the availability trace holds ``needed`` spot instances (0 without a trace)."""
        if self.capacity is None or needed <= 0:
            return 0.0
        return self.capacity.next_at_least(self.capacity_offset, now, needed) - now

    def consume(self, correlated: bool, now: float) -> None:
        if correlated:
            self.next_correlated = self._draw_correlated(now)

    # -- money ----------------------------------------------------------------------------------
    def node_cost(self, node: Node, t0: float, t1: float) -> float:
        """USD for ``node`` over [t0, t1] (clipped to its billed life)."""
        a, b = max(t0, node.start), min(t1, node.end if node.end is not None else t1)
        if b <= a:
            return 0.0
        if not node.spot:
            return self.od_price * (b - a) / 3600.0
        sp = self.spot
        if sp is not None and sp.trace is not None:
            return sp.trace.integral(self.trace_offset, a, b) * sp.trace_scale
        return self.spot_price * (b - a) / 3600.0

    def cost(self, t0: float, t1: float, up: bool | None = None) -> float:
        """USD of live nodes over [t0, t1]; ``up`` selects booted (True) or booting (False) nodes."""
        return sum(self.node_cost(n, t0, t1) for n in self.nodes
                   if (up is None or n.up == up) and (n.end is None or n.end > t0))

    def terminate(self, node: Node, t: float) -> tuple[float, float]:
        """Stop billing ``node`` at ``t``: (billed seconds, USD of the rounding and minimum charge)."""
        node.end = t
        ran = t - node.start
        billed = max(self.min_billed, math.ceil(ran - 1e-9))
        rate = self.node_cost(node, node.start, t) / ran * 3600 if ran > 0 else (
            self.od_price if not node.spot else self.spot_price)
        return billed, (billed - ran) * rate / 3600.0
