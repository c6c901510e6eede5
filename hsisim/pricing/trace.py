"""Spot price traces: piecewise-constant USD/h over time, replayed from an offset; trace files.

A trace file is a tidy table, one row per price record (CSV or Parquet):
``timestamp_utc, region, availability_zone, instance_type, product, spot_usd_per_hour``; the price
of a row holds from its timestamp until the next row of the same series (zone, instance type,
product). Its provenance (when, where, which API, how many pages) sits beside it in
``FILE.provenance.json``. The older flat CSV (``product_description``, ``spot_price_usd_per_hour``)
reads the same way.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hsisim.errors import HsisimInputError

COLUMNS = ("timestamp_utc", "region", "availability_zone", "instance_type", "product", "spot_usd_per_hour")
SERIES = ("instance_type", "availability_zone", "product")
# columns of the older flat CSV → tidy names
LEGACY = {"spot_price_usd_per_hour": "spot_usd_per_hour", "product_description": "product"}
# scenario filter keys (cost.price_trace.*) → trace columns
FILTER_COLUMNS = {"availability_zone": "availability_zone", "instance_type": "instance_type",
                  "product_description": "product"}
PARQUET_SUFFIXES = (".parquet", ".pq")


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


@dataclass(frozen=True)
class PriceTraceWritten:
    """A written trace: its path, its provenance sidecar and the provenance itself."""

    path: Path
    provenance_path: Path
    provenance: dict[str, Any]


def provenance_path(path: str | Path) -> Path:
    """Where the provenance of trace ``path`` lives: ``FILE.provenance.json`` beside it."""
    p = Path(path)
    return p.with_name(p.name + ".provenance.json")


def read_provenance(path: str | Path) -> dict[str, Any] | None:
    """The provenance recorded beside trace ``path``, or None when there is none (or it is unreadable)."""
    side = provenance_path(path)
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_table(path: str | Path, *, key: str = "cost.price_trace.file") -> pd.DataFrame:
    """A trace file (CSV or Parquet, tidy or the older flat CSV) as a tidy DataFrame.

    ``timestamp_utc`` becomes a UTC datetime, ``spot_usd_per_hour`` a float (USD per instance-hour);
    rows are sorted by series and time. Raises ``HsisimInputError`` naming ``key`` on a missing file,
    missing columns or a bad value.
    """
    p = Path(path)
    if not p.is_file():
        raise HsisimInputError(f"price trace not found: {p}", key=key)
    try:
        raw = pd.read_parquet(p) if p.suffix.lower() in PARQUET_SUFFIXES else pd.read_csv(p, dtype=str)
    except Exception as exc:  # pandas/pyarrow raise many types for a malformed file
        raise HsisimInputError(f"{p} is not a readable price trace: {type(exc).__name__}: {exc}", key=key) from None
    df = raw.rename(columns={k: v for k, v in LEGACY.items() if k in raw.columns and v not in raw.columns})
    missing = [c for c in ("timestamp_utc", "spot_usd_per_hour") if c not in df.columns]
    if missing:
        raise HsisimInputError(f"{p} needs 'timestamp_utc' and 'spot_usd_per_hour' (or 'spot_price_usd_per_hour') "
                               f"columns; missing {missing}", key=key)
    return _typed(df, p, key)


def _typed(df: pd.DataFrame, p: Path, key: str) -> pd.DataFrame:
    out = df.copy()
    try:
        out["timestamp_utc"] = pd.to_datetime(out["timestamp_utc"], utc=True, format="ISO8601")
        out["spot_usd_per_hour"] = pd.to_numeric(out["spot_usd_per_hour"], errors="raise").astype(float)
    except (ValueError, TypeError) as exc:
        raise HsisimInputError(f"{p}: bad timestamp or price: {exc}", key=key) from None
    price = out["spot_usd_per_hour"].to_numpy()
    if not np.all(np.isfinite(price)) or np.any(price <= 0):
        raise HsisimInputError(f"{p}: prices must be positive numbers (USD/h)", key=key)
    for col in SERIES:
        if col in out.columns:
            out[col] = out[col].astype(str)
    order = [c for c in SERIES if c in out.columns] + ["timestamp_utc"]
    return out.sort_values(order, kind="stable").reset_index(drop=True)


def read_trace(path: str | Path, *, where: dict[str, str] | None = None) -> PriceTrace:
    """The one price series of a trace file that ``where`` selects, as a ``PriceTrace`` (seconds, USD/h).

    ``where`` keeps rows whose columns equal the given values; its keys are the scenario's
    ``cost.price_trace`` keys: ``availability_zone``, ``instance_type``, ``product_description``
    (the ``product`` column). If the kept rows still hold several zones, instance types or products,
    that is an error naming the key to set and listing the choices (series are never mixed).
    Identical duplicate records count once; the same timestamp with two prices is an error.
    """
    df = read_table(path)
    for k, v in (where or {}).items():
        if k not in FILTER_COLUMNS:
            raise HsisimInputError(f"unknown filter {k!r}; known: {', '.join(FILTER_COLUMNS)}",
                                   key=f"cost.price_trace.{k}")
        col = FILTER_COLUMNS[k]
        df = df[df[col] == v] if col in df.columns else df.iloc[0:0]
    _one_series(df, Path(path))
    df = df.drop_duplicates(["timestamp_utc", "spot_usd_per_hour"])
    clash = df["timestamp_utc"].duplicated(keep=False)
    if clash.any():
        stamp = df.loc[clash, "timestamp_utc"].iloc[0]
        raise HsisimInputError(f"{path} has two different prices at {stamp.isoformat()} in one series",
                               key="cost.price_trace.file")
    if len(df) < 2:
        raise HsisimInputError(f"{path} has fewer than two prices for {where or 'the trace'}", key="cost.price_trace")
    seconds = (df["timestamp_utc"] - df["timestamp_utc"].iloc[0]).dt.total_seconds().to_numpy(dtype=float)
    return PriceTrace(seconds, df["spot_usd_per_hour"].to_numpy(dtype=float))


def _one_series(df: pd.DataFrame, path: Path) -> None:
    for k, col in FILTER_COLUMNS.items():
        if col not in df.columns:
            continue
        values = sorted(df[col].unique())
        if len(values) > 1:
            shown = ", ".join(values[:12]) + (", …" if len(values) > 12 else "")
            raise HsisimInputError(f"{path.name} holds {len(values)} series by {col}; choose one of: {shown}",
                                   key=f"cost.price_trace.{k}")


def write_trace(df: pd.DataFrame, path: str | Path, provenance: dict[str, Any]) -> tuple[Path, Path]:
    """Write a tidy trace (CSV, or Parquet for ``.parquet``/``.pq``) and its provenance sidecar, atomically.

    Both files go through temporary files in the target directory and are renamed into place
    only once both are complete, so a failure leaves neither half-written. Returns (trace, sidecar).
    """
    out = Path(path)
    if not out.parent.is_dir():
        raise HsisimInputError(f"directory {out.parent} does not exist", key="out")
    table = df.loc[:, list(COLUMNS)].sort_values([*SERIES, "timestamp_utc"], kind="stable").reset_index(drop=True)
    side = provenance_path(out)
    text = json.dumps(provenance, indent=2, sort_keys=True) + "\n"
    tmp_trace = _temp_written(out, lambda t: _write_table(table, out, t))
    try:
        tmp_side = _temp_written(side, lambda t: Path(t).write_text(text, encoding="utf-8"))
    except BaseException:
        Path(tmp_trace).unlink(missing_ok=True)
        raise
    os.replace(tmp_side, side)
    os.replace(tmp_trace, out)
    return out, side


def _write_table(table: pd.DataFrame, out: Path, tmp: str) -> None:
    if out.suffix.lower() in PARQUET_SUFFIXES:
        table.to_parquet(tmp, index=False)
        return
    csv = table.copy()
    csv["timestamp_utc"] = csv["timestamp_utc"].map(iso_utc)
    csv["spot_usd_per_hour"] = csv["spot_usd_per_hour"].map(repr)  # shortest text that reads back exactly
    csv.to_csv(tmp, index=False)


def iso_utc(stamp: pd.Timestamp) -> str:
    """ISO 8601 in UTC with a ``Z`` (``2020-02-27T04:42:58Z``; fractional seconds only when present)."""
    text = stamp.tz_convert("UTC").isoformat()
    return text.replace("+00:00", "Z")


def _temp_written(target: Path, write: Callable[[str], Any]) -> str:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def trace_facts(df: pd.DataFrame) -> dict[str, Any]:
    """Provenance facts every trace records: rows, regions, instance types, products, first/last record."""
    return {"rows": len(df), "regions": sorted(df["region"].unique()),
            "instance_types": sorted(df["instance_type"].unique()), "products": sorted(df["product"].unique()),
            "first_record_utc": iso_utc(df["timestamp_utc"].min()),
            "last_record_utc": iso_utc(df["timestamp_utc"].max())}
