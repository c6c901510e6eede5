"""Spot price history from the user's own AWS account with boto3, written as a tidy trace.

Credentials come from boto3's standard chain (environment, shared files, SSO, container or
instance role) and are never printed, logged or written. boto3 is imported inside the functions,
so ``hsisim --help`` stays fast.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pandas as pd

from hsisim.errors import HsisimInputError
from hsisim.pricing.history import deduplicated, history_frame
from hsisim.pricing.ondemand import PRICING_REGION, on_demand_prices
from hsisim.pricing.trace import SERIES, PriceTraceWritten, iso_utc, trace_facts, write_trace

MAX_DAYS = 90.0  # describe_spot_price_history reaches back 90 days (EC2 API Reference, DescribeSpotPriceHistory)
PAGE_SIZE = 1000  # its MaxResults upper bound
# error codes botocore's standard retry mode treats as throttling (botocore retries/standard.py)
THROTTLING = {"RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException",
              "RequestThrottled", "RequestThrottledException", "SlowDown"}
CREDENTIALS = {"AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId", "SignatureDoesNotMatch",
               "ExpiredToken", "RequestExpired", "UnrecognizedClientException", "AccessDenied"}
_INSTANCE_TYPE = re.compile(r"^[a-z0-9-]+\.[a-z0-9-]+$")


def known_regions() -> set[str]:
    """Every EC2 region botocore knows, over all partitions (aws, aws-cn, aws-us-gov, …)."""
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        session = boto3.session.Session()
        return {r for part in session.get_available_partitions()
                for r in session.get_available_regions("ec2", partition_name=part)}
    except BotoCoreError as exc:  # e.g. AWS_PROFILE names a profile that does not exist
        raise HsisimInputError(f"cannot set up an AWS session: {_one_line(exc)}") from None


def check_request(*, region: str, instance_types: Sequence[str], days: float, on_demand: str = "pricing_api",
                  max_attempts: int = 5, out: str | Path | None = None) -> list[str]:
    """Validate a fetch before any call; returns the instance types, de-duplicated in order."""
    if region not in known_regions():
        raise HsisimInputError(f"unknown EC2 region {region!r} (botocore knows e.g. us-east-1, eu-west-1)",
                               key="region")
    types = list(dict.fromkeys(instance_types))
    bad = [t for t in types if not _INSTANCE_TYPE.match(t)]
    if not types or bad:
        raise HsisimInputError(f"not an instance type name: {', '.join(bad)} (e.g. g5.xlarge)" if bad
                               else "give at least one instance type", key="instance_types")
    if not 0 < days <= MAX_DAYS:
        raise HsisimInputError(f"must be in (0, {MAX_DAYS:g}] days (EC2 keeps 90 days of history), got {days}",
                               key="days")
    if on_demand not in ("pricing_api", "catalog"):
        raise HsisimInputError(f"expected pricing_api or catalog, got {on_demand!r}", key="on_demand")
    if not 1 <= max_attempts <= 20:
        raise HsisimInputError(f"must be between 1 and 20, got {max_attempts}", key="max_attempts")
    if out is not None and not Path(out).parent.is_dir():  # a typo must not cost an API call
        raise HsisimInputError(f"directory {Path(out).parent} does not exist", key="out")
    return types


def public_endpoint(url: str | None) -> str | None:
    """``url`` without user info, query or fragment: what may be recorded and printed."""
    if url is None:
        return None
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        raise HsisimInputError("expected http(s)://HOST[:PORT]", key="endpoint_url")
    host = parts.hostname + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def make_clients(region: str, endpoint_url: str | None, max_attempts: int) -> tuple[Any, Any]:
    """(ec2 client for ``region``, factory of the us-east-1 pricing client), standard retry mode."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError

    # botocore "standard" retry mode: exponential backoff with jitter for throttling and transient
    # errors. ``total_max_attempts`` counts the first request too; the older ``max_attempts`` key of
    # this dict counts retries only (Boto3 documentation, "Retries").
    config = Config(retries={"mode": "standard", "total_max_attempts": max_attempts})
    try:
        session = boto3.session.Session()
        ec2 = session.client("ec2", region_name=region, endpoint_url=endpoint_url, config=config)
    except BotoCoreError as exc:
        raise HsisimInputError(f"cannot set up an AWS session: {_one_line(exc)}") from None
    # on-demand prices have a fallback (the catalog): do not wait through a long retry ladder for them
    quick = Config(retries={"mode": "standard", "total_max_attempts": min(max_attempts, 2)})
    return ec2, lambda: session.client("pricing", region_name=PRICING_REGION, endpoint_url=endpoint_url,
                                       config=quick)


