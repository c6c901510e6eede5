"""A loop at two paces: the slower pace's share of a run, of its time and of its steps, and how sure it is.

Where calibration's loop without workers ran at two paces (``calibration.state``), a run of hours lands at the
share of its time its machine holds the slower. The readings of the machine's state between calibration's loops
are moments, a share of time; the loop's own steps are a share of steps. ``steps_at`` and ``time_at`` turn one into
the other, ``pace_at`` gives the mean step at a share of time, and ``far_share`` the share a profile measured.
"""

from __future__ import annotations

from typing import NamedTuple

from hsisim import stats
from hsisim.profile import Interference


class Share(NamedTuple):
    """The slower of two paces' share of a run: of its time and of its steps (a run holding the slower pace for a
    share of its time takes fewer of its steps there, since they are longer), and where the share comes from."""

    time: float
    steps: float
    where: str
    # the 95 % interval of the share of time a run of hours holds the slower, where readings of the machine's state
    # gave the share (``far_share``); None where the loop's own steps did (consecutive steps share a spell)
    band: tuple[float, float] | None = None


def steps_at(time: float, near_s: float, far_s: float) -> float:
    """The share of a run's steps at a step of ``far_s``, where it holds that pace for ``time`` of its seconds and
    a step of ``near_s`` for the rest: each pace's steps are its seconds over its step."""
    at_far, at_near = time / far_s, (1 - time) / near_s
    return at_far / (at_far + at_near)


def time_at(steps: float, near_s: float, far_s: float) -> float:
    """The share of a run's seconds at a step of ``far_s``, where ``steps`` of its steps ran at it and the rest at
    ``near_s`` (``steps_at``'s inverse)."""
    at_far, at_near = steps * far_s, (1 - steps) * near_s
    return at_far / (at_far + at_near)


def pace_at(time: float, near_s: float, far_s: float) -> float:
    """The mean step of a run that holds a step of ``far_s`` for ``time`` of its seconds and ``near_s`` for the rest:
    the two paces' harmonic mean weighted by time (its seconds over its steps, ``steps_at``)."""
    return 1 / ((1 - time) / near_s + time / far_s)


def far_share(it: Interference) -> Share | None:
    """The slower pace's share of a run, where calibration's loop without workers ran at two (``near`` and
    ``far``), and where it comes from: the machine's state read between calibration's loops where those readings fell
    in two states (they span the rounds, where the loop's steps sample its own seconds), else the loop's own
    steps. The readings are moments, a share of time; the loop's steps a share of steps.

    Where the readings gave it, so does its 95 % interval for a run of hours (``band``): Wilson's, the readings taken
    as independent draws of the state. On the VM this was developed on (December 2026) they were: over fourteen full
    calibrations, two readings in a row of the same round read the same state 67 times in 126, where independent
    draws at each calibration's share would 69 (``docs/model.md``). A machine whose spells outlast the readings'
    spacing would make the band too narrow."""
    near, far, ms = it.inline.near, it.inline.far, it.machine_state
    if near is None or far is None:
        return None
    if ms is not None and ms.far is not None and ms.far_share is not None and ms.far_s is not None:
        return Share(ms.far_share, steps_at(ms.far_share, near.loop_s, far.loop_s), (
            f"the machine's state read between calibration's loops, slow in {ms.far} of {ms.readings} readings over "
            f"{ms.span_s:.0f} s (a small SVD at the BLAS libraries' own threads: {ms.near_s * 1e3:.2f} or "
            f"{ms.far_s * 1e3:.2f} ms)"), stats.wilson(ms.far, ms.readings))
    said = ("the machine's state read between its loops kept one pace throughout "
            f"({ms.readings} readings over {ms.span_s:.0f} s)" if ms is not None else
            "the profile has no readings of the machine's state between its loops")
    steps = far.steps / (near.steps + far.steps)
    return Share(time_at(steps, near.loop_s, far.loop_s), steps, f"the loop's own steps ({said})")


def in_words(share: Share) -> str:
    """The share in words, of time and of steps."""
    return f"{100 * share.time:.0f} % of the time at the slower ({100 * share.steps:.0f} % of the steps)"


def band_in_words(share: Share, near_s: float, far_s: float) -> str:
    """The share's 95 % interval for a run of hours in words, and the mean step at each end, where it has one."""
    if share.band is None:
        return ""
    lo, hi = share.band
    return (f"; the readings, taken as independent, put a run of hours at {100 * lo:.0f}-{100 * hi:.0f} % of its "
            f"time at the slower (95 %): {1e3 * pace_at(lo, near_s, far_s):.0f}-"
            f"{1e3 * pace_at(hi, near_s, far_s):.0f} ms a step")
