"""Does a user's loop run at the same pace for a whole run as for its first 150 steps? (imports nothing from hsisim)

    python benchmarks/long_run_check.py [RUNS] [CONFIG] [STEPS] [--log FILE]

``cpu_sharing_check.py`` takes the user's truth from loops of 150 steps (a minute or so each), but a user's training
runs for hours. On a machine whose pace swings between two levels, a loop's first minute need not stand for the
rest. Each run here is one fresh process of ``user_loop/hamida_user.py CONFIG STEPS`` (default getitem11, 900
steps), with the machine's pace (``user_loop/pace.py``) read just before and just after it. It prints each run's
step in its first 150 steps and in the rest, and the means of its 10-step blocks minute by minute; ``--log``
appends every run, every step kept, as one JSON line. Nothing else may run on the machine meanwhile.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from cpu_sharing_check import HERE, SCRIPT, STEPS, _configs, _option, _pace, _run  # the check's loop, as it runs it

FIRST = STEPS  # the steps of one of cpu_sharing_check.py's user loops
BLOCK = 10


def run_once(config: str, steps: int) -> dict[str, object]:
    """One fresh process of the user's loop, the machine's pace read just before and just after it."""
    before = _pace(HERE)
    t0 = time.perf_counter()
    d = json.loads(_run([sys.executable, str(SCRIPT), config, str(steps)], HERE))
    wall = time.perf_counter() - t0
    after = _pace(HERE)
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config": config, "steps": steps, "wall_s": round(wall, 1),
            "pace_ms": [round(before), round(after)],
            "step_ms": [round(1e3 * s, 2) for s in d["step_s"]], "wait_ms": [round(1e3 * s, 2) for s in d["wait_s"]]}


def summary(r: dict[str, object]) -> str:
    """The run's first ``FIRST`` steps against the rest, and its blocks' means minute by minute."""
    steps = [s / 1e3 for s in r["step_ms"]]  # type: ignore[attr-defined]
    first, rest = statistics.fmean(steps[:FIRST]), statistics.fmean(steps[FIRST:]) if steps[FIRST:] else float("nan")
    blocks = [statistics.fmean(steps[i:i + BLOCK]) for i in range(0, len(steps) - BLOCK + 1, BLOCK)]
    minutes: list[list[float]] = []
    t = 0.0
    for b in blocks:
        if not minutes or t >= 60.0 * len(minutes):
            minutes.append([])
        minutes[-1].append(b)
        t += b * BLOCK
    by_minute = ", ".join(f"{1e3 * statistics.fmean(m):.0f}" for m in minutes)
    return (f"{r['config']} {r['steps']} steps, pace {r['pace_ms']} ms: first {FIRST} steps {1e3 * first:.1f} ms, "
            f"the rest {1e3 * rest:.1f} ms ({rest / first:.3f}x), all {1e3 * statistics.fmean(steps):.1f} ms; "
            f"blocks {1e3 * min(blocks):.0f}-{1e3 * max(blocks):.0f} ms; minute by minute {by_minute} ms")


def main() -> None:
    log, argv = _option(sys.argv[1:], "--log", "a file name")
    try:
        runs = int(argv[0]) if argv else 2
        config = argv[1] if len(argv) > 1 else "getitem11"
        steps = int(argv[2]) if len(argv) > 2 else 900
    except ValueError:
        sys.exit(__doc__.splitlines()[2].strip())
    if runs < 1 or steps <= FIRST:
        sys.exit(f"RUNS at least 1, STEPS over {FIRST}")
    if config not in (configs := _configs()):
        sys.exit(f"unknown configuration {config!r}: one of {', '.join(configs)}")
    for _ in range(runs):
        r = run_once(config, steps)
        print(summary(r), flush=True)
        if log:
            with open(log, "a") as f:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