def spot_history(ec2: Any, *, instance_types: list[str], product: str, start: datetime,
                 end: datetime) -> tuple[list[dict[str, Any]], int]:
    """Every ``SpotPriceHistory`` record of the window over all pages, and the number of pages.

    The paginator follows ``NextToken`` until it is empty. Per AWS, the first record of each series
    may predate ``start``: it carries the price in effect at ``start``.
    """
    paginator = ec2.get_paginator("describe_spot_price_history")
    pages = paginator.paginate(InstanceTypes=instance_types, ProductDescriptions=[product], StartTime=start,
                               EndTime=end, PaginationConfig={"PageSize": PAGE_SIZE})
    records: list[dict[str, Any]] = []
    count = 0
    for page in pages:
        count += 1
        records.extend(page.get("SpotPriceHistory", []))
    return records, count


def windowed(df: pd.DataFrame, start: datetime, end: datetime) -> pd.DataFrame:
    """Each series restricted to [start, end]: its price in effect at ``start`` stamped ``start``, and a
    closing row at ``end`` carrying the last price (not a change), so the trace covers the whole window.
    """
    t0, t1 = pd.Timestamp(start), pd.Timestamp(end)
    parts = []
    for _, s in df.groupby(list(SERIES), sort=True):
        before, inside = s[s["timestamp_utc"] <= t0], s[(s["timestamp_utc"] > t0) & (s["timestamp_utc"] <= t1)]
        head = before.tail(1).assign(timestamp_utc=t0)
        s2 = pd.concat([head, inside])
        if not s2.empty and s2["timestamp_utc"].iloc[-1] < t1:
            s2 = pd.concat([s2, s2.tail(1).assign(timestamp_utc=t1)])
        parts.append(s2)
    return pd.concat(parts, ignore_index=True) if parts else df.iloc[0:0]


def fetch_prices(*, region: str, instance_types: Sequence[str], out: str | Path, days: float = 7.0,
                 product: str = "Linux/UNIX", endpoint_url: str | None = None, on_demand: str = "pricing_api",
                 max_attempts: int = 5, clients: tuple[Any, Any] | None = None,
                 now: datetime | None = None) -> PriceTraceWritten:
    """Fetch ``days`` of spot prices for ``instance_types`` in ``region`` and write a trace to ``out``.

    ``on_demand``: ``pricing_api`` (the Price List Query API, falling back to the catalog when it is
    not reachable) or ``catalog``. ``max_attempts`` counts every try of a request. ``clients`` =
    (ec2 client, pricing client) replaces the clients made from the standard credential chain
    (tests, notebooks with their own session). Returns the written paths and the provenance;
    nothing is written when anything fails.
    """
    types = check_request(region=region, instance_types=instance_types, days=days, on_demand=on_demand,
                          max_attempts=max_attempts, out=out)
    shown = public_endpoint(endpoint_url)
    ec2, make_pricing = make_clients(region, endpoint_url, max_attempts) if clients is None else \
        (clients[0], lambda: clients[1])
    end = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    start = end - timedelta(days=days)
    records, pages = _history(ec2, region=region, instance_types=types, product=product, start=start, end=end,
                              endpoint=shown)
    df = windowed(_checked(records, region=region, instance_types=types, product=product), start, end)
    od = on_demand_prices(make_pricing if on_demand == "pricing_api" else None, region=region,
                          instance_types=types, product=product)
    prov = {"format": "hsisim price trace 1", "created_utc": iso_utc(pd.Timestamp(datetime.now(UTC))),
            "fetched_utc": iso_utc(pd.Timestamp(end)), "source": "fetch",
            "apis": ["ec2:DescribeSpotPriceHistory"] + (["pricing:GetProducts"] if od.asked_api else []),
            "region": region, "endpoint_url": shown, "product_requested": product, "pages": pages,
            "api_records": len(records), "window": {"start_utc": iso_utc(pd.Timestamp(start)),
                                                    "end_utc": iso_utc(pd.Timestamp(end)), "days": days},
            **trace_facts(df), "on_demand": od.as_json()}
    path, side = write_trace(df, out, prov)
    return PriceTraceWritten(path, side, prov)


