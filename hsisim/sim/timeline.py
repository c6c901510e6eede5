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
    p = ck_end[idx] + persist_s
    previous = np.concatenate(([persist_end], p[:-1]))
    if np.all(previous <= seg_end[idx]):
        persist[idx] = p
        return seg_end, ck_end, blocked, persist, float(p[-1])
    # some snapshot waits for the previous persist: walk the segments one by one
    t = t0
    for i in range(len(dur)):
        t += float(dur[i])
        seg_end[i] = t
        if is_ck[i]:
            wait = max(0.0, persist_end - t)
            blocked[i] = wait + block
            t += blocked[i]
            persist_end = t + persist_s
            persist[i] = persist_end
        ck_end[i] = t
    return seg_end, ck_end, blocked, persist, persist_end


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
