"""Monte Carlo speed and two-level fidelity (run on purpose, not in CI).

    python benchmarks/bench_montecarlo.py [--quick]

1. Replicas per second for spot_8x at 1,000 replicas: in-process with each executor, and the CLI
   end to end (`hsisim run scenarios/spot_8x.yaml --replicas 1000 --json`, imports included).
2. Two-level mode against `fidelity: step` on the same smaller job, side by side in one run: the
   speed ratio (whole run, and per replica once the one-off micro simulation is paid) and the
   agreement of mean wall time and η, with their 95 % confidence intervals.
Timings are medians of repeated runs (the machine is shared and noisy).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

from timing import timed

from hsisim.api import simulate
from hsisim.montecarlo import prepare
from hsisim.resolve import resolve_job
from hsisim.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
SPOT8 = ROOT / "scenarios" / "spot_8x.yaml"


def speed(reps: int) -> None:
    sc = load_scenario(SPOT8)
    n = 1000
    print(f"## spot_8x, {n} replicas ({os.cpu_count()} cores; median of {reps})")
    print("| how | seconds | replicas/s |")
    print("|---|---:|---:|")
    for label, kw in (("in-process, inline", {"executor": "inline"}),
                      ("in-process, local processes (all cores)", {"executor": "local"}),
                      ("in-process, Dask LocalCluster (2 workers, startup included)",
                       {"executor": "dask", "workers": 2})):
        t, _ = timed(lambda kw=kw: simulate(sc, replicas=n, **kw), reps)
        print(f"| {label} | {t:.2f} | {n / t:,.0f} |")
    cmd = [sys.executable, "-m", "hsisim", "run", str(SPOT8), "--replicas", str(n), "--json"]
    t, _ = timed(lambda: subprocess.run(cmd, check=True, capture_output=True), reps)
    print(f"| CLI end to end (`hsisim run ... --replicas {n} --json`) | {t:.2f} | {n / t:,.0f} |")


def fidelity(replicas: int) -> None:
    # spot_8x on Indian Pines (60 steps per epoch), 100 epochs, spot interruptions active, without
    # queue/boot so that the training itself is compared
    small = ["training.epochs=100", "dataset.name=indian_pines", "training.global_batch=512",
             f"simulation.replicas={replicas}", "overhead.boot=0", "overhead.image_pull=0", "overhead.init=0",
             "overhead.queue=null"]
    noisy = [*small, "timings.compute_per_step=20 ms", "timings.data_wait_per_step=5 ms",
             "timings.comm_per_step=8 ms", "timings.cv=0.3"]
    print(f"\n## two-level vs `fidelity: step`, {replicas} replicas each, inline, side by side")
    print("| job | steps/replica | two-level s | step s | ratio | per-replica ratio | mean wall: two-level / step "
          "(diff) | mean η: two-level / step (diff) |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for label, sets in (("modelled pipeline (deterministic)", small), ("measured timings, cv 0.3", noisy)):
        two_sc = load_scenario(SPOT8, sets)
        step_sc = load_scenario(SPOT8, [*sets, "simulation.fidelity=step"])
        t_prep, _ = timed(lambda sc=two_sc: prepare(sc, sc.simulation.seed), 3)
        t_two, a = timed(lambda sc=two_sc: simulate(sc, executor="inline"), 3)
        t_step, b = timed(lambda sc=step_sc: simulate(sc, executor="inline"), 1)
        per_two = max(t_two - t_prep, 1e-9) / replicas
        cells = []
        for col in ("wall_h", "eta"):
            x, y = a.df[col].to_numpy(), b.df[col].to_numpy()  # type: ignore[attr-defined]
            half = 1.96 * math.hypot(x.std(ddof=1), y.std(ddof=1)) / math.sqrt(replicas)
            cells.append(f"{x.mean():.5g} / {y.mean():.5g} ({abs(x.mean() / y.mean() - 1):.3%}, "
                         f"95 % CI of the difference ±{half / abs(y.mean()):.3%})")
        print(f"| {label} | {resolve_job(two_sc).total_steps} | {t_two:.2f} | {t_step:.1f} | {t_step / t_two:,.0f}x | "
              f"{(t_step / replicas) / per_two:,.0f}x | {cells[0]} | {cells[1]} |")


def main() -> None:
    quick = "--quick" in sys.argv
    speed(1 if quick else 3)
    fidelity(50 if quick else 200)


if __name__ == "__main__":
    main()
