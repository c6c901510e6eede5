"""How a calibration profile drives a scenario (no torch needed): thread counts, hand-over, collectives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

from hsisim.errors import HsisimInputError
from hsisim.profile import load_profile
from hsisim.resolve import resolve
from hsisim.scenario import load_scenario

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


@pytest.mark.parametrize("workers, threads", [(0, 4), (1, 3), (3, 1), (6, 1)])
def test_training_threads_are_the_cores_the_workers_leave(workers: int, threads: int, tmp_path: Path) -> None:
    p = _profile(tmp_path)
    job = resolve(load_scenario(DATA_BOUND, [f"calibration={p}", f"loader.num_workers={workers}"]))
    fit = load_profile(p).compute[threads]
    assert job.compute_s == pytest.approx(fit.time(64))
    assert any(f"measured with {threads} training thread" in n for n in job.notes)
    # the build comes from the profile; workers beyond the free cores slow down (6 workers, 3 free cores: x2)
    build = 0.0001 + 3e-5 * 64
    assert job.batch_build_s == pytest.approx(build * (2.0 if workers == 6 else 1.0))
    assert job.handover_s == pytest.approx(0.0018 + 64e-6 if workers else 0.0)


def test_handover_and_exposed_gloo_only_on_a_cpu_device(tmp_path: Path) -> None:
    p = _profile(tmp_path, cores=2)
    two = resolve(load_scenario(DATA_BOUND, [f"calibration={p}", "cluster.instance=local-cpu-x2",
                                             "training.global_batch=128"]))
    assert two.comm_total_s > 0 and two.comm_exposed_s == two.comm_total_s
    assert any("from the profile's probe" in n for n in two.notes)
    gpu = resolve(load_scenario(ROOT / "scenarios" / "single_3090.yaml", ["loader.num_workers=2"]))
    assert gpu.handover_s == 0.0
    cpu_default = resolve(load_scenario(DATA_BOUND, ["loader.num_workers=1"]))
    assert cpu_default.handover_s > 0.0018  # the catalog's measured default, without a profile


def test_bad_profiles_are_input_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"compute": {"a_s": "fast"}}')
    with pytest.raises(HsisimInputError, match="not a valid profile"):
        load_profile(bad)
    with pytest.raises(HsisimInputError, match="not found"):
        load_profile(tmp_path / "none.json")
