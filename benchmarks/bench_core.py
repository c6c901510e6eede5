"""Speed and fidelity of the core simulator (run on purpose, not in CI).

    python benchmarks/bench_core.py

1. Micro simulation speed: simulated optimizer steps per second for spot_8x (8 ranks, 4 workers each).
2. Monte Carlo: wall seconds for spot_8x at 1,000 replicas with the default executor (all cores).
(Two-level vs `fidelity: step` and replicas/s per executor: benchmarks/bench_montecarlo.py.)
Timings are medians of repeated runs (the machine is shared and noisy).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from timing import timed

from hsisim.api import simulate
from hsisim.resolve import resolve_job
from hsisim.scenario import load_scenario
from hsisim.sim.micro import MicroSim

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    spot = load_scenario(ROOT / "scenarios" / "spot_8x.yaml")
    job = resolve_job(spot)
    n = 5000
    t = timed(lambda: MicroSim(job, np.random.default_rng(0)).run(n), 3)[0]
    print(f"micro simulation, spot_8x ({job.world} ranks, {job.num_workers} workers each): "
          f"{n / t:,.0f} optimizer steps/s ({n} steps in {t:.2f} s, median of 3)")

    t = timed(lambda: simulate(spot, replicas=1000), 3)[0]
    print(f"hsisim run spot_8x, 1,000 replicas, local executor: {t:.2f} s (median of 3)")


if __name__ == "__main__":
    main()
