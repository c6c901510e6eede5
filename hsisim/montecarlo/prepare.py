"""What every replica of a run shares: the resolved spec and its step models, one per world size.

Replica i draws from ``SeedSequence(seed, spawn_key=(1, i))`` and the micro simulation from
``spawn_key=(0,)``, so results depend on the seed alone, never on how replicas are split over
worker processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from hsisim.resolve import resolve, resolve_job
from hsisim.scenario import Scenario
from hsisim.sim.records import ReplicaResult
from hsisim.sim.replica import Replica
from hsisim.sim.spec import Job, RunSpec
from hsisim.sim.stepmodel import StepModel, estimate
from hsisim.sim.trace import Trace

# step models already estimated, by (job, seed): what-if runs that change only run-level keys
# (market, checkpoints, recovery) reuse their baseline's micro simulation
StepModels = dict[tuple[Job, int], StepModel]


@dataclass(frozen=True)
class Prepared:
    """A resolved run and the micro simulation's step model of every world size it can take."""

    spec: RunSpec
    model: StepModel
    worlds: dict[int, tuple[Job, StepModel]] = field(default_factory=dict)

    @property
    def job(self) -> Job:
        return self.spec.job

    def world(self, nodes: int) -> tuple[Job, StepModel]:
        return self.worlds.get(nodes, (self.spec.job, self.model))

    def with_interval(self, seconds: float | None) -> Prepared:
        """The same run with the checkpoint interval set (training progress, seconds)."""
        return replace(self, spec=self.spec.with_interval(seconds))


def prepare(sc: Scenario, seed: int, *, allow_code: bool = False, models: StepModels | None = None) -> Prepared:
    """Resolve the scenario and run the micro simulation once for every world size it can take
    (``models``: step models estimated before, reused and added to)."""
    spec = resolve(sc, allow_code=allow_code)
    model = step_model_for(spec.job, seed, models)
    worlds = {spec.job.nodes: (spec.job, model)}
    if spec.spot is not None and spec.spot.recovery == "elastic":
        for n in range(1, spec.job.nodes):
            small = resolve_job(sc, nodes=n, allow_code=allow_code)
            worlds[n] = (small, step_model_for(small, seed, models))
    return Prepared(spec, model, worlds)


def step_model_for(job: Job, seed: int, models: StepModels | None = None) -> StepModel:
    """The micro simulation's summary for ``job`` (seeded from the scenario seed); a function of the
    job's numbers and the seed alone, so ``models`` may hold it for another scenario with the same job."""
    key = (replace(job, notes=()), seed)
    if models is not None and key in models:
        return models[key]
    model = estimate(job, np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,))))
    if models is not None:
        models[key] = model
    return model


def replica(prep: Prepared, seed: int, i: int, log: list[tuple[float, str]] | None = None,
            trace: Trace | None = None) -> Replica:
    """Replica ``i`` of a prepared run, ready to ``run()`` (its random streams drawn from the seed and ``i``;
    ``log`` collects its events as text, ``trace`` its phases for the timeline figure)."""
    return Replica(prep.spec, prep.model, np.random.SeedSequence(seed, spawn_key=(1, i)), i, log=log,
                   worlds=prep.world, trace=trace)


def run_replica(prep: Prepared, seed: int, i: int, log: list[tuple[float, str]] | None = None) -> ReplicaResult:
    """The result of replica ``i`` of a prepared run."""
    return replica(prep, seed, i, log).run()