def _history(ec2: Any, *, region: str, instance_types: list[str], product: str, start: datetime, end: datetime,
             endpoint: str | None) -> tuple[list[dict[str, Any]], int]:
    """``spot_history`` with every boto3/botocore failure turned into one clear ``HsisimInputError``."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return spot_history(ec2, instance_types=instance_types, product=product, start=start, end=end)
    except (BotoCoreError, ClientError) as exc:
        raise aws_error(exc, region=region, instance_types=instance_types, endpoint=endpoint) from None


def _checked(records: list[dict[str, Any]], *, region: str, instance_types: list[str], product: str) -> pd.DataFrame:
    df = deduplicated(history_frame(records, source=f"EC2 {region}", key="instance_types"),
                      source=f"EC2 {region}", key="instance_types")
    if df.empty:
        raise HsisimInputError(f"EC2 {region} returned no {product} spot prices for {', '.join(instance_types)} "
                               "(not offered there, or an unknown instance type)", key="instance_types")
    return df


def aws_error(exc: Exception, *, region: str, instance_types: list[str], endpoint: str | None) -> HsisimInputError:
    """One clear ``HsisimInputError`` line for a boto3/botocore failure."""
    from botocore import exceptions as bx

    where = endpoint or f"EC2 in {region}"
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError | bx.CredentialRetrievalError):
        return HsisimInputError("no usable AWS credentials from the standard chain (environment, shared credentials "
                                "and config files, SSO, container or instance role); configure one, or import saved "
                                "describe-spot-price-history JSON instead")
    if isinstance(exc, bx.ConnectionError | bx.HTTPClientError):
        return HsisimInputError(f"cannot reach {where}: {_one_line(exc)}", key="endpoint_url" if endpoint else None)
    if isinstance(exc, bx.ClientError):
        return _client_error(exc, region=region, instance_types=instance_types)
    return HsisimInputError(f"AWS request failed: {_one_line(exc)}")


def _client_error(exc: Any, *, region: str, instance_types: list[str]) -> HsisimInputError:
    err = exc.response.get("Error", {})
    code, msg = str(err.get("Code", "?")), _one_line(err.get("Message", ""))
    attempts = 1 + int(exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0))
    if code in THROTTLING:
        return HsisimInputError(f"EC2 throttled the request ({code}) after {attempts} attempt(s) with botocore's "
                                "standard retries; wait and try again, or ask for fewer instance types or days")
    if code.startswith("InvalidParameter") or code == "InvalidInstanceType":
        return HsisimInputError(f"EC2 {region} rejected {', '.join(instance_types)}: {code}: {msg}",
                                key="instance_types")
    if code in CREDENTIALS:
        return HsisimInputError(f"AWS rejected the credentials or their permissions ({code}): {msg}")
    if code in ("OptInRequired", "UnsupportedOperation") or "region" in msg.lower():
        return HsisimInputError(f"{region}: {code}: {msg}", key="region")
    return HsisimInputError(f"EC2 {region}: {code}: {msg}")


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())[:300]
