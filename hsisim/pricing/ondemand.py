"""On-demand list prices: the AWS Price List Query API (``pricing.get_products``), else the catalog.

The Price List Query API is served from a few regions only; us-east-1 is one of them (AWS Billing
and Cost Management User Guide, "Using the AWS Price List Query API"). Its EC2 products are
filtered by attribute values; the region is its long ``location`` name, not its code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hsisim.errors import HsisimInputError

PRICING_REGION = "us-east-1"

# Region code → Price List ``location`` attribute of AmazonEC2 products. Source: the attribute
# values the Price List Query API returns (pricing GetAttributeValues, ServiceCode=AmazonEC2,
# AttributeName=location); note "EU (…)" where the console now says "Europe (…)".
REGION_LOCATIONS = {
    "us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)", "us-west-2": "US West (Oregon)",
    "af-south-1": "Africa (Cape Town)", "ap-east-1": "Asia Pacific (Hong Kong)",
    "ap-south-1": "Asia Pacific (Mumbai)", "ap-south-2": "Asia Pacific (Hyderabad)",
    "ap-northeast-1": "Asia Pacific (Tokyo)", "ap-northeast-2": "Asia Pacific (Seoul)",
    "ap-northeast-3": "Asia Pacific (Osaka)", "ap-southeast-1": "Asia Pacific (Singapore)",
    "ap-southeast-2": "Asia Pacific (Sydney)", "ap-southeast-3": "Asia Pacific (Jakarta)",
    "ap-southeast-4": "Asia Pacific (Melbourne)", "ap-southeast-5": "Asia Pacific (Malaysia)",
    "ap-southeast-7": "Asia Pacific (Thailand)", "ca-central-1": "Canada (Central)",
    "ca-west-1": "Canada West (Calgary)", "eu-central-1": "EU (Frankfurt)", "eu-central-2": "EU (Zurich)",
    "eu-west-1": "EU (Ireland)", "eu-west-2": "EU (London)", "eu-west-3": "EU (Paris)",
    "eu-south-1": "EU (Milan)", "eu-south-2": "EU (Spain)", "eu-north-1": "EU (Stockholm)",
    "il-central-1": "Israel (Tel Aviv)", "me-south-1": "Middle East (Bahrain)", "me-central-1": "Middle East (UAE)",
    "mx-central-1": "Mexico (Central)", "sa-east-1": "South America (Sao Paulo)",
}
# spot ProductDescription → Price List ``operatingSystem``
OPERATING_SYSTEMS = {"Linux/UNIX": "Linux", "Linux/UNIX (Amazon VPC)": "Linux", "Windows": "Windows",
                     "Windows (Amazon VPC)": "Windows", "Red Hat Enterprise Linux": "RHEL", "SUSE Linux": "SUSE"}


@dataclass(frozen=True)
class OnDemand:
    """On-demand USD per instance-hour by instance type, where they came from, and why."""

    source: str | None  # "pricing_api", "catalog", or None (none known)
    usd_per_hour: dict[str, float] = field(default_factory=dict)
    note: str = ""
    asked_api: bool = False  # whether the Pricing API was called (successfully or not)

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "usd_per_hour": dict(self.usd_per_hour), "note": self.note}


def product_filters(*, location: str, instance_type: str, operating_system: str) -> list[dict[str, str]]:
    """TERM_MATCH filters selecting the one shared-tenancy, no-software, used-capacity on-demand product."""
    terms = {"instanceType": instance_type, "location": location, "operatingSystem": operating_system,
             "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in terms.items()]


def hourly_usd(price_list: Iterable[str]) -> list[float]:
    """USD per hour of every on-demand price dimension in ``PriceList`` entries (each a JSON string)."""
    out = []
    for entry in price_list:
        doc = json.loads(entry) if isinstance(entry, str) else entry
        for term in doc.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                if dim.get("unit", "Hrs") == "Hrs":
                    out.append(float(dim["pricePerUnit"]["USD"]))
    return [p for p in out if p > 0]


def from_pricing_api(pricing: Any, *, region: str, instance_types: Iterable[str], product: str) -> dict[str, float]:
    """On-demand USD/h per instance type from ``pricing.get_products`` (all pages).

    Raises botocore errors as they come, and ``LookupError`` when a type has no matching product.
    """
    location = REGION_LOCATIONS.get(region)
    system = OPERATING_SYSTEMS.get(product)
    if location is None or system is None:
        raise LookupError(f"no Price List location for {region}" if location is None
                          else f"no Price List operating system for {product!r}")
    out = {}
    for itype in instance_types:
        pages = pricing.get_paginator("get_products").paginate(
            ServiceCode="AmazonEC2", FormatVersion="aws_v1",
            Filters=product_filters(location=location, instance_type=itype, operating_system=system))
        prices = [p for page in pages for p in hourly_usd(page.get("PriceList", []))]
        if not prices:
            raise LookupError(f"the Price List has no on-demand product for {itype} in {location}")
        out[itype] = min(prices)  # one product matches these filters; min() is robust to duplicates
    return out


def from_catalog(instance_types: Iterable[str]) -> dict[str, float]:
    """On-demand USD/h of the instance types the catalog knows (us-east-1 Linux list prices)."""
    from hsisim import catalog

    out = {}
    for itype in instance_types:
        try:
            out[itype] = catalog.instance(itype, key="instance_types").on_demand_usd_per_hour
        except HsisimInputError:
            continue
    return out


def on_demand_prices(pricing: Callable[[], Any] | None, *, region: str, instance_types: list[str],
                     product: str) -> OnDemand:
    """On-demand prices from the Pricing API client that ``pricing()`` makes, else from the catalog.

    ``pricing`` None skips the API. Any API failure (unreachable, no permission, no product) falls
    back to the catalog and the note says why; types the catalog lacks stay unknown.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    reason = "the Pricing API was not asked (on_demand = catalog)"
    if pricing is not None:
        try:
            return OnDemand("pricing_api", from_pricing_api(pricing(), region=region, instance_types=instance_types,
                                                            product=product), "AWS Price List Query API", True)
        except (BotoCoreError, ClientError, LookupError, ValueError, KeyError) as exc:
            reason = f"the Pricing API was not usable ({_reason(exc)})"
    asked = pricing is not None
    found = from_catalog(instance_types) if OPERATING_SYSTEMS.get(product) == "Linux" else {}
    if not found:
        return OnDemand(None, {}, f"{reason}; the catalog has no list price for {', '.join(instance_types)}", asked)
    missing = sorted(set(instance_types) - set(found))
    note = f"{reason}; catalog list price (us-east-1, Linux)" + (f", unknown for {', '.join(missing)}"
                                                                   if missing else "")
    return OnDemand("catalog", found, note, asked)


def _reason(exc: Exception) -> str:
    """A short reason for a failed Pricing API call (an HTML error page is reduced to its status)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        err = response.get("Error", {})
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        message = " ".join(str(err.get("Message", "")).split())
        message = "" if message.startswith("<") else f": {message[:120]}"
        return f"HTTP {status} {err.get('Code', '')}{message}".strip()
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"
