"""``SpotPriceHistory`` records (from boto3 or from saved ``describe-spot-price-history`` JSON) → tidy rows.

One record is ``{AvailabilityZone, InstanceType, ProductDescription, SpotPrice, Timestamp}``;
``SpotPrice`` is a string of USD per instance-hour and ``Timestamp`` the time the price took effect
(a datetime from boto3, an ISO 8601 string in saved JSON). Source: Amazon EC2 API Reference,
"DescribeSpotPriceHistory" and "SpotPrice" data type.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import pandas as pd

from hsisim.errors import HsisimInputError
from hsisim.pricing.trace import COLUMNS, SERIES

# A zone name is its region plus a letter (us-east-1a); Local Zones add a suffix (us-east-1-bos-1a).
_REGION_OF_ZONE = re.compile(r"^([a-z]{2}(?:-[a-z]+)+-\d+)")
FIELDS = ("AvailabilityZone", "InstanceType", "ProductDescription", "SpotPrice", "Timestamp")


def region_of_zone(zone: str) -> str:
    """The region code of an availability zone name (``us-east-1c`` → ``us-east-1``)."""
    m = _REGION_OF_ZONE.match(zone)
    if not m:
        raise ValueError(f"not an availability zone name: {zone!r}")
    return m.group(1)


def parse_record(rec: Mapping[str, Any]) -> dict[str, Any]:
    """One tidy row from one ``SpotPriceHistory`` record; ``ValueError`` names what is wrong."""
    if not isinstance(rec, Mapping):
        raise ValueError(f"a price record must be an object, got {type(rec).__name__}")
    missing = [f for f in FIELDS if f not in rec]
    if missing:
        raise ValueError(f"record lacks {', '.join(missing)}")
    try:
        price = float(rec["SpotPrice"])
    except (TypeError, ValueError):
        raise ValueError(f"SpotPrice {rec['SpotPrice']!r} is not a number") from None
    if not math.isfinite(price) or price <= 0:
        raise ValueError(f"SpotPrice {rec['SpotPrice']!r} is not a positive price")
    zone = str(rec["AvailabilityZone"])
    return {"timestamp_utc": _utc(rec["Timestamp"]), "region": region_of_zone(zone), "availability_zone": zone,
            "instance_type": str(rec["InstanceType"]), "product": str(rec["ProductDescription"]),
            "spot_usd_per_hour": price}


def _utc(value: Any) -> pd.Timestamp:
    if not isinstance(value, datetime | str):
        raise ValueError(f"Timestamp {value!r} is neither a datetime nor an ISO 8601 string")
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError):
        raise ValueError(f"Timestamp {value!r} is not ISO 8601") from None
    if stamp is pd.NaT:
        raise ValueError(f"Timestamp {value!r} is empty")
    # AWS timestamps are UTC; a naive one (a hand-edited file) is read as UTC too
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def history_frame(records: Iterable[Mapping[str, Any]], *, source: str, key: str) -> pd.DataFrame:
    """Tidy rows of ``records``; a malformed record is an ``HsisimInputError`` naming ``source`` and ``key``."""
    rows = []
    for i, rec in enumerate(records):
        try:
            rows.append(parse_record(rec))
        except ValueError as exc:
            raise HsisimInputError(f"{source}: SpotPriceHistory[{i}]: {exc}", key=key) from None
    return pd.DataFrame(rows, columns=list(COLUMNS))


def deduplicated(df: pd.DataFrame, *, source: str, key: str) -> pd.DataFrame:
    """``df`` without repeated records (overlapping pages or files); two prices at one time is an error."""
    out = df.drop_duplicates([*SERIES, "timestamp_utc", "spot_usd_per_hour"])
    clash = out.duplicated([*SERIES, "timestamp_utc"], keep=False)
    if clash.any():
        row = out[clash].iloc[0]
        raise HsisimInputError(f"{source}: two different prices for {row['instance_type']} in "
                               f"{row['availability_zone']} at {row['timestamp_utc'].isoformat()}", key=key)
    return out.sort_values([*SERIES, "timestamp_utc"], kind="stable").reset_index(drop=True)
