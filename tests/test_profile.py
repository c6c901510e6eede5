"""How a calibration profile drives a scenario (no torch needed): thread counts, hand-over, collectives."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from typer.testing import CliRunner

from hsisim.cli import app
from hsisim.errors import HsisimInputError
from hsisim.profile import load_profile
from hsisim.resolve import resolve_job
from hsisim.resolve.twopace import far_share, pace_at, steps_at, time_at
from hsisim.resolve.workload import workload
from hsisim.scenario import load_scenario
from hsisim.sim.micro import MicroSim
from hsisim.sim.spec import Job

DATA_BOUND = ROOT / "scenarios" / "validate" / "cpu_data_bound.yaml"


def _profile(tmp_path: Path, cores: int = 4) -> Path:
    fit = {"1": {"a_s": 0.002, "c_s_per_sample": 0.0004}, "2": {"a_s": 0.0015, "c_s_per_sample": 0.00025},
           "3": {"a_s": 0.0012, "c_s_per_sample": 0.0002}, "4": {"a_s": 0.001, "c_s_per_sample": 0.00015}}
    mode = {"patch": 9, "out_bands": 15, "per_sample_cv": 0.2,
            "batch_build": {"a_s": 0.0001, "c_s_per_sample": 3e-5},
            "handover": {"a_s": 0.0018, "c_s_per_sample": 1e-6}}
    prof = {"format": "hsisim-calibration/1", "device": {"kind": "cpu", "catalog_gpu": "cpu", "cores": cores},
            "model": {"name": "hybridsn", "bands": 15, "patch": 9},
            "compute": {"by_threads": fit}, "data": {"modes": {"getitem": mode, "offline": mode}},
            "collectives": {"alpha_per_hop_s": 5e-4, "bus_bw_bytes_per_s": 1e9}}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(prof))
    return path


@pytest.mark.parametrize("workers", [0, 1, 3, 6])
def test_training_threads_are_pytorchs_default_whatever_the_workers(workers: int, tmp_path: Path) -> None:
    # PyTorch starts one intra-op thread per core whatever num_workers is: workers and training threads
    # then share the cores (the micro simulation shares them), nothing is set aside statically
    p = _profile(tmp_path)
    job = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", f"loader.num_workers={workers}"]))
    assert job.compute_s == pytest.approx(load_profile(p).compute[4].time(64))
    assert job.compute_cpu_demand == 4
    assert job.batch_build_s == pytest.approx(0.0001 + 3e-5 * 64)  # full speed: sharing is simulated
    assert job.cpu_cores == (4 if workers else 0)  # 4 threads + a worker > 4 cores: shared
    assert job.handover_s == pytest.approx(0.0018 + 64e-6 if workers else 0.0)


def test_a_scenarios_thread_count_replaces_the_default(tmp_path: Path) -> None:
    p = _profile(tmp_path)
    job = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=2", "training.threads=2"]))
    assert job.compute_s == pytest.approx(load_profile(p).compute[2].time(64))
    assert job.compute_cpu_demand == 2 and job.cpu_cores == 0  # 2 threads + 2 workers fit 4 cores
    assert any("measured with 2 training thread" in n for n in job.notes)


def test_several_processes_on_a_node_train_with_one_thread_each_as_torchrun_starts_them(tmp_path: Path) -> None:
    # torchrun sets OMP_NUM_THREADS=1 when it starts more than one process on a node; the profile's
    # torch_threads (one process's default) does not apply, a scenario's count does
    p = _profile(tmp_path)
    doc = json.loads(p.read_text())
    doc["device"]["torch_threads"] = 4
    p.write_text(json.dumps(doc))
    sets = [f"calibration={p}", "cluster.instance=local-cpu-x2", "training.global_batch=128"]
    two = resolve_job(load_scenario(DATA_BOUND, sets))
    assert two.compute_s == pytest.approx(load_profile(p).compute[1].time(64)) and two.compute_cpu_demand == 1
    one = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}"]))
    assert one.compute_cpu_demand == 4  # one process: PyTorch's default as the profile saw it
    spawned = resolve_job(load_scenario(DATA_BOUND, [*sets, "training.threads=2"]))
    assert spawned.compute_s == pytest.approx(load_profile(p).compute[2].time(64)) and spawned.compute_cpu_demand == 2


def test_a_fit_scaled_to_a_lighter_model_warns_when_its_fixed_part_is_most_of_the_step(tmp_path: Path) -> None:
    # the 4-thread fit (1 ms + 0.15 ms a sample) measured on a model `heavier` times the scenario's
    # FLOPs: at micro-batch 64 the step is 1 + 9.6/heavier ms, the fixed part kept as measured
    sc = load_scenario(DATA_BOUND)
    flops = workload(sc, None, allow_code=False).stats.fwd_flops
    p = _profile(tmp_path)
    doc = json.loads(p.read_text())

    def resolved(heavier: float, a_s: float = 0.001) -> Job:
        doc["model"]["fwd_flops"] = flops * heavier
        doc["compute"]["by_threads"]["4"]["a_s"] = a_s
        p.write_text(json.dumps(doc))
        return resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}"]))

    job = resolved(20)  # 1.48 ms: the fixed part is 68 % of it
    assert job.compute_s == pytest.approx(0.001 + 0.00015 * 64 / 20)
    assert len(job.warnings) == 1
    assert "68% of the 1.48 ms compute step at micro-batch 64" in job.warnings[0] and "20x heavier" in job.warnings[0]
    assert not resolved(8).warnings  # 2.2 ms: 45 %
    assert not resolved(1).warnings  # the profile's own model: nothing scaled
    assert not resolved(1.6, a_s=0.05).warnings  # 90 % fixed, but scaled by only 0.6: mostly measured as is
    assert "91% of the 54.8 ms" in resolved(2, a_s=0.05).warnings[0]  # twice lighter: warned
    assert resolved(20).warnings  # and the step given by `timings` instead rests on no profile
    assert not resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "timings.compute_per_step=0.01",
                                                      "timings.data_wait_per_step=0"])).warnings


def test_the_run_prints_the_warning_of_a_step_that_rests_on_another_models_overheads() -> None:
    # the shipped 2-core profile (HybridSN 30x25x25, a 30.6 ms fixed part with 2 threads) on a 15x9x9 model
    profile = ROOT / "calibration" / "cpu-amd-epyc-2core.json"
    scen = ROOT / "scenarios" / "validate" / "cpu_compute_bound.yaml"
    res = CliRunner().invoke(app, ["run", str(scen), "--set", f"calibration={profile}", "--replicas", "5", "--json",
                                   "--no-compare", "--no-levers", "--executor", "inline"])
    assert res.exit_code == 0, res.output
    warnings = json.loads(res.stdout)["warnings"]
    assert any("is the profile's fixed part" in w and "hybridsn 30×25×25" in w for w in warnings), warnings


def test_handover_and_exposed_gloo_only_on_a_cpu_device(tmp_path: Path) -> None:
    p = _profile(tmp_path, cores=2)
    two = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "cluster.instance=local-cpu-x2",
                                             "training.global_batch=128"]))
    assert two.comm_total_s > 0 and two.comm_exposed_s == two.comm_total_s
    assert any("from the profile's probe" in n for n in two.notes)
    gpu = resolve_job(load_scenario(ROOT / "scenarios" / "single_3090.yaml", ["loader.num_workers=2"]))
    assert gpu.handover_s == 0.0
    cpu_default = resolve_job(load_scenario(DATA_BOUND, ["loader.num_workers=1"]))
    assert cpu_default.handover_s > 0.0018  # the catalog's measured default, without a profile


def test_bad_profiles_are_input_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"compute": {"a_s": "fast"}}')
    with pytest.raises(HsisimInputError, match="not a valid profile"):
        load_profile(bad)
    with pytest.raises(HsisimInputError, match="not found"):
        load_profile(tmp_path / "none.json")


def _two_process_profile(tmp_path: Path, in_training_bytes: float) -> Path:
    prof = json.loads(_profile(tmp_path, cores=2).read_text())
    prof["model"]["params"] = 100_000
    bimodal = [0.2] * 20 + [1.8] * 21  # transport threads awake (fast) or asleep (slow), about half each
    prof["collectives"].update({"world_size": 2, "ratio_quantiles": bimodal,
                                "in_training": {"bytes": in_training_bytes, "mean_s": 0.0031,
                                                "ratio_quantiles": bimodal}})
    path = tmp_path / "two.json"
    path.write_text(json.dumps(prof))
    return path


def test_the_models_own_all_reduce_from_ddp_training_steps_when_the_gradients_match(tmp_path: Path) -> None:
    from hsisim import catalog

    sets = ["cluster.instance=local-cpu-x2", "training.global_batch=128"]
    grad_bytes = 4.0 * catalog.model("hybridsn").stats(15, 9, 16).params  # the data-bound scenario's model
    own = resolve_job(load_scenario(DATA_BOUND, [f"calibration={_two_process_profile(tmp_path, grad_bytes)}", *sets]))
    assert own.comm_exposed_s == own.comm_total_s == pytest.approx(0.0031)
    assert own.comm_quantiles and any("DDP training steps" in n for n in own.notes)
    # normalised so that drawing by interpolation keeps the mean
    q = own.comm_quantiles
    assert sum((a + b) / 2 for a, b in itertools.pairwise(q)) / (len(q) - 1) == pytest.approx(1.0)
    other = resolve_job(load_scenario(DATA_BOUND, [f"calibration={_two_process_profile(tmp_path, 2 * grad_bytes)}",
                                               *sets]))
    assert other.comm_exposed_s != pytest.approx(0.0031)  # another model's gradients: the fitted line
    assert any("from the profile's probe" in n for n in other.notes)
    assert not any("DDP training steps" in n for n in other.notes)
    assert other.comm_quantiles == own.comm_quantiles  # the probe's shape either way


@pytest.mark.parametrize("quantiles", [[1.0], [1.2, 0.8], [-0.1, 1.0, 2.0], [0.0, 0.0]])
def test_bad_all_reduce_quantiles_are_input_errors(quantiles: list[float], tmp_path: Path) -> None:
    prof = json.loads(_profile(tmp_path).read_text())
    prof["collectives"]["ratio_quantiles"] = quantiles
    bad = tmp_path / "q.json"
    bad.write_text(json.dumps(prof))
    with pytest.raises(HsisimInputError, match="ratio_quantiles"):
        load_profile(bad)


@pytest.mark.parametrize("slowdown", [150.0, 1000.0])
def test_a_contention_slowdown_the_probe_measures_for_a_tiny_step_is_read(slowdown: float, tmp_path: Path) -> None:
    prof = json.loads(_profile(tmp_path).read_text())
    prof["compute"]["contention"] = {"threads": 2, "slowdown": [1.0, 3.0, slowdown]}
    (tmp_path / "c.json").write_text(json.dumps(prof))
    contention = load_profile(tmp_path / "c.json").contention
    assert contention is not None and contention.slowdown[2] == slowdown


@pytest.mark.parametrize("slowdown", [1000.5, 0.9])
def test_a_contention_slowdown_out_of_bounds_is_an_input_error(slowdown: float, tmp_path: Path) -> None:
    prof = json.loads(_profile(tmp_path).read_text())
    prof["compute"]["contention"] = {"threads": 2, "slowdown": [1.0, slowdown]}
    (tmp_path / "c.json").write_text(json.dumps(prof))
    with pytest.raises(HsisimInputError, match=r"contention\.slowdown"):
        load_profile(tmp_path / "c.json")


def _interference_profile(tmp_path: Path, workers: list[int] | None = None) -> Path:
    prof = json.loads(_profile(tmp_path).read_text())
    rows = [{"workers": k, "step_ratio": 1.5 + 0.25 * k, "build_ratio_idle": 1.0 * k, "build_ratio_busy": 4.0 * k}
            for k in (workers or [1, 2])]
    prof["data"]["modes"]["getitem"]["interference"] = {
        "threads": 4, "cores": 4, "batch": 32, "step_alone_s": 0.008, "build_alone_s": 0.002,
        "inline": {"build_ratio": 1.1, "step_ratio": 1.5, "build_s": 0.0022, "step_s": 0.012}, "workers": rows}
    path = tmp_path / "interference.json"
    path.write_text(json.dumps(prof))
    return path


def test_measured_paces_replace_the_share_on_the_machine_that_measured_them(tmp_path: Path) -> None:
    p = _interference_profile(tmp_path)
    one = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=1"]))
    assert one.paces is not None and one.paces.step == (1.75, 2.0) and one.paces.build_busy == (4.0, 8.0)
    assert one.cpu_cores == 4  # the measured paces are simulated even where 4 threads + 1 worker would fit
    # the step and the build alone as the interference probe timed them (at batch 32), along the fits to 64
    fit, build = load_profile(p).compute[4], load_profile(p).data["getitem"]["build"]
    assert one.compute_s == pytest.approx(0.008 * fit.time(64) / fit.time(32))
    assert one.batch_build_s == pytest.approx(0.002 * build.time(64) / build.time(32))
    assert one.paces.of(one.paces.step, 4, grow=False) == pytest.approx(2.5)  # beyond: along the last slope
    assert one.paces.of(one.paces.build_idle, 4, grow=True) == pytest.approx(4.0)  # beyond: in proportion
    inline = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=0"]))
    assert inline.paces is None
    assert inline.compute_s == pytest.approx(0.012 * fit.time(64) / fit.time(32))  # as measured, no workers
    assert inline.batch_build_s == pytest.approx(0.0022 * build.time(64) / build.time(32))
    assert any("as measured in a DataLoader loop" in n for n in inline.notes)
    # a profile whose method says the pairs were alternated by hand (before 2026-12-06, 9e5a94b) says so
    prof = json.loads(p.read_text())
    prof["data"]["modes"]["getitem"]["interference"]["method"] = (
        "the user's batch builds and a training step, alternated in one process, and in a DataLoader loop with k "
        "workers timed on one clock; each over its time alone; pooled over 3 rounds")
    p.write_text(json.dumps(prof))
    old = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=0"]))
    assert old.compute_s == inline.compute_s and not any("as measured in a DataLoader loop" in n for n in old.notes)
    assert any("alternated by hand (this profile predates the DataLoader loop: calibrate again)" in n
               for n in old.notes), old.notes
    other = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=1", "training.threads=2"]))
    assert other.paces is None and any("measured them meeting on 4 cores with 4" in n for n in other.notes)
    assert other.compute_s == pytest.approx(load_profile(p).compute[2].time(64))  # the fits, as before


def _with_worker_build(tmp_path: Path, build: dict[str, object] | None) -> Path:
    path = _interference_profile(tmp_path)
    prof = json.loads(path.read_text())
    if build is not None:
        prof["data"]["modes"]["getitem"]["interference"]["worker_build"] = build
    path.write_text(json.dumps(prof))
    return path


def test_a_build_that_runs_threads_of_its_own_is_a_warning_with_what_one_thread_measured(tmp_path: Path) -> None:
    threaded = {"build_s": 0.118, "cores": 2.0, "one_blas_thread_s": 0.089, "blas": ["openblas 0.3.31 (2 threads)"]}

    def warnings(build: dict[str, object] | None, *sets: str) -> tuple[str, ...]:
        p = _with_worker_build(tmp_path, build)
        return resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", *sets])).warnings

    one = warnings(threaded, "loader.num_workers=1")
    assert len(one) == 1 and "a batch build alone kept 2.0 of 4 cores busy (at batch 32" in one[0], one
    assert "each of the 1 DataLoader worker(s) of each of the 1 training process(es) on a 4-core node" in one[0]
    assert "openblas 0.3.31 (2 threads) found: with the BLAS limited to one thread the same build alone took " \
        "89.0 ms against 118.0 ms" in one[0]
    assert "OPENBLAS_NUM_THREADS=1" in one[0] and "worker_init_fn" in one[0]
    inline = warnings(threaded, "loader.num_workers=0")
    assert len(inline) == 1 and "in each of the 1 training process(es) on a 4-core node they may still" in inline[0]
    # no BLAS library ran more than one thread: the cores, without the limited build
    other = warnings({"build_s": 0.05, "cores": 1.8}, "loader.num_workers=2")
    assert len(other) == 1 and "kept 1.8 of 4 cores busy" in other[0] and "the same build alone took" not in other[0]
    # no BLAS named, no BLAS advice
    assert "OPENBLAS_NUM_THREADS" not in other[0] and "threadpool_limits(1)" in other[0]
    # the blocks calibration's loop ran, for the scenario's workers (the most it measured, if fewer), or without
    p = _with_worker_build(tmp_path, threaded)
    prof = json.loads(p.read_text())
    it = prof["data"]["modes"]["getitem"]["interference"]
    it["inline"]["block_step_s"], it["workers"][1]["block_step_s"] = [0.2437, 0.4791], [0.26, 0.43]
    p.write_text(json.dumps(prof))
    three, two, one_row, none = (
        resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", f"loader.num_workers={n}"])).warnings
        for n in (3, 2, 1, 0))
    assert "Calibration's loop with 2 worker(s) (the most it measured) ran 10-step blocks at 260 to 430 ms a " \
        "step, waits included (batch 32)." in three[0], three
    assert "Calibration's loop with 2 worker(s) ran 10-step blocks at 260 to 430 ms a step" in two[0], two
    assert "Calibration's loop without workers ran 10-step blocks at 244 to 479 ms a step" in none[0], none
    assert "10-step blocks" not in one_row[0]  # the row for 1 worker has none
    it["workers"][0]["block_step_s"] = [0.151, 0.2]
    p.write_text(json.dumps(prof))
    one_row = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=1"])).warnings
    assert "Calibration's loop with 1 worker(s) ran 10-step blocks at 151 to 200 ms a step" in one_row[0], one_row
    # how many blocks, where the profile says: under 6 they are few (a --quick calibration's, one a loop)
    for n, few in ((2, True), (5, True), (6, False)):
        it["workers"][0]["block_n"] = n
        p.write_text(json.dumps(prof))
        one_row = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=1"])).warnings
        assert f"Calibration's loop with 1 worker(s) ran {n} 10-step blocks at 151 to 200 ms a step, waits " \
            "included (batch 32)." in one_row[0], one_row
        assert (f"Only {n}: too few to have met both of the paces such a loop swings between" in one_row[0]) == few
    # exactly at the threshold it warns
    assert len(warnings({"build_s": 0.05, "cores": 1.3}, "loader.num_workers=2")) == 1
    # one core's worth, or a profile written before it was measured: nothing to say
    assert warnings({"build_s": 0.05, "cores": 1.29, "one_blas_thread_s": 0.05, "blas": ["openblas"]}) == ()
    assert warnings(None) == ()
    # the step and the build do not depend on it
    base = resolve_job(load_scenario(DATA_BOUND, [f"calibration={_with_worker_build(tmp_path, None)}"]))
    warned = resolve_job(load_scenario(DATA_BOUND, [f"calibration={_with_worker_build(tmp_path, threaded)}"]))
    assert (warned.compute_s, warned.batch_build_s) == (base.compute_s, base.batch_build_s)


def test_a_loop_whose_pace_moved_while_it_calibrated_is_a_warning_with_its_blocks(tmp_path: Path) -> None:
    p = _with_worker_build(tmp_path, {"build_s": 0.05, "cores": 1.0})  # its builds at one thread
    prof = json.loads(p.read_text())
    it = prof["data"]["modes"]["getitem"]["interference"]

    def warnings(one: list[float] | None, inline: list[float] | None, *sets: str) -> tuple[str, ...]:
        for entry, blocks in ((it["workers"][0], one), (it["inline"], inline)):
            entry.pop("block_step_s", None)
            if blocks is not None:
                entry["block_step_s"] = blocks
        p.write_text(json.dumps(prof))
        return resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", *sets])).warnings

    moved = warnings([0.15, 0.2], None, "loader.num_workers=1")
    assert len(moved) == 1 and moved[0].startswith(
        "calibration's DataLoader loop with 1 worker(s) ran 10-step blocks at 150.0 to 200.0 ms a step, waits "
        "included (batch 32): the machine's pace moved by 33 % while it calibrated"), moved
    it["workers"][0]["block_n"] = 3  # how many, where the profile says
    assert warnings([0.15, 0.2], None, "loader.num_workers=1")[0].startswith(
        "calibration's DataLoader loop with 1 worker(s) ran 3 10-step blocks at 150.0 to 200.0 ms")
    del it["workers"][0]["block_n"]
    # the loop the scenario's workers run, the most measured beyond them, or the loop without workers
    assert warnings(None, [0.15, 0.2], "loader.num_workers=1") == ()
    assert "loop without workers ran 10-step blocks at 150.0 to 200.0" in warnings(None, [0.15, 0.2])[0]
    it["workers"][1]["block_step_s"] = [0.1, 0.13]
    assert "loop with 2 worker(s) (the most it measured) ran 10-step blocks at 100.0 to 130.0" in \
        warnings(None, None, "loader.num_workers=3")[0]
    del it["workers"][1]["block_step_s"]
    # at the threshold (1.2x) it warns, under it not
    assert len(warnings([0.15, 0.18], None, "loader.num_workers=1")) == 1
    assert warnings([0.15, 0.1799], None, "loader.num_workers=1") == ()
    # paces the run does not use (other training threads than the profile's): nothing to say of them
    assert warnings([0.15, 0.2], None, "loader.num_workers=1", "training.threads=2") == ()
    # a build that runs threads of its own: its own warning, which quotes the blocks, and not this one
    it["worker_build"] = {"build_s": 0.118, "cores": 2.0}
    threaded = warnings([0.15, 0.2], None, "loader.num_workers=1")
    assert len(threaded) == 1 and "something inside the Dataset runs threads" in threaded[0], threaded
    assert "the swings tracked how long a cache line took to go between its two cores" in threaded[0]  # and why
    assert "ran 10-step blocks at 150 to 200 ms" in threaded[0]


def test_a_build_measured_under_a_blas_limit_says_the_run_must_keep_it(tmp_path: Path) -> None:
    def notes(build: dict[str, object] | None, *sets: str) -> list[str]:
        p = _with_worker_build(tmp_path, build)
        return [n for n in resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", *sets])).notes
                if "the profile measured the batch build with" in n]

    limited = {"build_s": 0.089, "cores": 1.0, "blas_threads": {"openblas 0.3.31": 1, "mkl 2025": 4}}
    said = notes(limited, "loader.num_workers=1")
    assert said == ["the profile measured the batch build with openblas 0.3.31 at 1 thread(s) on a 4-core machine, "
                    "fewer than such a library starts with (one thread a core) unless OPENBLAS_NUM_THREADS, "
                    "MKL_NUM_THREADS, OMP_NUM_THREADS or a threadpool limit sets them: the prediction is for a run "
                    "whose Dataset runs under the same limit (in its DataLoader workers too); without it, a build "
                    "may run threads of its own beside the step's"], said
    assert len(notes(limited, "loader.num_workers=0")) == 1  # the build is the profile's, with workers or without
    # at one thread a core, or the threads not recorded (a profile before them, or no BLAS loaded): nothing to say
    assert notes({"build_s": 0.089, "cores": 1.0, "blas_threads": {"openblas 0.3.31": 4}}) == []
    assert notes({"build_s": 0.089, "cores": 1.0}) == [] and notes(None) == []
    # and no warning beside it, nor another prediction
    p = _with_worker_build(tmp_path, limited)
    job = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}"]))
    base = resolve_job(load_scenario(DATA_BOUND, [f"calibration={_with_worker_build(tmp_path, None)}"]))
    assert job.warnings == () and (job.compute_s, job.batch_build_s) == (base.compute_s, base.batch_build_s)


THREADED = {"build_s": 0.118, "cores": 2.0, "one_blas_thread_s": 0.089, "blas": ["openblas 0.3.31 (4 threads)"],
            "blas_threads": {"openblas 0.3.31": 4}}


def _with_lever(tmp_path: Path, name: str = "lever.json") -> Path:
    """A threaded build's profile whose loops calibration ran again at one BLAS thread: other paces, other times."""
    prof = json.loads(_with_worker_build(tmp_path, THREADED).read_text())
    mode = prof["data"]["modes"]["getitem"]
    one = json.loads(json.dumps(mode["interference"]))
    one.update(step_alone_s=0.007, build_alone_s=0.0015,
               worker_build={"build_s": 0.09, "cores": 1.0, "blas_threads": {"openblas 0.3.31": 1}},
               inline={"build_ratio": 1.05, "step_ratio": 1.1, "build_s": 0.0016, "step_s": 0.0077},
               workers=[{"workers": k, "step_ratio": 1.2 + 0.1 * k, "build_ratio_idle": 1.0,
                         "build_ratio_busy": 1.5 * k} for k in (1, 2)])
    mode["interference_one_blas"] = one
    path = tmp_path / name
    path.write_text(json.dumps(prof))
    return path


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_a_run_at_one_blas_thread_is_predicted_from_the_loops_calibration_ran_at_one(workers: int,
                                                                                    tmp_path: Path) -> None:
    lever = _with_lever(tmp_path)
    # the same profile with the loops at one thread in the default's place: what the scenario's key must give
    prof = json.loads(lever.read_text())
    mode = prof["data"]["modes"]["getitem"]
    mode["interference"] = mode.pop("interference_one_blas")
    swapped = tmp_path / "swapped.json"
    swapped.write_text(json.dumps(prof))

    def job(p: Path, *sets: str) -> Job:
        return resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", f"loader.num_workers={workers}", *sets]))

    one, want, own = job(lever, "dataset.blas_threads=1"), job(swapped), job(lever)
    assert (one.compute_s, one.batch_build_s, one.paces, one.handover_s) == \
        (want.compute_s, want.batch_build_s, want.paces, want.handover_s)
    assert one.compute_s != own.compute_s and one.batch_build_s != own.batch_build_s
    # the build alone as a worker runs it, at one thread over at the libraries' own (one moment, back to back)
    assert any(f"a build alone as a worker runs it took {0.089 / 0.118:.2f}x its time at the libraries' own "
               "threads" in n for n in one.notes), one.notes
    # no threaded-build warning for the run at one thread; the default run's says how to predict it
    assert one.warnings == () and len(own.warnings) == 1
    assert "predict that run from the loops calibration ran under that limit too: --set dataset.blas_threads=1" \
        in own.warnings[0] and "calibrate again" not in own.warnings[0]
    assert own.blas_lever and not one.blas_lever  # a fix for the default run (report.fixes), none at one thread
    bare = job(_with_worker_build(tmp_path, THREADED))
    assert not bare.blas_lever and "calibrate again under it to predict that run" in bare.warnings[0]


