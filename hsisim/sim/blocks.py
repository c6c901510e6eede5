"""A block of training: up to several epochs planned at once as segments between checkpoints.

Planning is vectorised: the segment boundaries (periodic checkpoints, epoch starts, the block's
end), each segment's duration from the step source (plus the loader's epoch-start transient),
and the timeline of checkpoint writes and background persists. An outside event then cuts the
block: a soft one (a notice, a replacement ready to join) at the next step or checkpoint
boundary, a hard one (a reclaim, ``max_wall``) at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hsisim.sim.ledger import TIME_TERMS
from hsisim.sim.sources import StepSource
from hsisim.sim.stepmodel import TERMS
from hsisim.sim.timeline import step_boundary, timeline


@dataclass
class Block:
    """A planned block: segment i covers steps [starts[i], bounds[i]) and may end with a checkpoint."""

    start: int
    t0: float
    bounds: np.ndarray
    starts: np.ndarray
    is_ck: np.ndarray
    ns: np.ndarray  # steps per segment
    seg: dict[str, np.ndarray]  # seconds per term and segment
    dur: np.ndarray
    seg_end: np.ndarray
    ck_end: np.ndarray
    blocked: np.ndarray  # seconds a checkpoint blocks training after each segment
    persist: np.ndarray  # when each checkpoint becomes a restore point
    persist_end: float  # when the last persist of the whole block finishes
    opening: list[tuple[int, dict[str, float]]]  # segments that start an epoch, with its transient


@dataclass(frozen=True)
class Progress:
    """What happened of a block by ``stop``."""

    stop: float
    cut: str | None  # None (the block ran to its end), "soft" or "hard"
    parts: dict[str, float]  # seconds per time term
    reached: int  # optimizer step reached
    done: np.ndarray  # indices of the checkpoints taken


def checkpoint_steps(start: int, end: int, every: int | None, total_steps: int) -> np.ndarray:
    """Steps in (start, end] after which a periodic checkpoint is taken (never after the last)."""
    if not every:
        return np.empty(0, dtype=np.int64)
    first = (start // every + 1) * every
    last = min(end, total_steps - 1)
    return np.arange(first, last + 1, every, dtype=np.int64)


def plan(source: StepSource, *, start: int, end: int, t0: float, opens_epoch: bool, cold: bool,
         steps_per_epoch: int, cuts: np.ndarray, block_s: float, persist_s: float | None,
         persist_end: float) -> Block:
    """Plan steps [start, end): segments, their durations and the checkpoint timeline from ``t0``.

    ``opens_epoch``: the first segment starts an epoch (or the loader after a restart); ``cold``:
    its workers must start. ``block_s`` is what a checkpoint blocks (snapshot or write),
    ``persist_s`` the background persist of an async one (None when sync).
    """
    spe = steps_per_epoch
    epochs = np.arange((start // spe + 1) * spe, end, spe, dtype=np.int64)
    bounds = _sorted_union(cuts[cuts < end], epochs, np.array([end], dtype=np.int64))
    is_ck = _members(bounds, cuts)
    starts = np.concatenate(([start], bounds[:-1]))
    ns = (bounds - starts).astype(float)
    # the loader's epoch-start transient opens every segment that starts an epoch (asked for
    # first: the step-by-step source starts its loader there)
    opens = starts % spe == 0
    if opens_epoch:
        opens[0] = True
    opening: list[tuple[int, dict[str, float]]] = []
    for k in np.flatnonzero(opens):
        opening.append((int(k), source.epoch_start(cold)))
        cold = False
    seg = source.segments(ns)
    for i, ex in opening:
        for t, v in ex.items():
            seg[t][i] += v
    dur = np.sum([seg[t] for t in TERMS], axis=0)
    seg_end, ck_end, blocked, persist, last = timeline(t0, dur, is_ck, block_s, persist_s, persist_end)
    return Block(start, t0, bounds, starts, is_ck, ns, seg, dur, seg_end, ck_end, blocked, persist, last, opening)


def cut(b: Block, soft: float, hard: float) -> Progress:
    """Where an outside event stops the block, and the time and steps done by then."""
    now = b.t0
    total_end = float(b.ck_end[-1])
    stop, how = total_end, None
    if soft < total_end:
        stop, how = step_boundary(max(soft, now), now, b.ns, b.dur, b.seg_end, b.ck_end), "soft"
    if hard < stop:
        stop, how = max(now, hard), "hard"
    j = int(np.searchsorted(b.ck_end, stop, side="right")) if how else len(b.ns)
    parts = {t: 0.0 for t in TIME_TERMS}
    reached = b.start
    if j > 0:
        for t in TERMS:
            parts[t] += float(b.seg[t][:j].sum())
        parts["recover"] += float(b.blocked[:j].sum())
        reached = int(b.bounds[j - 1])
    if j < len(b.ns):
        seg_start = float(b.ck_end[j - 1]) if j > 0 else now
        if stop <= b.seg_end[j]:
            f = (stop - seg_start) / b.dur[j] if b.dur[j] > 0 else 0.0
            for t in TERMS:
                parts[t] += float(b.seg[t][j]) * f
            reached += math.floor(f * b.ns[j] + 1e-9)
        else:
            for t in TERMS:
                parts[t] += float(b.seg[t][j])
            parts["recover"] += stop - float(b.seg_end[j])
            reached = int(b.bounds[j])
    return Progress(stop, how, parts, reached, np.flatnonzero(b.is_ck[:j]))


def persist_end_after(b: Block, p: Progress, before: float) -> float:
    """When the last persist finishes: a checkpoint the cut prevented is never persisted."""
    if len(p.done) < int(b.is_ck.sum()):
        return float(b.persist[p.done[-1]]) if len(p.done) else before
    return b.persist_end


def events(b: Block, p: Progress, first_number: int, steps_per_epoch: int, sync: bool) -> list[tuple[float, str]]:
    """The event log of a block up to its stop: epoch starts, steps, checkpoints (numbered from ``first_number``)."""
    out: list[tuple[float, str]] = []
    opening = dict(b.opening)
    numbers = {int(i): first_number + k for k, i in enumerate(p.done)}
    for i in range(len(b.bounds)):
        if i in opening:
            begin = float(b.ck_end[i - 1]) if i > 0 else b.t0
            at = begin + sum(opening[i].values())
            if at <= p.stop + 1e-12:
                out.append((min(at, p.stop), f"epoch {int(b.starts[i]) // steps_per_epoch} started"))
        if b.seg_end[i] > p.stop + 1e-12:
            break
        out.append((float(b.seg_end[i]), f"step {int(b.bounds[i])}"))
        k = numbers.get(i)
        if k is None:
            continue
        if sync:
            out.append((float(b.ck_end[i]), f"checkpoint {k} written"))
        else:
            out.append((float(b.ck_end[i]), f"checkpoint {k} snapshot at step {int(b.bounds[i])}"))
            out.append((float(b.persist[i]), f"checkpoint {k} persisted"))
    return sorted(out, key=lambda e: e[0])


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
