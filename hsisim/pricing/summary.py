"""What a price trace says: per series min / time-weighted median / max, changes per day, the
spot/on-demand ratio, and per instance type the zone that was cheapest for the largest share of time.

A record's price holds from its timestamp until the next record of its series, so medians and
means are weighted by how long each price held (the last record of a series holds for no time in
the trace and counts only in min and max).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hsisim.errors import HsisimInputError
from hsisim.pricing.ondemand import from_catalog
from hsisim.pricing.trace import SERIES, iso_utc, read_provenance, read_table

DAY_S = 86400.0


def _num(x: float | None, digits: int = 6) -> float | None:
    """A finite float rounded for display, or None (strict JSON has no NaN or Infinity)."""
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


def weighted_median(prices: np.ndarray, weights: np.ndarray) -> float:
    """The price held for at least half of the total time (lower weighted median); NaN without time."""
    total = weights.sum()
    if total <= 0:
        return math.nan
    order = np.argsort(prices, kind="stable")
    cum = np.cumsum(weights[order])
    return float(prices[order][np.searchsorted(cum, total / 2)])


def series_stats(s: pd.DataFrame) -> dict[str, Any]:
    """Statistics of one series (rows sorted by time): USD/h, changes, span in days."""
    p = s["spot_usd_per_hour"].to_numpy(dtype=float)
    t = (s["timestamp_utc"] - s["timestamp_utc"].iloc[0]).dt.total_seconds().to_numpy(dtype=float)
    held = np.diff(t)
    span_days = float(t[-1] / DAY_S)
    changes = int(np.count_nonzero(np.diff(p)))
    mean = float((p[:-1] * held).sum() / held.sum()) if held.sum() > 0 else math.nan
    return {"records": len(p), "first_utc": iso_utc(s["timestamp_utc"].iloc[0]),
            "last_utc": iso_utc(s["timestamp_utc"].iloc[-1]), "span_days": _num(span_days, 4),
            "min_usd_per_hour": _num(p.min()), "median_usd_per_hour": _num(weighted_median(p[:-1], held)),
            "mean_usd_per_hour": _num(mean), "max_usd_per_hour": _num(p.max()), "changes": changes,
            "changes_per_day": _num(changes / span_days, 3) if span_days > 0 else None}


def _on_demand(provenance: dict[str, Any] | None, instance_types: list[str]) -> tuple[dict[str, float], dict[str, str]]:
    """On-demand USD/h per type and where each came from: the trace's provenance first, then the catalog."""
    recorded = ((provenance or {}).get("on_demand") or {})
    prices = {k: float(v) for k, v in (recorded.get("usd_per_hour") or {}).items() if k in instance_types}
    sources = {k: str(recorded.get("source") or "provenance") for k in prices}
    for k, v in from_catalog([t for t in instance_types if t not in prices]).items():
        prices[k], sources[k] = v, "catalog"
    return prices, sources


def cheapest_zone(group: pd.DataFrame) -> dict[str, Any] | None:
    """Share of the common time window in which each zone had the lowest price (ties count for each).

    The window runs from the first moment every zone has a price (the latest first record) to the
    last record of any zone: a zone's last price holds until the observation ends. None when only
    one zone is present or the window is empty.
    """
    zones = {z: s for z, s in group.groupby("availability_zone", sort=True)}
    if len(zones) < 2:
        return None
    lo = max(s["timestamp_utc"].iloc[0] for s in zones.values())
    hi = max(s["timestamp_utc"].iloc[-1] for s in zones.values())
    if hi <= lo:
        return None
    cuts = sorted({lo, hi} | {t for s in zones.values() for t in s["timestamp_utc"] if lo < t < hi})
    edges = pd.DatetimeIndex(cuts).as_unit("ns")
    held = np.diff(edges.asi8) / 1e9
    prices = np.array([_step_values(s, edges[:-1]) for s in zones.values()])
    cheapest = np.isclose(prices, prices.min(axis=0), rtol=0, atol=1e-12)
    shares = {z: float((held * cheapest[i]).sum() / held.sum()) for i, z in enumerate(zones)}
    best = max(shares, key=lambda z: shares[z])
    return {"zone": best, "share": _num(shares[best], 4), "shares": {z: _num(v, 4) for z, v in shares.items()},
            "window_days": _num(held.sum() / DAY_S, 4)}