def test_a_blas_limit_the_profile_did_not_measure_is_an_input_error(tmp_path: Path) -> None:
    def job(build: dict[str, object] | None, value: int, lever: bool = False) -> Job:
        p = _with_lever(tmp_path) if lever else _with_worker_build(tmp_path, build)
        return resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=1",
                                                      f"dataset.blas_threads={value}"]))

    with pytest.raises(HsisimInputError, match=r"dataset.blas_threads.*is 1, but the profile measured the batch "
                       r"build's DataLoader loops with openblas 0.3.31 at 4 thread\(s\), and calibration measures "
                       r"them again at 1 thread only where .*OPENBLAS_NUM_THREADS=1"):
        job(THREADED, 1)
    with pytest.raises(HsisimInputError, match=r"is 2, but .*at 4 thread\(s\), and again at 1 thread, not at 2: "
                       r"calibrate under that limit \(OPENBLAS_NUM_THREADS=2"):
        job(None, 2, lever=True)  # calibration measures one thread, not two
    with pytest.raises(HsisimInputError, match="does not record the BLAS threads"):
        job({"build_s": 0.118, "cores": 2.0}, 1)  # before 520b717, or none loaded before it said so with {}
    # at the count the loops ran at: the profile as it is, and a note that says so
    at_four = job(THREADED, 4)
    base = resolve_job(load_scenario(DATA_BOUND, [f"calibration={_with_worker_build(tmp_path, THREADED)}",
                                                  "loader.num_workers=1"]))
    assert (at_four.compute_s, at_four.batch_build_s, at_four.paces) == (base.compute_s, base.batch_build_s,
                                                                         base.paces)
    assert "dataset.blas_threads 4: the profile's DataLoader loops ran each BLAS library at that count" in \
        at_four.notes
    # a build that keeps under 1.3 cores busy runs no BLAS threads to speak of: the profile's paces, said so
    calm = job({"build_s": 0.05, "cores": 1.1, "blas_threads": {"openblas 0.3.31": 4}}, 1)
    assert (calm.compute_s, calm.batch_build_s, calm.paces) == (base.compute_s, base.batch_build_s, base.paces)
    assert any("kept 1.1 of 4 cores busy at the libraries' own threads, so it runs no BLAS threads of its own" in n
               for n in calm.notes), calm.notes
    # no BLAS library loaded: a limit changes nothing, and says so
    none = job({"build_s": 0.05, "cores": 1.0, "blas_threads": {}}, 1)
    assert any("found no BLAS library loaded by the build" in n for n in none.notes), none.notes
    # no profile measured the build: the modelled one runs a thread a worker
    modelled = resolve_job(load_scenario(DATA_BOUND, ["dataset.blas_threads=1"]))
    assert any("no profile measured this batch build" in n for n in modelled.notes)


