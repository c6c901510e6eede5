"""Calibration: the torch HSI models against their papers, HSI data, the probes, profiles, validate."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, SHARED_DATA
from typer.testing import CliRunner

torch = pytest.importorskip("torch", reason="calibration needs torch (pip install torch==2.13.0)")

from hsisim.calibration import collectives, interference, probes  # noqa: E402
from hsisim.calibration.data import (  # noqa: E402
    PatchDataset,
    fit_preprocess,
    offline_cube,
    open_cube,
    real_labels,
    synthetic_cube,
    synthetic_labels,
    write_cube,
)
from hsisim.calibration.models import MODELS, build, forward_flops, param_count  # noqa: E402
from hsisim.catalog.hsi_models import BUILDERS  # noqa: E402
from hsisim.cli import app  # noqa: E402
from hsisim.distributions import gamma_cv_for_mean_difference  # noqa: E402
from hsisim.errors import HsisimInputError  # noqa: E402
from hsisim.profile import load_profile  # noqa: E402
from hsisim.resolve import resolve_job  # noqa: E402
from hsisim.scenario import load_scenario  # noqa: E402

runner = CliRunner()
DATA_BOUND = ROOT / "scenarios" / "validate" / "cpu_data_bound.yaml"
CPU = torch.device("cpu")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the CUDA paths run on a GPU")
SHAPES = {"hamida": (200, 5, 17), "hybridsn": (30, 25, 16), "ssrn": (200, 7, 16), "ssftt": (30, 13, 16),
          "spectralformer": (200, 7, 16)}


def test_published_parameter_counts() -> None:
    # HybridSN (Roy et al. 2019, Indian Pines, 30 PCA components, 25x25): 5,122,176 trainable parameters;
    # Hamida et al. 3D-CNN as in DeepHyperX (Indian Pines, 200 bands, 5x5, 17 outputs): 46,107
    assert param_count(build("hybridsn", 30, 25, 16)) == 5_122_176
    assert param_count(build("hamida", 200, 5, 17)) == 46_107


@pytest.mark.parametrize("name", sorted(MODELS))
def test_torch_modules_match_the_catalog_arithmetic(name: str) -> None:
    bands, patch, classes = SHAPES[name]
    model = build(name, bands, patch, classes)
    stats = BUILDERS[name](bands, patch, classes)
    assert param_count(model) == stats.params
    out = model(torch.zeros(2, bands, patch, patch))
    assert out.shape == (2, classes)
    # flop_counter counts convolutions and matrix products; the catalog adds normalisation, softmax
    # and residual additions (2.0 x MACs each), a little more for the BatchNorm/LayerNorm models
    flops = forward_flops(model, (bands, patch, patch))
    ratio = flops / stats.fwd_flops
    if name in ("hamida", "hybridsn"):
        assert flops == stats.fwd_flops
    else:
        assert 0.98 <= ratio <= 1.0, ratio


def test_synthetic_labels_and_cube() -> None:
    rng = np.random.default_rng(0)
    lab = synthetic_labels(40, 30, 5, 500, rng)
    assert lab.shape == (40, 30) and (lab > 0).sum() == 500 and set(np.unique(lab)) <= set(range(6))
    cube = synthetic_cube(lab, 12, rng)
    assert cube.shape == (40, 30, 12) and cube.dtype == np.int16


@pytest.mark.skipif(not (SHARED_DATA / "hsi" / "Indian_pines_gt.mat").exists(), reason="shared HSI data absent")
def test_real_indian_pines_ground_truth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HSISIM_DATA", str(SHARED_DATA))
    lab = real_labels("indian_pines")
    assert lab is not None and lab.shape == (145, 145)
    assert (lab > 0).sum() == 10249 and lab.max() == 16  # the catalog's labelled count


@pytest.mark.parametrize("fmt", ["npy", "envi", "mat"])
def test_cube_readers_round_trip(fmt: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    cube = synthetic_cube(synthetic_labels(16, 12, 3, 100, rng), 7, rng)
    back = open_cube(write_cube(cube, tmp_path / "c", fmt))
    np.testing.assert_array_equal(np.asarray(back), cube)


def test_getitem_and_offline_preprocessing_give_the_same_patches(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    lab = synthetic_labels(20, 18, 4, 200, rng)
    cube = synthetic_cube(lab, 24, rng)
    pre = fit_preprocess(cube, lab, 5)
    assert pre.out_bands == 5
    off = offline_cube(cube, pre, tmp_path / "off.npy", rows_per_chunk=7)
    a = PatchDataset(cube, lab, 5, "getitem", pre)
    b = PatchDataset(off, lab, 5, "offline")
    assert len(a) == len(b) == 200
    for i in (0, 17, 199):  # includes border pixels (reflected)
        xa, ya = a[i]
        xb, yb = b[i]
        assert xa.shape == (5, 5, 5) and ya == yb
        torch.testing.assert_close(xa, xb, rtol=1e-4, atol=1e-4)
    r, c = int(a.rows[0]), int(a.cols[0])
    centre = pre.apply(cube[r, c][None])[0]
    np.testing.assert_allclose(a[0][0][:, 2, 2].numpy(), centre, rtol=1e-5)


def test_fit_line_recovers_a_line_and_clips_a_negative_intercept() -> None:
    a, c, r2 = probes.fit_line([1, 2, 4, 8], [0.5 + 0.25 * b for b in (1, 2, 4, 8)])
    assert (a, c, r2) == pytest.approx((0.5, 0.25, 1.0))
    a, c, _ = probes.fit_line([1, 2, 3], [0.9, 2.0, 3.1])
    assert a == 0.0 and c == pytest.approx((0.9 + 4.0 + 9.3) / 14)


def test_compute_and_checkpoint_probes_on_the_cpu(tmp_path: Path) -> None:
    res = probes.compute_probe(probes.builtin_net("hybridsn", 15, 9, 16), CPU, [2, 32], reps=3, warmup=1, threads=1)
    assert res["threads"] == 1 and res["c_s_per_sample"] > 0 and len(res["points"]) == 2
    assert torch.get_num_threads() != 0
    model, opt, scaler, dtype = probes.make_training(probes.builtin_net("hamida", 20, 3, 5), CPU)
    probes.training_step(model, opt, torch.randn(2, 20, 3, 3), torch.zeros(2, dtype=torch.long), scaler, dtype)
    ck = probes.checkpoint_probe(model, opt, tmp_path, reps=2)
    assert ck["bytes"] > 4 * param_count(model) and ck["write_bw_bytes_per_s"] > 0
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_overlap_counts_covered_time_once() -> None:
    spans = [(3.0, 4.0), (0.5, 2.0), (0.0, 1.0), (2.5, 2.5)]  # unsorted, nested, and an empty one
    assert interference.overlap(spans, [(0.0, 5.0), (1.5, 3.5), (3.2, 3.4), (4.0, 9.0), (-1.0, 0.25)]) == \
        pytest.approx([3.0, 1.0, 0.2, 0.0, 0.25])  # [0, 2] and [3, 4]
    assert interference.overlap([], [(0.0, 1.0)]) == [0.0] and interference.overlap(spans, []) == []


def test_overlap_agrees_with_a_fine_grid_on_random_spans() -> None:
    rng = np.random.default_rng(7)
    starts = rng.uniform(0, 10, 60)
    spans = [(float(s), float(s + d)) for s, d in zip(starts, rng.exponential(0.3, 60), strict=True)]
    windows = [(float(a), float(a + w)) for a, w in zip(rng.uniform(-1, 10, 40), rng.uniform(0, 2, 40), strict=True)]
    grid = np.linspace(-1.0, 12.0, 130001)  # 0.1 ms apart: each window's covered share, counted point by point
    covered = np.zeros_like(grid, dtype=bool)
    for s, e in spans:
        covered |= (grid >= s) & (grid < e)
    dx = grid[1] - grid[0]
    expected = [float(covered[(grid >= a) & (grid < b)].sum() * dx) for a, b in windows]
    assert interference.overlap(spans, windows) == pytest.approx(expected, abs=3e-4)


class _Cubes(torch.utils.data.Dataset):  # type: ignore[misc]
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.randn(20, 3, 3), i % 5


def _fake_loop(monkeypatch: pytest.MonkeyPatch) -> tuple[Iterator[tuple[None, float, float]], Callable[[], None]]:
    """Batches and a 10 ms step on a fake clock: every third batch still builds when asked (a 5 ms wait),
    the others were built 10 ms before (a 2 ms wait, the hand-over)."""
    clock = [0.0]
    monkeypatch.setattr(interference.time, "perf_counter", lambda: clock[0])

    def batches() -> Iterator[tuple[None, float, float]]:
        j = 0
        while True:
            asked = clock[0]
            if j % 3 == 2:  # still building when asked: it ends 4 ms later, the wait 5 ms
                clock[0] += 0.005
                yield None, asked - 0.001, asked + 0.004
            else:  # built 10 ms before it was asked for: the wait is the hand-over, 2 ms
                clock[0] += 0.002
                yield None, asked - 0.012, asked - 0.010
            j += 1

    def step() -> None:
        clock[0] += 0.010

    return batches(), step


def test_a_loop_past_its_cap_cuts_its_warm_up_and_its_measured_steps_short(monkeypatch: pytest.MonkeyPatch) -> None:
    # steps end at 12, 24, 39, 51 ms: past half the 40 ms cap after the second (the warm-up ends there,
    # not after 3), and past the cap once two are measured (not 6)
    computing, every, spans, waits, ready, after = interference._loop(*_fake_loop(monkeypatch), 1, 3, 6, 2,
                                                                      cap_s=0.040)
    assert len(every) == 4 and len(computing) == len(spans) == len(waits) == 2
    assert waits == pytest.approx([0.005, 0.002]) and ready == pytest.approx([0.002])
    # the builds after it are all taken: the 2 per worker that may have run beside the last steps, and 2 more
    assert computing[-1][1] == pytest.approx(0.051) and len(after) == 2 + 2
    # a cap never leaves fewer than 2 measured steps, however slow
    assert len(interference._loop(*_fake_loop(monkeypatch), 1, 3, 6, 2, cap_s=0.001)[0]) == 2
    # with a least duration of 100 ms (its warm-up included), steps are measured past the 4 until the loop has run
    # that long: ends at 12 and 24 ms warm up, the 6th measured ends at 102 ms
    lengthened = interference._loop(*_fake_loop(monkeypatch), 1, 2, 4, 2, min_s=0.100)
    assert len(lengthened[0]) == 6 and lengthened[0][-1][1] == pytest.approx(0.102)
    # the builds after it: 2k + max(reps, 2k) = 8, but past half the cap once 2k + 2 are taken only those
    assert len(interference._loop(*_fake_loop(monkeypatch), 1, 3, 6, 6)[5]) == 8
    # one more is asked for at once, within half of a 1 ms cap; 2 ms later it is past
    assert len(interference._loop(*_fake_loop(monkeypatch), 1, 3, 6, 6, cap_s=0.001)[5]) == 2 + 2 + 1
    # after the (2k + 2)-th, builds asked for 0 and 2 ms later start within half of a 10 ms cap, the next at
    # 7 ms does not: 2 more, not the 4 that make 8
    assert len(interference._loop(*_fake_loop(monkeypatch), 1, 3, 6, 6, cap_s=0.010)[5]) == 2 + 2 + 2


def test_a_dataset_without_a_whole_batch_is_an_input_error_not_an_endless_loop() -> None:
    it = probes.forever(torch.utils.data.DataLoader(_Cubes(), batch_size=65, drop_last=True))
    with pytest.raises(HsisimInputError, match="a dataset of 64 samples has no whole batch of 65"):
        next(it)
    assert next(probes.forever(torch.utils.data.DataLoader(_Cubes(), batch_size=64, drop_last=True)))[0].shape[0] == 64


class _PidCubes(_Cubes):
    """_Cubes of 16 samples that leave a file named after each process building them."""

    def __init__(self, where: Path) -> None:
        self.where = where

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        (self.where / str(os.getpid())).touch()
        return super().__getitem__(i)


class _FailingInWorker(_Cubes):
    """_Cubes whose DataLoader worker raises at its 100th sample (in its second epoch at batch 8)."""

    def __init__(self) -> None:
        self.built = 0

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        self.built += 1
        if torch.utils.data.get_worker_info() is not None and self.built == 100:
            raise RuntimeError("the user's __getitem__ failed")
        return super().__getitem__(i)


def test_the_probes_batches_end_their_workers_where_a_build_raises_or_they_are_closed() -> None:
    # the data and hand-over probes read persistent workers through `forever`: a raised build's traceback holds
    # its frame and so the loader, whose workers lived on as long as the traceback (the CLI's error report)
    before = set(multiprocessing.active_children())

    def batches() -> Generator[Any, None, None]:
        return probes.forever(torch.utils.data.DataLoader(_FailingInWorker(), batch_size=8, num_workers=1,
                                                          persistent_workers=True, drop_last=True))

    it = batches()
    with pytest.raises(RuntimeError, match="the user's __getitem__ failed") as raised:
        for _ in range(20):  # 8 batches an epoch: the worker fails in the second epoch, the same worker
            next(it)
    assert raised.traceback and set(multiprocessing.active_children()) <= before
    it = batches()
    next(it)
    assert set(multiprocessing.active_children()) > before
    it.close()  # as when a probe is done with it
    assert set(multiprocessing.active_children()) <= before


@pytest.mark.parametrize("k", [1, 2])
def test_the_loop_with_workers_keeps_its_workers_over_a_small_datasets_epochs(k: int, tmp_path: Path) -> None:
    # 16 samples at batch 8 are 2 batches an epoch; the round takes k + 1 + 2 + 4 batches for its steps and
    # 2k + 7 after them (17 or 20 batches, 9 or 10 epochs). A DataLoader started its k workers again at each
    # one (the round then timed worker start-ups); the round's k workers last the whole round
    row = interference.new_row()
    before = set(multiprocessing.active_children())
    interference._workers_round(row, _PidCubes(tmp_path), 8, k, lambda: None, 0.001, 0.001, 2, 4, 7, 90.0)
    assert row["steps"] == [4] and len(list(tmp_path.iterdir())) == k
    assert set(multiprocessing.active_children()) <= before  # and end with it
    with pytest.raises(HsisimInputError, match="a dataset of 16 samples has no whole batch of 17"):
        interference._workers_round(row, _PidCubes(tmp_path), 17, k, lambda: None, 0.001, 0.001, 2, 4, 7, 90.0)
    # a step that raises ends them too, though the traceback still holds the loop's iterator
    calls: list[int] = []

    def failing() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("the user's step failed")

    with pytest.raises(RuntimeError, match="the user's step failed") as raised:
        interference._workers_round(row, _PidCubes(tmp_path), 8, k, failing, 0.001, 0.001, 2, 4, 7, 90.0)
    assert raised.traceback and set(multiprocessing.active_children()) <= before


@pytest.mark.parametrize("min_s", [0.0, 20.0])
def test_a_loops_blocks_are_its_steps_with_their_waits(min_s: float, monkeypatch: pytest.MonkeyPatch) -> None:
    # 12 measured steps of 10 ms at 1.0, 1.1, ... s, each after a wait of 2 ms (even) or 6 ms (odd): one whole
    # block, 10 steps of 10 ms and their 5 waits of 2 and 5 of 6 ms, 14 ms a step
    computing = [(1.0 + 0.1 * j, 1.01 + 0.1 * j) for j in range(12)]
    waits = [0.002 if j % 2 == 0 else 0.006 for j in range(12)]
    after = [(None, 2.5 + j, 2.6 + j) for j in range(4)]
    seen: list[float] = []
    monkeypatch.setattr(interference, "_loop", lambda it, step, k, warmup, steps, reps, cap, least: (
        seen.append(least) or (computing, computing, computing, waits, [], after)))
    row = interference.new_row()
    interference._workers_round(row, _Cubes(), 8, 1, lambda: None, 0.01, 0.05, 2, 4, 2, 90.0, min_s)
    assert seen == [min_s] and row["loop_step_s"] == pytest.approx([0.014])
    # the builds' own spans (here the steps' 12 of 10 ms each), and how many
    assert row["spanned"] == pytest.approx([0.12]) and row["built"] == [12]
    # its blocks, whether or not it was lengthened
    assert row["blocks"] == pytest.approx([0.014])


def test_without_workers_the_loop_times_each_build_and_the_step_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # on the fake clock a build waits 2 or 5 ms (every third), a step takes 10 ms: 12, 24, 39, 51, 63, 78 ms
    builds, steps = interference._inline_loop(*_fake_loop(monkeypatch), 2, 4)
    assert builds == pytest.approx([0.005, 0.002, 0.002, 0.005]) and steps == pytest.approx([0.010] * 4)
    # past half a 40 ms cap after the second step (24 ms) the warm-up ends; past the cap with two measured
    builds, steps = interference._inline_loop(*_fake_loop(monkeypatch), 5, 6, cap_s=0.040)
    assert builds == pytest.approx([0.005, 0.002]) and len(steps) == 2
    # however slow, two are measured
    assert len(interference._inline_loop(*_fake_loop(monkeypatch), 5, 6, cap_s=0.001)[0]) == 2
    # with a least duration of 100 ms, steps are measured past the 4 until the loop has run that long (the 6th
    # measured ends at 102 ms); the cap still ends it first (60 ms: after the 3rd measured, at 63 ms)
    assert len(interference._inline_loop(*_fake_loop(monkeypatch), 2, 4, min_s=0.100)[1]) == 6
    assert len(interference._inline_loop(*_fake_loop(monkeypatch), 2, 4, cap_s=0.060, min_s=0.100)[1]) == 3
    # and a loop that has run long enough still measures its 4
    assert len(interference._inline_loop(*_fake_loop(monkeypatch), 2, 4, min_s=0.010)[1]) == 4


def test_the_loop_takes_the_hand_over_only_from_batches_built_before_they_were_asked_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    computing, every, spans, waits, ready, after = interference._loop(*_fake_loop(monkeypatch), 1, 3, 6, 2)
    assert len(every) == 9 and len(computing) == len(spans) == len(waits) == 6  # the first 3 warm up
    assert waits == pytest.approx([0.002, 0.002, 0.005] * 2)  # the measured steps, 3 ... 8
    assert ready == pytest.approx([0.002] * 4)  # the two batches still building are left out
    assert all(b - a == pytest.approx(0.010) for a, b in computing) and len(after) == 2 + 2


SPINNER = """
import multiprocessing as mp, os, time
from hsisim.calibration.probes import _spin

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    started, stop = ctx.Event(), ctx.Event()  # named: an Event made in the call was gone before the child read it
    p = ctx.Process(target=_spin, args=(stop, os.getpid(), started), daemon=True)
    p.start()
    assert started.wait(120)
    print(p.pid, flush=True)
    time.sleep(120)
