"""What goes with the machine's slow pace? The distance between its cores, read beside the work that slows (imports
nothing from hsisim).

    python benchmarks/core_distance_check.py [SECONDS] [--log FILE]

``user_loop/pace.py`` reads one of two paces for batches of small SVDs at numpy's default threads, each held for
seconds to minutes. This check reads, back to back for SECONDS (default 600), what each pace touches: the round trip
of one cache line between threads pinned to the first two cores this process may run on (``user_loop/pingpong.c``,
built here with ``cc``), the median of 20 per-patch SVDs (121 pixels by 200 bands, as ``hamida_user.py``'s getitem
configurations run them) at numpy's default BLAS threads and at one, and the median of 3 training steps of
``hamida_user.py``'s 11x11 model at batch 16, at torch's default threads and at one. Each minute it prints the range
of the round trips and the SVD's median. At the end the round trips are split in two where their logarithms part
best (``split``), the far state above and the near one below, and it prints every measure's median in each state,
how often the SVD at the default threads (split the same way) and the round trip agree on the state, and how long
the spells of each state lasted. ``--log`` appends the run, every reading kept, as one JSON line. Nothing else may
run on the machine meanwhile.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from cpu_sharing_check import _commit, _option  # the other checks' option reader and provenance
from threadpoolctl import threadpool_limits
from timing import timed

HERE = Path(__file__).resolve().parent / "user_loop"
TWO_STATES = 1.5  # the two groups' medians this many times apart or more: the round trips fall in two states
FEWEST = 3  # and each group this many readings or more (a stray reading or two is no state)
TRIPS = 50_000  # round trips a reading (about 5 ms near, about 18 ms far on the 2-core VM)
MEASURES = ("pingpong_ns", "svd_ms", "svd_1_ms", "step_ms", "step_1_ms")


def build_pingpong(where: Path) -> list[str]:
    """``pingpong.c`` compiled into ``where``, and its command for the first two cores this process may run on;
    exits with one line where there is no C compiler or fewer than two such cores."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        sys.exit("core_distance_check: this process may run on one core: there is no distance between cores to read")
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        sys.exit("core_distance_check: no C compiler (cc, gcc or clang) to build user_loop/pingpong.c")
    out = where / "pingpong"
    subprocess.run([cc, "-O2", "-pthread", str(HERE / "pingpong.c"), "-o", str(out)], check=True)
    return [str(out), str(TRIPS), str(allowed[0]), str(allowed[1])]


def median_ms(fn: Callable[[], object], n: int) -> float:
    """The median of ``n`` calls of ``fn`` in milliseconds (the benchmarks' one timer, ``timing.timed``)."""
    return 1e3 * timed(fn, n)[0]


def sampler(pingpong: list[str]) -> Callable[[], dict[str, float]]:
    """One reading of every measure."""
    sys.path.insert(0, str(HERE))
    import hamida_user as h

    rng = np.random.default_rng(0)
    pixels = rng.standard_normal((121, 200)).astype(np.float32)
    model, loss_fn = h.make_model(11), torch.nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, 30, 11, 11), torch.randint(0, 16, (16,))
    threads = torch.get_num_threads()

    def svd() -> None:
        np.linalg.svd(pixels, full_matrices=False)

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    def read() -> dict[str, float]:
        done = subprocess.run(pingpong, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"core_distance_check: {done.stderr.strip() or 'pingpong failed'}")
        ns = float(done.stdout)
        r = {"pingpong_ns": ns, "svd_ms": median_ms(svd, 20)}
        with threadpool_limits(limits=1, user_api="blas"):
            r["svd_1_ms"] = median_ms(svd, 20)
        r["step_ms"] = median_ms(step, 3)
        torch.set_num_threads(1)
        try:
            r["step_1_ms"] = median_ms(step, 3)
        finally:
            torch.set_num_threads(threads)
        return r

    for _ in range(3):  # warm: the model's first steps and the BLAS's first calls
        svd()
        step()
    return read


def spells(far: list[bool], t: list[float], end: float) -> dict[bool, list[float]]:
    """How long each unbroken run of one state lasted (s), by state, from readings that began at times ``t``; a
    spell ends where the next one begins, the last one at ``end`` (the run's)."""
    out: dict[bool, list[float]] = {True: [], False: []}
    start = 0
    for i in range(1, len(far) + 1):
        if i == len(far) or far[i] != far[start]:
            out[far[start]].append((t[i] if i < len(far) else end) - t[start])
            start = i
    return out