def test_where_the_loops_paces_are_not_used_the_blas_limit_scales_the_build_alone(tmp_path: Path) -> None:
    # other training threads than calibration's: the loops' paces are not this run's, the build is the data
    # probe's, times the build alone as a worker runs it at one BLAS thread over at the libraries' own
    sets = [f"calibration={_with_lever(tmp_path)}", "loader.num_workers=1", "training.threads=2"]
    own = resolve_job(load_scenario(DATA_BOUND, sets))
    one = resolve_job(load_scenario(DATA_BOUND, [*sets, "dataset.blas_threads=1"]))
    assert own.paces is None and one.paces is None
    assert one.batch_build_s == pytest.approx(own.batch_build_s * 0.089 / 0.118, rel=1e-12)
    # no paces of its own to predict from: the warning does not name the key, and diagnose does not offer it
    assert not own.blas_lever and "calibrate again under it" in own.warnings[0]


@pytest.mark.parametrize(("change", "message"), [
    ({"interference": None}, "go with the loops at the libraries' own"),
    ({"batch": 64}, "batch 64, where interference has 32"),
    ({"cores": 8}, "cores 8, where interference has 4")])
def test_loops_at_one_blas_thread_that_are_not_the_same_calibrations_are_an_input_error(
        change: dict[str, object], message: str, tmp_path: Path) -> None:
    prof = json.loads(_with_lever(tmp_path).read_text())
    mode = prof["data"]["modes"]["getitem"]
    if "interference" in change:
        del mode["interference"]
    else:
        mode["interference_one_blas"].update(change)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(prof))
    with pytest.raises(HsisimInputError, match=message):
        load_profile(bad)


