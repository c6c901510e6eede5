"""Units in one place: every quantity the user writes is parsed here, once, with pint.

Inside hsisim everything is SI: seconds, bytes, bytes/s, USD. A bare number is already SI.
"""

from __future__ import annotations

import functools
import math
import re
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


# A quantity is a decimal number and an optional unit made of names, '/', '*' and one-digit powers.
# pint would evaluate a whole expression ("9**9**9 s" never returns), so the number is read by
# float() and only the unit, checked against this pattern, reaches pint.
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?"
_NAME = r"[A-Za-zµμ_]{1,24}(?:\^\d|\*\*\d)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER})\s*((?:{_NAME})(?:\s*[/*]\s*{_NAME}){{0,3}})?\s*$")
MAX_TEXT = 64  # characters: longer strings are not quantities anyone writes by hand


def _parse_string(text: str, kind: str) -> float:
    match = _QUANTITY.match(text) if len(text) <= MAX_TEXT else None
    if match is None:
        raise ValueError(f"cannot read {text[:MAX_TEXT]!r} as a {kind}: write a number and a unit, "
                         f"e.g. {_EXAMPLE[kind]!r}")
    number, unit = float(match.group(1)), match.group(2)
    if unit is None:  # a bare number written as a string: already SI
        return number
    try:
        q: Any = _registry().Quantity(number, unit)
    except Exception as exc:  # pint raises several unrelated types for unknown units
        raise ValueError(f"unknown unit {unit!r} in {text!r} (e.g. {_EXAMPLE[kind]!r})") from exc
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
