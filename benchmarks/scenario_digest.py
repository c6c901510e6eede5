"""Digest of every scenario's replicas: run it on two commits to show a change kept results bit-identical.

    python benchmarks/scenario_digest.py [REPLICAS] [--without COL,COL] > digest.txt   (on each commit, then diff)

Each scenario in scenarios/ runs REPLICAS replicas (default 64) in this process with its own seed;
the line printed per scenario is the SHA-256 of the replicas table's bytes (every column, in order;
``--without`` leaves out columns a newer commit added, so its digest compares with an older one's).
Imports the hsisim of this checkout (not an installed one), and only the scenario loader and
``simulate`` (from where each version of hsisim keeps it).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    sys.path.insert(0, str(ROOT))  # this checkout's hsisim, not one installed elsewhere
    from hsisim.scenario import load_scenario

    try:  # the public API (hsisim >= 0.2), else the Monte Carlo module of earlier versions
        from hsisim.api import simulate
    except ImportError:
        from hsisim.montecarlo import simulate  # type: ignore[attr-defined,no-redef]

    args = sys.argv[1:]
    without: set[str] = set()
    if "--without" in args:
        i = args.index("--without")
        without = set(args[i + 1].split(","))
        del args[i:i + 2]
    n = int(args[0]) if args else 64
    for path in sorted((ROOT / "scenarios").rglob("*.yaml")):
        sc = load_scenario(path)
        df = simulate(sc, replicas=n, executor="inline").df
        df = df[[c for c in df.columns if c not in without]]
        h = hashlib.sha256()
        for col in df.columns:
            h.update(col.encode())
            h.update(np.ascontiguousarray(df[col].to_numpy(dtype=float)).tobytes())
        wall, cost = df["wall_h"].mean(), df["cost_usd"].mean()
        print(f"{path.relative_to(ROOT / 'scenarios')!s:34s} {h.hexdigest()[:16]}  wall_h {wall:.6f}  cost {cost:.6f}")


if __name__ == "__main__":
    main()
