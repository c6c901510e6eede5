"""Field types shared by the scenario schema and the distributions: units parsed once, no coercion.

Counts are whole numbers only (YAML's ``true`` is not one node), numbers are finite and never
booleans, durations/sizes/bandwidths go through ``hsisim.units`` (a number and a unit, never an
expression).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Strict

from hsisim import units

# YAML 1.1 (PyYAML) reads 1e-3 and 1e9 as strings (it wants 1.0e-3): accept a plain decimal number
# written as text, never an expression, "inf", "nan" or a boolean.
_DECIMAL = re.compile(r"^\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?\s*$")


def _number(value: Any) -> Any:
    if isinstance(value, str) and _DECIMAL.match(value):
        return float(value)
    return value

Seconds = Annotated[float, BeforeValidator(units.duration, json_schema_input_type=str | float)]
Bytes = Annotated[float, BeforeValidator(units.size, json_schema_input_type=str | float)]
Count = Annotated[int, Strict()]  # 4, not 4.0, "4" or true
Number = Annotated[float, Strict(), BeforeValidator(_number)]  # 0.5, 1 or 1e-3; not true; finite (model config)
Flag = Annotated[bool, Strict()]  # true/false, not 1 or "yes"
