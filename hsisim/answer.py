"""What a spot run's numbers mean beside the same job on on-demand capacity.

``hsisim run`` prints a spot job's time and cost beside the same job on on-demand nodes,
simulated with the same replica seeds (common random numbers: the same queue waits and step
noise), so the difference is the market's, not luck's. (The assumptions and warnings are part of
every run's summary: ``hsisim.resolve.assumptions``.)
"""

from __future__ import annotations

from typing import Any

from hsisim.montecarlo.results import Results


def on_demand_twin(res: Results, *, executor: str = "local", workers: int | None = None,
                   allow_code: bool = False) -> dict[str, Any] | None:
    """The same job on on-demand capacity, with the same replica seeds; None when it already is on-demand.

    Returns its mean wall time, cost and cost per useful GPU-hour beside the spot run's, and the
    differences (spot minus on-demand).
    """
    from hsisim import api

    sc = res.scenario
    if sc.cluster.market != "spot":
        return None
    twin = api.simulate(sc.with_overrides(["cluster.market=on_demand", "cluster.on_demand_nodes=0"]),
                        replicas=len(res.df), seed=res.seed, executor=executor, workers=workers, allow_long=True,
                        allow_code=allow_code)
    mine, theirs = _means(res), _means(twin)
    out = {"on_demand": theirs, "spot": mine,
           "saving_usd": theirs["cost_usd"] - mine["cost_usd"],
           "saving_pct": 100 * (1 - mine["cost_usd"] / theirs["cost_usd"]) if theirs["cost_usd"] else None,
           "extra_wall_h": mine["wall_h"] - theirs["wall_h"]}
    if sc.simulation.deadline is not None:
        out["on_demand"]["p_deadline"] = float((twin.df["wall_h"] * 3600 <= sc.simulation.deadline).mean())
    return out


def _means(res: Results) -> dict[str, Any]:
    df = res.df
    keys = ("wall_h", "cost_usd", "cost_per_useful_gpu_h", "eta", "useful_gpu_h")
    out: dict[str, Any] = {k: float(df[k].replace(float("inf"), float("nan")).mean()) for k in keys}
    out["wall_p90_h"] = float(df["wall_h"].quantile(0.9))
    out["cost_p90_usd"] = float(df["cost_usd"].quantile(0.9))
    return out


LEVERS_BUDGET_S = 20.0  # the most the lever runs may add to ``hsisim run`` (estimated)
FAST_WHAT_IFS = 4  # diagnose's fast mode: two fixes of each of the two largest bottlenecks


def levers_cost(res: Results, processes: int) -> float:
    """Estimated seconds of the lever runs (the baseline and up to four what-ifs of diagnose's fast
    mode) on ``processes`` processes, from the work estimate of one of the run's replicas."""
    from types import SimpleNamespace

    from hsisim.montecarlo import workload
    from hsisim.report.diagnose import FAST_REPLICAS

    per = workload.estimate(SimpleNamespace(job=res.spec.job, model=res.step_model, spec=res.spec)).seconds
    return per * FAST_REPLICAS * (1 + FAST_WHAT_IFS) / max(1, min(processes, FAST_REPLICAS))


def extras(res: Results, *, compare: bool, levers: bool, executor: str = "local",
           workers: int | None = None, allow_code: bool = False) -> dict[str, Any]:
    """What ``hsisim run`` adds to a run's summary: the on-demand comparison (``compare``) and the
    biggest levers (``levers``), or why they were not simulated (``levers_skipped``). ``allow_code``: the
    run was allowed to import the scenario's factories, and so are these runs of it."""
    from hsisim import montecarlo

    out: dict[str, Any] = {}
    if compare:
        out["on_demand_comparison"] = on_demand_twin(res, executor=executor, workers=workers, allow_code=allow_code)
    if levers:
        if (cost := levers_cost(res, montecarlo.processes(executor, workers))) <= LEVERS_BUDGET_S:
            out["levers"] = biggest_levers(res, executor=executor, workers=workers, allow_code=allow_code)
        else:
            out["levers_skipped"] = (f"the what-if runs would take about {cost / 60:.0f} min here; "
                                     "hsisim diagnose runs them")
    return out


def biggest_levers(res: Results, *, n: int = 2, executor: str = "local", workers: int | None = None,
                   allow_code: bool = False) -> list[dict[str, Any]]:
    """The ``n`` biggest levers of the run's scenario (``hsisim diagnose``'s fast mode: what-if runs with
    the same seeds), each with its overrides and its effect on wall time, cost and η."""
    from hsisim.report.diagnose import diagnose

    d = diagnose(res.scenario, fast=True, seed=res.seed, executor=executor, workers=workers, allow_long=True,
                 allow_code=allow_code)
    return [{"fix": f["title"], "id": f["id"], "overrides": f["overrides"], "effort": f["effort_kind"],
             "wall_pct": f["wall_h"]["change_pct"], "cost_pct": f["cost_usd"]["change_pct"],
             "eta_points": f["eta_points"]["change"]} for f in d.top(n)]
