"""Does a process keep a pace of its own? Several live processes of a user's loop, told in turn to run (run on purpose).

    python benchmarks/process_lottery_check.py [ROTATIONS] [CONFIG] [--processes K] [--turn-s S]

Starts K (default 4) processes of ``benchmarks/user_loop/hamida_user.py``'s training loop for CONFIG (default
getitem11), each with its own model, optimizer and DataLoader and PyTorch's defaults, as the user's script runs
them; it imports nothing from hsisim, and neither do they. Each warms up 10 steps, then waits. In each rotation
every process in turn (the order shifted by one each rotation) runs a turn: 48 steps or more, and at least S
seconds (default 10), while the others wait on a pipe. Only one computes at a time; the environment passes
through (run under ``OPENBLAS_NUM_THREADS=1`` for the user who limited the Dataset's BLAS).

Every turn's step, data wait and training part (step less wait) is printed, then each is split, additively, into
what moves every process together (the rotation: the machine's moment), what stays with one process through all
its turns (the process's own pace) and the rest: the standard deviations of the rotation and process terms and of
the residual, each in % of the grand mean, and each process's offset with a 95 % interval from the residual.
A process term well above its interval's width means a fresh process draws a pace of its own and keeps it: one
user run is one draw, and so is one calibrating process. Nothing else may run on the machine meanwhile.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from cpu_sharing_check import _positive, t95  # the same options and Student's t as the other checks

HERE = Path(__file__).resolve().parent / "user_loop"
TURN_STEPS = 48
WARMUP = 10

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
import hamida_user as h
turn_s, warmup, turn = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
loader, model, opt, loss_fn = h.setup(sys.argv[2])  # the user's own loader, model, optimizer and loss

it = h.epochs(loader)  # epoch after epoch, as the user's loop takes them

def steps(n, at_least_s=0.0):
    wait, step = [], []
    start = time.perf_counter()
    while len(step) < n or time.perf_counter() - start < at_least_s:
        w, s = h.timed_step(it, model, opt, loss_fn)  # the user's own step
        wait.append(w)
        step.append(s)
    return wait, step

steps(warmup)
print(json.dumps({"ready": True, "torch_threads": torch.get_num_threads()}), flush=True)
for line in sys.stdin:
    wait, step = steps(turn, turn_s)
    print(json.dumps({"step_ms": 1e3 * sum(step) / len(step), "wait_ms": 1e3 * sum(wait) / len(wait),
                      "steps": len(step)}), flush=True)
"""


class Split(NamedTuple):
    mean: float
    rotation: list[float]
    process: list[float]
    sd_e: float
    dof: int


def split(table: list[list[float]]) -> Split:
    """Rotations x processes, additively: the grand mean, each rotation's and each process's term, the residual's
    standard deviation (with the degrees of freedom of a two-way table without replication)."""
    r, p = len(table), len(table[0])
    mu = statistics.fmean(v for row in table for v in row)
    rot = [statistics.fmean(row) - mu for row in table]
    proc = [statistics.fmean(row[j] for row in table) - mu for j in range(p)]
    resid = [table[i][j] - mu - rot[i] - proc[j] for i in range(r) for j in range(p)]
    dof = (r - 1) * (p - 1)
    sd_e = math.sqrt(sum(e * e for e in resid) / dof) if dof else math.nan
    return Split(mu, rot, proc, sd_e, dof)


def report(name: str, table: list[list[float]]) -> None:
    s = split(table)
    mu, r = s.mean, len(table)
    pct = lambda xs: statistics.pstdev(xs) / mu * 100  # noqa: E731
    half = t95(s.dof) * s.sd_e / math.sqrt(r) / mu * 100  # a process's offset: its r turns' noise
    offsets = ", ".join(f"{v / mu * 100:+.1f}" for v in s.process)
    print(f"{name}: mean {mu:.1f} ms; rotation (moment) sd {pct(s.rotation):.1f} %, process sd "
          f"{pct(s.process):.1f} %, residual sd {s.sd_e / mu * 100:.1f} %; each process's offset {offsets} % "
          f"(each ± {half:.1f} %)")


def main() -> None:
    argv = sys.argv[1:]
    k, argv = _positive(argv, "--processes", int, 4)
    turn_s, argv = _positive(argv, "--turn-s", float, 10.0)
    rotations = int(argv[0]) if argv and argv[0].isdigit() else 6
    config = next((a for a in argv if not a.isdigit()), "getitem11")
    sys.path.insert(0, str(HERE))
    from hamida_user import CONFIGS

    if config not in CONFIGS:
        sys.exit(f"unknown configuration {config!r}: one of {', '.join(CONFIGS)}")
    k = int(k)
    if k < 2 or rotations < 2:
        sys.exit("two processes and two rotations at least: a process's own pace is what stays across rotations")
    blas = os.environ.get("OPENBLAS_NUM_THREADS")
    print(f"{config}: {k} live processes, {rotations} rotations, turns of {TURN_STEPS}+ steps and "
          f"{turn_s:g}+ s" + (f", OPENBLAS_NUM_THREADS={blas}" if blas else ""), flush=True)
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(HERE), config, str(turn_s),
                               str(WARMUP), str(TURN_STEPS)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=HERE) for _ in range(k)]
    try:
        for j, p in enumerate(procs):  # each warms up alone: the others have not started, or wait
            ready = json.loads(p.stdout.readline())  # type: ignore[union-attr]
            print(f"process {j + 1}: ready, {ready['torch_threads']} torch threads", flush=True)
        steps = [[math.nan] * k for _ in range(rotations)]
        waits = [[math.nan] * k for _ in range(rotations)]
        for i in range(rotations):
            for j in [(i + m) % k for m in range(k)]:
                procs[j].stdin.write("turn\n")  # type: ignore[union-attr]
                procs[j].stdin.flush()  # type: ignore[union-attr]
                out = json.loads(procs[j].stdout.readline())  # type: ignore[union-attr]
                steps[i][j], waits[i][j] = out["step_ms"], out["wait_ms"]
                print(f"rotation {i + 1} process {j + 1}: step {out['step_ms']:7.1f} ms, wait {out['wait_ms']:7.1f} "
                      f"ms, training part {out['step_ms'] - out['wait_ms']:7.1f} ms ({out['steps']} steps)",
                      flush=True)
    finally:
        for p in procs:
            p.stdin.close()  # type: ignore[union-attr]
        for p in procs:
            p.wait(timeout=60)
    report("step", steps)
    report("data wait", waits)
    report("training part", [[s - w for s, w in zip(rs, rw, strict=True)] for rs, rw in zip(steps, waits, strict=True)])


if __name__ == "__main__":
    main()
