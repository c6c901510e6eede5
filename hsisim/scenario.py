"""Scenario: the whole job as the user wrote it, YAML loading with line numbers, ``KEY=VALUE`` overrides.

Problems are reported all at once, each naming its key path and the YAML line it is on (or the
override that set it); the ``Scenario`` keeps where its keys came from, so that problems found
later (an unknown instance type, a batch that does not divide) point there too. The sections
themselves are in ``hsisim.sections``. This module never imports SimPy.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from pydantic import PrivateAttr, ValidationError, model_validator

from hsisim import yamlsafe
from hsisim.errors import HsisimInputError
from hsisim.sections import (
    DEADLINE_POLICIES,
    AdvisorHazard,
    AvailabilitySpec,
    CheckpointSpec,
    ClusterSpec,
    CostSpec,
    DatasetSpec,
    LifetimesHazard,
    LoaderSpec,
    MemorySpec,
    ModelSpec,
    OverheadSpec,
    Price,
    PriceTraceSpec,
    SimulationSpec,
    SpotSpec,
    TimingsSpec,
    TrainingSpec,
    _Section,
)

__all__ = ["AdvisorHazard", "AvailabilitySpec", "CheckpointSpec", "ClusterSpec", "CostSpec", "DatasetSpec",
           "LifetimesHazard",
           "LoaderSpec", "MemorySpec", "ModelSpec", "Origin", "OverheadSpec", "Price", "PriceTraceSpec", "Scenario",
           "SimulationSpec", "SpotSpec", "TimingsSpec", "TrainingSpec", "apply_overrides", "json_schema",
           "load_scenario", "parse_scenario", "validate_scenario"]


@dataclass(frozen=True)
class Origin:
    """Where a scenario's keys came from: the YAML line of each, the file, the overrides."""

    lines: dict[str, int]
    source: str | None
    overrides: tuple[str, ...] = ()

    def locate(self, exc: HsisimInputError) -> HsisimInputError:
        """``exc`` with the line (or the override) of its key."""
        if exc.problems or (exc.line is not None and exc.source is not None):
            return exc
        key = exc.key or ""
        for item in self.overrides:
            k = item.partition("=")[0].strip()
            if key and (key == k or key.startswith(k + ".") or k.startswith(key + ".")):
                return HsisimInputError(exc.message, key=exc.key, source="set by {overrides}")
        return HsisimInputError(exc.message, key=exc.key, line=self.lines.get(key), source=self.source)


