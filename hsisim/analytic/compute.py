"""Compute time of one micro-batch: a roofline from the catalog, or a calibrated t(b) = a + c·b."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Training FLOPs are forward + backward ≈ 3 × forward (backward computes gradients with respect to
# both inputs and weights: Kaplan et al. 2020, "Scaling Laws for Neural Language Models", §2.1).
TRAIN_FLOPS_PER_FWD = 3.0
# Eager PyTorch spends roughly 10 µs of host time per operator (dispatch + kernel launch); for small
# HSI models this sets the fixed part of a step (Horace He, "Making Deep Learning Go Brrrr From
# First Principles", 2022: overhead-bound regime).
EAGER_OP_OVERHEAD_S = 10e-6
# Backward launches about two kernels per forward operator; a foreach Adam/SGD step ~12 launches.
BACKWARD_OPS_PER_FWD = 2.0
OPTIMIZER_OPS = 12
# Activation checkpointing recomputes the forward of each segment: ~20-30 % more compute
# (Chen et al. 2016, arXiv:1604.06174; seed article §5.3). We take the midpoint.
RECOMPUTE_OVERHEAD = 0.25


@dataclass(frozen=True)
class LinearCost:
    """t(b) = a + c·b seconds for a micro-batch of b samples, with a coefficient of variation."""

    a_s: float
    c_s_per_sample: float
    cv: float = 0.0

    def time(self, batch: int) -> float:
        """Mean seconds for one micro-batch of ``batch`` samples."""
        return self.a_s + self.c_s_per_sample * batch


def roofline_cost(*, fwd_flops: float, act_bytes: float, params: int, ops: int, peak_flops: float,
                  efficiency: float, mem_bw_bytes_per_s: float, optimizer_bytes_per_param: float,
                  activation_checkpointing: bool = False) -> LinearCost:
    """Micro-batch cost from FLOPs and bytes (roofline) plus eager-mode fixed overhead.

    Per sample: the larger of the FLOP time (3 × forward FLOPs at ``efficiency`` × peak) and the
    activation traffic time (each saved activation written in forward, read and its gradient
    written in backward: 3 passes over ``act_bytes``). Fixed per micro-batch: operator launch
    overhead plus the optimizer's pass over its state, which is memory-bound.
    """
    flop_time = TRAIN_FLOPS_PER_FWD * fwd_flops / (peak_flops * efficiency)
    traffic_time = 3.0 * act_bytes / mem_bw_bytes_per_s
    per_sample = max(flop_time, traffic_time)
    if activation_checkpointing:
        per_sample *= 1.0 + RECOMPUTE_OVERHEAD
    fixed = (ops * (1.0 + BACKWARD_OPS_PER_FWD) + OPTIMIZER_OPS) * EAGER_OP_OVERHEAD_S
    fixed += params * optimizer_bytes_per_param / mem_bw_bytes_per_s
    return LinearCost(fixed, per_sample)


def roofline_ratio(src_peak: float, src_bw: float, dst_peak: float, dst_bw: float, flop_bound: bool) -> float:
    """Factor that converts a time measured on one device to another (>1: destination is slower)."""
    return src_peak / dst_peak if flop_bound else src_bw / dst_bw


def efficiency(compute_s: float, step_s: float) -> float:
    """η = compute / total time (seed article §3.1)."""
    return compute_s / step_s


def fit_line(x: list[float] | np.ndarray, y: list[float] | np.ndarray) -> tuple[float, float, float]:
    """Least squares y = a + c·x with a, c ≥ 0; returns (a, c, R²).

    A time has no negative fixed or per-item part: a negative intercept is noise (refit through
    the origin), and so is a negative slope (a batch of 16 measured slower than one of 64: the
    fit is the constant mean).
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    c, a = np.polyfit(xa, ya, 1) if len(xa) > 1 else (0.0, float(ya.mean()))
    if c < 0:
        a, c = float(ya.mean()), 0.0
    elif a < 0:
        a, c = 0.0, float(xa @ ya / (xa @ xa))
    pred = a + c * xa
    ss = float(((ya - ya.mean()) ** 2).sum())
    r2 = 1.0 - float(((ya - pred) ** 2).sum()) / ss if ss > 0 else 1.0
    return float(a), float(c), r2
