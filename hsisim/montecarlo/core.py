"""Running replicas: in chunks, on an executor, streamed to a result store, to a count or a precision.

``run`` takes a prepared run (resolved spec and step models) and returns its ``Results``. It
knows nothing of checkpoint optimisation: a run whose policy is ``optimal`` arrives here with its
interval already chosen (``hsisim.optimize``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hsisim import stats
from hsisim.errors import HsisimInputError
from hsisim.montecarlo import workload
from hsisim.montecarlo.executors import Executor, check_executor, open_executor
from hsisim.montecarlo.prepare import Prepared, run_replica
from hsisim.montecarlo.results import Results
from hsisim.montecarlo.store import CHUNK, ResultStore, run_identity
from hsisim.scenario import Scenario

FIRST_WAVE = 256  # replicas before the first ci_halfwidth check
Progress = Callable[[int, int], None]  # (replicas just finished, replicas planned so far)


def run(sc: Scenario, prep: Prepared, *, replicas: int | None = None, seed: int | None = None,
        workers: int | None = None, executor: str = "local", scheduler: str | None = None,
        progress: Progress | None = None, out: str | Path | None = None, resume: bool = False,
        overwrite: bool = False, ci_halfwidth: float | None = None, max_replicas: int = 100_000,
        pool: Executor | None = None, allow_long: bool = False) -> Results:
    """Run the replicas of ``prep`` (the scenario ``sc`` resolved) and return their ``Results``.

    ``replicas`` fixes the count (default: the scenario's); ``ci_halfwidth`` (relative, e.g. 0.01)
    instead runs waves until the 95 % confidence interval of the mean cost is that tight, or
    ``max_replicas``. ``out`` streams chunks to a result store (``resume`` continues one,
    ``overwrite`` replaces a finished one); ``pool`` reuses an open executor. Runs estimated over
    ``workload.LIMIT_S`` are refused unless ``allow_long``.
    """
    n = replicas if replicas is not None else sc.simulation.replicas
    s = seed if seed is not None else sc.simulation.seed
    _check(n, ci_halfwidth, max_replicas, resume, out, executor, scheduler)
    planned = max_replicas if ci_halfwidth is not None else n
    procs = _processes(executor, workers, planned)
    if pool is None:  # an adaptive run is checked on its first wave, and later waves stop at the limit
        workload.check([prep], min(planned, FIRST_WAVE) if ci_halfwidth is not None else n, procs,
                       allow_long=allow_long)
    if ci_halfwidth is not None and not allow_long:
        max_replicas = min(max_replicas, workload.affordable(prep, procs))
    with ExitStack() as stack:
        ex = pool or stack.enter_context(open_executor(executor, procs, scheduler))
        store = None
        if out is not None:
            identity = run_identity(sc, s, CHUNK, prep.spec.checkpoint.override_s)
            store = ResultStore.open(Path(out), identity, resume=resume, overwrite=overwrite)
            stack.callback(store.close)
        notes = (*prep.spec.notes, *(store.notes if store is not None else ()))
        if store is not None and store.complete and store.target(replicas, n) == store.saved_end \
                and ci_halfwidth is None:
            df = pd.concat([store.done[k] for k in sorted(store.done)], ignore_index=True)
            notes = (*notes, f"{out} already holds {len(df)} replicas of this run; reported as they are "
                             f"(asked for {n})")
            return Results(sc, prep.spec, prep.model, df, s, notes)
        if store is not None:
            n = store.target(replicas, n)
            store.begin(max_replicas if ci_halfwidth is not None else n)
        waves = _Waves(prep, s, ex, store, progress)
        df, stopping = (waves.to(n), None) if ci_halfwidth is None else _adaptive(waves, ci_halfwidth, max_replicas)
        res = Results(sc, prep.spec, prep.model, df, s, notes, stopping)
        if store is not None:
            store.finish(res)
    return res


def _check(n: int, ci_halfwidth: float | None, max_replicas: int, resume: bool, out: str | Path | None,
           executor: str, scheduler: str | None) -> None:
    if n < 1:
        raise HsisimInputError(f"{{replicas}} must be at least 1, got {n}", key="simulation.replicas")
    if ci_halfwidth is not None and not 0 < ci_halfwidth < 1:
        raise HsisimInputError(f"{{ci_halfwidth}} must be a fraction of the mean in (0, 1), got {ci_halfwidth}")
    if max_replicas < 2:
        raise HsisimInputError(f"{{max_replicas}} must be at least 2, got {max_replicas}")
    if resume and out is None:
        raise HsisimInputError("{resume} needs {out} (the folder of the run to continue)")
    check_executor(executor, scheduler)


def _processes(executor: str, workers: int | None, replicas: int) -> int:
    """Worker processes: as asked (default every core), never more than there are chunks of work."""
    if workers is not None and workers < 1:
        raise HsisimInputError(f"{{workers}} must be at least 1, got {workers}")
    if executor == "inline":
        return 1
    procs = workers if workers is not None else (os.cpu_count() or 1)
    return max(1, min(procs, math.ceil(replicas / CHUNK)))


def _chunk(prep: Prepared, seed: int, start: int, stop: int) -> list[dict[str, float]]:
    return [run_replica(prep, seed, i).row() for i in range(start, stop)]


class _Waves:
    """Runs replicas [0, n) in chunks of ``CHUNK``, reusing chunks already finished (store or earlier waves)."""

    def __init__(self, prep: Prepared, seed: int, ex: Executor, store: ResultStore | None,
                 progress: Progress | None) -> None:
        self.prep, self.seed, self.ex, self.store, self.progress = prep, seed, ex, store, progress
        self.have: dict[tuple[int, int], pd.DataFrame] = {}

    def to(self, n: int) -> pd.DataFrame:
        bounds = [(i, min(n, i + CHUNK)) for i in range(0, n, CHUNK)]
        todo, reused = [], 0
        for a, b in bounds:
            if (a, b) in self.have:
                continue
            got = self.store.get(a, b) if self.store is not None else None
            if got is None:
                todo.append((a, b))
            else:
                self.have[(a, b)] = got
                reused += b - a
        if self.progress:
            self.progress(reused, n)
        for a, b, rows in self.ex.run(_chunk, self.prep, self.seed, todo):
            part = pd.DataFrame(rows)
            part["replica"] = part["replica"].astype(np.int64)
            if self.store is not None:
                self.store.put(a, b, part)
            self.have[(a, b)] = part
            if self.progress:
                self.progress(b - a, n)
        return pd.concat([self.have[k] for k in bounds], ignore_index=True)


def _adaptive(runner: _Waves, target: float, max_n: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Waves of replicas until the relative 95 % half-width of the mean cost is at most ``target``.

    Wave sizes depend only on the replicas' values, never on timing or worker count, so a seed
    gives the same replicas on any executor (and a resumed run the same waves).
    """
    n = min(FIRST_WAVE, max_n)
    while True:
        df = runner.to(n)
        rel = stats.relative_halfwidth(df["cost_usd"].to_numpy(dtype=float))
        if rel <= target or n >= max_n:
            return df, {"metric": "cost_usd", "ci_halfwidth_target": target, "ci_halfwidth": rel,
                        "replicas": n, "max_replicas": max_n, "reached_max": bool(rel > target)}
        want = math.ceil(n * (rel / target) ** 2 * 1.1)
        n = min(max_n, 8 * n, max(n + CHUNK, -(-want // CHUNK) * CHUNK))