"""


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] not in "ZX"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_the_contention_probes_competitors_stop_when_the_calibration_is_killed(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "spinner.py"
    script.write_text(SPINNER)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        time.sleep(0.5)
        assert _running(child)  # spinning (past its start-up) while its calibration lives
        parent.send_signal(signal.SIGKILL)  # a kill sets no Event
        parent.wait()
        deadline = time.monotonic() + 10
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(child), "the competitor kept spinning after its calibration was killed"
    finally:
        if _running(child):
            os.kill(child, signal.SIGKILL)


def test_the_contention_probe_refuses_to_time_a_step_beside_competitors_that_never_started(tmp_path: Path) -> None:
    import subprocess
    import sys

    # a main module read from stdin cannot be imported again by a spawned process: its competitors die
    # at once, and the probe used to time the step beside nothing and call it "beside k busy cores"
    script = ("from hsisim.calibration import probes\n"
              "probes.contention_probe(probes.builtin_net('hamida', 20, 3, 5), 4, rounds=1, reps=2)\n")
    out = subprocess.run([sys.executable, "-"], input=script, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert "the contention probe's competitor process exited (code 1) before the step beside it was timed" in out.stderr


@pytest.mark.parametrize("cores, min_s", [((1.0,), (0.0,)), ((2.0,), (20.0,)), ((1.29,), (0.0,)), ((1.3,), (20.0,)),
                                          ((1.0, 2.0, 1.0), (0.0, 20.0, 20.0)), ((2.0, 1.0, 0.5), (20.0, 20.0, 0.0))])
def test_each_worker_counts_loop_runs_its_steps_within_the_cap(cores: tuple[float, ...], min_s: tuple[float, ...],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int, int, float, float]] = []
    monkeypatch.setattr(interference, "_timed", lambda fn: {"step": 0.25, "build": 0.15}[fn.__name__])
    monkeypatch.setattr(interference, "_workers_round", lambda row, ds, batch, k, step, sa, ba, warmup, steps, reps,
                        cap, least, init: seen.append((k, warmup, steps, cap, least)) if init is None else 1 / 0)
    monkeypatch.setattr(interference, "_inline_loop", lambda it, step, warmup, steps, cap, least: (
        seen.append((0, warmup, steps, cap, least)) or ([0.1, 0.2, 0.6] * 4, [0.2, 0.3, 0.7] * 4)))

    def step() -> None: ...

    def build() -> None: ...

    probe = interference.InterferenceProbe.__new__(interference.InterferenceProbe)  # its times are the fakes'
    probe.step, probe.build, probe.ds, probe.batch, probe.reps, probe.steps, probe.cap_s, probe.threads = (
        step, build, _Cubes(), 8, 3, 10, 90.0, torch.get_num_threads())  # type: ignore[assignment]
    probe.threaded_s, probe.blas_limit = 20.0, None
    probe.alone = {"step_alone_s": [], "build_alone_s": [], "build_s": [], "step_s": []}
    probe.table, probe.starts, probe.worker_builds, probe.inline_blocks = {1: {}, 2: {}}, [], [], []
    probe.inline_steps, probe.readings = [], []
    monkeypatch.setattr(interference, "STATE_PAUSE_S", 0.0)
    monkeypatch.setattr(interference.state, "reading", lambda: seen.append((-2, 0, 0, 0.0, 0.0)) or 0.003)
    each = iter(cores)
    monkeypatch.setattr(interference.threads, "worker_build", lambda fn, reps: (
        seen.append((-1, reps, 0, 0.0, 0.0)) or {"build_s": 0.15, "cores": next(each)}) if fn is build else None)
    for least in min_s:
        seen.clear()
        probe.round()
        # the build as a worker runs it, then no workers: a warm-up of 2, then the steps; with workers, a warm-up
        # of as many steps as are measured; where the rounds' builds so far kept 1.3 cores or more busy on
        # average (as the profile pools them), every loop runs for 20 s or longer, and the machine's state is read
        # before each loop and after the last
        loops = [(0, 2, 10, 90.0, least), (1, 10, 10, 90.0, least), (2, 10, 10, 90.0, least)]
        read = (-2, 0, 0, 0.0, 0.0)
        assert seen == [(-1, 3, 0, 0.0, 0.0), *([read, loops[0], read, loops[1], read, loops[2], read] if least
                                                 else loops)]
    assert len(probe.readings) == 4 * sum(1 for least in min_s if least)
    assert probe.worker_builds == [{"build_s": 0.15, "cores": c} for c in cores]
    # the times alone are medians of the fakes; without workers, the loop's means (its medians: 0.2, 0.3)
    assert {key: v[0] for key, v in probe.alone.items()} == pytest.approx(
        {"step_alone_s": 0.25, "build_alone_s": 0.15, "build_s": 0.3, "step_s": 0.4})
    # each round's loop without workers: one whole block of its 12 builds and steps (0.3, 0.5, 1.3 ...), and each
    # step's build and step
    assert probe.inline_blocks == pytest.approx([0.66] * len(min_s))
    # (kept only in the rounds that read the machine's state)
    assert probe.inline_steps == [(0.1, 0.2), (0.2, 0.3), (0.6, 0.7)] * 4 * sum(1 for least in min_s if least)
    kept = len(probe.inline_steps)
    # loops under a BLAS limit (the lever's) read nothing: the state is read at the libraries' own threads
    probe.blas_limit, before = 1, len(seen)
    monkeypatch.setattr(interference.threads, "worker_build", lambda fn, reps: {"build_s": 0.15, "cores": 2.0})
    probe._round(None)
    assert -2 not in [e[0] for e in seen[before:]] and len(probe.readings) == 4 * sum(1 for least in min_s if least)
    assert len(probe.inline_steps) == kept  # nor keeps its steps' two paces


def test_the_probes_result_has_the_loops_two_paces_and_the_machine_state_where_they_fell_in_two() -> None:
    probe = interference.InterferenceProbe.__new__(interference.InterferenceProbe)  # its rounds' times only
    probe.threads, probe.batch, probe.table, probe.starts = 2, 64, {}, [0.0, 200.0]
    probe.alone = {key: [0.1, 0.1] for key in ("step_alone_s", "build_alone_s", "build_s", "step_s")}
    probe.worker_builds = [{"build_s": 0.1, "cores": 2.0}] * 2
    probe.inline_blocks = [0.38, 0.5]  # its blocks' range, and its steps' two paces
    probe.inline_steps = [(0.20, 0.17), (0.45, 0.19), (0.21, 0.18), (0.46, 0.20)]
    probe.readings = [(1.0, 0.003), (21.0, 0.007), (41.0, 0.003), (61.0, 0.0031), (81.0, 0.0071)]
    res = probe.result()
    assert res["inline"]["near"]["steps"] == 2 and res["inline"]["far"]["build_s"] == pytest.approx(0.455)
    assert res["inline"]["block_step_s"] == pytest.approx([0.38, 0.5]) and res["inline"]["block_n"] == 2
    assert res["machine_state"]["readings"] == 5 and res["machine_state"]["far"] == 2
    assert res["machine_state"]["span_s"] == pytest.approx(80.0)
    probe.inline_steps, probe.readings = [(0.20, 0.17)] * 4, []  # one pace, no readings: neither
    res = probe.result()
    assert "near" not in res["inline"] and "machine_state" not in res


def _row(covered: float, owed: float, alone: tuple[float, ...] = (0.0112,), left: float = 0.001
         ) -> dict[str, list[float]]:
    rounds = len(alone)  # the covered time and the owed work pooled over the rounds; 10 builds of 3 ms each
    return {"covered": [covered / rounds] * rounds, "owed": [owed / rounds] * rounds, "idle_s": [0.0012] * rounds,
            "busy_t": [0.004 / rounds] * rounds, "left": [left / rounds] * rounds, "spanned": [0.03 / rounds] * rounds,
            "built": [10 / rounds] * rounds, "loop_step_s": [0.0144] * rounds,
            "loop_wait_s": [0.002] * rounds, "ready_wait_s": [0.002, 0.0018], "step_alone_s": list(alone),
            "steps": [10] * rounds, "blocks": []}


def test_a_loops_pace_is_read_in_whole_10_step_blocks_and_its_fastest_and_slowest_are_kept() -> None:
    # 25 steps: two whole blocks (means 0.15 and 0.45), the last 5 left out
    paced = [0.1, 0.2] * 5 + [0.4, 0.5] * 5 + [9.0] * 5
    assert interference.blocks(paced) == pytest.approx([0.15, 0.45]) and interference.blocks(paced[:9]) == []
    assert interference.blocks([0.2] * 10) == pytest.approx([0.2]) and len(interference.blocks([0.2] * 20)) == 2
    row = _row(0.08, 0.01)
    assert "block_step_s" not in interference._pooled(1, row, 0.0112, 0.0012)
    row["blocks"] = [0.0144]  # one block is no spread
    assert "block_step_s" not in interference._pooled(1, row, 0.0112, 0.0012)
    row["blocks"] = [0.0144, 0.0121, 0.0302]
    pooled = interference._pooled(1, row, 0.0112, 0.0012)
    assert (pooled["block_step_s"], pooled["block_n"]) == ([0.0121, 0.0302], 3)


def test_a_builds_pace_beside_steps_is_split_from_its_pace_after_the_loop_only_where_the_work_left_says_it() -> None:
    # builds of 0.6 ms alone: after the loop 1.2 ms (2x); in the loop 4 ms beside steps, where 1 ms of their work
    # was left for that time: 4x. Their own 10 spans in the loop took 30 ms (5x alone)
    split = interference._pooled(1, _row(0.010, 0.005), 0.0112, 0.0006)
    assert (split["build_ratio_idle"], split["build_ratio_busy"]) == pytest.approx((2.0, 4.0))
    # just over 5 % of the time beside steps left: still split (4 / 0.21)
    barely = interference._pooled(1, _row(0.010, 0.005, left=0.00021), 0.0112, 0.0006)
    assert (barely["build_ratio_idle"], barely["build_ratio_busy"]) == pytest.approx((2.0, 4.0 / 0.21))
    # 5 % or less, or none, or less than none (the time beside no step did it all at the pace after the loop): the
    # builds' own time in the loop for both, 30 ms over 10 builds of 0.6 ms
    for left in (0.0002, 0.0, -0.001):
        whole = interference._pooled(1, _row(0.010, 0.005, left=left), 0.0112, 0.0006)
        assert (whole["build_ratio_idle"], whole["build_ratio_busy"]) == pytest.approx((5.0, 5.0)), left
    # over rounds, the sums: 4 builds over 6 ms (2.5x) and 6 over 24 ms (6.67x) are 30 ms over 10 (5x), not the
    # rounds' mean ratio (4.58x) nor either round's
    two = _row(0.010, 0.005, (0.0112, 0.0112), left=0.0)
    two["spanned"], two["built"] = [0.006, 0.024], [4, 6]
    assert interference._pooled(1, two, 0.0112, 0.0006)["build_ratio_busy"] == pytest.approx(5.0)
    # no build beside the measured steps' batches: the pace after the loop
    none = _row(0.010, 0.005, left=0.0)
    none["spanned"], none["built"] = [0.0], [0]
    assert interference._pooled(1, none, 0.0112, 0.0006)["build_ratio_busy"] == pytest.approx(2.0)


def test_a_step_slowdown_the_builds_cannot_explain_is_kept_for_the_whole_step() -> None:
    # builds covered 10 ms of the steps, which owed 5 ms of their work then: they ran at half pace
    explained = interference._pooled(2, _row(0.010, 0.005), 0.0112, 0.0006)
    assert explained["step_ratio"] == pytest.approx(2.0) and explained["step_base"] == 1.0
    # builds covered 1 ms, and the step owed next to nothing then: the loop's step over the step alone
    throughout = interference._pooled(2, _row(0.001, 0.00001), 0.0112, 0.0006)
    assert throughout["step_ratio"] == 1.0 and throughout["step_base"] == pytest.approx((0.0144 - 0.002) / 0.0112)
    assert throughout["build_ratio_idle"] == pytest.approx(2.0) and throughout["build_ratio_busy"] == pytest.approx(4.0)
    assert throughout["handover_s"] == pytest.approx(0.0019) and throughout["handover_n"] == 2
    # the step alone timed at a slower moment than the loop (14.0 ms against the loop's 12.4 of compute):
    # the loop's own step, under 1, not held at 1
    faster = interference._pooled(2, _row(0.001, 0.00001, (0.0140,)), 0.0140, 0.0006)
    assert faster["step_ratio"] == 1.0 and faster["step_base"] == pytest.approx((0.0144 - 0.002) / 0.0140)
    assert faster["step_base"] < 1.0
    # builds covered 1 ms, and the steps owed 3 ms of their work then (a ratio of 1/3: the step alone was timed
    # at a slower moment): nothing explained, the loop's own step
    moved = interference._pooled(2, _row(0.001, 0.003, (0.0140,)), 0.0140, 0.0006)
    assert moved["step_ratio"] == 1.0 and moved["step_base"] == pytest.approx((0.0144 - 0.002) / 0.0140)
    # owing exactly the covered time is a ratio of 1, explained
    assert interference._pooled(2, _row(0.003, 0.003), 0.0112, 0.0006)["step_base"] == 1.0


def test_owed_work_within_the_noise_of_the_step_alone_explains_nothing() -> None:
    # 20 steps over 2 rounds, the step alone 11.2 and 12.0 ms: its noise in the owed work is
    # 20 x sd / sqrt(2) = 20 x 0.566 / 1.414 = 8 ms, and 5 ms owed is within twice that
    noisy = interference._pooled(1, _row(0.010, 0.005, (0.0112, 0.0120)), 0.0116, 0.0006)
    assert noisy["step_ratio"] == 1.0 and noisy["step_base"] == pytest.approx((0.0144 - 0.002) / 0.0116)
    # the step alone 11.20 and 11.21 ms: 0.1 ms of noise, and the builds explain the 5 ms
    steady = interference._pooled(1, _row(0.010, 0.005, (0.0112, 0.01121)), 0.011205, 0.0006)
    assert steady["step_ratio"] == pytest.approx(2.0) and steady["step_base"] == 1.0


def test_interference_probe_times_builds_and_steps_meeting() -> None:
    res = interference.interference_probe(probes.builtin_net("hamida", 20, 3, 5), _Cubes(), 8, 2, rounds=1, reps=3,
                                    steps=4)
    assert res["threads"] == torch.get_num_threads() and res["cores"] == os.cpu_count()
    assert set(res["inline"]) == {"build_ratio", "step_ratio", "build_s", "step_s"}
    assert all(v > 0 for v in res["inline"].values()) and res["step_alone_s"] > 0 and res["build_alone_s"] > 0
    assert [w["workers"] for w in res["workers"]] == [1, 2]
    assert res["worker_build"]["build_s"] > 0 and res["worker_build"]["cores"] > 0  # calibration.threads' tests
    for w in res["workers"]:
        assert w["step_ratio"] >= 1.0 and w["build_ratio_busy"] >= w["build_ratio_idle"] > 0
        # one or the other: the builds explain the step (base exactly 1), or the loop's compute over the step alone
        whole = (w["loop_step_s"] - w["loop_wait_s"]) / res["step_alone_s"]
        assert w["step_base"] == 1.0 or (w["step_ratio"] == 1.0 and w["step_base"] == pytest.approx(whole))
        assert w["loop_step_s"] > w["loop_wait_s"] >= 0  # what the loop itself measured, for the record
        assert ("handover_s" in w) == ("handover_n" in w)
        assert 1 <= w.get("handover_n", 1) <= 4  # waits of the 4 measured steps
    from hsisim.profile import Interference

    Interference.model_validate(res)  # what calibrate writes, a profile reads


def test_rank_difference_keeps_only_what_differs_between_ranks() -> None:
    rng = np.random.default_rng(4)
    n = 4000
    common = rng.normal(0.0, 0.5, n)  # the machine slows every rank at once
    ranks = [list(1.0 + common + rng.normal(0.0, 0.1, n)) for _ in range(3)]
    # X1 - X2 ~ N(0, 2·0.1²): E|X1 - X2| = 2·0.1/sqrt(pi) = 0.1128; the per-step |difference| has
    # sd 0.1414·sqrt(1 - 2/pi) = 0.085, so the mean of 3 pairs x 4000 steps has s.e. below 0.0014
    assert collectives.rank_difference(ranks) == pytest.approx(0.2 / math.sqrt(math.pi), abs=4 * 0.0014)
    assert collectives.rank_difference([list(1.0 + common)] * 3) == pytest.approx(0.0, abs=1e-12)
    assert collectives.rank_difference([ranks[0]]) == 0.0
    # a normal difference gives back its own cv through the gamma inversion (small cv: normal limit)
    cv = gamma_cv_for_mean_difference(collectives.rank_difference(ranks) / 1.0)
    assert cv == pytest.approx(0.1, rel=0.06)


def test_a_rare_stall_counts_in_the_wait_as_often_as_it_happens() -> None:
    """Two ranks, each stalled 1 step in 50 by 10x its step: the simulator's independent gamma ranks,
    with the cv calibrate derives, wait at the barrier as long as the measured ranks did."""
    rng = np.random.default_rng(7)
    n, p, stall = 20000, 0.02, 10.0
    ranks = np.array([1.0 + rng.normal(0.0, 0.02, n) + stall * (rng.random(n) < p) for _ in range(2)])
    real_wait = float((ranks.max(axis=0) - ranks.mean(axis=0)).mean())  # E|X1 - X2| / 2 ~ p(1-p)·stall
    mean = float(ranks.mean())
    cv = gamma_cv_for_mean_difference(collectives.rank_difference(list(map(list, ranks))) / mean)
    sim = rng.gamma(1 / cv**2, mean * cv**2, (2, 200000))
    sim_wait = float((sim.max(axis=0) - sim.mean(axis=0)).mean())
    # real_wait has s.e. ~ stall/2·sqrt(2p/n) ~ 0.005 on ~0.2; the simulated one far less
    assert sim_wait == pytest.approx(real_wait, abs=4 * 0.005)
    # the standard deviation, as calibrate used it before, makes them wait about three times as long
    sd_cv = float(np.sqrt(ranks.var(axis=0, ddof=1).mean())) / mean
    sd_sim = rng.gamma(1 / sd_cv**2, mean * sd_cv**2, (2, 200000))
    assert float((sd_sim.max(axis=0) - sd_sim.mean(axis=0)).mean()) > 1.8 * real_wait


def _handed(builds: np.ndarray, computes: np.ndarray, common: np.ndarray) -> list[list[float]]:
    """Hand-over times on one clock: every rank leaves step i's all-reduce at the same moment, then
    builds and computes; the all-reduce ends after the last rank's hand-over plus the common part."""
    t, rows = 100.0, []
    for i in range(builds.shape[1]):
        row = t + builds[:, i] + computes[:, i]
        rows.append(row)
        t = float(row.max()) + common[i]
    return [list(r) for r in np.array(rows).T]


