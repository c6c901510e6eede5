"""The data pipeline: a DataLoader worker's time to build a micro-batch, the hand-over, the copy to the GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hsisim import catalog
from hsisim.analytic import datapipe
from hsisim.analytic.compute import LinearCost
from hsisim.errors import HsisimInputError
from hsisim.profile import BLAS_LEVER, BLOCK, THREADED_BUILD, Interference, Profile, WorkerPace
from hsisim.resolve.compute import Steps
from hsisim.resolve.hardware import Hardware
from hsisim.resolve.twopace import band_in_words, far_share, in_words
from hsisim.resolve.workload import Workload
from hsisim.scenario import Scenario
from hsisim.sim.spec import Paces


@dataclass(frozen=True)
class Data:
    """Seconds of the input pipeline for one micro-batch."""

    build_s: float  # one worker building one micro-batch (after sharing the node's cores)
    build_cv: float
    handover_s: float  # the training process receiving it from a worker (CPU device)
    h2d_s: float  # host-to-device copy
    notes: tuple[str, ...] = ()
    # measured on this machine with this input: how builds and steps slow each other (CPU device, one
    # training process per node)
    paces: Paces | None = None
    # a training step's time at a batch size as the interference probe measured it (alone, or after an
    # in-process build without workers): the compute fit is rescaled to pass through it
    step_at: tuple[float, int] | None = None
    # the step's ratio over all of it in the DataLoader loop with the scenario's workers, where the
    # builds beside it did not explain it (under 1 where the machine's pace likely moved between the
    # loop and the step alone; 1: they did, or nothing measured it)
    step_base: float = 1.0
    # the profile measured this run's DataLoader loops again with the Dataset's BLAS at ``BLAS_LEVER`` thread: a
    # what-if ``dataset.blas_threads`` of that count is predicted from them (``report.fixes``)
    blas_lever: bool = False


def data(sc: Scenario, hw: Hardware, wl: Workload, st: Steps, prof: Profile | None) -> Data:
    """The batch build, modelled from the catalog's CPU costs or measured by the profile's data probe."""
    micro = st.micro_batch
    notes: list[str] = []
    sample_bytes, build, build_cv = _modelled_build(sc, hw, wl, micro)
    measured = _measured(sc, prof, wl)
    fitted = build
    if measured is not None:
        fitted, build, build_cv = _probed(sc, measured, micro, notes)
    elif prof is not None and prof.data and not (wl.factory is not None and wl.factory.per_sample_s is not None):
        notes.append("batch build modelled: the profile's data probe used another patch or band count")
    if measured is None and sc.dataset.blas_threads is not None:
        notes.append(f"dataset.blas_threads {sc.dataset.blas_threads}: no profile measured this batch build, and "
                     "the modelled one runs one thread a worker: the limit changes nothing in it")
    # On a CPU device the training process computes synchronously, so receiving each finished batch
    # from a worker is on its critical path. On a GPU it overlaps the asynchronous kernels of the
    # previous step and is left out (it matters only when the host is busier than the GPU).
    handover = 0.0
    if hw.on_cpu and sc.loader.num_workers:
        ho = measured.get("handover") if measured is not None else None
        handover = ho.time(micro) if ho is not None else \
            hw.cpu.ipc_handover_s + micro * sample_bytes / hw.cpu.ipc_bw_bytes_per_s
    host = catalog.link(hw.instance.host_link)
    h2d = datapipe.h2d_seconds(sample_bytes * micro, host.effective_bytes_per_s, sc.loader.pin_memory,
                               hw.cpu.copy_bw_bytes_per_s)
    it = _interference(sc, hw, measured, prof, notes)
    if it is None or measured is None:
        return Data(build, build_cv, handover, h2d, tuple(notes))
    # the build and the step at the times the interference probe measured them, rescaled to this
    # micro-batch along the fits: the regime they meet in (in turn, or a worker's builds back to
    # back) is not the one the data and compute probes time them in (a step after a per-patch PCA
    # took 1.4-1.5x its time alone, and builds of it in turn with steps 0.7-1.1x their time back to back)
    scale = fitted / measured["build"].time(it.batch)
    if it.rounds is not None and it.rounds > 1 and it.rounds_se is not None and it.span_s is not None:
        notes.append(f"the machine's pace: the profile's {it.rounds} interference rounds over {it.span_s:.0f} s "
                     f"agree within a standard error of {100 * it.rounds_se:.1f} % (a shared machine moves; the "
                     "paces are their mean)")
    if sc.loader.num_workers == 0:
        notes.append(f"no workers: the batch build and the step after it {_inline_how(it)} "
                     f"({it.inline.build_s * 1e3:.1f} and {it.inline.step_s * 1e3:.1f} ms at batch {it.batch}; "
                     f"{it.inline.build_ratio:.2f}x and {it.inline.step_ratio:.2f}x their times alone)")
        built, stepped = mixed(it, notes)
        return Data(built * scale, build_cv, handover, h2d, tuple(notes), None,
                    (stepped, it.batch), blas_lever=_lever(sc, measured))
    w = it.workers
    notes.append(f"workers and the training step share the cores at the paces measured in a DataLoader loop "
                 f"(1..{len(w)} workers; a step alone {it.step_alone_s * 1e3:.1f} ms, a build "
                 f"{it.build_alone_s * 1e3:.1f} ms at batch {it.batch})")
    row = it.row(sc.loader.num_workers)
    paces = Paces(_step_table(w, row), tuple(p.build_ratio_idle for p in w), tuple(p.build_ratio_busy for p in w))
    handover = _loop_handover(w, row, handover, measured.get("handover"), micro, it.batch, notes)
    if row.step_base > 1.0:
        notes.append(f"a step with {row.workers} worker(s) took {row.step_base:.2f}x its time alone throughout "
                     f"the DataLoader loop, beyond what the builds beside it explain")
    elif row.step_base < 1.0:
        notes.append(f"a step with {row.workers} worker(s) took {row.step_base:.2f}x its time alone in the "
                     f"DataLoader loop: the machine's pace likely moved between the two, and the loop's is used")
    return Data(it.build_alone_s * scale, build_cv, handover, h2d, tuple(notes), paces, (it.step_alone_s, it.batch),
                row.step_base, _lever(sc, measured))


def mixed(it: Interference, notes: list[str]) -> tuple[float, float]:
    """The loop without workers' build and step (at the profile's batch): where its steps ran at two paces, each
    pace's weighted by its share of the run's steps (``far_share``), else the loop's means. A run of hours lands at
    the long-run share of the two, where calibration's loop sampled a minute or two of them; its mean step is then
    the harmonic mean of the two paces weighted by their shares of its time. The share of steps is taken at the
    profile's batch: a run at another batch, whose build and step scale apart, takes a slightly other share."""
    share = far_share(it)
    near, far, ms = it.inline.near, it.inline.far, it.machine_state
    if share is None or near is None or far is None:
        if ms is not None and ms.far is not None:
            notes.append(f"no workers: the machine's state read between calibration's loops was slow in {ms.far} of "
                         f"{ms.readings} readings over {ms.span_s:.0f} s, but calibration's loop met one pace: "
                         "predicted at that loop's pace, which a run's steps may leave for another")
        return it.inline.build_s, it.inline.step_s
    s = share.steps
    notes.append(f"no workers: calibration's loop ran at two paces, {1e3 * near.loop_s:.0f} ms a "
                 f"step ({near.steps} steps) and {1e3 * far.loop_s:.0f} ms ({far.steps}),"
                 f" build and step included (batch {it.batch}); mixed at {in_words(share)}, from {share.where}"
                 f"{band_in_words(share, near.loop_s, far.loop_s)}")
    return near.build_s * (1 - s) + far.build_s * s, near.step_s * (1 - s) + far.step_s * s


