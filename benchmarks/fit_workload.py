"""Refit the work estimate's unit costs (hsisim.montecarlo.workload) on this machine.

Runs replicas of spot_8x inline with its checkpoint interval and with checkpoints every 1, 10
and 100 steps, at its own hazard and at 2 reclaims per hour (not with every step), counts each
replica's blocks and planned elements as the estimate does (with the replicas' mean
interruptions), and fits seconds = BLOCK_S·blocks + ELEMENT_S·elements + REPLANNED_S·re-planned
elements by non-negative least squares on relative errors. Prints each run's measured and fitted
seconds per replica, and what the estimate (with its predicted interruptions) says.

    python benchmarks/fit_workload.py [replicas]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from hsisim import montecarlo, tuning
from hsisim.montecarlo import workload
from hsisim.scenario import Scenario

SPOT = Path(__file__).resolve().parents[1] / "scenarios" / "spot_8x.yaml"
CHECKPOINTS = [[], ["checkpoint={policy: fixed, every_steps: 1}"], ["checkpoint={policy: fixed, every_steps: 10}"],
               ["checkpoint={policy: fixed, every_steps: 100}"]]
HAZARDS = [[], ["spot.hazard={dist: exponential, mean: 30 min}"]]


def main(replicas: int) -> None:
    rows, seconds, labels, old = [], [], [], []
    for ck in CHECKPOINTS:
        for hz in HAZARDS:
            if ck == CHECKPOINTS[1] and hz:
                continue  # every step at 2 reclaims an hour: ten minutes a replica
            sc = Scenario.load(SPOT, overrides=[*ck, *hz])
            prep = tuning.prepared(sc, 0)
            times = []
            for seed in range(3):  # medians of three runs: the machine is shared
                t = time.perf_counter()
                res = montecarlo.run(sc, prep, replicas=replicas, seed=seed, executor="inline", allow_long=True)
                times.append((time.perf_counter() - t) / replicas)
            work = workload.estimate(prep)
            interruptions = float(res.df["interruptions"].mean())
            rows.append(workload.units(prep, interruptions))
            seconds.append(statistics.median(times))
            labels.append(" ".join(ck + hz) or "spot_8x as written")
            old.append(work.seconds)
    a, b = np.array(rows), np.array(seconds)
    coef, _ = nnls(a / b[:, None], np.ones_like(b))  # relative errors: the runs span three decades
    print(f"BLOCK_S = {coef[0]:.2g}  ELEMENT_S = {coef[1]:.2g}  REPLANNED_S = {coef[2]:.2g}")
    for label, row, s, o in zip(labels, a, b, old, strict=True):
        print(f"{s:9.4f} s measured  {row @ coef:9.4f} s fitted  {o:9.4f} s estimated now  "
              f"units {row[0]:6.1f} {row[1]:9.0f} {row[2]:9.0f}  {label}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
