"""A structured record of one replica's phases, for the timeline figure of ``hsisim report``.

A ``Replica`` given a ``Trace`` reports to it at the few places where it books time: every
non-training phase (``Replica.spend``: boot, image pull, init, rendezvous, restores, capacity
waits, blocking checkpoints), the queue, every block of training (its segments between
checkpoints with their compute / data / comm / stall split, and the checkpoint writes that
blocked training) and every loss to a reclaim (with the step training goes back to). Without a
trace the replica skips all of this: results are the same, bit for bit. Nothing here draws.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hsisim.sim.stepmodel import TERMS

if TYPE_CHECKING:
    from hsisim.sim.blocks import Block, Progress
    from hsisim.sim.cluster import Node


@dataclass(frozen=True)
class Phase:
    """Time outside training, booked to ``term``; ``nodes`` are the (rank, up) of the nodes alive then."""

    term: str
    what: str  # the replica's label: "boot done", "replacement capacity", "restored step 1200", "queue", ...
    t0: float
    t1: float
    nodes: tuple[tuple[int, bool], ...]


@dataclass(frozen=True)
class Segment:
    """Training from step ``step0`` (at ``t0``) to ``step1`` (at ``t1``) on the node ranks ``ranks``."""

    t0: float
    t1: float
    step0: int
    step1: int
    seconds: dict[str, float]  # compute, data, comm, stall on the critical path
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class Blocking:
    """A periodic checkpoint that blocked training over [t0, t1] (the write, or the async snapshot)."""

    t0: float
    t1: float
    persist: float  # when it became a restore point (nan: cut before it did)
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class Loss:
    """A reclaim at ``t`` of the node ranks ``ranks``; training goes back to ``restore_step``."""

    t: float
    ranks: tuple[int, ...]
    restore_step: int


@dataclass
class Trace:
    """What one replica did, as lists of phases, training segments, blocking checkpoints and losses."""

    phases: list[Phase] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    checkpoints: list[Blocking] = field(default_factory=list)
    losses: list[Loss] = field(default_factory=list)

    def phase(self, term: str, what: str, t0: float, t1: float, nodes: Iterable[Node]) -> None:
        if t1 > t0:
            self.phases.append(Phase(term, what, t0, t1, tuple((n.rank, n.up) for n in nodes)))

    def block(self, b: Block, p: Progress, nodes: Iterable[Node]) -> None:
        """The segments of block ``b`` up to where it stopped (``p``), as ``blocks.cut`` books them."""
        ranks = tuple(n.rank for n in nodes if n.up)
        for i in range(len(b.ns)):
            s0 = float(b.ck_end[i - 1]) if i > 0 else b.t0
            if s0 >= p.stop:
                break
            end = float(b.seg_end[i])
            s1 = min(end, p.stop)
            f = (s1 - s0) / b.dur[i] if b.dur[i] > 0 and s1 < end else 1.0
            step1 = int(b.bounds[i]) if s1 >= end else int(b.starts[i]) + math.floor(f * b.ns[i] + 1e-9)
            self.segments.append(Segment(s0, s1, int(b.starts[i]), step1,
                                         {t: float(b.seg[t][i]) * f for t in TERMS}, ranks))
            if s1 < end:
                break
            c1 = min(float(b.ck_end[i]), p.stop)
            if b.is_ck[i] and c1 > end:
                self.checkpoints.append(Blocking(end, c1, float(b.persist[i]) if c1 >= b.ck_end[i] else math.nan,
                                                 ranks))

    def lost(self, t: float, nodes: Iterable[Node], restore_step: int) -> None:
        self.losses.append(Loss(t, tuple(n.rank for n in nodes), restore_step))