# calibration's loop ran its slowest block this many times its fastest, or more: the machine's pace moved while it
# calibrated. On the 2-core VM the loop of batch 100 of 5x5 patches with 2 workers (its builds at one thread) ran
# blocks 1.20, 1.44 and 1.24x apart in three --quick calibrations in a row, where the user's own loops ran at one of
# two paces 1.3-1.4x apart for tens of seconds at a time (December 2026)
UNSTEADY = 1.2


def loop_warnings(sc: Scenario, hw: Hardware, wl: Workload, prof: Profile | None) -> tuple[str, ...]:
    """What the user should know of calibration's DataLoader loops before trusting the prediction: a batch build
    that runs threads of its own (``threaded_build``), else loops whose pace moved while calibration ran them
    (``unsteady``)."""
    measured = _measured(sc, prof, wl)
    it = measured.get("interference") if measured is not None else None
    if it is None:
        return ()
    used = _interference(sc, hw, measured, prof, []) is not None  # the run uses the loops' paces
    threaded = threaded_build(sc, hw, it, used and _lever(sc, measured), used)  # type: ignore[arg-type]
    if threaded or not used:
        return threaded
    return unsteady(sc, it)


def unsteady(sc: Scenario, it: Interference) -> tuple[str, ...]:
    """A warning where calibration's loop for the scenario's workers ran its slowest ``BLOCK``-step block ``UNSTEADY``
    times its fastest or more."""
    lo_hi, loop, n = _blocks(it, sc.loader.num_workers)
    if lo_hi is None or lo_hi[1] < UNSTEADY * lo_hi[0]:
        return ()
    return (f"calibration's DataLoader loop {loop} ran {_count(n)}{BLOCK}-step blocks at {lo_hi[0] * 1e3:.1f} to "
            f"{lo_hi[1] * 1e3:.1f} ms a step, waits included (batch {it.batch}): the machine's pace moved by "
            f"{100 * (lo_hi[1] / lo_hi[0] - 1):.0f} % while it calibrated, and the prediction rests on the paces "
            "its loops happened to sample. On a shared or virtual machine the pace of threads that wait on each "
            "other can change for tens of seconds or several minutes at a time, and a run's steps may land "
            "anywhere in that span: "
            "calibrate again (a full calibration samples more moments than --quick) and compare before trusting "
            "the prediction closer than that",)


