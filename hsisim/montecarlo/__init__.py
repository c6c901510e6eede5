"""Monte Carlo over replicas: preparing a run, executors, the result store, the runner and its results."""

from hsisim.montecarlo import workload
from hsisim.montecarlo.core import run
from hsisim.montecarlo.executors import EXECUTORS, Executor, check_executor, open_executor, processes
from hsisim.montecarlo.prepare import Prepared, prepare, replica, run_replica, step_model_for
from hsisim.montecarlo.results import SUMMARY_METRICS, Results
from hsisim.montecarlo.store import CHUNK

__all__ = ["CHUNK", "EXECUTORS", "SUMMARY_METRICS", "Executor", "Prepared", "Results", "check_executor",
           "open_executor", "prepare", "processes", "replica", "run", "run_replica", "step_model_for", "workload"]
