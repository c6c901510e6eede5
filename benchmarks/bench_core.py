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

    # a smaller job that step fidelity can afford: spot_8x on Indian Pines (60 steps per epoch),
    # 100 epochs, without queue/boot so that the training itself is compared
    small = ["training.epochs=100", "dataset.name=indian_pines", "training.global_batch=512",
             "simulation.replicas=100", "overhead.boot=0", "overhead.image_pull=0", "overhead.init=0",
             "overhead.queue=null"]
    noisy = [*small, "timings.compute_per_step=20 ms", "timings.data_wait_per_step=5 ms",
             "timings.comm_per_step=8 ms", "timings.cv=0.3"]
    for label, sets in (("modelled pipeline, deterministic", small), ("measured timings, cv 0.3", noisy)):
        two_sc = load_scenario(ROOT / "scenarios" / "spot_8x.yaml", sets)
        step_sc = load_scenario(ROOT / "scenarios" / "spot_8x.yaml", [*sets, "simulation.fidelity=step"])
        t_two = _median(lambda sc=two_sc: simulate(sc, executor="inline"), 3)
        t_step = _median(lambda sc=step_sc: simulate(sc, executor="inline"), 1)
        a, b = simulate(two_sc, executor="inline").df, simulate(step_sc, executor="inline").df
        print(f"two-level vs step fidelity, {label} ({resolve(two_sc).total_steps} steps/replica, "
              f"100 replicas, inline):")
        print(f"  time: two-level {t_two:.2f} s, step {t_step:.2f} s, ratio {t_step / t_two:,.0f}x")
        for col in ("wall_h", "eta"):
            print(f"  mean {col}: two-level {a[col].mean():.6g}, step {b[col].mean():.6g}, "
                  f"difference {abs(a[col].mean() / b[col].mean() - 1):.3%}; "
                  f"std two-level {a[col].std():.3g}, step {b[col].std():.3g}")


if __name__ == "__main__":
    main()