def test_compute_difference_takes_the_build_out_of_the_hand_over_times() -> None:
    rng = np.random.default_rng(11)
    n, ranks = 4000, 3
    common = rng.uniform(0.5, 3.0, n)  # the all-reduce and the machine's moments: every rank at once
    builds = 2.0 + rng.normal(0.0, 0.3, (ranks, n))
    computes = 10.0 + common + rng.normal(0.0, 0.4, (ranks, n))
    got = collectives.compute_difference(_handed(builds, computes, common), [list(b) for b in builds])
    # independent normal parts: the computations' E|X1 - X2| = 2·0.4/sqrt(pi) = 0.451; the hand-over
    # times' is 2·0.5/sqrt(pi) = 0.564 with per-pair s.e. 0.707·0.5·sqrt(1 - 2/pi)/sqrt(n) = 0.0034,
    # the build's 0.339 with s.e. 0.0020: the difference of squares carries both, about 0.006
    assert got == pytest.approx(0.8 / math.sqrt(math.pi), abs=4 * 0.006)
    # nothing differs between the ranks but the build: nothing is left for the computation
    same = np.tile(10.0 + common, (ranks, 1))
    assert collectives.compute_difference(_handed(builds, same, common), [list(b) for b in builds]) == \
        pytest.approx(0.0, abs=0.03)
    # no build timed (a hand-over probe's run): the whole difference is the computation's
    assert collectives.compute_difference(_handed(np.zeros((ranks, n)), computes, common), []) == \
        pytest.approx(0.8 / math.sqrt(math.pi), abs=4 * 0.0034)
    assert collectives.compute_difference([[1.0, 2.0]], [[0.5, 0.5]]) == 0.0  # one rank waits for none


