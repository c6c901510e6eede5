"""The user's own loop as it runs by default against the same loop with its BLAS at one thread (run on purpose).

    python benchmarks/blas_threads_check.py [PAIRS] [CONFIG] [STEPS]

Imports nothing from hsisim. Each pair runs ``benchmarks/user_loop/hamida_user.py CONFIG STEPS`` (default
getitem9, 300 steps) as a plain ``python`` process twice, one right after the other, order swapped each
pair: once with the environment as it is, once with ``OPENBLAS_NUM_THREADS=1``. The getitem
configurations' ``__getitem__`` runs a per-patch SVD in numpy, whose OpenBLAS starts one thread per core in
every process, DataLoader workers included. For each loop it prints the mean step, the data-wait share, and
the 10-step blocks' paces (fastest, median, slowest), which show whether the loop held one pace or
swung between several. ``hsisim calibrate`` reports what it measures of this (``worker_build`` in the
profile, a warning in ``hsisim run``); this is the user's view of it. Nothing else may run meanwhile.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "user_loop" / "hamida_user.py"


def loop(config: str, steps: int, one_thread: bool) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if one_thread:
        env["OPENBLAS_NUM_THREADS"] = "1"
    out = subprocess.run([sys.executable, str(SCRIPT), config, str(steps)], capture_output=True, text=True,
                         check=True, env=env, cwd=SCRIPT.parent).stdout
    d = json.loads(out)
    step, wait = d["step_s"], d["wait_s"]
    blocks = sorted(statistics.fmean(step[i:i + 10]) for i in range(0, len(step) - 9, 10))
    return {"step": statistics.fmean(step), "wait": sum(wait) / sum(step), "fast": blocks[0],
            "median": statistics.median(blocks), "slow": blocks[-1]}


def main() -> None:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    config = sys.argv[2] if len(sys.argv) > 2 else "getitem9"
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    print(f"{config}, {steps} steps a loop (after 10 not timed); 10-step blocks: fastest / median / slowest")
    print("| pair | OPENBLAS_NUM_THREADS | step (ms) | data wait | blocks (ms) |")
    print("|---:|---|---:|---:|---|")
    seen: dict[bool, list[float]] = {False: [], True: []}
    for n in range(1, pairs + 1):
        for one in ((False, True) if n % 2 else (True, False)):
            r = loop(config, steps, one)
            seen[one].append(r["step"])
            print(f"| {n} | {'1' if one else 'as set' if 'OPENBLAS_NUM_THREADS' in os.environ else 'unset'} | "
                  f"{r['step'] * 1e3:.1f} | {r['wait']:.1%} | {r['fast'] * 1e3:.0f} / {r['median'] * 1e3:.0f} / "
                  f"{r['slow'] * 1e3:.0f} |", flush=True)
    ratio = [a / b for a, b in zip(seen[False], seen[True], strict=True)]
    print(f"\nas it runs over one BLAS thread, per pair: {', '.join(f'{x:.2f}' for x in ratio)} "
          f"(median {statistics.median(ratio):.2f})")


if __name__ == "__main__":
    main()
