"""Speed and fidelity of the core simulator (run on purpose, not in CI).

    python benchmarks/bench_core.py

1. Micro simulation speed: simulated optimizer steps per second for spot_8x (8 ranks, 4 workers each).
2. Monte Carlo: wall seconds for spot_8x at 1,000 replicas with the default executor (all cores).
3. Two-level vs `fidelity: step` on the same smaller job, measured side by side in one run:
   speed ratio, and the agreement of mean wall time and η.
Timings are medians of repeated runs (the machine is shared and noisy).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np

from hsisim.montecarlo import simulate
from hsisim.resolve import resolve
from hsisim.scenario import load_scenario
from hsisim.sim.micro import MicroSim

ROOT = Path(__file__).resolve().parent.parent


def _median(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    spot = load_scenario(ROOT / "scenarios" / "spot_8x.yaml")
    job = resolve(spot)
    n = 5000
    t = _median(lambda: MicroSim(job, np.random.default_rng(0)).run(n), 3)
    print(f"micro simulation, spot_8x ({job.world} ranks, {job.num_workers} workers each): "
          f"{n / t:,.0f} optimizer steps/s ({n} steps in {t:.2f} s, median of 3)")

    t = _median(lambda: simulate(spot, replicas=1000), 3)
    print(f"hsisim run spot_8x, 1,000 replicas, local executor: {t:.2f} s (median of 3)")

    # a smaller job that step fidelity can afford: 8 GPUs, noisy timings, 20 epochs of 40 steps
    small = ["training.epochs=20", "dataset.name=indian_pines", "training.global_batch=256",
             "simulation.replicas=200"]
    two_sc = load_scenario(ROOT / "scenarios" / "spot_8x.yaml", small)
    step_sc = load_scenario(ROOT / "scenarios" / "spot_8x.yaml", [*small, "simulation.fidelity=step"])
    t_two = _median(lambda: simulate(two_sc, executor="inline"), 3)
    t_step = _median(lambda: simulate(step_sc, executor="inline"), 1)
    a, b = simulate(two_sc, executor="inline").df, simulate(step_sc, executor="inline").df
    print(f"two-level vs step fidelity ({resolve(two_sc).total_steps} steps/replica, 200 replicas, inline):")
    print(f"  time: two-level {t_two:.2f} s, step {t_step:.2f} s, ratio {t_step / t_two:,.0f}x")
    for col in ("wall_h", "eta"):
        print(f"  mean {col}: two-level {a[col].mean():.6g}, step {b[col].mean():.6g}, "
              f"difference {abs(a[col].mean() / b[col].mean() - 1):.3%}")


if __name__ == "__main__":
    main()
