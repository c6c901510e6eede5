"""The public functions behind every command: what ``import hsisim`` offers a notebook.

Each takes a scenario (a ``Scenario`` or the path of a YAML file) and keyword-only options, and
returns an object with the answer (``Results``, ``PlanResult``, ``OptimizeResult``, a profile,
a validation report) that can say itself as JSON (``summary()``/``to_json()``) and write itself.
Bad input raises ``HsisimInputError`` naming the scenario key or the parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hsisim.errors import HsisimInputError
from hsisim.scenario import Scenario

ScenarioLike = Scenario | str | Path
Keys = list[str] | tuple[str, ...]  # KEY=VALUE overrides, KEY=V1,V2 sweeps
Progress = Callable[[int, int], None]


def _scenario(scenario: ScenarioLike, overrides: Keys) -> Scenario:
    if isinstance(scenario, Scenario):
        return scenario.with_overrides(overrides)
    if isinstance(scenario, str | Path):
        return Scenario.load(scenario, overrides=overrides)
    raise HsisimInputError(f"{{scenario}} must be a Scenario or the path of a YAML file, got {type(scenario).__name__}")


def simulate(scenario: ScenarioLike, *, overrides: Keys = (), replicas: int | None = None,
             seed: int | None = None, workers: int | None = None, executor: str = "local",
             scheduler: str | None = None, out: str | Path | None = None, resume: bool = False,
             overwrite: bool = False, ci_halfwidth: float | None = None, max_replicas: int = 100_000,
             allow_long: bool = False, allow_code: bool = False, progress: Progress | None = None) -> Any:
    """Simulate a scenario (Monte Carlo) and return its ``Results``.

    ``replicas`` and ``seed`` default to the scenario's; ``ci_halfwidth`` (e.g. 0.01) runs until the
    mean cost is known to ±1 % instead. ``executor`` is ``inline``, ``local`` (``workers``
    processes) or ``dask`` (a ``LocalCluster``, or ``scheduler``); the same seed gives the same
    results on any of them. ``out`` streams replicas to a result folder (``resume`` continues it,
    ``overwrite`` replaces a finished run there). ``allow_long`` runs work estimated over ten
    minutes; ``allow_code`` lets factories named in the scenario run.
    """
    from hsisim import montecarlo, tuning

    sc = _scenario(scenario, overrides)
    s = seed if seed is not None else sc.simulation.seed
    montecarlo.check_executor(executor, scheduler)
    prep = tuning.prepared(sc, s, allow_code=allow_code, executor=executor, workers=workers, scheduler=scheduler)
    return montecarlo.run(sc, prep, replicas=replicas, seed=s, workers=workers, executor=executor,
                          scheduler=scheduler, progress=progress, out=out, resume=resume, overwrite=overwrite,
                          ci_halfwidth=ci_halfwidth, max_replicas=max_replicas, allow_long=allow_long)


def plan(scenario: ScenarioLike, *, overrides: Keys = (), sweeps: Keys = (),
         budget: float | None = None, deadline_s: float | None = None, confidence: float = 0.9,
         replicas: int | None = None, seed: int | None = None, workers: int | None = None, executor: str = "local",
         scheduler: str | None = None, out: str | Path | None = None, resume: bool = False, overwrite: bool = False,
         allow_long: bool = False, allow_code: bool = False, progress: Progress | None = None) -> Any:
    """Budget planning: P(cost ≤ ``budget`` USD), P(time ≤ ``deadline_s``), and with ``sweeps``
    (``"cluster.nodes=1,2,4"``) every combination, its Pareto flag and the recommended one (``PlanResult``)."""
    from hsisim import planning

    return planning.plan(scenario, overrides=overrides, sweeps=sweeps, budget=budget, deadline_s=deadline_s,
                         confidence=confidence, replicas=replicas, seed=seed, workers=workers, executor=executor,
                         scheduler=scheduler, out=Path(out) if out is not None else None, resume=resume,
                         overwrite=overwrite, allow_long=allow_long, allow_code=allow_code, progress=progress)


def optimize(scenario: ScenarioLike, *, overrides: Keys = (), objective: str = "cost",
             replicas: int = 200, seed: int | None = None, workers: int | None = None, executor: str = "local",
             scheduler: str | None = None, allow_long: bool = False, allow_code: bool = False) -> Any:
    """The checkpoint interval that minimises cost per useful GPU-hour (``objective="cost"``) or wall time
    (``"time"``) on a spot cluster, with its 95 % CI and Young's and Daly's intervals (``OptimizeResult``)."""
    from hsisim.tuning import optimize_interval

    return optimize_interval(_scenario(scenario, overrides), objective=objective, replicas=replicas, seed=seed,
                             workers=workers, executor=executor, scheduler=scheduler, allow_long=allow_long,
                             allow_code=allow_code)


def calibrate(*, device: str = "cpu", model: str = "hybridsn", dataset: str = "indian_pines",
              out: str | Path | None = None, quick: bool = False, patch: int | None = None, pca: int | None = None,
              batch: int = 64, world_size: int = 1, checkpoint_dir: str | Path | None = None,
              checkpoint_storage: str = "local_nvme", fmt: str = "npy", spec: str | None = None,
              model_factory: str | None = None, dataset_factory: str | None = None,
              factory_kwargs: str | dict[str, Any] | None = None, log: Callable[[str], None] | None = None) -> Any:
    """Run short real PyTorch probes on ``device`` and return the calibration profile (``ProfileData``;
    written to ``out`` when given). ``spec`` derives one from a catalog GPU's published figures instead."""
    from hsisim.calibration.run import calibrate as probe
    from hsisim.calibration.run import spec_profile

    if spec is not None:
        prof = spec_profile(spec, model, dataset, patch, pca)
    else:
        prof = probe(device=device, model=model, dataset=dataset, quick=quick, patch=patch, pca=pca, batch=batch,
                     world_size=world_size, checkpoint_dir=Path(checkpoint_dir) if checkpoint_dir else None,
                     checkpoint_storage=checkpoint_storage, fmt=fmt, log=log, model_factory=model_factory,
                     dataset_factory=dataset_factory, factory_kwargs=factory_kwargs)
    if out is not None:
        prof.write(out)
    return prof


