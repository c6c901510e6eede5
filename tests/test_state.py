"""The machine's state between calibration's loops, and two paces told apart (``calibration.state``)."""

from __future__ import annotations

import numpy as np
import pytest

from hsisim.calibration import interference, state


def test_readings_in_two_groups_far_enough_apart_are_split_at_the_best_cut_of_their_logarithms() -> None:
    near, far = [0.0030, 0.0029, 0.0031, 0.0030], [0.0071, 0.0072]
    values = near[:2] + far[:1] + near[2:] + far[1:]
    assert state.two(values) == [False, False, True, False, False, True]
    # the VM's loop blocks: 370-400 against 600-680 ms
    assert state.two([0.37, 0.61, 0.40, 0.38, 0.68, 0.39, 0.60]) == [False, True, False, False, True, False, True]


@pytest.mark.parametrize("values", [
    [0.003] * 6,  # one value
    [0.0030, 0.0031, 0.0029, 0.0044, 0.0045],  # two groups 1.47x apart: under TWO_PACES
    [0.0030, 0.0031, 0.0029, 0.0030, 0.0071],  # one stray reading: under FEWEST on its side
    [0.0030, 0.0071],  # too few
    [0.003],
])
def test_readings_of_one_pace_or_too_few_are_not_split(values: list[float]) -> None:
    assert state.two(values) is None


def test_a_stray_reading_beyond_both_paces_does_not_hide_them_and_falls_on_its_side_of_the_cut() -> None:
    steps = [0.39] * 25 + [0.69] * 25
    assert state.two([*steps, 9.0]) == [False] * 25 + [True] * 26
    assert state.two([0.01, *steps]) == [False] * 26 + [True] * 25
    assert state.two([0.003, 0.0031, 0.0029, 9.0]) is None  # without the stray, too few for two groups


def test_the_groups_medians_at_exactly_two_paces_apart_split_and_equal_values_stay_on_one_side() -> None:
    assert state.two([1.0, 1.0, 1.5, 1.5]) == [False, False, True, True]
    assert state.two([1.0, 1.0, 1.4999, 1.4999]) is None
    # ties at the cut: every equal value on the same side
    assert state.two([1.0, 1.0, 1.0, 3.0, 3.0, 3.0, 3.0]) == [False] * 3 + [True] * 4


def test_a_reading_is_the_median_of_a_few_small_svds() -> None:
    r = state.reading()
    assert 0 < r < 1.0
    # the matrix a per-patch PCA of an 11x11 patch of 200 bands decomposes, the same at every reading
    assert state._MATRIX.shape == (121, 200) and state._MATRIX.dtype == np.float32


def test_the_loop_without_workers_keeps_each_of_two_paces_where_its_steps_fell_in_two() -> None:
    parts = [(0.20, 0.17), (0.45, 0.19), (0.21, 0.18), (0.46, 0.20), (0.19, 0.17)]
    paces = interference._two_paces(parts)
    assert paces["near"] == {"build_s": pytest.approx(0.20), "step_s": pytest.approx(0.52 / 3), "steps": 3}
    assert paces["far"] == {"build_s": pytest.approx(0.455), "step_s": pytest.approx(0.195), "steps": 2}
    assert interference._two_paces([(0.20, 0.17), (0.21, 0.18), (0.25, 0.19)]) == {}  # one pace
    assert interference._two_paces([]) == {}


def test_the_machine_state_is_how_many_readings_read_each_state_over_how_long() -> None:
    readings = [(10.0, 0.003), (30.0, 0.0071), (55.0, 0.0029), (80.0, 0.0031), (100.0, 0.0072)]
    assert interference._machine_state(readings) == {"machine_state": {
        "readings": 5, "span_s": 90.0, "values_ms": [3.0, 7.1, 2.9, 3.1, 7.2], "far": 2,
        "near_s": pytest.approx(0.003), "far_s": pytest.approx(0.00715)}}
    # one state: its median, and no count of the slow one
    assert interference._machine_state([(0.0, 0.003), (5.0, 0.0031), (9.0, 0.0032)]) == {"machine_state": {
        "readings": 3, "span_s": 9.0, "values_ms": [3.0, 3.1, 3.2], "near_s": pytest.approx(0.0031)}}
    assert interference._machine_state([(0.0, 0.003)]) == {} and interference._machine_state([]) == {}
