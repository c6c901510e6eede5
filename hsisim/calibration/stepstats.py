"""Step statistics of ``hsisim validate``, like for like in a real run's steps and the simulated ones."""

from __future__ import annotations

import numpy as np

TRIM = 0.1  # the mean without the fastest and the slowest 10 % of steps


def trimmed(x: np.ndarray) -> float:
    """The mean of the middle 80 %: a neighbour's burst on a shared machine is cut off (a mean would
    follow it), and a step time with two modes (a 2-process gloo step: the all-reduce's transport
    threads awake or asleep) gives a stable value (its median jumps from one mode to the other)."""
    from scipy import stats

    return float(stats.trim_mean(x, TRIM))


def summary(steps: np.ndarray, waits: np.ndarray) -> dict[str, float]:
    """Step time and data wait, like for like in the measurement and the prediction."""
    step = trimmed(steps)
    return {"step_time_s": step, "data_wait_fraction": trimmed(waits) / step, "data_wait_s": trimmed(waits),
            "step_time_median_s": float(np.median(steps)), "step_time_mean_s": float(steps.mean()),
            "data_wait_fraction_of_medians": float(np.median(waits) / np.median(steps)),
            "data_wait_fraction_of_sums": float(waits.sum() / steps.sum())}