def test_a_rank_that_catches_up_makes_no_one_wait() -> None:
    """A rank that built longer computes faster while the others' builds leave it the cores: the
    timed computations differ widely, the hand-over times (what the barrier sees) hardly."""
    rng = np.random.default_rng(12)
    n, ranks = 4000, 2
    common = rng.uniform(0.5, 3.0, n)
    builds = 2.0 + rng.normal(0.0, 2.0, (ranks, n))
    computes = 10.0 - (builds - 2.0) + rng.normal(0.0, 0.1, (ranks, n))  # build + compute ~ 12 everywhere
    timed = collectives.rank_difference([list(c) for c in computes])  # 2·2/sqrt(pi) = 2.26
    got = collectives.compute_difference(_handed(builds, computes, common), [list(b) for b in builds])
    assert timed > 2.0 and got < 0.15  # the barrier waits for 2·0.1/sqrt(pi) = 0.11 at most
    # and the simulator's independent ranks, drawn with the cv that gives, wait as long as these did
    real_wait = float(np.mean(np.max(builds + computes, axis=0) - np.mean(builds + computes, axis=0)))
    cv = gamma_cv_for_mean_difference(collectives.rank_difference([list(b) for b in builds + computes]) / 12.0)
    sim = rng.gamma(1 / cv**2, 12.0 * cv**2, (2, 200000))
    assert float((sim.max(axis=0) - sim.mean(axis=0)).mean()) == pytest.approx(real_wait, rel=0.1)