def test_a_blas_limit_the_profile_did_not_measure_exits_2_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    p = _with_worker_build(tmp_path, THREADED)
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["run", str(DATA_BOUND), "--set", f"calibration={p}", "--set",
                                   "dataset.blas_threads=1", "--out", str(out)])
    assert res.exit_code == 2 and "dataset.blas_threads" in res.output and not out.exists(), res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize(("key", "value"), [("cores", 0.0), ("build_s", -0.1), ("one_blas_thread_s", 0.0),
                                          ("blas", "openblas"), ("one_blas_thread_s", None), ("blas", []),
                                          ("blas_threads", {"openblas": 0}), ("blas_threads", ["openblas"])])
def test_bad_worker_build_measurements_are_input_errors(key: str, value: object, tmp_path: Path) -> None:
    build: dict[str, object] = {"build_s": 0.118, "cores": 2.0, "one_blas_thread_s": 0.089, "blas": ["openblas"]}
    build[key] = value  # the last two: the time at one BLAS thread without the libraries, or they without it
    with pytest.raises(HsisimInputError, match=key):
        load_profile(_with_worker_build(tmp_path, build))


def _with_loop_handover(tmp_path: Path, values: list[tuple[float, int] | None], probe: bool = True) -> Path:
    path = _interference_profile(tmp_path)
    prof = json.loads(path.read_text())
    for row, v in zip(prof["data"]["modes"]["getitem"]["interference"]["workers"], values, strict=True):
        if v is not None:
            row["handover_s"], row["handover_n"] = v
    if not probe:
        del prof["data"]["modes"]["getitem"]["handover"]
    path.write_text(json.dumps(prof))
    return path