class Scenario(_Section):
    """A training job on a cluster, as the user wrote it, in SI units."""

    _origin: Origin | None = PrivateAttr(default=None)

    name: str
    description: str = ""
    dataset: DatasetSpec
    model: ModelSpec
    training: TrainingSpec
    loader: LoaderSpec = LoaderSpec()
    cluster: ClusterSpec
    calibration: str | None = None
    spot: SpotSpec | None = None
    checkpoint: CheckpointSpec = CheckpointSpec()
    overhead: OverheadSpec = OverheadSpec()
    cost: CostSpec = CostSpec()
    memory: MemorySpec = MemorySpec()
    timings: TimingsSpec | None = None
    simulation: SimulationSpec = SimulationSpec()

    @model_validator(mode="after")
    def _spot_section(self) -> Scenario:
        # cross-section rules: raised as HsisimInputError (pydantic passes it through) to name the key
        if self.cluster.market == "spot" and self.spot is None:
            raise HsisimInputError("cluster.market is 'spot' but there is no 'spot' section", key="spot")
        if self.checkpoint.policy in ("young", "daly", "optimal") and self.spot is None:
            raise HsisimInputError(f"policy {self.checkpoint.policy!r} needs the job's MTBF, from a 'spot' "
                                   "section", key="checkpoint.policy")
        sp = self.cost.spot_price
        if sp is not None and sp.trace and self.cost.price_trace is None:
            raise HsisimInputError("spot_price 'trace' needs a cost.price_trace section", key="cost.spot_price")
        return self._deadline_policy()

    def _deadline_policy(self) -> Scenario:
        if self.spot is None or self.spot.recovery not in DEADLINE_POLICIES:
            return self
        if self.simulation.deadline is None:
            raise HsisimInputError(f"recovery {self.spot.recovery!r} steers by the deadline: set simulation.deadline",
                                   key="spot.recovery")
        if self.checkpoint.storage == "local_nvme":
            raise HsisimInputError(f"recovery {self.spot.recovery!r} moves the job between nodes: its checkpoints "
                                   "must outlive them (storage s3, ebs or fsx, not local_nvme)",
                                   key="checkpoint.storage")
        return self

    @classmethod
    def load(cls, path: str | Path, *, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
        """Read a scenario YAML file and apply ``KEY=VALUE`` overrides (dotted keys, YAML values).

        Raises ``HsisimInputError`` naming the key path and the YAML line (or the override) of any problem.
        """
        return load_scenario(path, overrides)

    @classmethod
    def parse(cls, text: str, *, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
        """A scenario from YAML text (see ``load``)."""
        return parse_scenario(text, overrides)

    def with_overrides(self, overrides: list[str] | tuple[str, ...]) -> Scenario:
        """A copy with ``KEY=VALUE`` overrides applied and validated again."""
        if not overrides:
            return self
        # only what was set (at every level), so that keys left to their defaults stay defaults
        data = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        o = self._origin or Origin({}, None)
        return validate_scenario(apply_overrides(data, overrides), o.lines, o.source, (*o.overrides, *overrides))

    def locate(self, exc: HsisimInputError) -> HsisimInputError:
        """``exc`` (about one of this scenario's keys) with the YAML line or override of that key."""
        return self._origin.locate(exc) if self._origin is not None else exc

    def fingerprint(self) -> str:
        """SHA-256 of the resolved scenario (canonical JSON): the scenario hash of the manifest."""
        text = json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file, for editor completion."""
    return _standard(Scenario.model_json_schema(by_alias=True, mode="validation"))


# pydantic writes the bounds of fields with a custom input type (a duration written "2 min" or
# 120) under its own keys; JSON Schema's names are these. A string input cannot be bounded in the
# schema: the bound is then stated for numbers only.
_BOUNDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}


def _standard(node: Any) -> Any:
    if isinstance(node, list):
        return [_standard(v) for v in node]
    if not isinstance(node, dict):
        return node
    bounds = {_BOUNDS[k]: v for k, v in node.items() if k in _BOUNDS}
    out = {k: _standard(v) for k, v in node.items() if k not in _BOUNDS}
    if bounds and "anyOf" in out:
        out["anyOf"] = [{**alt, **bounds} if alt.get("type") in ("number", "integer") else alt for alt in out["anyOf"]]
    else:
        out.update(bounds)
    return out


def load_scenario(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Read a scenario YAML file, apply ``KEY=VALUE`` overrides and validate it.

    Raises ``HsisimInputError`` naming the key path and YAML line for any problem.
    """
    text = yamlsafe.read_text(path)
    return parse_scenario(text, overrides, source=str(path))


def parse_scenario(text: str, overrides: list[str] | tuple[str, ...] = (), source: str | None = None) -> Scenario:
    """Validate scenario YAML ``text`` (see ``load_scenario``)."""
    doc = yamlsafe.parse(text, source)
    if not isinstance(doc.data, dict):
        raise HsisimInputError("a scenario must be a YAML mapping of sections", source=source)
    data = apply_overrides(doc.data, overrides)
    return validate_scenario(data, doc.lines, source, overrides)


def validate_scenario(data: dict[str, Any], lines: dict[str, int] | None = None, source: str | None = None,
                      overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Validate an already-parsed scenario mapping. Every schema problem is reported at once, each
    naming its key and line (or the override that set it)."""
    origin = Origin(dict(lines or {}), source, tuple(overrides))
    try:
        sc = Scenario.model_validate(data)
    except HsisimInputError as exc:
        raise origin.locate(exc) from None
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = _key_path(data, err["loc"])
            problems.append(origin.locate(HsisimInputError(_clean_message(err), key=key or None)))
        ordered = sorted(_unique(problems), key=lambda e: (e.line is None, e.line or 0, e.key or ""))
        raise HsisimInputError.several(ordered, source) from None
    sc._origin = origin
    return sc


def _unique(problems: list[HsisimInputError]) -> list[HsisimInputError]:
    """One problem per key (a union reports each of its alternatives' complaints about the same value)."""
    seen: dict[str | None, HsisimInputError] = {}
    for p in problems:
        seen.setdefault(p.key, p)
    return list(seen.values())


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Return a copy of ``data`` with each ``dotted.key=value`` set (value parsed as YAML)."""
    out = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise HsisimInputError(f"{{overrides}} expects KEY=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(parts):
            raise HsisimInputError(f"{{overrides}}: {key!r} is not a dotted key path")
        try:
            value = yamlsafe.parse(raw).data if raw.strip() else ""
        except HsisimInputError:
            value = raw
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise HsisimInputError(f"cannot set {key!r}: {'.'.join(parts[:i + 1])!r} is not a section", key=key)
            node = child
        node[parts[-1]] = value
    return out


def _has(node: Any, item: int | str) -> bool:
    if isinstance(node, dict):
        return item in node
    return isinstance(node, list) and isinstance(item, int) and item < len(node)


def _key_path(data: Any, loc: tuple[int | str, ...]) -> str:
    """The dotted path of ``loc`` in the user's data, dropping pydantic's union/tag entries."""
    parts: list[str] = []
    node = data
    for item in loc:
        if _has(node, item):
            parts.append(str(item))
            node = node[item]
        elif isinstance(item, str) and not isinstance(node, dict | list):
            continue
        elif isinstance(node, dict) and isinstance(item, str) and item in _TAGS:
            continue  # discriminated-union tag, not a key the user wrote
        else:
            parts.append(str(item))
            node = None
    return ".".join(parts)


def _dist_names() -> tuple[str, ...]:
    """The ``dist`` names of every law a spot hazard (or a delay) can be, read from the schema."""
    names: list[str] = []
    stack: list[Any] = [SpotSpec.model_fields["hazard"].annotation]
    while stack:
        t = stack.pop()
        field = getattr(t, "model_fields", {}).get("dist") if isinstance(t, type) else None
        if field is not None:
            names.extend(a for a in get_args(field.annotation) if isinstance(a, str))
        else:
            stack.extend(get_args(t))
    return tuple(sorted(names))


_DIST = _dist_names()
_TAGS = {*_DIST, "function-before[_price(), Price]"}


def _clean_message(err: Any) -> str:
    kind = err.get("type", "")
    msg = str(err.get("msg", "invalid value"))
    if kind == "extra_forbidden":
        return "unknown key (check the spelling; unknown keys are not ignored)"
    if kind == "missing":
        return "required key is missing"
    if kind == "union_tag_invalid":
        return f"unknown distribution {err.get('input', {}).get('dist')!r}; known: {', '.join(_DIST)}"
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    inp = err.get("input")
    if not isinstance(inp, dict | list) and inp is not None and repr(inp) not in msg:
        msg = f"{msg} (got {inp!r})"
    return msg