def threaded_build(sc: Scenario, hw: Hardware, it: Interference, lever: bool = False, used: bool = True
                   ) -> tuple[str, ...]:
    """A warning where the profile measured this scenario's batch build keeping ``THREADED_BUILD`` cores or more
    busy on its own, as a DataLoader worker runs it (torch at one thread): something inside the Dataset runs
    threads of its own, which oversubscribe the cores beside the training's and spin-wait, and the loop's pace
    then swings (``calibration.threads``). Where a BLAS library ran more than one thread, the build's time with
    them limited to one says what limiting them would do to the build alone, and where calibration measured the
    loops under that limit too (``lever``), how to predict that run. ``used``: whether the run uses the loops' paces
    (then, where the loop without workers ran at two, the warning says both and the share they are mixed at)."""
    wb = it.worker_build
    if wb is None or not wb.threaded:
        return ()
    workers, ranks = sc.loader.num_workers, hw.instance.gpus
    where = (f"each of the {workers} DataLoader worker(s) of each of the {ranks} training process(es) on a "
             f"{hw.vcpus}-core node runs them beside the training's threads" if workers else
             f"in each of the {ranks} training process(es) on a {hw.vcpus}-core node they may still be spinning "
             "when its step starts")
    head = (f"a batch build alone kept {wb.cores:.1f} of {it.cores} cores busy (at batch {it.batch}, torch at one "
            f"thread as in a worker): something inside the Dataset runs threads of its own, and {where}, "
            "oversubscribing the cores. Such threads hand each other work many times a millisecond, so the loop's "
            "pace can swing for tens of seconds or several minutes at a time, and the prediction reflects only the "
            "paces calibration's loops happened to sample: two runs of 6 and 9 minutes of one such script on a "
            "2-core VM parted by 39 %. On that VM the swings tracked how long a cache line took to go between its "
            "two cores and back (about 94 or 370 ns), a patch's SVD taking 3.0 or 7.1 ms at two BLAS threads and "
            f"2.1 ms at one either way.{_sampled(it, workers, used)}")
    if wb.one_blas_thread_s is None:
        return (f"{head} Limit those threads to one per process (threadpoolctl.threadpool_limits(1) in the "
                "DataLoader's worker_init_fn, or the library's own setting) and calibrate again under it to "
                "predict that run",)
    return (f"{head} {', '.join(wb.blas)} found: with the BLAS limited to one thread the same build alone took "
            f"{wb.one_blas_thread_s * 1e3:.1f} ms against {wb.build_s * 1e3:.1f} ms. To limit it, set "
            "OPENBLAS_NUM_THREADS=1 (MKL_NUM_THREADS=1 for MKL) before the script starts, or call "
            + ("threadpoolctl.threadpool_limits(1) in the DataLoader's worker_init_fn" if workers else
               "threadpoolctl.threadpool_limits(1) before the training loop") + ", and "
            + ("predict that run from the loops calibration ran under that limit too: --set dataset.blas_threads=1"
               if lever else "calibrate again under it to predict that run"),)


