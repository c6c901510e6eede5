"""The machine's pace for work whose threads wait on each other, read in about a second (imports numpy only).

    python pace.py [SECONDS]

Times batches of 64 small SVDs (11x11 pixels by 200 bands, as ``hamida_user.py``'s getitem
configurations run them) with numpy's BLAS at its default thread count, for SECONDS (default 1.0),
and prints the median batch time in milliseconds, as JSON. Such SVDs are too small to keep two
threads working: the threads hand each other work and wait for it many times a millisecond, so the
time rests on how fast the cores see each other's writes. On the 2-core development VM this read
one of two paces, about 190 ms (187-226) or about 450 ms (444-481) a batch, now and then 157-161 ms
(December 2026), each held for tens of seconds, while two independent single-thread processes kept
one pace throughout (1224-1269 loop passes per 0.5 s in every 10 s window over 2 minutes): the slow
pace is the machine's, not the process's. Both threads were busy all the time at either pace (a
whole core each). Pinned to one core, the batch took 146 ms at either moment. The two paces
coincide with two distances between the cores that ``../core_distance_check.py`` reads: a cache
line's round trip of about 94 or 370 ns, with an SVD here of 2.97 or 7.13 ms.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np

PIXELS, BANDS, BATCH = 121, 200, 64


def pace(seconds: float) -> dict[str, float]:
    rng = np.random.default_rng(0)
    patches = rng.standard_normal((BATCH, PIXELS, BANDS)).astype(np.float32)
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 2:
        t0 = time.perf_counter()
        for p in patches:
            np.linalg.svd(p, full_matrices=False)
        times.append(time.perf_counter() - t0)
    return {"batch_ms": 1e3 * statistics.median(times), "batches": len(times)}


if __name__ == "__main__":
    print(json.dumps(pace(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)))
