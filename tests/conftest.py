from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hsisim.sim.ledger import MONEY_CATEGORIES, TIME_TERMS
from hsisim.sim.spec import Job

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
SHARED_DATA = ROOT.parent / "shared" / "data"


def make_job(**kw: object) -> Job:
    """A small hand-made Job with round numbers, for process-level tests."""
    base = Job(nodes=1, gpus_per_node=1, accumulation=1, micro_batch=8, steps_per_epoch=10, total_steps=10,
               compute_s=0.4, stall_share=0.0, compute_cv=0.0, batch_build_s=1.0, batch_build_cv=0.0, h2d_s=0.0,
               num_workers=2, prefetch_factor=1, persistent_workers=True, worker_start_s=0.0,
               comm_exposed_s=0.1, comm_total_s=0.1)
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.fixture
def job_factory():  # type: ignore[no-untyped-def]
    return make_job


def assert_budget_identities(df) -> None:  # type: ignore[no-untyped-def]
    """Per replica: the six time terms sum to the wall time, the money categories to the bill, and no
    time term is negative."""
    terms = df[[f"t_{t}_h" for t in TIME_TERMS]]
    assert np.all(np.abs(terms.sum(axis=1) - df["wall_h"]) <= 1e-9 * df["wall_h"])
    money = df[[f"cost_{c}_usd" for c in MONEY_CATEGORIES]].sum(axis=1)
    assert np.all(np.abs(money - df["cost_usd"]) <= 1e-9 * df["cost_usd"])
    assert np.all(terms >= -1e-12)