def test_the_hand_over_is_the_loops_rescaled_along_the_stand_alone_fit(tmp_path: Path) -> None:
    probe = 0.0018 + 1e-6 * 64  # the stand-alone probe's fit at the scenario's micro-batch, 64
    at_32 = 0.0018 + 1e-6 * 32  # ... and at the interference probe's batch, 32

    def job(values: list[tuple[float, int] | None], workers: int, *sets: str, stand_alone: bool = True) -> Job:
        p = _with_loop_handover(tmp_path, values, stand_alone)
        return resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", f"loader.num_workers={workers}", *sets]))

    one = job([(0.0012, 5), (0.0009, 4)], 1)
    assert one.handover_s == pytest.approx(0.0012 * probe / at_32)  # its own worker count's
    assert any("waited for batches already built: 1.20 ms at batch 32 with 1 worker(s) (5 waits)" in n
               for n in one.notes)
    assert job([(0.0012, 5), (0.0009, 4)], 6).handover_s == pytest.approx(0.0009 * probe / at_32)  # the most measured
    # too few waits with 2 workers (a data-bound loop's batches are late): pooled over every count
    pooled = job([(0.0012, 5), (0.0009, 1)], 2)
    assert pooled.handover_s == pytest.approx((5 * 0.0012 + 0.0009) / 6 * probe / at_32)
    assert any("with 1..2 workers (6 waits)" in n for n in pooled.notes)
    few = job([(0.0012, 1), (0.0009, 1)], 2)  # 2 waits in all: the stand-alone fit
    assert few.handover_s == pytest.approx(probe) and not any("already built" in n for n in few.notes)
    assert job([None, None], 2).handover_s == pytest.approx(probe)  # a profile that did not measure it
    bare = job([(0.0012, 5), None], 1, stand_alone=False)  # nothing to rescale it by: as measured
    assert bare.handover_s == pytest.approx(0.0012) and any("no stand-alone fit" in n for n in bare.notes)
    # measured with other threads: not this loop
    assert job([(0.0012, 5), (0.0009, 4)], 1, "training.threads=2").handover_s == pytest.approx(probe)


