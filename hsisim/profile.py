"""Calibration profiles (JSON): what ``hsisim calibrate`` measured, read without importing torch.

A profile holds a ``device`` block (kind, name, the catalog GPU it corresponds to, core count), a
``compute`` fit t(b) = a + c·b (on the CPU one per training-thread count, because loader workers
and the training process share the cores), optionally ``data`` (the batch build of the real
``DataLoader`` per preprocessing mode), ``checkpoint`` bandwidths and ``collectives`` (α per hop
and bus bandwidth of an all-reduce between processes of this machine), and a ``fingerprint``.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hsisim.analytic.compute import LinearCost, fit_line
from hsisim.errors import HsisimInputError

FORMAT = "hsisim-calibration/1"


@dataclass(frozen=True)
class Profile:
    path: str
    source: str  # "measured" or "spec"
    device_kind: str  # "cpu" or "cuda"
    catalog_gpu: str | None
    cores: int | None
    compute: dict[int, LinearCost]  # by training threads (0 = not thread-dependent: a GPU)
    data: dict[str, dict[str, Any]]  # by preprocess mode: {"build": LinearCost, "patch", "out_bands", "bands"}
    checkpoint: dict[str, float] | None
    collectives: dict[str, float] | None
    model: dict[str, Any]
    raw: dict[str, Any]
    allreduce_quantiles: tuple[float, ...] = ()  # one all-reduce's time / mean, at evenly spaced probabilities
    # the model's own gradient all-reduce measured in DDP training steps: (bytes, mean seconds, quantiles)
    allreduce_in_training: tuple[float, float, tuple[float, ...]] | None = None
    allreduce_world: int | None = None

    def compute_fit(self, threads: int | None) -> tuple[LinearCost, int]:
        """The compute fit for ``threads`` training threads (nearest measured), and the count used."""
        if threads is None or list(self.compute) == [0]:
            key = max(self.compute)
            return self.compute[key], key
        key = nearest_count(self.compute, threads)
        return self.compute[key], key


def nearest_count(counts: Iterable[int], threads: int) -> int:
    """The measured thread count nearest ``threads`` (the larger on a tie)."""
    return min(counts, key=lambda t: (abs(t - threads), -t))


def _fit(d: Any, where: str) -> LinearCost:
    try:
        a, c, cv = float(d["a_s"]), float(d["c_s_per_sample"]), float(d.get("cv", 0.0))
        points = [(float(p["batch"]), float(p["median_s"])) for p in d.get("points") or []]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None
    if not all(math.isfinite(v) for v in (a, c, cv, *(t for _, t in points))) or a < 0 or cv < 0:
        raise ValueError(f"{where}: a_s and cv must be finite and not negative (got a_s={a}, cv={cv})")
    if c < 0:  # profiles written before fits were kept non-negative: refit their points the same way
        a, c, _ = fit_line([b for b, _ in points], [t for _, t in points]) if points else (a, 0.0, 1.0)
    if a + c <= 0:
        raise ValueError(f"{where}: a batch must take some time (a_s={a}, c_s_per_sample={c})")
    return LinearCost(a, c, cv)


def _quantiles(q: Any) -> tuple[float, ...]:
    """Quantiles of time / mean: at least two, non-decreasing, non-negative, mean 1 as drawn (rescaled)."""
    if q is None:
        return ()
    vals = [float(v) for v in q]
    if len(vals) < 2 or min(vals) < 0 or any(b < a for a, b in itertools.pairwise(vals)):
        raise ValueError("collectives.ratio_quantiles: need two or more non-decreasing values >= 0")
    # drawing by linear interpolation between the quantiles has mean = the trapezoid average
    mean = sum((a + b) / 2 for a, b in itertools.pairwise(vals)) / (len(vals) - 1)
    if mean <= 0:
        raise ValueError("collectives.ratio_quantiles: all zero")
    return tuple(v / mean for v in vals)


def _in_training(d: Any) -> tuple[float, float, tuple[float, ...]] | None:
    if not d:
        return None
    return (_num(d["bytes"], "collectives.in_training.bytes", positive=True),
            _num(d["mean_s"], "collectives.in_training.mean_s", positive=True),
            _quantiles(d.get("ratio_quantiles") or None))


def _num(value: Any, where: str, positive: bool = False) -> float:
    """A finite, non-negative (or positive) number of the profile, else a ValueError naming it."""
    x = float(value)
    if not math.isfinite(x) or x < 0 or (positive and x == 0):
        raise ValueError(f"{where} must be a finite {'positive' if positive else 'non-negative'} number, got {value}")
    return x


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a profile can hold")


def load_profile(path: str | Path) -> Profile:
    """Read and check a profile; bad files are input errors naming the ``calibration`` key."""
    p = Path(path)
    if not p.is_file():
        raise HsisimInputError(f"calibration profile not found: {p}", key="calibration")
    try:
        raw = json.loads(p.read_text(encoding="utf-8"), parse_constant=_no_constant)
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        comp = raw["compute"]
        if "by_threads" in comp:
            compute = {int(t): _fit(f, f"compute.by_threads.{t}") for t, f in comp["by_threads"].items()}
        else:
            compute = {0: _fit(comp, "compute")}
        if not compute:
            raise ValueError("compute: no measurement")
        data = {}
        for mode, d in (raw.get("data") or {}).get("modes", {}).items():
            data[mode] = {"build": _fit(d["batch_build"], f"data.modes.{mode}.batch_build"),
                          "handover": _fit(d["handover"], f"data.modes.{mode}.handover") if "handover" in d else None,
                          "patch": int(d["patch"]) if "patch" in d else None,
                          "out_bands": int(d["out_bands"]) if "out_bands" in d else None,
                          "dataset_factory": d.get("dataset_factory"),
                          "per_sample_cv": _num(d.get("per_sample_cv", 0.0), f"data.modes.{mode}.per_sample_cv")}
        dev = raw.get("device", {})
        ck = raw.get("checkpoint")
        coll = raw.get("collectives")
        return Profile(str(p), str(raw.get("source", "measured")), str(dev.get("kind", "cuda")),
                       dev.get("catalog_gpu"), int(dev["cores"]) if dev.get("cores") else None, compute, data,
                       {k: _num(ck[k], f"checkpoint.{k}", positive=True)
                        for k in ("write_bw_bytes_per_s", "read_bw_bytes_per_s")} if ck else None,
                       {"alpha_per_hop_s": _num(coll["alpha_per_hop_s"], "collectives.alpha_per_hop_s"),
                        "bus_bw_bytes_per_s": _num(coll["bus_bw_bytes_per_s"], "collectives.bus_bw_bytes_per_s",
                                                   positive=True),
                        "cv": _num(coll.get("cv", 0.0), "collectives.cv")} if coll else None,
                       dict(raw.get("model", {})), raw, _quantiles(coll.get("ratio_quantiles") if coll else None),
                       _in_training(coll.get("in_training") if coll else None),
                       int(coll["world_size"]) if coll and coll.get("world_size") else None)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise HsisimInputError(f"calibration profile {p} is not a valid profile: {exc}", key="calibration") from None
    except OSError as exc:
        raise HsisimInputError(f"calibration profile {p} cannot be read: {exc.strerror or exc}",
                               key="calibration") from None
