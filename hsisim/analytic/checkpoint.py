"""Checkpoint size, write/restore times, and the Young and Daly optimal intervals."""

from __future__ import annotations

import math

from hsisim.analytic.memory import HALF


def checkpoint_bytes(params: int, precision: str, optimizer: str) -> float:
    """Model + optimizer state bytes: weights as trained (fp32, or half + fp32 master) + moments."""
    opt = {"adam": 8.0, "adamw": 8.0, "sgd": 4.0}[optimizer]
    weights = 2.0 + 4.0 if precision in HALF else 4.0
    return params * (weights + opt)


def write_seconds(size: float, write_bw: float, latency: float, writers: int = 1) -> float:
    """Persist ``size`` bytes written by ``writers`` nodes in parallel (ZeRO shards), each at ``write_bw``."""
    return latency + size / (write_bw * max(1, writers))


def young_interval(delta: float, mtbf: float) -> float:
    """Young (1974): τ = √(2δM), with checkpoint cost δ and mean time between failures M."""
    return math.sqrt(2 * delta * mtbf)


def daly_interval(delta: float, mtbf: float) -> float:
    """Daly (2006, eq. 37): τ = √(2δM)[1 + ⅓√(δ/2M) + (δ/2M)/9] − δ for δ < 2M, else M."""
    if delta >= 2 * mtbf:
        return mtbf
    x = delta / (2 * mtbf)
    return math.sqrt(2 * delta * mtbf) * (1 + math.sqrt(x) / 3 + x / 9) - delta


