"""Spot capacity traces: how many instances of one type could be had, over time, replayed with wrap-around.

Two file formats:

- the public spot-traces JSON (the availability traces of Wu et al., "Can't Be Late", NSDI 2024):
  ``{"metadata": {"gap_seconds": G, ...}, "data": [n0, n1, ...]}``, where ``n_i`` instances are
  available from i·G to (i + 1)·G seconds (0/1 for one instance);
- a tidy CSV with a column ``available`` and either ``t_s`` (seconds from the trace start) or
  ``timestamp_utc`` (ISO 8601): a count holds from its row's time to the next row's; the last row
  holds for the median gap between rows.

The simulation replays a trace from an offset (random per replica) and wraps around at its end.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hsisim.errors import HsisimInputError

KEY = "spot.availability.trace"
MAX_BYTES = 256 << 20
# A time within this of a change counts as after it: the time of a change, computed from the
# offset and added back, must land on the new level, or a node launched when capacity returns
# would be reclaimed at once by rounding.
TOLERANCE_S = 1e-6


@dataclass(frozen=True)
class AvailabilityTrace:
    """``counts[i]`` instances available from ``t[i]`` (seconds; t[0] = 0) to ``t[i+1]``, the last until ``span``."""

    t: np.ndarray
    counts: np.ndarray
    span: float
    _below: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    _enough: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @property
    def most(self) -> int:
        return int(self.counts.max())

    def _locate(self, x: float) -> tuple[float, int]:
        """(start of the lap holding trace time ``x``, index of the tick holding it)."""
        lap, rem = divmod(x, self.span)
        if rem + TOLERANCE_S >= self.span:
            lap, rem = lap + 1, 0.0
        i = int(np.searchsorted(self.t, rem + TOLERANCE_S, side="right")) - 1
        return lap * self.span, max(i, 0)

    def available(self, offset: float, t: float) -> int:
        """Instances available at simulated time ``t`` of a replay that starts at trace time ``offset``."""
        return int(self.counts[self._locate(offset + t)[1]])

    def _first(self, ticks: np.ndarray, offset: float, t: float) -> tuple[float, int]:
        """The first time ≥ ``t`` inside one of ``ticks`` (indices), and that tick; (inf, -1) if none."""
        if len(ticks) == 0:
            return math.inf, -1
        base, i = self._locate(offset + t)
        j = int(np.searchsorted(ticks, i, side="left"))
        if j < len(ticks) and int(ticks[j]) == i:
            return t, i  # already there (exactly t: offset + t − offset may round away from it)
        if j < len(ticks):
            k = int(ticks[j])
            at = base + float(self.t[k])
        else:
            k = int(ticks[0])
            at = base + self.span + float(self.t[k])
        return max(t, at - offset), k

    def next_below(self, offset: float, t: float, n: int) -> tuple[float, int]:
        """(first time ≥ ``t`` when fewer than ``n`` instances are available, how many are then); (inf, n) never."""
        if n not in self._below:
            self._below[n] = np.flatnonzero(self.counts < n)
        when, k = self._first(self._below[n], offset, t)
        return when, int(self.counts[k]) if k >= 0 else n

    def next_at_least(self, offset: float, t: float, n: int) -> float:
        """The first time ≥ ``t`` when at least ``n`` instances are available (inf: never)."""
        if n not in self._enough:
            self._enough[n] = np.flatnonzero(self.counts >= n)
        return self._first(self._enough[n], offset, t)[0]

    def drops_per_second(self, n: int) -> float:
        """How often the trace falls from at least ``n`` to fewer (per second of trace, around the loop)."""
        ok = self.counts >= n
        return float(np.count_nonzero(ok & ~np.roll(ok, -1))) / self.span if len(ok) > 1 else 0.0

    def share_at_least(self, n: int) -> float:
        """The share of the trace's time with at least ``n`` instances available."""
        widths = np.diff(np.append(self.t, self.span))
        return float(widths[self.counts >= n].sum() / self.span)


def read_availability(path: str | Path, *, key: str = KEY) -> AvailabilityTrace:
    """An availability trace from a spot-traces JSON file or a tidy CSV (see the module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise HsisimInputError(f"availability trace not found: {p}", key=key)
    if p.stat().st_size > MAX_BYTES:
        raise HsisimInputError(f"{p} is larger than {MAX_BYTES >> 20} MiB: not an availability trace", key=key)
    if p.suffix.lower() == ".json":
        t, counts, span = _from_json(p, key)
    else:
        t, counts, span = _from_csv(p, key)
    if len(counts) == 0:
        raise HsisimInputError(f"{p} holds no availability records", key=key)
    if not np.all(np.isfinite(counts)) or np.any(counts < 0) or np.any(counts != np.round(counts)):
        raise HsisimInputError(f"{p}: availability must be whole numbers of instances, 0 or more", key=key)
    if counts.max() < 1:
        raise HsisimInputError(f"{p}: no instance is ever available", key=key)
    return AvailabilityTrace(t, counts.astype(np.int64), span)


def _from_json(p: Path, key: str) -> tuple[np.ndarray, np.ndarray, float]:
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
        gap = float(doc["metadata"]["gap_seconds"])
        data = doc["data"]
        counts = np.array([float(v) for v in data], dtype=float)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise HsisimInputError(f"{p} is not a spot-traces JSON ({{\"metadata\": {{\"gap_seconds\": G}}, \"data\": "
                               f"[...]}}): {type(exc).__name__}: {exc}", key=key) from None
    if not (math.isfinite(gap) and gap > 0):
        raise HsisimInputError(f"{p}: metadata.gap_seconds must be a positive number, got {gap}", key=key)
    return np.arange(len(counts)) * gap, counts, len(counts) * gap


def _from_csv(p: Path, key: str) -> tuple[np.ndarray, np.ndarray, float]:
    try:
        df = pd.read_csv(p, dtype=str)
    except Exception as exc:  # pandas raises many types for a malformed file
        raise HsisimInputError(f"{p} is not a readable CSV: {type(exc).__name__}: {exc}", key=key) from None
    if "available" not in df.columns or not ({"t_s", "timestamp_utc"} & set(df.columns)):
        raise HsisimInputError(f"{p} needs an 'available' column and 't_s' or 'timestamp_utc'; has "
                               f"{list(df.columns)}", key=key)
    try:
        if "t_s" in df.columns:
            t = pd.to_numeric(df["t_s"], errors="raise").to_numpy(dtype=float)
        else:
            stamps = pd.to_datetime(df["timestamp_utc"], utc=True, format="ISO8601")
            t = (stamps - stamps.iloc[0]).dt.total_seconds().to_numpy(dtype=float)
        counts = pd.to_numeric(df["available"], errors="raise").to_numpy(dtype=float)
    except (ValueError, TypeError) as exc:
        raise HsisimInputError(f"{p}: bad time or availability: {exc}", key=key) from None
    if len(t) < 2:
        raise HsisimInputError(f"{p} needs at least two rows (a count holds until the next row)", key=key)
    steps = np.diff(t)
    if not np.all(np.isfinite(t)) or np.any(steps <= 0):
        raise HsisimInputError(f"{p}: times must increase strictly from row to row", key=key)
    t = t - t[0]
    return t, counts, float(t[-1] + np.median(steps))
