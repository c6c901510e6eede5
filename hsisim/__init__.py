"""hsisim: what a hyperspectral-image training job really costs on a rented GPU cluster.

    >>> import hsisim
    >>> sc = hsisim.Scenario.load("scenarios/spot_8x.yaml")        # doctest: +SKIP
    >>> res = hsisim.simulate(sc, replicas=200)                     # doctest: +SKIP
    >>> res.summary()["metrics"]["cost_usd"]["p90"]                 # doctest: +SKIP

Everything below is imported on first use, so ``import hsisim`` (and ``hsisim --help``) stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from hsisim._version import __version__

# public name → module that defines it
_PUBLIC = {
    "Scenario": "hsisim.scenario",
    "HsisimInputError": "hsisim.errors",
    "simulate": "hsisim.api",
    "plan": "hsisim.api",
    "optimize": "hsisim.api",
    "calibrate": "hsisim.api",
    "validate": "hsisim.api",
    "diagnose": "hsisim.api",
    "write_report": "hsisim.api",  # `hsisim report`; hsisim.report is the package of figures and tables
    "Results": "hsisim.montecarlo.results",
    "PlanResult": "hsisim.planning",
    "OptimizeResult": "hsisim.tuning",
    "ProfileData": "hsisim.profile",
    "RunSpec": "hsisim.sim.spec",
    "fetch_prices": "hsisim.pricing",
    "import_history": "hsisim.pricing",
    "summarize_prices": "hsisim.pricing",
    "fit_hazards": "hsisim.pricing",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'hsisim' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