def _step_values(s: pd.DataFrame, at: pd.DatetimeIndex) -> np.ndarray:
    stamps = pd.DatetimeIndex(s["timestamp_utc"]).as_unit("ns").asi8
    i = np.searchsorted(stamps, at.asi8, side="right") - 1
    return s["spot_usd_per_hour"].to_numpy(dtype=float)[i]


def summarize_prices(*, path: str | Path) -> dict[str, Any]:
    """A JSON-ready summary of the trace at ``path``: ``series`` (per instance type, zone and product),
    ``cheapest`` (per instance type and product), ``on_demand`` sources, ``provenance`` and ``notes``.

    Prices are USD per instance-hour; the spot/on-demand ratio is the time-weighted mean spot price
    over the on-demand price (from the trace's provenance, else the catalog's us-east-1 list price).
    """
    df = read_table(path, key="path")
    if df.empty:
        raise HsisimInputError(f"{path} holds no price records", key="path")
    prov = read_provenance(path)
    types = sorted(df["instance_type"].unique()) if "instance_type" in df.columns else []
    od, od_source = _on_demand(prov, types)
    by_type = [c for c in ("instance_type", "product") if c in df.columns]
    cheapest = []
    for key, g in (df.groupby(by_type, sort=True) if by_type and "availability_zone" in df.columns else []):
        best = cheapest_zone(g)
        if best:
            cheapest.append(dict(zip(by_type, key, strict=True)) | best)
    return {"file": str(path), "median": "time-weighted", "series": _series_rows(df, od), "cheapest": cheapest,
            "on_demand": {t: {"usd_per_hour": od[t], "source": od_source[t]} for t in od},
            "provenance": _provenance_brief(prov), "notes": _notes(types, od, od_source, prov)}


def _series_rows(df: pd.DataFrame, on_demand: dict[str, float]) -> list[dict[str, Any]]:
    """One row per series: its key columns, its statistics and its spot/on-demand ratio."""
    keys = [c for c in SERIES if c in df.columns]
    rows = []
    for key, s in df.groupby(keys, sort=True):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        stats = series_stats(s.drop_duplicates(["timestamp_utc", "spot_usd_per_hour"]))
        price, mean = on_demand.get(str(row.get("instance_type"))), stats["mean_usd_per_hour"]
        stats["on_demand_usd_per_hour"] = price
        stats["spot_to_on_demand"] = _num(mean / price, 4) if price and mean is not None else None
        rows.append(row | stats)
    return rows


def _provenance_brief(prov: dict[str, Any] | None) -> dict[str, Any] | None:
    if prov is None:
        return None
    keep = ("source", "fetched_utc", "created_utc", "region", "regions", "apis", "pages", "rows", "window")
    return {k: prov[k] for k in keep if k in prov}


def _notes(types: list[str], od: dict[str, float], src: dict[str, str], prov: dict[str, Any] | None) -> list[str]:
    notes = []
    unknown = [t for t in types if t not in od]
    if unknown:
        notes.append(f"no on-demand price known for {', '.join(unknown)}: no spot/on-demand ratio")
    if any(v == "catalog" for v in src.values()):
        notes.append("on-demand from the catalog: us-east-1 Linux list prices, which may differ in other regions")
    if prov is None:
        notes.append("no provenance file beside the trace")
    elif (prov.get("on_demand") or {}).get("note"):
        notes.append(f"on-demand when recorded: {prov['on_demand']['note']}")
    return notes