def _clock_worker(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    finished = False
    try:
        torch.manual_seed(0)
        model = DistributedDataParallel(torch.nn.Linear(3, 2))
        clock = collectives.CommClock(model)
        try:
            clock.take()
            raised = False
        except RuntimeError:
            raised = True
        x = torch.full((4, 3), float(rank + 1))
        model(x).sum().backward()
        handed, done = clock.take()
        grads = [p.grad.tolist() for p in model.parameters()]
        got: list[object] = [None, None]
        dist.all_gather_object(got, {"handed": handed, "done": done, "grads": grads, "raised": raised})
        if rank == 0:
            Path(out).write_text(json.dumps(got))
        del model, clock
        finished = True
    finally:
        collectives.end_group(finished)


@pytest.mark.slow
def test_comm_clock_averages_like_ddp_and_times_the_all_reduce(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    out = tmp_path / "clock.json"
    mp.spawn(_clock_worker, args=(collectives.free_port(), str(out)), nprocs=2, join=True)
    r0, r1 = json.loads(out.read_text())
    # d(sum W x + b)/dW = 4 * x per row; the ranks' inputs are 1 and 2: the average is 4 * 1.5 = 6
    assert r0["grads"] == r1["grads"] == [[[6.0] * 3] * 2, [4.0, 4.0]]
    for r in (r0, r1):
        assert r["raised"] and r["handed"] <= r["done"]
    # one clock for the host: both ranks' completions come after both hand-overs
    assert max(r0["handed"], r1["handed"]) <= min(r0["done"], r1["done"])


def test_collective_probe_two_gloo_processes() -> None:
    res = collectives.collective_probe(2, "gloo", sizes=[4096, 65536, 1 << 20], reps=3)
    assert res["world_size"] == 2 and len(res["points"]) == 3
    assert res["bus_bw_bytes_per_s"] > 0 and res["alpha_per_hop_s"] >= 0


def _probe_dirs() -> set[str]:
    return {p for p in os.listdir(tempfile.gettempdir()) if p.startswith(("hsisim-probe-", "hsisim-validate-"))}


def test_calibrate_cli_writes_a_profile_that_drives_a_scenario(tmp_path: Path) -> None:
    before = _probe_dirs()
    out = tmp_path / "cpu.json"
    res = runner.invoke(app, ["calibrate", "--device", "cpu", "--model", "hybridsn", "--dataset", "indian_pines",
                              "--patch", "9", "--pca", "15", "--batch", "8", "--quick", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    prof = json.loads(out.read_text())
    assert prof == json.loads(res.output)
    assert prof["source"] == "measured" and prof["device"]["catalog_gpu"] == "cpu"
    fp = prof["fingerprint"]
    assert {"device", "torch", "cpu", "cores", "date", "python"} <= set(fp)
    assert set(prof["data"]["modes"]) == {"getitem", "offline"}
    assert prof["checkpoint"]["bytes"] > 0 and not _probe_dirs() - before  # another run's may come and go
    loaded = load_profile(out)
    # the profile drives a CPU scenario: compute and batch build come from it
    sc = load_scenario(ROOT / "scenarios" / "validate" / "cpu_data_bound.yaml",
                       [f"calibration={out}", "training.micro_batch=8", "training.global_batch=8",
                        "dataset.augmentation=none"])
    job = resolve_job(sc)
    # no workers: the batch build and the step after it at the paces measured in the loop without workers
    it = loaded.data["getitem"]["interference"]
    assert [w.workers for w in it.workers] == list(range(1, min(4, os.cpu_count() or 1) + 1))
    assert job.num_workers == 0 and job.paces is None
    assert it.batch == 8 and job.compute_s == pytest.approx(it.inline.step_s)  # the step after a build, measured
    assert job.batch_build_s == pytest.approx(it.inline.build_s)
    assert any("profile's DataLoader probe" in n for n in job.notes)
    # and a GPU scenario, extrapolated with a note
    gpu = resolve_job(load_scenario(ROOT / "scenarios" / "single_3090.yaml", [f"calibration={out}"]))
    assert any("extrapolated" in n for n in gpu.notes) and any("CPU profile" in n for n in gpu.notes)


@pytest.mark.parametrize(("quick", "spare_s", "rounds"), [(True, 10.0, 3), (True, -1.0, 2), (False, -1.0, 3)])
def test_calibrate_spreads_the_interference_rounds_through_the_calibration(
        quick: bool, spare_s: float, rounds: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # one round before the compute probe, one after the data probes, and one between them (with
    # --quick only where a round took under SPARE_ROUND_S): a shared machine's moments a minute
    # apart, not one moment; every data mode's probe in each round
    from hsisim.calibration import run as cal_run

    events: list[str] = []

    class Probe:
        def __init__(self, net: object, ds: PatchDataset, batch: int, k: int, steps: int, threaded_s: float) -> None:
            self.mode = ds.mode
            self.worker_builds = [{"build_s": 0.01, "cores": 1.0}]  # builds at one thread: no loops at one BLAS thread
            events.append(f"new {self.mode} {batch} {steps} {threaded_s}")

        def round(self) -> None:
            events.append(f"round {self.mode}")

        def result(self) -> dict[str, object]:
            return {"rounds": events.count(f"round {self.mode}")}

    monkeypatch.setattr(cal_run, "SPARE_ROUND_S", spare_s)
    monkeypatch.setattr(cal_run, "InterferenceProbe", Probe)
    monkeypatch.setattr(cal_run, "_compute", lambda *a: events.append("compute"))
    monkeypatch.setattr(cal_run, "_data", lambda ds, label, *a: events.append(f"data {ds.mode}") or {})
    monkeypatch.setattr(cal_run.probes, "checkpoint_probe", lambda *a: events.append("checkpoint") or {})
    monkeypatch.setattr(cal_run, "document", lambda profile: profile)  # the fakes' profile is not a valid one
    prof = cal_run.calibrate(device="cpu", model="hamida", dataset="indian_pines", patch=5, batch=4, quick=quick)
    steps = 10 if quick else 16
    both = ["round getitem", "round offline"]
    # a build that runs threads of its own has each loop of a full calibration run 20 s or longer; --quick's not
    least = 0.0 if quick else 20.0
    assert events == [f"new getitem 4 {steps} {least}", f"new offline 4 {steps} {least}", *both, "compute",
                      *(both if rounds == 3 else []), "data getitem", "data offline", *both, "checkpoint"]
    assert {m: d["interference"] for m, d in prof["data"]["modes"].items()} == {"getitem": {"rounds": rounds},
                                                                                "offline": {"rounds": rounds}}


@pytest.mark.parametrize(("cores", "blas", "limited"), [(2.0, ["openblas (2 threads)"], True),
                                                       (2.0, None, False), (1.0, ["openblas (2 threads)"], False)])
def test_a_build_on_blas_threads_of_its_own_has_its_loops_run_again_at_one_blas_thread(
        cores: float, blas: list[str] | None, limited: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # from the round whose builds so far kept 1.3 cores or more busy through a BLAS library at more than one
    # thread, each round runs that mode's loops again at one BLAS thread, right after its own (a moment apart)
    from hsisim.calibration import run as cal_run

    events: list[str] = []

    class Probe:
        def __init__(self, net: object, ds: PatchDataset, batch: int, k: int, steps: int, threaded_s: float,
                     blas_limit: int | None = None) -> None:
            self.mode, self.limit, self.steps, self.threaded_s = ds.mode, blas_limit, steps, threaded_s
            self.worker_builds: list[dict[str, Any]] = []
            events.append(f"new {self.mode} {steps} {threaded_s} {blas_limit}")

        def round(self) -> None:
            events.append(f"round {self.mode} {self.limit}")
            if self.mode == "getitem" and self.worker_builds:  # threaded from its second round on
                self.worker_builds.append({"build_s": 0.2, "cores": cores, **({"blas": blas} if blas else {})})
            else:
                self.worker_builds.append({"build_s": 0.1, "cores": 1.0})

        def result(self) -> dict[str, object]:
            return {"limit": self.limit}

    monkeypatch.setattr(cal_run, "InterferenceProbe", Probe)
    meet = cal_run._Meetings(probes.builtin_net("hamida", 20, 3, 5), {"getitem": _Modes("getitem"),
                                                                       "offline": _Modes("offline")},
                             CPU, 8, False, lambda s: None)
    assert events == ["new getitem 16 20.0 None", "new offline 16 20.0 None"]
    events.clear()
    for _ in range(3):
        meet.round()
    again = ["new getitem 16 20.0 1", "round getitem 1"] if limited else []
    rest = ["round getitem 1"] if limited else []
    # round 1: neither threaded; round 2: getitem's builds were, its loops again at one thread; round 3: both
    assert events == ["round getitem None", "round offline None", "round getitem None", *again, "round offline None",
                      "round getitem None", *rest, "round offline None"]
    assert meet.result("getitem") == {"interference": {"limit": None},
                                      **({"interference_one_blas": {"limit": 1}} if limited else {})}
    assert meet.result("offline") == {"interference": {"limit": None}}


class _BlasSeen(_Cubes):
    """``_Cubes`` that write down, once a process, the threads its BLAS libraries run as a sample is built."""

    def __init__(self, out: Path) -> None:
        self.out, self.pid = out, 0

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if self.pid != os.getpid():  # a forked worker starts with its parent's pid here
            self.pid = os.getpid()
            with self.out.open("a") as f:
                f.write(f"{os.getpid()} {sorted(set(interference.threads.blas_threads().values()))}\n")
        return super().__getitem__(i)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: a BLAS library runs one thread anyway")
def test_the_loops_at_one_blas_thread_run_it_in_the_training_process_and_in_every_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not interference.threads.threaded_blas():
        pytest.skip("no BLAS library with more than one thread is loaded (OPENBLAS_NUM_THREADS set?)")
    before = interference.threads.blas_threads()
    net = probes.builtin_net("hamida", 20, 3, 5)
    seen = {name: tmp_path / name for name in ("own", "one")}
    inits, real = tmp_path / "inits", interference.threads.limit_blas

    def init(n: int, worker: int = 0) -> None:  # each worker's worker_init_fn, where it has one
        with inits.open("a") as f:
            f.write(f"{os.getpid()} {n}\n")
        real(n, worker)

    monkeypatch.setattr(interference.threads, "limit_blas", init)
    for name, limit in (("own", None), ("one", 1)):
        ds = _BlasSeen(seen[name])
        probe = interference.InterferenceProbe(net, ds, 8, 2, reps=2, steps=2, blas_limit=limit)
        seen[name].unlink()  # its warm-up, before the round (at the libraries' own threads), left out
        ds.pid = 0
        probe.round()
        res = probe.result()
        assert res["worker_build"]["blas_threads"] == ({k: 1 for k in before} if limit else before)
        assert ("one_blas_thread_s" in res["worker_build"]) == (limit is None)  # limited: no threaded BLAS left
    lines = {name: [line.split(" ", 1) for line in f.read_text().splitlines()] for name, f in seen.items()}
    # this process and both workers of each loop with workers (1 and 2): 4 processes, each at its thread count
    for name, counts in (("own", sorted(set(before.values()))), ("one", [1])):
        assert len({pid for pid, _ in lines[name]}) >= 4 and {c for _, c in lines[name]} == {str(counts)}
    # the limit is each worker's own, not only what a forked one inherits (a spawned one inherits nothing)
    workers = {pid for pid, _ in lines["one"]} - {str(os.getpid())}
    assert {line.split()[0] for line in inits.read_text().splitlines()} == workers
    assert {line.split()[1] for line in inits.read_text().splitlines()} == {"1"}
    assert interference.threads.blas_threads() == before  # the limit ends with the round


class _Modes(torch.utils.data.Dataset):  # type: ignore[misc]
    def __init__(self, mode: str) -> None:
        self.mode = mode


def test_the_rounds_disagree_by_their_largest_relative_standard_error() -> None:
    from hsisim.calibration.interference import InterferenceProbe

    probe = object.__new__(InterferenceProbe)  # the rounds' times only
    probe.alone = {"build_s": [2.0, 2.0, 2.0], "step_s": [4.0, 4.2, 3.8]}
    probe.table = {1: {"loop_step_s": [1.0, 1.0, 1.0]}, 2: {"loop_step_s": [1.0, 1.1, 0.9]}}
    # the step's sd 0.2 of 4 and the 2-worker loop's 0.1 of 1, each over the root of 3 rounds
    assert probe.unsteadiness() == pytest.approx(0.1 / 3 ** 0.5)
    probe.alone = {"build_s": [2.0], "step_s": [4.0]}
    assert probe.unsteadiness() == math.inf


def test_no_interference_rounds_on_a_gpu() -> None:
    from hsisim.calibration import run as cal_run

    meet = cal_run._Meetings(probes.builtin_net("hamida", 20, 3, 5), {"factory": _Cubes()}, torch.device("cuda"), 8,
                             True, lambda s: None)
    meet.round()
    assert meet.probes == {} and meet.result("factory") == {} and meet.done == 0


def test_spec_profile_is_the_committed_reference(tmp_path: Path) -> None:
    out = tmp_path / "spec.json"
    res = runner.invoke(app, ["calibrate", "--spec", "rtx3090", "--model", "hybridsn", "--dataset", "indian_pines",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text()) == json.loads((ROOT / "calibration" / "rtx3090-spec.json").read_text())
    assert json.loads(out.read_text())["source"] == "spec"


def test_reference_cpu_profile_loads() -> None:
    profiles = [p for p in (ROOT / "calibration").glob("cpu-*.json")]
    assert profiles
    for p in profiles:
        prof = load_profile(p)
        assert prof.source == "measured" and prof.device_kind == "cpu" and prof.compute


def test_validate_reports_measured_predicted_and_errors() -> None:
    before = _probe_dirs()
    res = runner.invoke(app, ["validate", "--scenario", str(ROOT / "scenarios" / "validate" / "cpu_compute_bound.yaml"),
                              "--device", "cpu", "--steps", "6", "--warmup", "3",
                              "--set", "training.micro_batch=8", "--set", "training.global_batch=8", "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    for key in ("step_time_s", "data_wait_fraction"):
        m, p = r["measured"][key], r["predicted"][key]
        assert m > 0 and p > 0
        assert r["error_pct"][key] == pytest.approx(100 * (p - m) / m)
    assert r["measured"]["steps"] == 6 and r["threads"] >= 1
    assert any("hand" in n or "profile" in n for n in r["notes"])
    # one loader worker: the prediction takes the step's and the builds' paces measured in a DataLoader loop
    # beside the run, as a calibrated profile gives them
    assert any("paces measured in a DataLoader loop (1..1 workers" in n for n in r["notes"]), r["notes"]
    assert not _probe_dirs() - before  # none left behind (another process's may come and go meanwhile)


def test_validate_runs_the_scenarios_blas_limit_in_the_training_process_and_each_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inits, real = tmp_path / "inits", interference.threads.limit_blas

    def init(n: int, worker: int = 0) -> None:
        with inits.open("a") as f:
            f.write(f"{n}\n")
        real(n, worker)

    monkeypatch.setattr(interference.threads, "limit_blas", init)  # what each worker's worker_init_fn calls
    before = interference.threads.blas_threads()
    res = runner.invoke(app, ["validate", "--scenario", str(ROOT / "scenarios" / "validate" / "cpu_compute_bound.yaml"),
                              "--device", "cpu", "--steps", "6", "--warmup", "3", "--set", "training.micro_batch=8",
                              "--set", "training.global_batch=8", "--set", "dataset.blas_threads=1", "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    # the real run's one worker started under the limit; the probes beside it ran under it too, so the profile
    # validate measured says its loops ran the BLAS at that count, and the prediction is from them
    assert inits.read_text().split() == ["1"]
    if before:
        assert "dataset.blas_threads 1: the profile's DataLoader loops ran each BLAS library at that count" in \
            r["notes"], r["notes"]
    assert interference.threads.blas_threads() == before  # the limit ended with the run


def test_validate_without_workers_predicts_from_the_paired_probe_alone() -> None:
    res = runner.invoke(app, ["validate", "--scenario", str(ROOT / "scenarios" / "validate" / "cpu_in_between.yaml"),
                              "--device", "cpu", "--steps", "6", "--warmup", "3", "--set", "training.micro_batch=8",
                              "--set", "training.global_batch=8", "--json"])
    assert res.exit_code == 0, res.output
    notes = json.loads(res.output)["notes"]
    assert not any("DataLoader loop" in n or "alternated" in n for n in notes), notes


def test_validate_trains_with_the_threads_the_users_launch_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from hsisim.calibration.validate import _default_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert _default_threads(1) == torch.get_num_threads()
    assert _default_threads(2) == 1  # torchrun: OMP_NUM_THREADS=1 for several processes on a node
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # set by the user: torchrun leaves it, PyTorch reads it
    assert _default_threads(2) == torch.get_num_threads()


@pytest.mark.slow
def test_two_process_validate_splits_the_step_and_checks_the_collective_model(monkeypatch: pytest.MonkeyPatch
                                                                               ) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    res = runner.invoke(app, ["validate", "--scenario", str(ROOT / "scenarios" / "validate" / "cpu_gloo_2proc.yaml"),
                              "--device", "cpu", "--world-size", "2", "--steps", "8", "--warmup", "2",
                              "--set", "training.micro_batch=8", "--set", "training.global_batch=16", "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    m, p = r["measured"], r["predicted"]
    for key in ("step_time_s", "data_wait_fraction", "allreduce_s", "barrier_wait_s", "allreduce_probe_s"):
        assert m[key] >= 0 and p[key] >= 0
        assert r["error_pct"][key] == pytest.approx(100 * (p[key] - m[key]) / m[key])
    # the measured step holds its computation, the wait for the slower rank and the all-reduce
    assert 0 < m["compute_s"] + m["allreduce_s"] < m["step_time_s"] * 1.5
    assert r["world_size"] == 2 and any("all-reduce" in n for n in r["notes"])
    assert r["threads"] == 1 and m["training_threads"] == 1  # torchrun's one thread a process
    assert any("measured with 1 training thread" in n for n in r["notes"])


@pytest.mark.parametrize("args, message", [
    (["calibrate", "--device", "tpu"], "--device must be cpu, cuda or cuda:N"),
    (["calibrate", "--model", "resnet"], "--model must be one of"),
    (["calibrate", "--dataset", "mars"], "mars"),
    (["calibrate", "--pca", "500"], "--pca must be between 1 and the 200 bands"),
    (["calibrate", "--model", "hybridsn", "--patch", "5"], "cannot take a 5x5 patch"),
    (["calibrate", "--world-size", "0"], "--world-size"),
    (["calibrate", "--checkpoint-dir", "/nonexistent/dir"], "is not a directory"),
    (["calibrate", "--spec", "tpu9"], "tpu9"),
    (["validate", "--scenario", str(DATA_BOUND), "--steps", "2"], "--steps must be at least 5"),
    (["validate", "--scenario", str(DATA_BOUND), "--world-size", "3"], "--world-size must be"),
    (["validate", "--scenario", "missing.yaml"], "missing.yaml"),
])
def test_bad_calibration_input_exits_2(args: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "never.json"
    extra = ["--out", str(out)] if args[0] == "calibrate" else []
    res = runner.invoke(app, [*args, *extra])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_cuda_without_a_gpu_is_a_clear_error() -> None:
    res = runner.invoke(app, ["calibrate", "--device", "cuda"])
    assert res.exit_code == 2 and "torch sees no CUDA device" in res.output


@needs_cuda
def test_cuda_compute_memory_and_oom_handling() -> None:
    dev = torch.device("cuda", 0)
    net = probes.builtin_net("hybridsn", 30, 25, 16)
    res = probes.compute_probe(net, dev, [8, 32], reps=5, warmup=2)
    assert res["precision"] == "amp_fp16" and res["c_s_per_sample"] > 0
    mem = probes.memory_probe(net, dev, [8, 32], limit=1 << 20)
    assert mem["activation_bytes_per_sample"] > 0 and mem["largest_batch"] >= 32
    assert 1.0 <= mem["fragmentation"] < 3.0


@needs_cuda
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="nccl needs 2 GPUs")
def test_nccl_collective_probe() -> None:
    res = collectives.collective_probe(2, "nccl", sizes=[1 << 16, 1 << 22], reps=3)
    assert res["bus_bw_bytes_per_s"] > 1e9
