"""The threads a user's batch build runs of its own (``calibration.threads``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="calibration needs torch (pip install torch==2.13.0)")

from hsisim.calibration import threads  # noqa: E402


class _FakeBuild:
    """A build whose clocks are given: 0.1 s of wall time with 0.2 s of CPU at the BLAS's own threads, 0.06 s and
    0.06 s with them limited to one; it records torch's thread count at each call."""

    def __init__(self) -> None:
        self.limited, self.torch_threads = False, []  # type: ignore[var-annotated]
        self.__name__ = "build"

    def __call__(self) -> None:
        self.torch_threads.append(torch.get_num_threads())

    def clocks(self) -> tuple[float, float]:
        return (0.06, 0.06) if self.limited else (0.1, 0.2)


def _faked(monkeypatch: pytest.MonkeyPatch, build: _FakeBuild, blas: list[str],
           counts: dict[str, int] | None = None) -> list[bool]:
    """The fakes in place (``counts``: each BLAS library's threads, none loaded by default); returns the list of
    timed builds (whether each ran limited)."""
    timed: list[bool] = []

    def clocked(fn: _FakeBuild) -> tuple[float, float]:
        fn()
        timed.append(fn.limited)
        return fn.clocks()

    @contextlib.contextmanager
    def limits(limits: int, user_api: str) -> Iterator[None]:
        assert (limits, user_api) == (1, "blas")
        build.limited = True
        yield
        build.limited = False

    monkeypatch.setattr(threads, "_clocked", clocked)
    monkeypatch.setattr(threads, "threadpool_limits", limits)
    monkeypatch.setattr(threads, "threaded_blas", lambda: blas)
    monkeypatch.setattr(threads, "blas_threads", lambda: counts or {})
    return timed


def test_a_build_is_timed_as_a_worker_runs_it_and_with_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    build = _FakeBuild()
    timed = _faked(monkeypatch, build, ["openblas 0.3.31 (2 threads)"], {"openblas 0.3.31": 2})
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        out = threads.worker_build(build, reps=3)
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(before)
    assert out.pop("blas") == ["openblas 0.3.31 (2 threads)"] and out.pop("blas_threads") == {"openblas 0.3.31": 2}
    assert out == pytest.approx({"build_s": 0.1, "cores": 2.0, "one_blas_thread_s": 0.06})
    assert set(build.torch_threads) == {1}  # torch at one thread, as in a worker, for every build, untimed or not
    # reps timed builds, and more until 0.2 s were timed: 3 at 0.1 s, then 4 at 0.06 s (0.24 s), limited
    assert timed == [False] * 3 + [True] * 4
    assert len(build.torch_threads) > len(timed)  # untimed builds first, each time


def test_torch_threads_are_restored_when_the_build_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise ValueError("the user's dataset")

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(ValueError, match="the user's dataset"):
            threads.worker_build(broken, reps=3)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_without_a_threaded_blas_only_the_build_and_its_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    build = _FakeBuild()
    _faked(monkeypatch, build, [])
    # no BLAS library loaded: an empty record of their threads, which says so (absent: a profile before it)
    out = threads.worker_build(build, reps=3)
    assert out.pop("blas_threads") == {} and out == pytest.approx({"build_s": 0.1, "cores": 2.0})
    # a BLAS library at one thread (limited by the user, say): its threads kept, nothing timed again
    _faked(monkeypatch, build, [], {"openblas 0.3.31": 1})
    out = threads.worker_build(build, reps=3)
    assert out.pop("blas_threads") == {"openblas 0.3.31": 1} and "blas" not in out


def test_the_blas_threads_are_each_librarys_as_threadpoolctl_finds_them(monkeypatch: pytest.MonkeyPatch) -> None:
    info = [{"user_api": "blas", "internal_api": "openblas", "version": "0.3.31", "num_threads": 2},
            {"user_api": "openmp", "internal_api": "openmp", "version": None, "num_threads": 2},
            {"user_api": "blas", "internal_api": "mkl", "version": None, "num_threads": 1}]
    monkeypatch.setattr(threads, "threadpool_info", lambda: info)
    assert threads.blas_threads() == {"openblas 0.3.31": 2, "mkl": 1}
    assert threads.threaded_blas() == ["openblas 0.3.31 (2 threads)"]


def test_rounds_pool_to_means_and_the_one_thread_build_only_where_every_round_had_it() -> None:
    a = {"build_s": 0.1, "cores": 2.0, "one_blas_thread_s": 0.06, "blas": ["openblas (2 threads)"]}
    b = {"build_s": 0.2, "cores": 1.0, "one_blas_thread_s": 0.08, "blas": ["openblas (2 threads)"]}
    both = threads.pooled([a, b])
    assert both.pop("blas") == ["openblas (2 threads)"]
    assert both == pytest.approx({"build_s": 0.15, "cores": 1.5, "one_blas_thread_s": 0.07})
    assert threads.pooled([a, {"build_s": 0.2, "cores": 1.0}]) == pytest.approx({"build_s": 0.15, "cores": 1.5})
    # each library's threads as the last round found them
    assert threads.pooled([a, {**b, "blas_threads": {"openblas": 2}}])["blas_threads"] == {"openblas": 2}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no BLAS thread runs beside another")
def test_a_real_blas_product_keeps_its_threads_busy_and_one_thread_is_one_core() -> None:
    if not threads.threaded_blas():
        pytest.skip("no BLAS library with more than one thread is loaded (OPENBLAS_NUM_THREADS set?)")
    a = np.random.default_rng(0).standard_normal((600, 600))

    def build() -> None:
        a @ a

    out = threads.worker_build(build, reps=3)
    # a threaded BLAS found: the build timed again with it limited (how many cores the product kept busy depends
    # on what else the machine runs: 0.99 under a test run beside it, 2.0 alone, on a 2-core VM)
    assert out["one_blas_thread_s"] > 0 and out["blas"] == threads.threaded_blas() and out["cores"] > 0.5
    with threads.threadpool_limits(limits=1, user_api="blas"):
        one = threads.worker_build(build, reps=3)
    # limited: no threaded BLAS left, and one core at most (a thread can keep no more busy)
    assert one["cores"] < 1.2 and "one_blas_thread_s" not in one and "blas" not in one
    # what it ran them at, recorded: every library at one thread, limited; before, each at its own count
    assert set(one["blas_threads"].values()) == {1} and out["blas_threads"] == threads.blas_threads()
