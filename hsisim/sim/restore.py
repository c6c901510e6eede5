"""Restore points of one replica: which checkpoints have persisted, and where training last started.

A checkpoint is a restore point only once persisted. After a reclaim, training restarts from the
newest persisted checkpoint, else from where it last (re)started, else from step 0; a checkpoint
on a node's local disk is lost with that node. Each restore point carries the ledger as it was
when training resumed after it, so lost work can be moved to ``recover`` exactly.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from hsisim.sim.ledger import TRAINING_TERMS, Snapshot


@dataclass(frozen=True)
class Ckpt:
    step: int
    persist: float  # when it becomes a restore point
    snap: Snapshot  # the ledger when training resumed after it
    nodes: tuple[int, ...]  # node ranks whose local disks hold it (local NVMe only)


class RestorePoints:
    """Persisted checkpoints, persist times (for storage billing) and the training (re)starts."""

    def __init__(self) -> None:
        self.persist_end = -math.inf  # when the last background persist finishes
        self.persisted: list[float] = []  # persist times, in order
        self.ckpts: list[Ckpt] = []
        self.resume: Ckpt | None = None  # where training last (re)started, with the ledger then
        self.origin: Ckpt | None = None  # step 0: the restore point when no checkpoint survives

    def newest(self, t: float) -> Ckpt | None:
        """The newest checkpoint persisted by ``t``, else where training last started (None before)."""
        done = [c for c in self.ckpts if c.persist <= t]
        newest = done[-1] if done else None
        base = self.resume
        if base is None:
            return None
        return newest if newest is not None and newest.step > base.step else base

    def started(self, step: int, snap: Snapshot, nodes: tuple[int, ...]) -> Ckpt:
        """Training (re)starts at ``step`` with the ledger ``snap``."""
        self.resume = Ckpt(step, -math.inf, snap, nodes)
        if self.origin is None:
            self.origin = self.resume
        return self.resume

    def lose(self, t: float, lost_ranks: set[int]) -> tuple[Ckpt, bool]:
        """A reclaim at ``t``: (the restore point, whether a local checkpoint went with a node)."""
        del self.persisted[bisect.bisect_right(self.persisted, t):]  # persist times only grow
        restore = self.newest(t)
        assert restore is not None and self.origin is not None
        gone = bool(set(restore.nodes) & lost_ranks)
        if gone:
            self.ckpts.clear()
            restore = self.origin
        self.resume = Ckpt(restore.step, -math.inf, restore.snap, restore.nodes)
        self.ckpts = [c for c in self.ckpts if c.step <= restore.step]
        self.persist_end = -math.inf
        return restore, gone

    def add(self, ckpt: Ckpt) -> None:
        """An emergency (or grow) checkpoint, persisted at ``ckpt.persist``."""
        self.persisted.append(ckpt.persist)
        self.ckpts.append(ckpt)
        self.persist_end = ckpt.persist

    def add_block(self, before: Snapshot, seg: dict[str, np.ndarray], done: np.ndarray, bounds: np.ndarray,
                  persist: np.ndarray, rate: float, gpus: int, holders: tuple[int, ...] | None, t1: float) -> None:
        """The periodic checkpoints ``done`` of a block that started with the ledger ``before``.

        ``holders`` is None when nothing can interrupt the job (no restore point is needed).
        """
        self.persisted.extend(persist[done].tolist())
        if holders is None:
            return
        cum = {t: np.cumsum(seg[t]) for t in TRAINING_TERMS}
        for i in done[-3:]:
            times = {t: before.time[t] + float(cum[t][i]) for t in TRAINING_TERMS}
            money = {t: before.money[t] + float(cum[t][i]) * rate for t in TRAINING_TERMS}
            useful = before.useful_gpu_s + float(cum["compute"][i]) * gpus
            self.ckpts.append(Ckpt(int(bounds[i]), float(persist[i]), Snapshot(times, money, useful), holders))
        safe = [c for c in self.ckpts if c.persist <= t1]
        self.ckpts = ([safe[-1]] if safe else []) + [c for c in self.ckpts if c.persist > t1]

    def regrouped(self, step: int, snap: Snapshot, nodes: tuple[int, ...]) -> None:
        """Every worker restarted from a fresh checkpoint at ``step`` (an elastic grow)."""
        self.ckpts.clear()
        self.persist_end = -math.inf
        self.resume = Ckpt(step, -math.inf, snap, nodes)