# the last: a count of blocks without their range
_BAD_BLOCKS = [("block_step_s", [0.3, 0.2]), ("block_step_s", [0.2]), ("block_step_s", [0.0, 0.2]),
               ("block_step_s", [0.1, 0.2, 0.3]), ("block_n", 1), ("block_n", 2.5), ("block_n", 3)]


@pytest.mark.parametrize(("where", "key", "value"), [
    *(("workers", k, v) for k, v in [("handover_s", -0.001), ("handover_s", "fast"), ("handover_n", 0),
                                     ("step_base", 0.0), ("step_base", -0.9), ("step_base", None), *_BAD_BLOCKS]),
    *(("inline", k, v) for k, v in _BAD_BLOCKS)])
def test_a_bad_loop_measurement_is_an_input_error(where: str, key: str, value: object, tmp_path: Path) -> None:
    p = _with_loop_handover(tmp_path, [None, None])
    prof = json.loads(p.read_text())
    it = prof["data"]["modes"]["getitem"]["interference"]
    (it["workers"][0] if where == "workers" else it["inline"])[key] = value
    p.write_text(json.dumps(prof))
    with pytest.raises(HsisimInputError, match=key):
        load_profile(p)


def _step_base_profile(tmp_path: Path, rows: list[dict[str, float]]) -> Path:
    p = _interference_profile(tmp_path, workers=list(range(1, len(rows) + 1)))
    prof = json.loads(p.read_text())
    for row, update in zip(prof["data"]["modes"]["getitem"]["interference"]["workers"], rows, strict=True):
        row.update(update)
    p.write_text(json.dumps(prof))
    return p


def test_a_step_slowed_throughout_the_loop_is_slowed_throughout(tmp_path: Path) -> None:
    p = _step_base_profile(tmp_path, [{"step_ratio": 1.75}, {"step_ratio": 1.0, "step_base": 1.3}])
    fit = load_profile(p).compute[4]
    alone = 0.008 * fit.time(64) / fit.time(32)  # the step alone at batch 32, along the fit to 64
    two = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=2"]))
    assert two.compute_s == pytest.approx(1.3 * alone)
    # the 1.3 holds all of the step's slowdown with 2 workers: none left for a build beside it
    assert two.paces is not None and two.paces.step == (1.0, 1.0)
    assert any("took 1.30x its time alone throughout" in n for n in two.notes)
    # so a step takes 1.3x its time alone, however many of the workers build beside it
    trace = MicroSim(two, np.random.default_rng(0), start_workers=False).run(200)
    assert trace.compute == pytest.approx(np.full(200, 1.3 * alone), rel=1e-9)
    five = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=5"]))
    assert five.compute_s == pytest.approx(two.compute_s)  # beyond the counts measured: the most workers
    one = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=1"]))
    assert one.compute_s == pytest.approx(alone)  # explained by the builds beside it
    assert one.paces is not None and one.paces.step == (1.75, 1.75)  # 2 workers' ratio: the nearest measured
    assert not any("throughout" in n for n in one.notes)
    # another model than the profile's (its fit is scaled by FLOPs): still slowed throughout
    other = [f"calibration={p}", "model.name=ssftt"]
    base = resolve_job(load_scenario(DATA_BOUND, [*other, "loader.num_workers=1"]))
    slowed = resolve_job(load_scenario(DATA_BOUND, [*other, "loader.num_workers=2"]))
    assert slowed.compute_s == pytest.approx(1.3 * base.compute_s)


def test_a_loop_faster_than_the_step_alone_is_the_step_as_the_loop_ran_it(tmp_path: Path) -> None:
    # the machine's pace moved between the step alone and the loop: its 0.9 is the step's time, not 1
    p = _step_base_profile(tmp_path, [{"step_ratio": 1.75}, {"step_ratio": 1.0, "step_base": 0.9}])
    fit = load_profile(p).compute[4]
    alone = 0.008 * fit.time(64) / fit.time(32)  # the step alone at batch 32, along the fit to 64
    two = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=2"]))
    assert two.compute_s == pytest.approx(0.9 * alone)
    assert two.paces is not None and two.paces.step == (1.0, 1.0)  # the 0.9 is all of it: no ratio beside builds
    said = "took 0.90x its time alone in the DataLoader loop: the machine's pace likely moved"
    assert any(said in n for n in two.notes)
    trace = MicroSim(two, np.random.default_rng(0), start_workers=False).run(200)
    assert trace.compute == pytest.approx(np.full(200, 0.9 * alone), rel=1e-9)  # whether or not builds run beside it
    one = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=1"]))
    assert one.compute_s == pytest.approx(alone) and one.paces is not None and one.paces.step == (1.75, 1.75)
    assert not any("pace moved" in n for n in one.notes)


def test_profiles_from_before_step_base_read_the_whole_step_slowdown_as_what_it_is(tmp_path: Path) -> None:
    # an older calibrate wrote the loop's step over the step alone (0.008) as step_ratio where builds
    # could not explain it: (0.0124 - 0.0020) / 0.008 = 1.3; where they could, its own fit (1.75)
    loops = {"loop_step_s": 0.0124, "loop_wait_s": 0.0020}
    p = _step_base_profile(tmp_path, [{"step_ratio": 1.75, **loops}, {"step_ratio": 0.0104 / 0.008, **loops}])
    rows = load_profile(p).data["getitem"]["interference"].workers
    assert (rows[0].step_ratio, rows[0].step_base) == (1.75, 1.0)
    assert rows[1].step_ratio == 1.0 and rows[1].step_base == pytest.approx(1.3)
    new = _step_base_profile(tmp_path, [{"step_ratio": 1.75}, {"step_ratio": 0.0104 / 0.008, "step_base": 1.0,
                                                                **loops}])
    assert load_profile(new).data["getitem"]["interference"].workers[1].step_ratio == pytest.approx(1.3)  # as written


