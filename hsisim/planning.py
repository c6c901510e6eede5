"""Budget planning: P(cost ≤ budget), P(time ≤ deadline) and sweeps over scenario keys.

Every combination of a sweep runs the same replica seeds (common random numbers: replica ``i``
of every combination draws from the same ``SeedSequence``), so differences between combinations
are differences of the configurations, not of luck. Combinations are compared on their P90 cost
and P90 wall time (the Pareto flag), and the recommendation is the cheapest combination whose
probabilities of meeting the budget and the deadline both reach the confidence level.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from hsisim import montecarlo, stats, tuning
from hsisim.errors import HsisimInputError
from hsisim.montecarlo import Results
from hsisim.scenario import Scenario, load_scenario

T = TypeVar("T")


def parse_sweeps(items: list[str]) -> list[tuple[str, list[str]]]:
    """``KEY=V1,V2,...`` per item → [(key, [values])]; a key may appear once."""
    out: list[tuple[str, list[str]]] = []
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        vals = [v.strip() for v in values.split(",")]
        if not sep or not key or not all(vals):
            raise HsisimInputError(f"{{sweeps}} expects KEY=V1,V2,... with no empty value, got {item!r}")
        if any(k == key for k, _ in out):
            raise HsisimInputError(f"{{sweeps}}: {key} is given twice")
        if len(set(vals)) != len(vals):
            raise HsisimInputError(f"{{sweeps}}: {key} repeats a value: {values}")
        out.append((key, vals))
    return out


@dataclass
class PlanResult:
    """A plan: the table of combinations, the probabilities, the recommendation, and each run's results."""

    data: dict[str, Any]  # the ``hsisim plan --json`` object
    runs: list[Results]  # one per combination, in the order of ``data["combinations"]``

    def to_json(self) -> dict[str, Any]:
        return self.data

    def write(self, folder: str | Path) -> Path:
        """Write ``plan.json`` into ``folder`` (atomically); returns its path."""
        from hsisim.writer import write_json

        path = Path(folder) / "plan.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, self.data)
        return path


@dataclass
class Combination:
    """One configuration of a plan and what its replicas say."""

    settings: dict[str, str]
    results: Results
    budget: float | None
    deadline_s: float | None

    def row(self) -> dict[str, Any]:
        df = self.results.df
        row: dict[str, Any] = {"settings": self.settings, "replicas": len(df)}
        for m in ("wall_h", "cost_usd", "cost_per_useful_gpu_h", "eta", "interruptions", "on_demand_gpu_h",
                  "switches"):
            row[m] = stats.describe(df[m].to_numpy(dtype=float))
        done = df["finished"].to_numpy(dtype=float) > 0
        ok = np.ones(len(df), dtype=bool)
        if self.budget is not None:
            b = df["cost_usd"].to_numpy(dtype=float) <= self.budget
            row["p_budget"], row["p_budget_ci95"] = stats.proportion(b)
            ok &= b
        if self.deadline_s is not None:
            d = (df["wall_h"].to_numpy(dtype=float) * 3600 <= self.deadline_s) & done
            row["p_deadline"], row["p_deadline_ci95"] = stats.proportion(d)
            ok &= d
        row["p_both"] = float(ok.mean())
        row["p_finished"] = float(done.mean())
        return row


def pareto(points: list[tuple[float, float]]) -> list[bool]:
    """True where no other point is at least as good in both and better in one (both minimised)."""
    flags = []
    for i, (c, t) in enumerate(points):
        dominated = any(c2 <= c and t2 <= t and (c2 < c or t2 < t) for j, (c2, t2) in enumerate(points) if j != i)
        flags.append(not dominated and math.isfinite(c) and math.isfinite(t))
    return flags


def plan(scenario: Scenario | str | Path, *, overrides: list[str] | tuple[str, ...] = (),
         sweeps: list[str] | tuple[str, ...] = (), budget: float | None = None, deadline_s: float | None = None,
         confidence: float = 0.9, replicas: int | None = None, seed: int | None = None, workers: int | None = None,
         executor: str = "local", scheduler: str | None = None, out: Path | None = None, resume: bool = False,
         overwrite: bool = False, allow_long: bool = False, allow_code: bool = False,
         progress: Callable[[int, int], None] | None = None) -> PlanResult:
    """Simulate every combination of the sweeps; returns the plan (``to_json()``: the ``hsisim plan --json``).

    ``budget`` (USD) and ``deadline_s`` (seconds) default to the scenario's; the plan holds
    P(cost ≤ budget) and P(time ≤ deadline) with 95 % intervals, and with ``sweeps``
    (``KEY=V1,V2,...``) a row per combination, the Pareto flags and a recommendation. With sweeps and
    ``out``, each combination's replicas go to ``out/combo-NNN`` (a result store each).
    """
    _check(budget, deadline_s, confidence, replicas)
    axes = parse_sweeps(list(sweeps))
    combos = [dict(zip([k for k, _ in axes], vals, strict=True))
              for vals in itertools.product(*[v for _, v in axes])]
    scenarios = [_combination(scenario, [*overrides, *(f"{k}={v}" for k, v in c.items())], c, bool(axes))
                 for c in combos]
    base = scenarios[0]
    n = replicas if replicas is not None else base.simulation.replicas
    s = seed if seed is not None else base.simulation.seed
    b = budget if budget is not None else base.simulation.budget_usd
    d = deadline_s if deadline_s is not None else base.simulation.deadline
    if out is not None and axes:
        _plan_folder(out)

    def tick(advance: int, _total: int) -> None:
        if progress:
            progress(advance, n * len(combos))

    results: list[Combination] = []
    with ExitStack() as stack:
        pool = stack.enter_context(montecarlo.open_executor(executor, workers, scheduler))
        preps = [_in_combination(partial(tuning.prepared, sc, s, allow_code=allow_code, pool=pool), c, bool(axes))
                 for sc, c in zip(scenarios, combos, strict=True)]
        procs = montecarlo.processes(executor, workers)
        montecarlo.workload.check(preps, n, procs, allow_long=allow_long)
        for i, (sc, prep, c) in enumerate(zip(scenarios, preps, combos, strict=True)):
            where = out if out is None or not axes else out / f"combo-{i:03d}"
            res = montecarlo.run(sc, prep, replicas=n, seed=s, pool=pool, out=where, resume=resume,
                                 overwrite=overwrite, progress=tick)
            results.append(Combination(c, res, b, d))
    return PlanResult(_report(base.name, results, n, s, b, d, confidence, bool(axes)), [c.results for c in results])


