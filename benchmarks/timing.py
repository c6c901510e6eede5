"""The benchmarks' one timer: the median of repeated calls (the machine is shared and noisy)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any], reps: int) -> tuple[float, Any]:
    """Median wall seconds of ``reps`` calls of ``fn``, and the last call's result."""
    times, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out
