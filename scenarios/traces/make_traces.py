"""Write the synthetic availability trace(s) the scenarios replay (deterministic: run it to reproduce them).

    python scenarios/traces/make_traces.py

``g5_12xlarge_zone_14d.json`` (spot-traces JSON: ``metadata.gap_seconds``, ``data``): how many
g5.12xlarge spot instances one zone would grant, every 10 minutes for 14 days. Not a measurement:
an alternating process shaped like the multi-hour capacity outages that Wu et al. report for
GPU spot instances on AWS ("Can't Be Late", NSDI 2024): open periods (2 to 4 instances, the
level redrawn every 1-3 h) of exponential length with a mean of 9 h, and tight periods (0 or 1
instance) of log-normal length with a median of 2 h (sigma 0.8). A two-node job is reclaimed at
every tight period and waits until the next open one.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

GAP_S = 600
DAYS = 14
SEED = 20240416


def g5_zone(rng: np.random.Generator) -> list[int]:
    ticks = DAYS * 86400 // GAP_S
    out: list[int] = []
    while len(out) < ticks:
        open_ticks = max(1, round(rng.exponential(9 * 3600) / GAP_S))
        while open_ticks > 0:  # open: the level wanders between 2 and 4 instances
            run = min(open_ticks, max(1, round(rng.uniform(3600, 3 * 3600) / GAP_S)))
            out += [int(rng.integers(2, 5))] * run
            open_ticks -= run
        tight = max(1, round(rng.lognormal(math.log(2 * 3600), 0.8) / GAP_S))
        out += [int(rng.integers(0, 2))] * tight
    return out[:ticks]


def main() -> None:
    here = Path(__file__).resolve().parent
    data = g5_zone(np.random.default_rng(SEED))
    meta = {"gap_seconds": GAP_S, "instance_type": "g5.12xlarge", "synthetic": True, "seed": SEED,
            "generator": "scenarios/traces/make_traces.py",
            "description": "instances available per 10-minute tick over 14 days: open periods of 2-4 (mean 9 h), "
                           "tight periods of 0-1 (median 2 h)"}
    text = json.dumps({"metadata": meta, "data": data}, separators=(",", ":"))
    (here / "g5_12xlarge_zone_14d.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