def limited_blas(it: Interference | None) -> tuple[str, ...]:
    """A note where the profile measured the batch build with a BLAS library at fewer threads than the machine's
    cores: a limit the user set (likely to follow ``threaded_build``'s advice) that the run must keep too."""
    if it is None or it.worker_build is None:
        return ()
    limited = it.worker_build.limited(it.cores)
    if not limited:
        return ()
    libs = ", ".join(f"{name} at {n} thread(s)" for name, n in limited.items())
    return (f"the profile measured the batch build with {libs} on a {it.cores}-core machine, fewer than such a "
            "library starts with (one thread a core) unless OPENBLAS_NUM_THREADS, MKL_NUM_THREADS, OMP_NUM_THREADS "
            "or a threadpool limit sets them: the prediction is for a run whose Dataset runs under the same limit "
            "(in its DataLoader workers too); without it, a build may run threads of its own beside the step's",)


def _blocks(it: Interference, workers: int) -> tuple[list[float] | None, str, int | None]:
    """The fastest and slowest ``BLOCK``-step block calibration's loop with the scenario's workers (the most it ran, if
    fewer) ran, where the profile has them, which loop that was, and how many blocks it ran (where the profile says)."""
    if not workers:
        return it.inline.block_step_s, "without workers", it.inline.block_n
    row = it.row(workers)
    return row.block_step_s, f"with {row.workers} worker(s)" + (" (the most it measured)" if row.workers < workers
                                                                else ""), row.block_n


def _count(n: int | None) -> str:
    return f"{n} " if n is not None else ""


# a loop's blocks this few read a pace that holds for tens of seconds at one or two moments: a --quick calibration's
# loops run one block each (2 or 3 in all), where a full calibration runs each loop of a build that runs threads of
# its own for 20 s or longer (``calibration.threads.THREADED_LOOP_S``)
FEW_BLOCKS = 6


def _probed(sc: Scenario, measured: dict[str, Any], micro: int, notes: list[str]) -> tuple[float, float, float]:
    """The profile's batch build at ``micro``: as its data probe fitted it, at the scenario's BLAS threads
    (``_blas_ratio``), and its spread."""
    fitted = measured["build"].time(micro)
    notes.append(f"batch build from the profile's DataLoader probe ({_mode(sc)}): {fitted * 1e3:.2f} ms per "
                 f"micro-batch of {micro}")
    build = fitted * _blas_ratio(sc, measured, notes)
    if sc.dataset.blas_threads is None:
        notes.extend(limited_blas(measured.get("interference")))
    return fitted, build, measured["per_sample_cv"] / math.sqrt(micro)


