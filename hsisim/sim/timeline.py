"""The timeline of one block of training: segments, checkpoint writes, background persists."""

from __future__ import annotations

import math

import numpy as np


def timeline(t0: float, dur: np.ndarray, is_ck: np.ndarray, block: float, persist_s: float | None,
             persist_end: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """(segment ends, checkpoint ends, blocked seconds, persist times, last persist end).

    Segment i trains for ``dur[i]`` and, where ``is_ck[i]``, then blocks for ``block`` seconds (the
    write when sync, the snapshot when async). ``persist_s`` is the background persist of an async
    checkpoint (None when sync); the next snapshot waits for the previous persist, which may have
    started in an earlier block (``persist_end``).
    """
    persist = np.full(len(dur), np.nan)
    blocked = np.where(is_ck, block, 0.0)
    ck_end = t0 + np.cumsum(dur + blocked)
    seg_end = ck_end - blocked
    idx = np.flatnonzero(is_ck)
    if len(idx) == 0:
        return seg_end, ck_end, blocked, persist, persist_end
    if persist_s is None:
        persist[idx] = ck_end[idx]
        return seg_end, ck_end, blocked, persist, persist_end
    # a snapshot waits for the persist its predecessor started as it ended (the first, for the one
    # still running at t0): it waits for whatever part of it the training since then did not cover
    trained = np.diff(np.concatenate(([0.0], np.cumsum(dur)[idx])))
    ready = np.concatenate(([persist_end - t0], np.full(len(idx) - 1, persist_s)))
    wait = np.maximum(ready - trained, 0.0)
    if np.any(wait > 0):
        blocked[idx] += wait
        ck_end = t0 + np.cumsum(dur + blocked)
        seg_end = ck_end - blocked
    persist[idx] = ck_end[idx] + persist_s
    return seg_end, ck_end, blocked, persist, float(persist[idx[-1]])


def step_boundary(t: float, t0: float, ns: np.ndarray, dur: np.ndarray, seg_end: np.ndarray,
                  ck_end: np.ndarray) -> float:
    """The first moment at or after ``t`` when no step or checkpoint is in progress."""
    if t <= t0:
        return t0
    j = int(np.searchsorted(ck_end, t, side="left"))
    seg_start = float(ck_end[j - 1]) if j > 0 else t0
    if t > seg_end[j]:  # inside a checkpoint write: let it finish
        return float(ck_end[j])
    step = float(dur[j]) / ns[j] if ns[j] else 0.0
    k = math.ceil((t - seg_start) / step - 1e-9) if step > 0 else 0
    return min(float(seg_end[j]), seg_start + k * step)