def test_the_run_says_how_far_calibrations_rounds_disagreed(tmp_path: Path) -> None:
    p = _interference_profile(tmp_path)
    assert not any("rounds over" in n for n in resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}"])).notes)
    prof = json.loads(p.read_text())
    prof["data"]["modes"]["getitem"]["interference"].update({"rounds": 7, "span_s": 30.4, "rounds_se": 0.0312})
    p.write_text(json.dumps(prof))
    for workers in (0, 1):
        notes = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", f"loader.num_workers={workers}"])).notes
        assert "the profile's 7 interference rounds over 30 s agree within a standard error of 3.1 %" in " ".join(notes)


def test_interference_rows_must_count_the_workers_from_one(tmp_path: Path) -> None:
    with pytest.raises(HsisimInputError, match="one entry per worker count"):
        load_profile(_interference_profile(tmp_path, workers=[2, 3]))


def test_diagnose_offers_the_blas_limit_calibration_measured_and_its_gain_is_that_runs(tmp_path: Path) -> None:
    import hsisim

    sets = [f"calibration={_with_lever(tmp_path)}", "loader.num_workers=1"]
    diag = hsisim.diagnose(DATA_BOUND, overrides=sets, replicas=4, fast=True)
    fix = next(f for f in diag.fixes if f["id"] == "blas_threads")
    assert fix["overrides"] == ["dataset.blas_threads=1"] and fix["bottleneck"] == "data" and fix["effort"] == 1
    base = hsisim.simulate(DATA_BOUND, overrides=sets, replicas=4, executor="inline").df
    after = hsisim.simulate(DATA_BOUND, overrides=[*sets, *fix["overrides"]], replicas=4, executor="inline").df
    assert fix["wall_h"]["change"] == pytest.approx((after["wall_h"] - base["wall_h"]).mean(), rel=1e-12)
    # not offered where calibration did not measure it, nor where the scenario already runs it
    for other in ([f"calibration={_with_worker_build(tmp_path, THREADED)}", "loader.num_workers=1"],
                  [*sets, "dataset.blas_threads=1"]):
        assert "blas_threads" not in {f["id"] for f in hsisim.diagnose(DATA_BOUND, overrides=other, replicas=4,
                                                                        fast=True).fixes}


def _two_paces(tmp_path: Path, state: dict[str, float] | None) -> Path:
    """The interference profile whose loop without workers ran at two paces: 30 steps near, 10 far."""
    p = _interference_profile(tmp_path)
    prof = json.loads(p.read_text())
    it = prof["data"]["modes"]["getitem"]["interference"]
    it["inline"].update(near={"build_s": 0.002, "step_s": 0.011, "steps": 30},
                        far={"build_s": 0.006, "step_s": 0.013, "steps": 10}, block_step_s=[0.0125, 0.019], block_n=4)
    if state is not None:
        it["machine_state"] = state
    p.write_text(json.dumps(prof))
    return p


def test_a_loop_at_two_paces_is_mixed_at_the_share_of_the_machines_slow_state(tmp_path: Path) -> None:
    fit, build = (load_profile(_interference_profile(tmp_path)).compute[4],
                  load_profile(_interference_profile(tmp_path)).data["getitem"]["build"])
    at64 = fit.time(64) / fit.time(32), build.time(64) / build.time(32)

    def job(state: dict[str, float] | None, *sets: str) -> Job:
        return resolve_job(load_scenario(DATA_BOUND, [f"calibration={_two_paces(tmp_path, state)}",
                                                      "loader.num_workers=0", *sets]))

    # the readings between the loops: 2 of 10 slow, a share of the run's time; at 13 and 19 ms a step its steps
    # are at the far pace in the share (0.2 / 19) / (0.2 / 19 + 0.8 / 13) of them
    read = job({"readings": 10, "span_s": 480.0, "near_s": 0.003, "far": 2, "far_s": 0.0071})
    n = (0.2 / 0.019) / (0.2 / 0.019 + 0.8 / 0.013)
    assert read.batch_build_s == pytest.approx(((1 - n) * 0.002 + n * 0.006) * at64[1])
    assert read.compute_s == pytest.approx(((1 - n) * 0.011 + n * 0.013) * at64[0])
    # the mean step at batch 32 is the harmonic mean of the paces weighted by time: 1 / (0.8 / 13 + 0.2 / 19) ms
    assert read.batch_build_s / at64[1] + read.compute_s / at64[0] == pytest.approx(1 / (0.8 / 0.013 + 0.2 / 0.019))
    said = [n for n in read.notes if "two paces" in n]
    assert said == ["no workers: calibration's loop ran at two paces, 13 ms a step (30 steps) and 19 ms (10), "
                    "build and step included (batch 32); mixed at 20 % of the time at the slower (15 % of the steps), "
                    "from the machine's state read between calibration's loops, slow in 2 of 10 readings over 480 s "
                    "(a small SVD at the BLAS libraries' own threads: 3.00 or 7.10 ms); the readings, taken as "
                    "independent, put a run of hours at 6-51 % of its time at the slower (95 %): 13-15 ms a step"
                    ], read.notes
    # that band: Wilson's 95 % interval of 2 in 10, and the harmonic mean of the paces at each end
    z = 1.959963984540054
    centre, half = (0.2 + z * z / 20) / (1 + z * z / 10), z * math.sqrt(0.2 * 0.8 / 10 + z * z / 400) / (1 + z * z / 10)
    share = far_share(load_profile(_two_paces(tmp_path, {"readings": 10, "span_s": 480.0, "near_s": 0.003, "far": 2,
                                                         "far_s": 0.0071})).data["getitem"]["interference"])
    assert share is not None and share.band == pytest.approx((centre - half, centre + half), rel=1e-9)
    assert share.band == pytest.approx((0.0567, 0.5098), abs=1e-4)
    assert [pace_at(t, 0.013, 0.019) for t in share.band] == pytest.approx([0.013237, 0.015494], abs=1e-6)
    # readings of one state, or none: the loop's own steps, 10 of 40 slow (a share of steps: 10 x 19 ms of the
    # loop's 30 x 13 + 10 x 19 ms, 33 % of its time)
    for state, why in (({"readings": 10, "span_s": 480.0, "near_s": 0.003},
                        "kept one pace throughout (10 readings over 480 s)"), (None, "has no readings")):
        own = job(state)
        assert own.batch_build_s == pytest.approx((0.75 * 0.002 + 0.25 * 0.006) * at64[1])
        assert own.compute_s == pytest.approx((0.75 * 0.011 + 0.25 * 0.013) * at64[0])
        assert any("mixed at 33 % of the time at the slower (25 % of the steps), from the loop's own steps" in n
                   and why in n and "95 %" not in n for n in own.notes), own.notes  # a spell's steps: no band
    # with workers the loops with workers' paces, as before: the readings change nothing
    with_workers = [resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=1"]))
                    for p in (_interference_profile(tmp_path), _two_paces(tmp_path, {
                        "readings": 10, "span_s": 480.0, "near_s": 0.003, "far": 2, "far_s": 0.0071}))]
    assert with_workers[0].compute_s == with_workers[1].compute_s
    assert with_workers[0].batch_build_s == with_workers[1].batch_build_s
    # a build that runs threads of its own: the warning says both paces and the share, where the run uses them
    p = _two_paces(tmp_path, {"readings": 10, "span_s": 480.0, "near_s": 0.003, "far": 2, "far_s": 0.0071})
    prof = json.loads(p.read_text())
    prof["data"]["modes"]["getitem"]["interference"]["worker_build"] = {"build_s": 0.118, "cores": 2.0}
    p.write_text(json.dumps(prof))
    warned = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=0"])).warnings
    assert "ran 4 10-step blocks at 12 to 19 ms a step, waits included (batch 32). They fell in two paces, 13 " \
        "and 19 ms a step: the prediction mixes them at 20 % of the time at the slower (15 % of the steps), and a " \
        "run's steps land between the two, at the share of its time its machine holds the slower; the readings, " \
        "taken as independent, put a run of hours at 6-51 % of its time at the slower (95 %): 13-15 ms a step. " \
        "Limit those" \
        in warned[0], warned
    # where the run does not use them (other training threads than the profile's), no word of the mix
    other = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=0",
                                                   "training.threads=2"])).warnings
    assert "ran 4 10-step blocks" in other[0] and "They fell in two paces" not in other[0]
    assert "Only 4: too few" in other[0]  # the steps' two paces are not said: the blocks are few
    # nor with workers: the loop with the scenario's workers is the one quoted, and the mix is not used
    prof["data"]["modes"]["getitem"]["interference"]["workers"][0]["block_step_s"] = [0.15, 0.2]
    p.write_text(json.dumps(prof))
    one = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=1"])).warnings
    assert "loop with 1 worker(s) ran 10-step blocks" in one[0] and "They fell in two paces" not in one[0]