def _sampled(it: Interference, workers: int, used: bool = True) -> str:
    """The blocks of ``_blocks`` in words, where the profile has them, where they are few, that they are, and where the
    run uses them (``used``) and they fell in two paces, both (``_two``)."""
    lo_hi, loop, n = _blocks(it, workers)
    if lo_hi is None:
        return ""
    both = _two(it, workers) if used else ""
    few = (f" Only {n}: too few to have met both of the paces such a loop swings between (a --quick calibration "
           "runs one block a loop; a full calibration runs each such loop for 20 s or longer)."
           if n is not None and n < FEW_BLOCKS and not both else "")  # its steps met both: they are not too few
    return (f" Calibration's loop {loop} ran {_count(n)}{BLOCK}-step blocks at {lo_hi[0] * 1e3:.0f} to "
            f"{lo_hi[1] * 1e3:.0f} ms a step, waits included (batch {it.batch}).{few}{both}")


def _two(it: Interference, workers: int) -> str:
    """Where calibration's loop without workers ran at two paces and the run has none, both, and the share the
    prediction mixes them at (``far_share``)."""
    share = far_share(it) if not workers else None
    near, far = it.inline.near, it.inline.far
    if share is None or near is None or far is None:
        return ""
    return (f" They fell in two paces, {1e3 * near.loop_s:.0f} and "
            f"{1e3 * far.loop_s:.0f} ms a step: the prediction mixes them at {in_words(share)}, and a run's "
            "steps land between the two, at the share of its time its machine holds the slower"
            f"{band_in_words(share, near.loop_s, far.loop_s)}.")


def _inline_how(it: Interference) -> str:
    """How the profile measured the no-worker paces: profiles written before 2026-12-06 (9e5a94b) timed builds
    called by hand, alternated with steps (their method says so), medians of 7 pairs whose wait share read
    3-5 points under the user's loop."""
    if "alternated" in str((it.model_extra or {}).get("method")):
        return "as measured alternated by hand (this profile predates the DataLoader loop: calibrate again)"
    return "as measured in a DataLoader loop"


def _step_table(w: list[WorkerPace], row: WorkerPace) -> tuple[float, ...]:
    """A step's slowdown while n workers build (index n - 1). Where the scenario's own worker count
    put all of the step's slowdown in ``step_base`` (its builds could not explain it: it is not exactly
    1), none is left for the time builds run (1 for every n: else it would count twice). Else a row that
    could not explain its step takes the slowdown of the nearest worker count whose builds did (not its
    1, which is no measurement)."""
    if not row.explained:
        return tuple(1.0 for _ in w)
    explained = [p for p in w if p.explained]
    return tuple(p.step_ratio if p.explained else
                 min(explained, key=lambda e: (abs(e.workers - p.workers), e.workers)).step_ratio for p in w)


# a loop's hand-over from fewer waits than this is not used (its mean is a few samples' noise)
MIN_HANDOVERS = 3


def _loop_handover(w: list[WorkerPace], row: WorkerPace, handover: float, probe: LinearCost | None, micro: int,
                   batch: int, notes: list[str]) -> float:
    """The hand-over as the interference probe's DataLoader loop waited for it (at ``batch``), rescaled
    to this micro-batch along the stand-alone probe's fit: that probe, which sleeps before each fetch,
    overstated it (2.6-3.0 ms where the loop waited 1.8-2.2 ms, batch 100, 2 workers, a 2-core VM).
    From the loop with the scenario's workers where it waited for enough ready batches, else pooled
    over every worker count (a data-bound loop has few: its batches are late)."""
    # (mean, waits) per worker count that measured it; a hand-written profile without a count is trusted
    loops = {p.workers: (p.handover_s, p.handover_n or MIN_HANDOVERS) for p in w if p.handover_s is not None}
    pooled_n = sum(n for _, n in loops.values())
    if loops.get(row.workers, (0.0, 0))[1] >= MIN_HANDOVERS:
        (loop, n), where = loops[row.workers], f"with {row.workers} worker(s)"
    elif pooled_n >= MIN_HANDOVERS:
        loop, n = sum(v * k for v, k in loops.values()) / pooled_n, pooled_n
        where = f"with 1..{len(w)} workers"
    else:
        return handover
    said = f"hand-over as the DataLoader loop waited for batches already built: {loop * 1e3:.2f} ms at batch " \
           f"{batch} {where} ({n} waits)"
    at_batch = probe.time(batch) if probe is not None else 0.0
    if probe is None or at_batch <= 0:
        notes.append(f"{said}; no stand-alone fit to rescale it by: as measured, at batch {micro}")
        return loop
    notes.append(f"{said}; the stand-alone probe's {at_batch * 1e3:.2f} ms there, rescaled along its fit to "
                 f"batch {micro}")
    return loop * probe.time(micro) / at_batch