def validate(scenario: str | Path, *, overrides: Keys = (), device: str = "cpu",
             steps: int = 100, warmup: int | None = None, profile: str | Path | None = None, world_size: int = 1,
             allow_code: bool = False, log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Train the scenario's model for real on ``device`` and compare step time and data-wait share with the
    simulator's prediction; returns measured, predicted and the errors in %."""
    from hsisim.calibration.validate import validate as run_validation

    return run_validation(Path(scenario), sets=list(overrides), device=device, steps=steps, warmup=warmup,
                          profile=Path(profile) if profile is not None else None, world_size=world_size, log=log,
                          allow_code=allow_code)


def diagnose(scenario: ScenarioLike, *, overrides: Keys = (), replicas: int | None = None, seed: int | None = None,
             objective: str = "balanced", fast: bool = False, executor: str = "inline", workers: int | None = None,
             scheduler: str | None = None, allow_long: bool = False, allow_code: bool = False,
             progress: Progress | None = None, stage: Callable[[str], None] | None = None) -> Any:
    """The seed article's checklist, quantified (``Diagnosis``): bottlenecks ranked by their share of the wall
    time (or of the bill), each standard fix that applies simulated as a what-if with the baseline's replica
    seeds and ranked by gain per effort (``top(n)``: the best levers), and the article's trigger thresholds.

    ``replicas`` per run (default 64; ``fast``: 16, the two largest bottlenecks' fixes only); ``objective``:
    ``balanced`` (mean of the % saved on wall time and on cost), ``time``, ``cost`` or ``eta``. Every fix is
    a list of overrides: ``simulate`` with them, the same seed and replicas gives the claimed numbers.
    """
    from hsisim.report.diagnose import diagnose as run_diagnosis

    return run_diagnosis(scenario, overrides=overrides, replicas=replicas, seed=seed, objective=objective, fast=fast,
                         executor=executor, workers=workers, scheduler=scheduler, allow_long=allow_long,
                         allow_code=allow_code, progress=progress, stage=stage)


def write_report(scenario: ScenarioLike, *, out: str | Path, overrides: Keys = (), replicas: int | None = None,
                 sweep_replicas: int | None = None, seed: int | None = None, executor: str = "local",
                 workers: int | None = None, scheduler: str | None = None, allow_long: bool = False,
                 allow_code: bool = False, progress: Progress | None = None,
                 stage: Callable[[str], None] | None = None) -> Any:
    """``hsisim report``: simulate the scenario and write its report into ``out`` atomically (``Report``).

    It writes ``budget.png``, ``cost.png``, ``distribution.png``, ``checkpoint.png``, ``timeline.png``,
    ``scaling.png``, ``report.md`` (the tables behind each figure, the diagnosis, the scenario and the
    manifest) and ``report.json``. (Not ``hsisim.report``: that name is the package of figures and tables.)

    ``out`` must be new, empty or a previous report (which is replaced). ``replicas`` for the main run
    (default: the scenario's); ``sweep_replicas`` per configuration of the checkpoint curve, the scaling
    sweep and the diagnosis (default: ``min(replicas, 200)``).
    """
    from hsisim.report.build import report as build

    return build(scenario, out=out, overrides=overrides, replicas=replicas, sweep_replicas=sweep_replicas, seed=seed,
                 executor=executor, workers=workers, scheduler=scheduler, allow_long=allow_long,
                 allow_code=allow_code, progress=progress, stage=stage)