def _check(budget: float | None, deadline_s: float | None, confidence: float, replicas: int | None) -> None:
    if budget is not None and not budget > 0:
        raise HsisimInputError(f"{{budget}} must be a positive amount of USD, got {budget}")
    if deadline_s is not None and not deadline_s > 0:
        raise HsisimInputError("{deadline_s} must be a positive duration")
    if not 0 < confidence < 1:
        raise HsisimInputError(f"{{confidence}} must be in (0, 1), got {confidence}")
    if replicas is not None and replicas < 2:
        raise HsisimInputError(f"{{replicas}} must be at least 2, got {replicas}")


def _combination(scenario: Scenario | str | Path, overrides: list[str], combo: dict[str, str],
                 swept: bool) -> Scenario:
    """The scenario of one combination (loaded and overridden)."""
    if isinstance(scenario, Scenario):
        return _in_combination(lambda: scenario.with_overrides(overrides), combo, swept)
    return _in_combination(lambda: load_scenario(scenario, overrides), combo, swept)


def _in_combination(fn: Callable[[], T], combo: dict[str, str], swept: bool) -> T:
    """``fn()``, its input errors naming the sweep combination they come from."""
    try:
        return fn()
    except HsisimInputError as exc:
        if not swept:
            raise
        where = ", ".join(f"{k}={v}" for k, v in combo.items())
        raise HsisimInputError(f"{exc.message} (in the {{sweeps}} combination {where})", key=exc.key, line=exc.line,
                               source=exc.source) from None


def _plan_folder(out: Path) -> None:
    """A plan's folder holds plan.json and one result folder per combination: refuse anything else."""
    if out.exists() and not out.is_dir():
        raise HsisimInputError(f"results folder {out} exists and is not a folder")
    if not out.is_dir():
        return
    foreign = [p.name for p in out.iterdir()
               if not (p.name in ("plan.json", ".hsisim.lock") or (p.is_dir() and p.name.startswith("combo-"))
                       or (p.name.startswith(".plan.json.") and p.name.endswith(".tmp")))]
    if foreign:
        raise HsisimInputError(f"{out} is not empty and holds no hsisim plan ({', '.join(sorted(foreign)[:3])}"
                               f"{', ...' if len(foreign) > 3 else ''}): choose a new or empty folder")


def _report(name: str, combos: list[Combination], n: int, seed: int, budget: float | None, deadline_s: float | None,
            confidence: float, swept: bool) -> dict[str, Any]:
    rows = [c.row() for c in combos]
    flags = pareto([(r["cost_usd"]["p90"], r["wall_h"]["p90"]) for r in rows])
    for r, f in zip(rows, flags, strict=True):
        r["pareto"] = f
        r["meets"] = all(r.get(k, 1.0) >= confidence for k in ("p_budget", "p_deadline")) and r["p_finished"] > 0
    ok = [i for i, r in enumerate(rows) if r["meets"]]
    if ok:
        best = min(ok, key=lambda i: (rows[i]["cost_usd"]["p90"], rows[i]["wall_h"]["p90"]))
        why = (f"cheapest P90 cost among the {len(ok)} of {len(rows)} combinations that meet "
               + _constraints(budget, deadline_s, confidence))
        recommended: int | None = best
    else:
        best = max(range(len(rows)), key=lambda i: (rows[i]["p_both"], -rows[i]["cost_usd"]["p90"]))
        why = ("no combination meets " + _constraints(budget, deadline_s, confidence)
               + "; shown: the most likely to meet both")
        recommended = None
    top = rows[best]
    out: dict[str, Any] = {"scenario": name, "replicas": n, "seed": seed, "budget_usd": budget,
                           "deadline_h": None if deadline_s is None else deadline_s / 3600, "confidence": confidence,
                           "settings": top["settings"],
                           "metrics": {m: top[m] for m in ("wall_h", "cost_usd", "cost_per_useful_gpu_h", "eta",
                                                           "interruptions")}}
    for k in ("p_budget", "p_budget_ci95", "p_deadline", "p_deadline_ci95", "p_both", "p_finished"):
        if k in top:
            out[k] = top[k]
    if swept:
        out["combinations"] = rows
        out["recommended"] = None if recommended is None else {"index": recommended,
                                                               "settings": rows[recommended]["settings"]}
        out["recommendation"] = why
    else:
        out["meets"] = top["meets"]
    return out


def _constraints(budget: float | None, deadline_s: float | None, confidence: float) -> str:
    parts = []
    if budget is not None:
        parts.append(f"cost ≤ ${budget:,.2f}")
    if deadline_s is not None:
        parts.append(f"wall time ≤ {deadline_s / 3600:.4g} h")
    if not parts:
        return "no constraint (no budget or deadline given)"
    return " and ".join(parts) + f" with probability ≥ {confidence:.0%}"
