"""``hsisim diagnose``: the seed article's checklist made quantitative.

A baseline run, then one what-if run per standard fix that applies (``fixes``), every run with the
same replica seeds (common random numbers: replica i of every run meets the same interruptions,
capacity waits and step noise), so a fix's gain is measured replica by replica, with a confidence
interval from the paired differences. Each fix is a list of scenario overrides: ``hsisim run
SCENARIO --set ...`` with the same seed and replica count gives exactly the numbers claimed.

Bottlenecks are ranked by what they cost (their share of the wall time T, or of the bill, whichever
is larger: §3.1's budget); fixes by their gain per unit of effort (§3.2: fix by marginal gain). The
gain is the objective's relative saving: ``balanced`` (the default) averages the wall-time and the
cost saving (the wall time alone on owned hardware billed at 0), ``time`` and ``cost`` take one,
``eta`` the gain in η (points). The article's trigger thresholds are evaluated beside
(``thresholds``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hsisim import montecarlo, stats, tuning
from hsisim.errors import HsisimInputError
from hsisim.montecarlo.prepare import StepModels
from hsisim.report import thresholds
from hsisim.report.fixes import BOTTLENECKS, EFFORT, MONEY, TIME_TERMS, Fix, candidates
from hsisim.scenario import Scenario

OBJECTIVES = ("balanced", "time", "cost", "eta")
FAST_REPLICAS = 16
# a lever saves at least this much (% of the objective, or η points) with 95 % confidence: below it, a
# "gain" is the rounding of two runs that differ in nothing that matters
MIN_GAIN = 0.1
Progress = Callable[[int, int], None]
Stage = Callable[[str], None]


@dataclass
class Diagnosis:
    """The ranked bottlenecks and fixes of a scenario, and the article's thresholds evaluated on it."""

    scenario: str
    replicas: int
    seed: int
    objective: str
    baseline: dict[str, Any]
    bottlenecks: list[dict[str, Any]]
    fixes: list[dict[str, Any]]  # ranked: levers (95 % CI of the gain above MIN_GAIN) first, by gain per effort
    thresholds: list[dict[str, Any]]
    skipped: list[dict[str, Any]] = field(default_factory=list)  # fixes that do not apply (and why)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the baseline run's (``Results.warnings``)

    def top(self, n: int = 2) -> list[dict[str, Any]]:
        """The ``n`` best levers: fixes whose gain is at least ``MIN_GAIN`` with 95 % confidence, by gain per effort."""
        return [f for f in self.fixes if f["lever"]][:n]

    def to_json(self) -> dict[str, Any]:
        """The ``hsisim diagnose --json`` object."""
        return {"scenario": self.scenario, "replicas": self.replicas, "seed": self.seed, "objective": self.objective,
                "baseline": self.baseline, "bottlenecks": self.bottlenecks, "fixes": self.fixes,
                "thresholds": self.thresholds, "skipped": self.skipped, "notes": self.notes,
                "warnings": self.warnings}

    def write(self, path: str | Path) -> Path:
        """Write ``to_json()`` to ``path`` (atomically); returns it."""
        from hsisim.writer import write_json

        write_json(Path(path), self.to_json())
        return Path(path)


class _Runner:
    """Runs the baseline and the what-ifs of one scenario with the same seed, pool and step models."""

    def __init__(self, scenario: Scenario | str | Path, overrides: list[str], seed: int | None, replicas: int,
                 pool: Any, allow_code: bool, progress: Progress | None, total: Callable[[], int]) -> None:
        self.source, self.overrides, self.pool, self.allow_code = scenario, overrides, pool, allow_code
        self.models: StepModels = {}
        self.progress, self.total = progress, total
        self.base = self.scenario(())
        self.seed = seed if seed is not None else self.base.simulation.seed
        self.n = replicas

    def scenario(self, sets: tuple[str, ...]) -> Scenario:
        """The scenario with the caller's overrides and then ``sets`` (read again from its file when it has one,
        exactly as ``hsisim run FILE --set ...`` reads it)."""
        if isinstance(self.source, Scenario):
            return self.source.with_overrides([*self.overrides, *sets])
        return Scenario.load(self.source, overrides=[*self.overrides, *sets])

    def prepare(self, sc: Scenario) -> montecarlo.Prepared:
        return tuning.prepared(sc, self.seed, allow_code=self.allow_code, pool=self.pool, models=self.models)

    def run(self, sc: Scenario, prep: montecarlo.Prepared) -> montecarlo.Results:
        def tick(n: int, _total: int) -> None:
            if self.progress is not None:
                self.progress(n, self.total())

        return montecarlo.run(sc, prep, replicas=self.n, seed=self.seed, pool=self.pool, progress=tick)


