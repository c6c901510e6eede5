"""Prices and interruption hazards: spot price traces, censored lifetime fits, Spot Advisor bands.

The functions behind ``hsisim prices``, for notebooks::

    from hsisim.pricing import fetch_prices, import_history, summarize_prices, fit_hazards

They load on first use, so importing this package (the simulator does, for its hazards and
traces) stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_PUBLIC = {"fetch_prices": "fetch", "import_history": "imports", "summarize_prices": "summary",
           "fit_hazards": "hazard_report"}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(import_module(f"hsisim.pricing.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module 'hsisim.pricing' has no attribute {name!r}")