def test_a_share_of_time_and_a_share_of_steps_convert_both_ways() -> None:
    # half the time at 0.8 s a step, half at 0.4 s: 0.625 steps a second against 1.25, a third of the steps
    assert steps_at(0.5, 0.4, 0.8) == pytest.approx(1 / 3)
    assert time_at(1 / 3, 0.4, 0.8) == pytest.approx(0.5)
    for share in (0.0, 0.17, 0.5, 0.83, 1.0):
        assert time_at(steps_at(share, 0.386, 0.689), 0.386, 0.689) == pytest.approx(share)
        assert steps_at(share, 0.5, 0.5) == pytest.approx(share)  # one pace: the same share
        assert steps_at(share, 0.386, 0.689) <= share  # the slower pace holds fewer steps than seconds
        # the mean step: the steps' mix of the paces, which is the paces' harmonic mean weighted by time
        s = steps_at(share, 0.386, 0.689)
        assert pace_at(share, 0.386, 0.689) == pytest.approx((1 - s) * 0.386 + s * 0.689)
    assert pace_at(0.5, 0.4, 0.8) == pytest.approx(1 / (0.5 / 0.4 + 0.5 / 0.8))  # 0.533 s, not the 0.6 s of a mean


def test_readings_in_two_states_beside_a_loop_at_one_pace_are_said_and_the_loop_is_predicted(tmp_path: Path) -> None:
    p = _interference_profile(tmp_path)
    prof = json.loads(p.read_text())
    prof["data"]["modes"]["getitem"]["interference"]["machine_state"] = {
        "readings": 12, "span_s": 900.0, "near_s": 0.003, "far": 5, "far_s": 0.0078}
    p.write_text(json.dumps(prof))
    job = resolve_job(load_scenario(DATA_BOUND, [f"calibration={p}", "loader.num_workers=0"]))
    base = resolve_job(load_scenario(DATA_BOUND, [f"calibration={_interference_profile(tmp_path)}",
                                                  "loader.num_workers=0"]))
    assert (job.compute_s, job.batch_build_s) == (base.compute_s, base.batch_build_s)
    assert "no workers: the machine's state read between calibration's loops was slow in 5 of 12 readings over " \
        "900 s, but calibration's loop met one pace: predicted at that loop's pace, which a run's steps may leave " \
        "for another" in job.notes, job.notes
    assert not any("slow in" in n for n in base.notes)


@pytest.mark.parametrize(("where", "value", "match"), [
    ("inline", {"near": {"build_s": 0.002, "step_s": 0.011, "steps": 3}}, "both or neither"),
    ("inline", {"near": {"build_s": 0.006, "step_s": 0.013, "steps": 3},
                "far": {"build_s": 0.002, "step_s": 0.011, "steps": 1}}, "near pace's build and step take less"),
    ("inline", {"near": {"build_s": 0.002, "step_s": 0.011, "steps": 0},
                "far": {"build_s": 0.006, "step_s": 0.013, "steps": 1}}, "steps"),
    ("state", {"readings": 1, "span_s": 0.0, "near_s": 0.003}, "readings"),
    ("state", {"readings": 10, "span_s": 480.0, "near_s": 0.003, "far": 2}, "both or neither"),
    ("state", {"readings": 10, "span_s": 480.0, "near_s": 0.003, "far": 10, "far_s": 0.007}, "fewer readings"),
    ("state", {"readings": 10, "span_s": 480.0, "near_s": 0.003, "far": 2, "far_s": 0.003}, "over the near"),
    ("state", {"readings": 10, "span_s": -1.0, "near_s": 0.003}, "span_s"),
    ("state", {"readings": 10, "span_s": 480.0, "near_s": 0.003, "far": 0, "far_s": 0.007}, "far"),
])
def test_bad_two_paces_or_machine_state_are_input_errors(where: str, value: dict[str, object], match: str,
                                                         tmp_path: Path) -> None:
    p = _interference_profile(tmp_path)
    prof = json.loads(p.read_text())
    it = prof["data"]["modes"]["getitem"]["interference"]
    if where == "inline":
        it["inline"].update(value)
    else:
        it["machine_state"] = value
    p.write_text(json.dumps(prof))
    with pytest.raises(HsisimInputError, match=match):
        load_profile(p)