def diagnose(scenario: Scenario | str | Path, *, overrides: list[str] | tuple[str, ...] = (),
             replicas: int | None = None, seed: int | None = None, objective: str = "balanced", fast: bool = False,
             executor: str = "inline", workers: int | None = None, scheduler: str | None = None,
             allow_long: bool = False, allow_code: bool = False, progress: Progress | None = None,
             stage: Stage | None = None) -> Diagnosis:
    """Diagnose a scenario: its bottlenecks ranked by share of T (or of the bill), every standard fix that
    applies simulated as a what-if and ranked by gain per effort, and the article's thresholds.

    ``replicas`` per run (default 64; ``fast``: 16, and only the fixes of the two largest bottlenecks, at
    most two each, without the scaling-efficiency simulation); ``objective`` ranks the fixes (``balanced``,
    ``time``, ``cost`` or ``eta``). ``progress(replicas done, replicas planned)`` and ``stage(text)`` report
    what it is doing.
    """
    if objective not in OBJECTIVES:
        raise HsisimInputError(f"{{objective}} must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    n = replicas if replicas is not None else (FAST_REPLICAS if fast else 64)
    if n < 2:
        raise HsisimInputError(f"{{replicas}} must be at least 2 (gains are paired over replicas), got {n}")
    say = stage or (lambda text: None)
    planned = [1]
    with ExitStack() as stack:
        pool = stack.enter_context(montecarlo.open_executor(executor, workers, scheduler))
        r = _Runner(scenario, list(overrides), seed, n, pool, allow_code, progress, lambda: n * planned[0])
        say("baseline")
        prep = r.prepare(r.base)
        procs = montecarlo.processes(executor, workers)
        base = r.run(r.base, prep)
        shares = _shares(base.summary())
        todo = _select(candidates(r.base, prep.job, prep.job.stall_share > 0 or prep.job.oom_retry_s > 0),
                       shares, fast)
        montecarlo.workload.check([prep], n, procs, allow_long=allow_long, repeats=1 + len(todo))
        planned[0] = 1 + len(todo)
        results, skipped = [], []
        for fix in todo:
            say(f"what-if: {fix.title}")
            try:
                sc = r.scenario(fix.overrides)
                res = r.run(sc, r.prepare(sc))
            except HsisimInputError as exc:
                skipped.append({"id": fix.id, "bottleneck": fix.bottleneck, "overrides": list(fix.overrides),
                                "reason": exc.message})
                continue
            results.append(_measure(fix, base.df, res.df, objective, r.base))
        say("thresholds")
        checks = thresholds.evaluate(r.base, prep, base.summary(), r.seed, r.models, scaling=not fast)
    ranked = rank(results)
    return Diagnosis(r.base.name, n, r.seed, objective, _baseline(base), _bottlenecks(shares, ranked), ranked, checks,
                     skipped, _notes(r.base, fast, len(todo)), base.warnings)


def _shares(summary: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per bottleneck: its share of the mean wall time and of the mean bill."""
    m = summary["metrics"]
    wall, cost = m["wall_h"]["mean"], m["cost_usd"]["mean"]
    out = {b: {"time": 0.0, "cost": 0.0} for b in BOTTLENECKS}
    for term, b in TIME_TERMS.items():
        out[b]["time"] += m[f"t_{term}_h"]["mean"] / wall if wall else 0.0
    for cat, b in MONEY.items():
        out[b]["cost"] += m[f"cost_{cat}_usd"]["mean"] / cost if cost else 0.0
    return out


def _select(fixes: list[Fix], shares: dict[str, dict[str, float]], fast: bool) -> list[Fix]:
    """All fixes; in fast mode those of the two largest bottlenecks (with a share), at most two each, least
    effort first."""
    if not fast:
        return fixes
    order = sorted((b for b in shares if max(shares[b].values()) > 0), key=lambda b: -max(shares[b].values()))[:2]
    out = []
    for b in order:
        out += sorted((f for f in fixes if f.bottleneck == b), key=lambda f: f.effort)[:2]
    return out


def _paired(delta: np.ndarray) -> tuple[float, list[float]]:
    d = stats.describe(delta)
    return d["mean"], d["ci95"]


def _measure(fix: Fix, base: pd.DataFrame, df: pd.DataFrame, objective: str, sc: Scenario) -> dict[str, Any]:
    """A fix's effect, replica by replica against the baseline (the same replica seeds)."""
    out: dict[str, Any] = {"id": fix.id, "bottleneck": fix.bottleneck, "title": fix.title,
                           "overrides": list(fix.overrides), "effort": fix.effort, "effort_kind": EFFORT[fix.effort],
                           "source": fix.source}
    cols = {}
    for metric, scale in (("eta", 100.0), ("wall_h", 1.0), ("cost_usd", 1.0)):
        a, b = base[metric].to_numpy(dtype=float), df[metric].to_numpy(dtype=float)
        cols[metric] = (b - a) * scale
        mean, ci = _paired(cols[metric])
        before = float(a.mean())
        entry = {"before": before, "after": float(b.mean()), "change": mean, "ci95": ci}
        if metric != "eta":
            entry["change_pct"] = 100 * mean / before if before else 0.0
        out["eta_points" if metric == "eta" else metric] = entry
    sim = sc.simulation
    if sim.deadline is not None:
        out["p_deadline"] = {"before": float((base["wall_h"] * 3600 <= sim.deadline).mean()),
                             "after": float((df["wall_h"] * 3600 <= sim.deadline).mean())}
    if sim.budget_usd is not None:
        out["p_budget"] = {"before": float((base["cost_usd"] <= sim.budget_usd).mean()),
                           "after": float((df["cost_usd"] <= sim.budget_usd).mean())}
    gain = _objective(objective, cols, base)
    out["gain"], out["gain_ci95"] = _paired(gain)
    out["gain_unit"] = "η points" if objective == "eta" else "% saved"
    out["score"] = out["gain"] / fix.effort
    out["lever"] = bool(out["gain_ci95"][0] >= MIN_GAIN)
    return out


def _objective(objective: str, cols: dict[str, np.ndarray], base: pd.DataFrame) -> np.ndarray:
    """Per replica: the objective's saving in % of the baseline mean (η: the gain in points)."""
    if objective == "eta":
        return cols["eta"]
    wall0, cost0 = float(base["wall_h"].mean()), float(base["cost_usd"].mean())
    time_saved = -100 * cols["wall_h"] / wall0
    if cost0 <= 0 or objective == "time":
        return time_saved
    cost_saved = -100 * cols["cost_usd"] / cost0
    return cost_saved if objective == "cost" else (time_saved + cost_saved) / 2


def rank(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Levers first, by gain per effort (then by gain); the rest after them, by gain."""
    ordered = sorted(results, key=lambda f: (not f["lever"], -f["score"] if f["lever"] else -f["gain"], -f["gain"]))
    for i, f in enumerate(ordered, 1):
        f["rank"] = i
    return ordered


def _bottlenecks(shares: dict[str, dict[str, float]], fixes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bottlenecks ranked by the larger of their share of T and of the bill, each with its fixes (best first)."""
    rows: list[dict[str, Any]] = []
    for b, (label, section) in BOTTLENECKS.items():
        mine = [f for f in fixes if f["bottleneck"] == b]
        best = next((f for f in mine if f["lever"]), None)
        rows.append({"id": b, "label": label, "section": section, "share_of_time": shares[b]["time"],
                     "share_of_cost": shares[b]["cost"], "share": max(shares[b].values()),
                     "fixes": [f["id"] for f in mine], "best_fix": best["id"] if best else None})
    rows.sort(key=lambda r: -r["share"])
    for i, r in enumerate(rows, 1):
        r["rank"] = i
    return rows


def _baseline(res: montecarlo.Results) -> dict[str, Any]:
    m = res.summary()["metrics"]
    out = {k: m[k]["mean"] for k in ("eta", "wall_h", "cost_usd", "cost_per_useful_gpu_h", "interruptions")}
    out.update({f"t_{t}_h": m[f"t_{t}_h"]["mean"] for t in ("compute", "data", "comm", "stall", "recover",
                                                             "overhead")})
    out["notes"] = list(res.notes)
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def _notes(sc: Scenario, fast: bool, evaluated: int) -> list[str]:
    out = ["each fix is simulated alone against the baseline; gains of several fixes do not simply add up"]
    if sc.timings is not None:
        out.append("the scenario gives measured step timings: data, memory and communication fixes cannot be "
                   "simulated")
    if fast:
        out.append(f"fast mode: {evaluated} fix(es) of the two largest bottlenecks only")
    return out
