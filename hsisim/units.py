"""Units in one place: every quantity the user writes is parsed here, once, with pint.

Inside hsisim everything is SI: seconds, bytes, bytes/s, USD. A bare number is already SI.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import pint


@functools.lru_cache(maxsize=1)
def _registry() -> pint.UnitRegistry:
    ureg: pint.UnitRegistry = pint.UnitRegistry(cache_folder=None)
    ureg.define("USD = [currency]")
    return ureg


_TARGET = {
    "duration": "second",
    "size": "byte",
    "bandwidth": "byte / second",
    "price": "USD / hour",
}


def parse_quantity(value: Any, kind: str) -> float:
    """Return ``value`` in SI units of ``kind`` (duration → s, size → B, bandwidth → B/s).

    Raises ``ValueError`` with a message a user can act on (the caller adds the key path).
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a {kind}, got a boolean")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        number = _parse_string(value, kind)
    else:
        raise ValueError(f"expected a {kind} such as {_EXAMPLE[kind]!r}, got {value!r}")
    if not math.isfinite(number):
        raise ValueError(f"{kind} must be finite, got {value!r}")
    if number < 0:
        raise ValueError(f"{kind} must not be negative, got {value!r}")
    return number


_EXAMPLE = {"duration": "2 min", "size": "24 GiB", "bandwidth": "25 Gbit/s", "price": "1.62 USD/h"}


def _parse_string(text: str, kind: str) -> float:
    ureg = _registry()
    try:
        q: Any = ureg.Quantity(text.strip())
    except Exception as exc:  # pint raises several unrelated types for garbage input
        raise ValueError(f"cannot read {text!r} as a {kind} (e.g. {_EXAMPLE[kind]!r})") from exc
    if isinstance(q, int | float):
        return float(q)
    if q.unitless:  # a bare number written as a string: already SI
        return float(q.magnitude)
    try:
        return float(q.to(_TARGET[kind]).magnitude)
    except pint.DimensionalityError as exc:
        raise ValueError(f"{text!r} is not a {kind} (e.g. {_EXAMPLE[kind]!r})") from exc


def duration(value: Any) -> float:
    """Seconds."""
    return parse_quantity(value, "duration")


def size(value: Any) -> float:
    """Bytes."""
    return parse_quantity(value, "size")


def bandwidth(value: Any) -> float:
    """Bytes per second."""
    return parse_quantity(value, "bandwidth")


def usd_per_hour(value: Any) -> float:
    """US dollars per hour."""
    return parse_quantity(value, "price")
