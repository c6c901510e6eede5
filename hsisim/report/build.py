"""``hsisim report``: six figures, ``report.md`` and ``report.json`` for one scenario, written atomically.

One Monte Carlo run gives the budget, cost and distribution figures and the replica drawn in the
timeline (run again with a trace). The checkpoint U-curve comes from ``optimize`` (spot only),
the scaling figure from ``plan`` sweeps over the node count and the market, and the diagnosis
from ``diagnose``; these use ``sweep_replicas`` replicas per configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hsisim import montecarlo, tuning
from hsisim.montecarlo import Results
from hsisim.report import curves, figures, folder, gantt, markdown
from hsisim.report.diagnose import Diagnosis, diagnose
from hsisim.scenario import Scenario
from hsisim.writer import jsonable, write_json, write_text

Progress = Callable[[int, int], None]
Stage = Callable[[str], None]
SWEEP_REPLICAS = 200


@dataclass
class Report:
    """A written report: its folder, the tables behind its figures, the run and the diagnosis."""

    folder: Path
    tables: dict[str, pd.DataFrame]
    results: Results
    diagnosis: Diagnosis
    data: dict[str, Any]  # report.json

    def to_json(self) -> dict[str, Any]:
        """The ``report.json`` object (also printed by ``hsisim report --json``)."""
        return self.data


@dataclass(frozen=True)
class _Opts:
    source: Scenario | str | Path
    overrides: list[str]
    seed: int
    sweep: int
    executor: str
    workers: int | None
    scheduler: str | None
    allow_long: bool
    allow_code: bool
    progress: Progress | None


def report(scenario: Scenario | str | Path, *, out: str | Path, overrides: list[str] | tuple[str, ...] = (),
           replicas: int | None = None, sweep_replicas: int | None = None, seed: int | None = None,
           executor: str = "local", workers: int | None = None, scheduler: str | None = None,
           allow_long: bool = False, allow_code: bool = False, progress: Progress | None = None,
           stage: Stage | None = None) -> Report:
    """Simulate ``scenario`` and write its report into ``out`` (new, empty, or a previous report).

    ``replicas`` for the main run (default: the scenario's); ``sweep_replicas`` per configuration of
    the checkpoint curve, the scaling sweep and the diagnosis (default: ``min(replicas, 200)``).
    """
    target = Path(out)
    folder.check(target)
    say = stage or (lambda text: None)
    sc = scenario.with_overrides(list(overrides)) if isinstance(scenario, Scenario) else \
        Scenario.load(scenario, overrides=list(overrides))
    s = seed if seed is not None else sc.simulation.seed
    say("Monte Carlo run")
    prep = tuning.prepared(sc, s, allow_code=allow_code, executor=executor, workers=workers, scheduler=scheduler)
    res = montecarlo.run(sc, prep, replicas=replicas, seed=s, workers=workers, executor=executor,
                         scheduler=scheduler, progress=progress, allow_long=allow_long)
    opts = _Opts(scenario, list(overrides), s, sweep_replicas or min(len(res.df), SWEEP_REPLICAS), executor,
                 workers, scheduler, allow_long, allow_code, progress)
    tmp = folder.staging(target)
    try:
        tables, ctx = _draw(sc, prep, res, opts, tmp, say)
        say("report.md")
        data = _json(ctx, tables)
        write_json(tmp / "report.json", data)
        write_text(tmp / "report.md", markdown.render(ctx))
        folder.publish(tmp, target)
    except BaseException:
        folder.discard(tmp)
        raise
    return Report(target, tables, res, ctx["diag"], data)


def _draw(sc: Scenario, prep: montecarlo.Prepared, res: Results, o: _Opts, tmp: Path,
          say: Stage) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Every figure into ``tmp``; returns their tables and the context of ``report.md``."""
    tables: dict[str, pd.DataFrame] = {"budget": figures.budget(res, tmp / "budget.png")}
    tables["cost"], tables["prices"] = figures.cost(res, tmp / "cost.png")
    tables["distribution"] = figures.distribution(res, tmp / "distribution.png")
    say("timeline of one replica")
    tx = gantt.trace_replica(prep, o.seed, gantt.pick_replica(res.df))
    tables["timeline"] = gantt.figure(tx, sc.name, tmp / "timeline.png")
    tables["timeline_totals"] = timeline_totals(tx)
    say("checkpoint interval (optimize)")
    opt = None
    if sc.cluster.market == "spot" and sc.spot is not None:
        opt = tuning.optimize_interval(sc, replicas=o.sweep, seed=o.seed, executor=o.executor, workers=o.workers,
                                       scheduler=o.scheduler, prep=prep, allow_long=o.allow_long)
    tables["checkpoint"] = curves.checkpoint(opt, sc.name, tmp / "checkpoint.png")
    say("scaling: nodes × market (plan)")
    rows, notes = curves.plan_scaling(o.source, o.overrides, sc, replicas=o.sweep, seed=o.seed, executor=o.executor,
                                      workers=o.workers, progress=o.progress)
    per_node = curves.gpus_per_node(sc)
    notes.insert(0, f"GPUs step by one {sc.cluster.instance} ({per_node} GPU{'s' if per_node > 1 else ''})")
    own = {"cluster.nodes": str(sc.cluster.nodes), "cluster.market": sc.cluster.market}
    tables["scaling"] = curves.scaling(curves.scaling_table(rows, per_node, own), sc.name, notes,
                                       tmp / "scaling.png")
    say("diagnosis (what-if runs)")
    diag = diagnose(o.source, overrides=o.overrides, replicas=o.sweep, seed=o.seed, executor=o.executor,
                    workers=o.workers, scheduler=o.scheduler, allow_long=o.allow_long, allow_code=o.allow_code,
                    progress=o.progress)
    ctx = _context(sc, res, o, tx, opt, notes, diag)
    ctx["tables"] = tables
    return tables, ctx


def timeline_totals(tx: gantt.Traced) -> pd.DataFrame:
    """The six terms of the traced replica from its trace and from its results row (hours)."""
    terms = gantt.job_terms(tx.trace)
    return pd.DataFrame([{"term": t, "trace_h": v / 3600, "results_h": tx.row[f"t_{t}_h"]} for t, v in terms.items()])


def _context(sc: Scenario, res: Results, o: _Opts, tx: gantt.Traced, opt: Any, notes: list[str],
             diag: Diagnosis) -> dict[str, Any]:
    path = str(o.source) if not isinstance(o.source, Scenario) else "SCENARIO.yaml"
    sets = "".join(f" --set {x}" for x in o.overrides)
    losses = len(tx.trace.losses)
    manifest = res.manifest()
    manifest["step_model"].pop("wall_seconds", None)  # how long the micro simulation took: not reproducible
    ctx: dict[str, Any] = {
        "name": sc.name, "description": sc.description, "manifest": manifest, "notes": list(res.notes),
        "warnings": res.warnings,
        "scenario": sc.model_dump(mode="json", by_alias=True), "eta": res.summary()["metrics"]["eta"]["mean"],
        "command": f"hsisim report {path}{sets} --replicas {len(res.df)} --seed {o.seed}",
        "reproduce": f"hsisim run {path}{sets} --replicas {diag.replicas} --seed {o.seed}",
        "sweep_replicas": o.sweep, "timeline_replica": tx.index, "scaling_notes": notes, "diag": diag,
        "diagnosis": diag.to_json(),
        "timeline_line": f"{losses} reclaim(s), {len(tx.trace.checkpoints):,} blocking checkpoint(s), wall time "
                         f"{tx.row['wall_h']:,.2f} h (chosen as a typical replica: the median wall time among "
                         "those with the most common number of interruptions).",
    }
    if opt is not None:
        ctx["objective_unit"] = "USD per useful GPU-hour" if opt.objective == "cost" else "wall time (h)"
        ctx["checkpoint_line"] = (f"Simulated optimum {opt.optimal_interval_s / 60:,.3f} min (intervals not "
                                  f"worse at 95 %: {opt.ci95_s[0] / 60:,.3f}–{opt.ci95_s[1] / 60:,.3f}); Young "
                                  f"{opt.young_interval_s / 60:,.3f} min, Daly {opt.daly_interval_s / 60:,.3f} min; "
                                  f"job MTBF {opt.mtbf_s / 3600:,.1f} h.")
    return ctx


def _json(ctx: dict[str, Any], tables: dict[str, pd.DataFrame]) -> dict[str, Any]:
    return jsonable({"format": folder.FORMAT, "scenario": ctx["name"], "command": ctx["command"],
                     "manifest": ctx["manifest"], "notes": ctx["notes"], "warnings": ctx["warnings"],
                     "tables": {k: df.to_dict(orient="records") for k, df in tables.items() if k != "timeline"},
                     "timeline_replica": ctx["timeline_replica"], "diagnosis": ctx["diagnosis"]})