def split(values: list[float]) -> float:
    """Where a list of positive readings parts best in two (Otsu's threshold on their logarithms: the cut that
    maximises the variance between the two groups), as the geometric mean of the readings either side of it."""
    logs = sorted(math.log(v) for v in values)
    n, total = len(logs), sum(logs)
    best, at, below = -1.0, 0, 0.0
    for i in range(1, n):
        below += logs[i - 1]
        between = i * (n - i) * (below / i - (total - below) / (n - i)) ** 2
        if logs[i - 1] < logs[i] and between > best:  # a cut between two equal readings parts nothing
            best, at = between, i
    return math.exp((logs[at - 1] + logs[at]) / 2) if at else math.inf  # all equal: no cut


def summary(samples: list[dict[str, float]], end: float) -> list[str]:
    """The lines ``main`` prints after a run that ended at ``end`` (s)."""
    trips = [s["pingpong_ns"] for s in samples]
    head = f"{len(samples)} readings over {end:.0f} s"
    cut = split(trips)
    far = [x > cut for x in trips]
    if cut == math.inf:
        return [f"{head}: every round trip read {trips[0]:.0f} ns"]
    apart = statistics.median(x for x in trips if x > cut) / statistics.median(x for x in trips if x <= cut)
    lines = [f"{head}; the round trips part best at {cut:.0f} ns: {sum(far)} readings above it "
             f"({sum(far) / len(far):.0%}), medians {apart:.2f}x apart"]
    if apart < TWO_STATES or min(sum(far), len(far) - sum(far)) < FEWEST:
        return [*lines, f"  under {TWO_STATES:g}x apart, or under {FEWEST} readings on one side: the cores held one "
                "distance throughout"]
    for key in MEASURES:
        a = statistics.median(s[key] for s, f in zip(samples, far, strict=True) if not f)
        b = statistics.median(s[key] for s, f in zip(samples, far, strict=True) if f)
        lines.append(f"  {key}: near {a:.2f}, far {b:.2f} (medians; far/near {b / a:.2f}x)")
    svd = [s["svd_ms"] for s in samples]
    mid = split(svd)
    agree = sum((v > mid) == f for v, f in zip(svd, far, strict=True))
    lines.append(f"  the SVD at the default threads, parted the same way (at {mid:.2f} ms), and the round trip "
                 f"agree on the state in {agree} of {len(samples)} readings")
    runs = spells(far, [s["t"] for s in samples], end)
    for state, name in ((False, "near"), (True, "far")):
        lines.append(f"  {name} spells: {len(runs[state])}, median {statistics.median(runs[state]):.1f} s, "
                     f"longest {max(runs[state]):.1f} s, {sum(runs[state]):.0f} s in all")
    return lines


def main() -> None:
    log, argv = _option(sys.argv[1:], "--log", "a file name")
    try:
        seconds = float(argv[0]) if argv else 600.0
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf") or len(argv) > 1:
        sys.exit(f"core_distance_check: one positive, finite SECONDS at most, not {' '.join(argv)!r}")
    with tempfile.TemporaryDirectory() as d:
        read = sampler(build_pingpong(Path(d)))
        print(f"torch {torch.get_num_threads()} threads; {os.cpu_count()} cores; reading for {seconds:g} s",
              flush=True)
        samples: list[dict[str, float]] = []
        t0, minute = time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds:
            samples.append({"t": round(time.perf_counter() - t0, 2), **{k: round(v, 2) for k, v in read().items()}})
            if time.perf_counter() - t0 >= 60 * (minute + 1):  # a minute's readings, as they come
                last = [s for s in samples if s["t"] >= 60 * minute] or samples[-1:]
                trips = [s["pingpong_ns"] for s in last]
                minute = int((time.perf_counter() - t0) // 60)
                print(f"minute {minute}: round trip {min(trips):.0f}-{max(trips):.0f} ns, SVD at the default "
                      f"threads {statistics.median(s['svd_ms'] for s in last):.2f} ms (median of {len(last)})",
                      flush=True)
        end = time.perf_counter() - t0
    for line in summary(samples, end):
        print(line)
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "commit": _commit(HERE),
                                "seconds": seconds, "end_s": round(end, 2), "cores": os.cpu_count(), "trips": TRIPS,
                                "samples": samples}) + "\n")


if __name__ == "__main__":
    main()