def _interference(sc: Scenario, hw: Hardware, measured: dict[str, Any] | None, prof: Profile | None,
                  notes: list[str]) -> Any:
    """The profile's interference measurement, where it measured this input on this machine with these
    threads and the scenario runs one training process per node (else None)."""
    it = measured.get("interference") if measured is not None else None
    if it is None or prof is None or not hw.on_cpu or hw.instance.gpus != 1:
        return None
    if it.cores != hw.vcpus or it.threads != hw.threads:
        notes.append(f"builds and steps share the cores as modelled: the profile measured them meeting on "
                     f"{it.cores} cores with {it.threads} training threads, this run has {hw.vcpus} and {hw.threads}")
        return None
    return it


def _modelled_build(sc: Scenario, hw: Hardware, wl: Workload, micro: int) -> tuple[float, float, float]:
    """(sample bytes, build seconds, build cv) from the catalog's per-core costs or the factory's measurement."""
    if wl.dataset is None:  # the user's Dataset: measured when the scenario was resolved
        parts = wl.factory
        assert parts is not None
        build = (parts.per_sample_s or 0.0) * micro + parts.collate_s * micro / max(1, sc.training.micro_batch)
        cv = parts.per_sample_cv / math.sqrt(micro) if parts.per_sample_s is not None else 0.0
        return parts.sample_bytes, build, cv
    assert wl.dataset is not None
    fs = catalog.storage("nfs", key="dataset.storage")
    readers = max(1, sc.loader.num_workers) * hw.world
    sample_bytes = wl.patch**2 * wl.out_bands * datapipe.FLOAT_BYTES
    sample = datapipe.sample_cost(
        patch=wl.patch, bands=wl.dataset.bands, out_bands=wl.out_bands, preprocess=sc.dataset.preprocess,
        pca=wl.model is not None and wl.model.spectral_input == "pca", storage=sc.dataset.storage,
        augmentation=sc.dataset.augmentation, cpu=hw.cpu, fs_latency_s=fs.latency_s,
        fs_share_bw=fs.read_bw_bytes_per_s / readers)
    return sample_bytes, datapipe.batch_build_seconds(sample.total, micro, sample_bytes, hw.cpu), 0.0


def _mode(sc: Scenario) -> str:
    """The profile's data mode this scenario's batches are built in: the user's factory, or a preprocessing."""
    return "factory" if sc.dataset.factory is not None else sc.dataset.preprocess


def _measured(sc: Scenario, prof: Profile | None, wl: Workload) -> dict[str, Any] | None:
    """The profile's DataLoader measurement for the scenario's data mode, if it measured this input, its
    ``interference`` the loops measured at the scenario's ``dataset.blas_threads`` (``_at_blas``)."""
    mode = _mode(sc)
    measured = prof.data.get(mode) if prof is not None else None
    if measured is None:
        return None
    if mode == "factory":
        return _at_blas(sc, measured) if measured.get("dataset_factory") == sc.dataset.factory else None
    return _at_blas(sc, measured) if (measured["patch"], measured["out_bands"]) == (wl.patch, wl.out_bands) else None


