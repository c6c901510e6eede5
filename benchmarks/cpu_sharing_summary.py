"""Every round ``cpu_sharing_check.py --log FILE`` kept, pooled over its sittings, against the machine's floor.

    python benchmarks/cpu_sharing_summary.py FILE [--since YYYY-MM-DD]

For each configuration: the step's error (prediction over the mean of the user's loops around it) in
every round, their mean with its 95 % confidence interval (a bias the model would carry) and their
standard deviation (the scatter a single round shows) and root mean square (both together), how
many rounds met 10 % on the step and 5 points on the data wait; then the same rounds' floor: every
second user loop against the others (``cpu_sharing_check.floor``), its root mean square and how many
rounds it kept within 10 %, which no prediction from the machine's other moments can be expected to
beat. Rounds of several commits pool: the table names them.

A second table takes the rounds whose calibration loop without workers ran at two paces and whose readings of the
machine's state fell in two states: the band ``hsisim run`` states for a run of hours (the 95 % Wilson interval of the
readings' slow share, each end's mean step the paces' harmonic mean weighted by time), how many rounds' user mean fell
inside it, and how many fell inside it widened by the user's loops' own 95 % interval (added in quadrature): the
user's six loops are minutes, not hours, and sample the state as few times as the readings do.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from cpu_sharing_check import _option, ci95, floor  # the same statistics and options as the table's


def rounds(path: Path, since: str) -> dict[str, list[dict[str, Any]]]:
    """The log's rounds on or after ``since``, by configuration (``--quick`` calibrations, full ones and full ones with
    ``--threaded-loop-s`` apart), in the order they ran."""
    out: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            if str(r["date"]) >= since:
                full = "" if r.get("quick", True) else ", full calibration"
                if "threaded_loop_s" in r:  # --threaded-loop-s: the threaded build's loops lengthened
                    full += f", loops {r['threaded_loop_s']:g} s"
                out.setdefault(f"{r['config']}{full}", []).append(r)
    return out


def _runs(r: dict[str, Any]) -> list[dict[str, float]]:
    return [{"step_s": s / 1e3, "wait_share": w / 100}
            for s, w in zip(r["user_step_ms"], r["user_wait_pct"], strict=True)]


def _spread(xs: list[float]) -> str:
    return (f"{statistics.fmean(xs):+.1f} ± {ci95(xs):.1f}, sd {statistics.stdev(xs):.1f}" if len(xs) > 1
            else f"{xs[0]:+.1f}")


def _rms(xs: list[float]) -> float:
    """The root mean square: the typical size of an error about zero (its bias and scatter together)."""
    return math.sqrt(statistics.fmean(x * x for x in xs))


def _each(xs: list[float]) -> str:
    return ", ".join(f"{x:+.1f}" for x in xs)


def _within(xs: list[float], bound: float) -> str:
    return f"{sum(abs(x) <= bound for x in xs)} of {len(xs)}"


def main() -> None:
    since, argv = _option(sys.argv[1:], "--since", "a date, YYYY-MM-DD")
    since = since or ""
    if len(argv) != 1 or not Path(argv[0]).is_file():
        sys.exit("usage: cpu_sharing_summary.py FILE [--since YYYY-MM-DD] (FILE: a cpu_sharing_check.py --log file)")
    by = rounds(Path(argv[0]), since)
    if not by:
        sys.exit(f"{argv[0]}: no rounds{' since ' + since if since else ''}")
    print("| config | rounds (commits, days) | step error per round (%) | mean ± 95 % CI, sd, rms | within 10 % "
          "| data-wait error (points) | within 5 points | floor: one half of the loops against the other (%) "
          "| floor within 10 % |")
    print("|---|---|---|---:|---:|---|---:|---|---:|")
    for name, rs in by.items():
        errs, pts, half = [], [], []
        for r in rs:
            runs = _runs(r)
            mean_step = statistics.fmean(u["step_s"] for u in runs) * 1e3
            mean_wait = statistics.fmean(u["wait_share"] for u in runs) * 100
            errs.append(100 * (r["predicted_step_ms"] / mean_step - 1))
            pts.append(r["predicted_wait_pct"] - mean_wait)
            half.append(floor(runs)[0])
        commits = sorted({str(r["commit"]) for r in rs})
        days = sorted({str(r["date"])[:10] for r in rs})
        print(f"| {name} | {len(rs)} ({', '.join(commits)}; {', '.join(days)}) | {_each(errs)} "
              f"| {_spread(errs)}, rms {_rms(errs):.1f} | {_within(errs, 10)} | {_each(pts)} | {_within(pts, 5)} "
              f"| {_each(half)} (rms {_rms(half):.1f}) | {_within(half, 10)} |")
    bands(by)


Z95 = 1.959963984540054  # the normal quantile of a two-sided 95 % interval


def wilson(k: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of ``k`` in ``n`` independent draws (its closed form)."""
    p, zz = k / n, Z95 * Z95
    centre = (p + zz / (2 * n)) / (1 + zz / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + zz / (4 * n * n)) / (1 + zz / n)
    return centre - half, centre + half


def band(r: dict[str, Any]) -> tuple[float, float, float] | None:
    """The round's band for a run of hours and its middle, the readings' own share (ms a step), where its loop ran at
    two paces and its readings fell in two (rounds logged before the mixture weighed by time, f5e1bdd, are read as
    today's model reads them)."""
    ms = r.get("machine_state") or {}
    if "far" not in r or not ms.get("far"):
        return None
    near, far = (1e3 * (r[k]["build_s"] + r[k]["step_s"]) for k in ("near", "far"))

    def step(t: float) -> float:  # the mean step at a share t of the time at the far pace
        return 1 / ((1 - t) / near + t / far)

    lo, hi = wilson(ms["far"], ms["readings"])
    return step(lo), step(hi), step(ms["far"] / ms["readings"])


def bands(by: dict[str, list[dict[str, Any]]]) -> None:
    """The second table (module doc), for the configurations that have such rounds."""
    rows = {name: [(r, b) for r in rs if (b := band(r)) is not None] for name, rs in by.items()}
    if not any(rows.values()):
        return
    print("\n| config | rounds | the band (ms) against the user's mean ± 95 % CI, per round | user's mean inside "
          "| inside, widened by the user's CI |")
    print("|---|---:|---|---:|---:|")
    for name, rs in rows.items():
        inside = widened = 0
        each = []
        for r, (lo, hi, middle) in rs:
            steps = r["user_step_ms"]
            u, ci = statistics.fmean(steps), ci95(steps)
            edge = hi - middle if u > middle else middle - lo
            inside += lo <= u <= hi
            widened += abs(u - middle) <= math.hypot(edge, ci)
            each.append(f"{lo:.0f}-{hi:.0f} vs {u:.0f} ± {ci:.0f}")
        if rs:
            print(f"| {name} | {len(rs)} | {'; '.join(each)} | {inside} of {len(rs)} | {widened} of {len(rs)} |")


if __name__ == "__main__":
    main()
