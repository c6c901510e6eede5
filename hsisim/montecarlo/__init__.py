"""Monte Carlo over replicas: seeding, executors, the result store and summaries."""

from hsisim.montecarlo import workload
from hsisim.montecarlo.core import (
    CHUNK,
    SUMMARY_METRICS,
    Prepared,
    Results,
    describe,
    prepare,
    relative_halfwidth,
    run_replica,
    simulate,
    step_model_for,
)
from hsisim.montecarlo.executors import EXECUTORS, Executor, check_executor, open_executor

__all__ = [
    "CHUNK",
    "EXECUTORS",
    "SUMMARY_METRICS",
    "Executor",
    "Prepared",
    "Results",
    "check_executor",
    "describe",
    "open_executor",
    "prepare",
    "relative_halfwidth",
    "run_replica",
    "simulate",
    "step_model_for",
    "workload",
]