def _at_blas(sc: Scenario, measured: dict[str, Any]) -> dict[str, Any]:
    """The measurement with the interference loops run at the scenario's ``dataset.blas_threads``, and a note of
    which (``blas_note``): as measured where it sets none, where the loops ran the BLAS at that count (or loaded
    none), or where the build kept under ``THREADED_BUILD`` cores busy at the libraries' own threads (it runs no
    BLAS threads of its own to speak of); the loops calibration ran again at ``BLAS_LEVER`` thread where it asks
    for that (the loops at the libraries' own threads kept as ``interference_default``). Any other limit was not
    measured: an input error, not a prediction for another run."""
    want, it = sc.dataset.blas_threads, measured.get("interference")
    if want is None:
        return measured
    head = f"dataset.blas_threads {want}: "
    if it is None:
        return {**measured, "blas_note": head + "the profile has no DataLoader loops (a GPU calibration runs none), "
                "so it did not measure the build's BLAS threads: the build as its data probe measured it"}
    wb = it.worker_build
    if wb is not None and wb.blas_threads == {}:
        return {**measured, "blas_note": head + "calibration found no BLAS library loaded by the build: a limit on "
                "one changes nothing in it"}
    if wb is not None and wb.blas_threads is not None and set(wb.blas_threads.values()) == {want}:
        return {**measured, "blas_note": head + "the profile's DataLoader loops ran each BLAS library at that count"}
    limited = measured.get("interference_one_blas")
    if want == BLAS_LEVER and limited is not None:
        return {**measured, "interference": limited, "interference_default": it}
    if wb is not None and not wb.threaded:
        return {**measured, "blas_note": head + f"a build alone kept {wb.cores:.1f} of {it.cores} cores busy at the "
                "libraries' own threads, so it runs no BLAS threads of its own to speak of: the profile's paces"}
    if wb is None or wb.blas_threads is None:
        why = "does not record the BLAS threads its DataLoader loops ran at (calibrated before 2026-12-07)"
    else:
        ran = ("measured the batch build's DataLoader loops with "
               + ", ".join(f"{name} at {n} thread(s)" for name, n in wb.blas_threads.items()))
        why = (f"{ran}, and again at {BLAS_LEVER} thread, not at {want}" if limited is not None else
               f"{ran}, and calibration measures them again at {BLAS_LEVER} thread only where a build alone keeps "
               f"{THREADED_BUILD} cores or more busy through a BLAS library that runs more than one thread (this one "
               f"kept {wb.cores:.1f} busy; profiles written before 2026-12-07 never do)")
    raise HsisimInputError(f"{{dataset.blas_threads}} is {want}, but the profile {why}: calibrate under that limit "
                           f"(OPENBLAS_NUM_THREADS={want} or MKL_NUM_THREADS={want} before the calibration starts) "
                           "to predict that run, or leave the key out")


def _lever(sc: Scenario, measured: dict[str, Any]) -> bool:
    """Whether the scenario leaves the BLAS threads at the libraries' own and the profile measured the loops again
    at ``BLAS_LEVER`` thread."""
    return sc.dataset.blas_threads is None and measured.get("interference_one_blas") is not None


def _blas_ratio(sc: Scenario, measured: dict[str, Any], notes: list[str]) -> float:
    """What ``dataset.blas_threads`` does to the data probe's build, which ran at the BLAS libraries' own threads,
    where the loops at ``BLAS_LEVER`` thread stand in for the default ones (``_at_blas``): a build alone as a worker
    runs it, at one BLAS thread over at the libraries' own, timed back to back at one moment (``worker_build``;
    else the two loops' builds alone, a round apart). It is the build's wherever the loops' own paces are not used
    (a GPU node, other cores or threads); else 1, and ``_at_blas``'s note."""
    default = measured.get("interference_default")
    if default is None:
        if "blas_note" in measured:
            notes.append(measured["blas_note"])
        return 1.0
    wb = default.worker_build
    ratio = (wb.one_blas_thread_s / wb.build_s if wb is not None and wb.one_blas_thread_s is not None
             else measured["interference"].build_alone_s / default.build_alone_s)
    notes.append(f"dataset.blas_threads {sc.dataset.blas_threads}: from the DataLoader loops calibration ran again "
                 f"with the BLAS at {BLAS_LEVER} thread; a build alone as a worker runs it took {ratio:.2f}x its time "
                 "at the libraries' own threads")
    return ratio
