"""Is the user's training step slower in a process that has just run ``hsisim calibrate`` than in a fresh one?

    python benchmarks/process_state_check.py [PAIRS] [CONFIG]

The calibration measures the user's batch build and training step inside the process that ran every
earlier probe; the user's run is a fresh process. For a getitem configuration of
``benchmarks/user_loop/hamida_user.py`` (default getitem11), each pair runs, one after the other, a
fresh process and a process that first runs ``calibrate(..., quick=True)`` on the script's factories;
both then time the script's in-process batch build and training step alternated (12 after 2 warm-up,
medians: the interference probe's method without workers until it moved to a DataLoader loop in
December 2026; both arms use it, so the comparison between processes holds). It prints every run.
Nothing else may run on the machine meanwhile.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent / "user_loop"
PATCH = {"getitem11": 11, "getitem9": 9}


def measure(after_calibrate: bool, config: str) -> dict[str, float]:
    """In this process: optionally calibrate, then the build and the step alternated (milliseconds)."""
    import numpy as np
    import torch
    from torch.utils.data import default_collate

    sys.path.insert(0, str(HERE))
    os.chdir(HERE)
    from hamida_user import make_dataset, make_model  # the user's script: plain PyTorch

    patch = PATCH[config]
    cal_s = 0.0
    if after_calibrate:
        from hsisim.calibration.run import calibrate

        t0 = time.perf_counter()
        calibrate(device="cpu", model="", dataset="", quick=True, batch=64, model_factory="hamida_user.py:make_model",
                  dataset_factory="hamida_user.py:make_dataset",
                  factory_kwargs={"dataset": {"patch": patch, "preprocess": "getitem"}, "model": {"patch": patch}})
        cal_s = time.perf_counter() - t0
    ds, model = make_dataset(patch, "getitem"), make_model(patch)
    opt, loss_fn = torch.optim.Adam(model.parameters(), lr=1e-3), torch.nn.CrossEntropyLoss()
    rng = np.random.default_rng(1)
    builds, steps = [], []
    for j in range(14):
        t0 = time.perf_counter()
        x, y = default_collate([ds[int(i)] for i in rng.integers(0, len(ds), 64)])
        t1 = time.perf_counter()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        t2 = time.perf_counter()
        if j >= 2:
            builds.append(t1 - t0)
            steps.append(t2 - t1)
    return {"build_ms": statistics.median(builds) * 1e3, "step_ms": statistics.median(steps) * 1e3,
            "calibrate_s": cal_s, "threads": torch.get_num_threads()}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(measure(sys.argv[2] == "after", sys.argv[3])))
        return
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    config = sys.argv[2] if len(sys.argv) > 2 else "getitem11"
    print("| pair | process | build | step | calibrate |\n|---:|---|---:|---:|---:|")
    for n in range(1, pairs + 1):
        for kind in ("fresh", "after"):
            out = subprocess.run([sys.executable, __file__, "--child", kind, config], capture_output=True, text=True,
                                 check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"| {n} | {'fresh' if kind == 'fresh' else 'after calibrate'} | {r['build_ms']:.0f} ms | "
                  f"{r['step_ms']:.0f} ms | {r['calibrate_s']:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
