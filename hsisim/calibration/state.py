"""Which of two paces a machine holds for threads that hand each other work, and how to tell two paces apart.

On the 2-core VM calibration was developed on (December 2026), a loop whose batch build runs BLAS threads of its
own ran at one of two paces, each held for seconds to minutes: its steps fell in two groups (about 390 against
690 ms, batch 64 of 11x11 patches with a per-patch PCA, no workers). The two paces coincided
with two distances between the VM's cores: a cache line's round trip between them took about 94 or 370 ns, and a
121x200 SVD at numpy's two BLAS threads 2.97 or 7.13 ms (1 in 300 readings disagreed). A loop of a minute samples
a few of those spells; a run of hours lands at the share of time the slow one holds.

``reading`` is one look at that state: the median of a few such SVDs at numpy's own BLAS threads, about 15-35 ms,
taken where nothing else of calibration runs (between its loops). ``two`` splits readings (or a loop's steps) in
two where they fall in two groups far enough apart, at Otsu's cut on their logarithms.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

# one SVD of a patch's pixels by its bands, as a per-patch PCA runs it (11x11 pixels, 200 bands)
PIXELS, BANDS = 121, 200
SVDS = 5  # per reading: the median of these
# two groups whose medians are this many times apart, or more, are two paces (the VM's: 2.4x for the SVD, 1.7-1.8x
# for a loop's steps, 386-408 against 685-692 ms); closer ones are one pace and its noise
TWO_PACES = 1.5
FEWEST = 2  # readings on each side for a group to count: one stray reading is not a pace

_MATRIX = np.random.default_rng(0).standard_normal((PIXELS, BANDS)).astype(np.float32)


def reading() -> float:
    """The median time of ``SVDS`` SVDs of a ``PIXELS`` x ``BANDS`` matrix at numpy's own BLAS threads (seconds)."""
    times = []
    for _ in range(SVDS):
        t0 = time.perf_counter()
        np.linalg.svd(_MATRIX, full_matrices=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def two(values: list[float]) -> list[bool] | None:
    """Which of ``values`` (positive) belong to the slower of two groups, where they fall in two: the cut that
    best separates their logarithms (Otsu's: the largest between-group variance), between unequal values, with
    ``FEWEST`` or more on each side and the groups' medians ``TWO_PACES`` times apart or more. None where they
    do not (one pace, or too few readings). Where the best cut leaves fewer than ``FEWEST`` on a side, those few are
    strays: the cut is sought again without them (one reading of 9 s beside steps of 0.39 and 0.69 s would otherwise
    hide the two paces), and they then fall on the side of the cut they lie on."""
    order = sorted(values)
    while len(order) >= 2 * FEWEST:
        cut = _otsu(order)
        if cut == 0:
            return None
        if cut < FEWEST:
            order = order[cut:]
        elif len(order) - cut < FEWEST:
            order = order[:cut]
        else:
            if statistics.median(order[cut:]) < TWO_PACES * statistics.median(order[:cut]):
                return None
            threshold = order[cut]
            return [v >= threshold for v in values]
    return None


def _otsu(order: list[float]) -> int:
    """The cut in sorted ``order`` (the index of the slower group's first) that best separates their logarithms,
    between unequal values; 0 where all are equal."""
    logs = [math.log(v) for v in order]
    n, best, cut = len(logs), 0.0, 0
    total, below = sum(logs), 0.0
    for i in range(1, n):
        below += logs[i - 1]
        if order[i] == order[i - 1]:
            continue
        m0, m1 = below / i, (total - below) / (n - i)
        between = i * (n - i) * (m0 - m1) ** 2
        if between > best:
            best, cut = between, i
    return cut
