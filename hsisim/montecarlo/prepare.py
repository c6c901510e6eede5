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


def prepare(sc: Scenario, seed: int, *, allow_code: bool = False) -> Prepared:
    """Resolve the scenario and run the micro simulation once for every world size it can take."""
    spec = resolve(sc, allow_code=allow_code)
    model = step_model_for(spec.job, seed)
    worlds = {spec.job.nodes: (spec.job, model)}
    if spec.spot is not None and spec.spot.recovery == "elastic":
        for n in range(1, spec.job.nodes):
            small = resolve_job(sc, nodes=n, allow_code=allow_code)
            worlds[n] = (small, step_model_for(small, seed))
    return Prepared(spec, model, worlds)


def step_model_for(job: Job, seed: int) -> StepModel:
    """The micro simulation's summary for ``job`` (seeded from the scenario seed)."""
    return estimate(job, np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0,))))


def replica(prep: Prepared, seed: int, i: int, log: list[tuple[float, str]] | None = None) -> Replica:
    """Replica ``i`` of a prepared run, ready to ``run()`` (its random streams drawn from the seed and ``i``)."""
    return Replica(prep.spec, prep.model, np.random.SeedSequence(seed, spawn_key=(1, i)), i, log=log,
                   worlds=prep.world)


def run_replica(prep: Prepared, seed: int, i: int, log: list[tuple[float, str]] | None = None) -> ReplicaResult:
    """The result of replica ``i`` of a prepared run."""
    return replica(prep, seed, i, log).run()
