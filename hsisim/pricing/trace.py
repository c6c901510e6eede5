"""Spot price traces: piecewise-constant USD/h over time, replayed from an offset."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from hsisim.errors import HsisimInputError


@dataclass(frozen=True)
class PriceTrace:
    """Price ``usd_per_hour[i]`` holds from ``t[i]`` (seconds from the trace start) to ``t[i+1]``."""

    t: np.ndarray
    usd_per_hour: np.ndarray

    @property
    def span(self) -> float:
        return float(self.t[-1])

    def integral(self, offset: float, a: float, b: float) -> float:
        """USD·h/h: ∫ price dt over [a, b] seconds of simulated time, the trace starting at ``offset``.

        Returns USD per node for that interval; the trace wraps around at its end.
        """
        if b <= a:
            return 0.0
        return (self._cum(offset + b) - self._cum(offset + a)) / 3600.0

    def _cum(self, x: float) -> float:
        span = self.span
        laps, rem = divmod(x, span) if span > 0 else (0.0, x)
        cum = np.concatenate(([0.0], np.cumsum(np.diff(self.t) * self.usd_per_hour[:-1])))
        i = int(np.searchsorted(self.t, rem, side="right") - 1)
        i = min(max(i, 0), len(self.t) - 1)
        return float(laps * cum[-1] + cum[i] + (rem - self.t[i]) * self.usd_per_hour[i])

    def mean_usd_per_hour(self) -> float:
        return self._cum(self.span) / self.span if self.span > 0 else float(self.usd_per_hour[0])


def read_trace(path: str | Path, *, where: dict[str, str] | None = None) -> PriceTrace:
    """Read a CSV with ``timestamp_utc`` (ISO 8601) and ``spot_price_usd_per_hour`` columns.

    ``where`` keeps rows whose columns equal the given values (``availability_zone``,
    ``instance_type``, ``product_description``). Duplicate timestamps keep the last price.
    """
    p = Path(path)
    if not p.is_file():
        raise HsisimInputError(f"price trace not found: {p}", key="cost.price_trace.file")
    rows: dict[float, float] = {}
    try:
        with p.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                if where and any(row.get(k) != v for k, v in where.items()):
                    continue
                stamp = datetime.fromisoformat(row["timestamp_utc"].replace("Z", "+00:00")).timestamp()
                rows[stamp] = float(row["spot_price_usd_per_hour"])
    except (KeyError, ValueError) as exc:
        raise HsisimInputError(f"{p} needs 'timestamp_utc' and 'spot_price_usd_per_hour' columns: {exc}",
                               key="cost.price_trace.file") from None
    if len(rows) < 2:
        raise HsisimInputError(f"{p} has fewer than two prices for {where or 'the trace'}",
                               key="cost.price_trace")
    keys = sorted(rows)
    times = np.array(keys)
    prices = np.array([rows[k] for k in keys])
    return PriceTrace(times - times[0], prices)
