"""Does calibration's DataLoader loop, run in a fresh process, time the user's loop as the user's run does?

    python benchmarks/fresh_probe_check.py [PAIRS]

``hsisim calibrate`` runs its interference probe (the user's batch builds and training step in a real
DataLoader loop) in the process that ran every earlier probe, and the prediction follows that loop's
step. For the offline5 configuration of ``benchmarks/user_loop/hamida_user.py`` (batch 100, 2 workers),
each pair runs, one after the other, the user's script as a plain ``python`` process and a fresh
process that builds the script's dataset and model and runs only the interference probe (2 rounds of
10 steps, as ``calibrate --quick``). Compare its loop with the "calibration's own loop" column of
``cpu_sharing_check.py``. It prints every pair. Nothing else may run on the machine meanwhile.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "user_loop"
ROOT = HERE.parent.parent


def probe() -> dict[str, float]:
    """In this (fresh) process: the interference probe on the script's factories, 2 workers."""
    from hsisim.calibration import factories as fx
    from hsisim.calibration.interference import interference_probe, max_workers

    os.chdir(HERE)
    ds = fx.make_dataset(fx.load_factory("hamida_user.py:make_dataset", "dataset"),
                         {"patch": 5, "preprocess": "offline"})[0]
    net = fx.make_net(fx.load_factory("hamida_user.py:make_model", "model"), {"patch": 5}, tuple(ds[0][0].shape))
    k = max_workers()
    row = interference_probe(net, ds, 100, k, rounds=2, steps=10)["workers"][min(k, 2) - 1]
    return {"step_s": row["loop_step_s"], "wait_s": row["loop_wait_s"], "workers": min(k, 2)}


def main() -> None:
    if sys.argv[1:] == ["--probe"]:
        print(json.dumps(probe()))
        return
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print("| pair | user's loop: step, data wait | probe's loop in a fresh process: step, data wait |")
    print("|---:|---:|---:|")
    for n in range(1, pairs + 1):
        out = subprocess.run([sys.executable, str(HERE / "hamida_user.py"), "offline5", "150"], cwd=HERE,
                             capture_output=True, text=True, check=True).stdout
        u = json.loads(out)
        out = subprocess.run([sys.executable, __file__, "--probe"], capture_output=True, text=True, check=True,
                             env=env).stdout
        p = json.loads(out.strip().splitlines()[-1])
        print(f"| {n} | {statistics.fmean(u['step_s']) * 1e3:.1f} ms, {sum(u['wait_s']) / sum(u['step_s']):.1%} | "
              f"{p['step_s'] * 1e3:.1f} ms, {p['wait_s'] / p['step_s']:.1%} ({p['workers']} workers) |", flush=True)


if __name__ == "__main__":
    main()
