"""The CLI contract, through typer's CliRunner: JSON output, determinism, files, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT
from typer.testing import CliRunner

from hsisim.cli import app

runner = CliRunner()
SPOT = str(ROOT / "scenarios" / "spot_8x.yaml")
CONTRACT = {"wall_h", "t_compute_h", "t_data_h", "t_comm_h", "t_stall_h", "t_recover_h", "t_overhead_h", "eta",
            "cost_usd", "useful_gpu_h", "billed_gpu_h", "cost_per_useful_gpu_h", "interruptions", "checkpoints"}
STATS = {"mean", "std", "p5", "p50", "p90", "p95", "p99", "ci95"}


def _run(*args: str) -> tuple[int, str, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_run_json_follows_the_contract() -> None:
    code, out, err = _run("run", SPOT, "--replicas", "20", "--json", "--workers", "1")
    assert code == 0, err
    data = json.loads(out)
    assert data["scenario"] == "spot_8x" and data["replicas"] == 20 and data["seed"] == 42
    assert set(data["metrics"]) >= CONTRACT
    for m in CONTRACT:
        assert set(data["metrics"][m]) == STATS
        lo, hi = data["metrics"][m]["ci95"]
        assert lo <= data["metrics"][m]["mean"] <= hi
    assert 0 <= data["p_deadline"] <= 1 and 0 <= data["p_budget"] <= 1


@pytest.mark.slow
def test_same_seed_same_json_whatever_the_process_count() -> None:
    args = ("run", SPOT, "--replicas", "150", "--json", "--seed", "9")
    a = _run(*args, "--workers", "1")[1]
    b = _run(*args, "--workers", "1")[1]
    c = _run(*args, "--workers", "2")[1]
    d = _run(*args, "--executor", "inline")[1]
    assert a == b == c == d
    e = _run("run", SPOT, "--replicas", "150", "--json", "--seed", "10", "--workers", "1")[1]
    assert json.loads(e)["metrics"]["wall_h"]["mean"] != json.loads(a)["metrics"]["wall_h"]["mean"]


def test_set_overrides_change_the_run() -> None:
    base = json.loads(_run("run", SPOT, "--replicas", "5", "--json", "--workers", "1")[1])
    more = json.loads(_run("run", SPOT, "--replicas", "5", "--json", "--workers", "1",
                           "--set", "cluster.nodes=4", "--set", "training.global_batch=1024")[1])
    assert more["metrics"]["billed_gpu_h"]["mean"] != base["metrics"]["billed_gpu_h"]["mean"]


def test_out_writes_results_and_manifest(tmp_path: Path) -> None:
    out = tmp_path / "res"
    code, _, err = _run("run", SPOT, "--replicas", "30", "--out", str(out), "--workers", "1")
    assert code == 0, err
    assert {p.name for p in out.iterdir()} == {"replicas.parquet", "summary.json", "scenario.json", "manifest.json"}
    df = pd.read_parquet(out / "replicas.parquet")
    assert len(df) == 30 and set(df.columns) >= CONTRACT
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 42 and len(manifest["scenario_hash"]) == 64
    assert "calibration_fingerprint" in manifest and "hsisim_version" in manifest
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metrics"]["wall_h"]["mean"] == pytest.approx(df["wall_h"].mean())


def test_human_output_answers_first_then_the_budget_and_the_bill() -> None:
    res = runner.invoke(app, ["run", SPOT, "--replicas", "10", "--workers", "1"], env={"COLUMNS": "80"})
    assert res.exit_code == 0
    out = res.stdout
    for text in ("The same job on on-demand", "Cost per useful GPU-hour", "list price", "Assumed",
                 "Where the wall time goes", "exposed comm", "The bill", "checkpoints / interruptions"):
        assert text in out
    assert out.index("The same job on on-demand") < out.index("Where the wall time goes")
    assert max(len(line) for line in out.splitlines()) <= 80


def test_run_json_compares_with_the_same_job_on_demand_and_says_what_it_assumed() -> None:
    code, out, err = _run("run", SPOT, "--replicas", "40", "--json", "--workers", "1")
    assert code == 0, err
    data = json.loads(out)
    comp, a = data["on_demand_comparison"], data["assumptions"]
    twin = json.loads(_run("run", SPOT, "--replicas", "40", "--json", "--workers", "1", "--no-compare",
                           "--no-levers", "--set", "cluster.market=on_demand")[1])
    assert comp["on_demand"]["cost_usd"] == pytest.approx(twin["metrics"]["cost_usd"]["mean"])
    assert comp["on_demand"]["wall_h"] == pytest.approx(twin["metrics"]["wall_h"]["mean"])
    assert comp["spot"]["cost_usd"] == pytest.approx(data["metrics"]["cost_usd"]["mean"])
    assert comp["saving_usd"] == pytest.approx(comp["on_demand"]["cost_usd"] - comp["spot"]["cost_usd"])
    assert a["instance"] == "g5.12xlarge" and a["gpus"] == 8 and a["gpu"] == "NVIDIA A10G"
    assert a["spot_usd_per_node_h"] == pytest.approx(0.4 * a["on_demand_usd_per_node_h"])
    assert a["budget_usd"] == 500 and a["deadline_h"] == 48
    assert "memory.fragmentation" in a["defaults"] and "overhead.boot" not in a["defaults"]
    assert "on_demand_comparison" not in twin
    # the biggest levers, each reproducible with its overrides (hsisim diagnose measures their effect)
    assert 1 <= len(data["levers"]) <= 2 and all(lv["overrides"] for lv in data["levers"])
    assert "levers_skipped" not in data


def test_levers_that_would_take_minutes_are_named_not_run() -> None:
    # a checkpoint after every step: ~1 s a replica, so diagnose's 5 × 16 what-if replicas would take a minute
    code, out, err = _run("run", SPOT, "--replicas", "2", "--json", "--workers", "1", "--no-compare",
                          "--set", "checkpoint={policy: fixed, every_steps: 1}")
    assert code == 0, err
    data = json.loads(out)
    assert "levers" not in data and "hsisim diagnose" in data["levers_skipped"]
    assert "min here" in data["levers_skipped"]


def test_warnings_for_assumptions_a_user_likely_did_not_mean() -> None:
    code, out, _ = _run("run", SPOT, "--replicas", "4", "--json", "--workers", "1", "--no-compare",
                        "--set", "cost.spot_price=null", "--set", "overhead={}", "--set", "spot.replacement_delay=null")
    warnings = json.loads(out)["warnings"]
    assert code == 0 and len(warnings) == 3
    assert any("cost.spot_price" in w for w in warnings) and any("overhead.boot" in w for w in warnings)
    assert any("replacement_delay" in w for w in warnings)
    assert json.loads(_run("run", SPOT, "--replicas", "4", "--json", "--workers", "1", "--no-compare")[1])[
        "warnings"] == []


BAD = [
    ("cluster.nodez", ["--set", "cluster.nodez=3"]),
    ("loader.num_workers", ["--set", "loader.num_workers=many"]),
    ("overhead.boot", ["--set", "overhead.boot=-3 min"]),
    ("spot.hazard.rate_per_hour", ["--set", "spot.hazard.rate_per_hour=-0.1"]),
    ("cluster.instance", ["--set", "cluster.instance=g9.huge"]),
    ("dataset.name", ["--set", "dataset.name=moon"]),
    ("model.name", ["--set", "model.name=resnet"]),
    ("spot.hazard", ["--set", "spot.hazard.dist=poisson"]),
    ("training.global_batch", ["--set", "training.global_batch=100"]),
    ("training.micro_batch", ["--set", "training.micro_batch=65536", "--set", "training.global_batch=524288"]),
    ("cost.spot_price", ["--set", "cost.spot_price=2.5"]),
    ("dataset.patch", ["--set", "dataset.patch=3"]),
]


@pytest.mark.parametrize(("key", "args"), BAD, ids=[k for k, _ in BAD])
def test_bad_input_exits_2_with_one_line_naming_the_key(key: str, args: list[str], tmp_path: Path) -> None:
    out = tmp_path / "never"
    code, stdout, err = _run("run", SPOT, "--replicas", "3", "--out", str(out), "--workers", "1", *args)
    assert code == 2
    assert key in err and err.startswith("error: ")
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err + stdout
    assert not out.exists()


def _bad_file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return p


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    p = _bad_file(tmp_path, "name: x\ndataset: {name: indian_pines\nmodel: [\n")
    code, _, err = _run("run", str(p))
    assert code == 2 and "malformed YAML" in err
    assert "bad.yaml:3:" in err  # the line where the unclosed flow mapping runs into the next key


def test_error_names_the_yaml_line(tmp_path: Path) -> None:
    text = Path(SPOT).read_text().replace("notice: 2 min", "notice: -2 min")
    code, _, err = _run("run", str(_bad_file(tmp_path, text)))
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "notice:" in s)
    assert code == 2 and f"bad.yaml:{line}: spot.notice" in err


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "name: only\n"])
def test_incomplete_scenarios_are_rejected(tmp_path: Path, text: str) -> None:
    code, _, err = _run("run", str(_bad_file(tmp_path, text)))
    assert code == 2 and "Traceback" not in err


def test_missing_file_and_bad_flags() -> None:
    assert _run("run", "nope.yaml")[0] == 2
    assert "not found" in _run("run", "nope.yaml")[2]
    assert _run("run", SPOT, "--replicas", "0")[0] == 2
    assert _run("run", SPOT, "--set", "novalue")[0] == 2
    assert _run("run", SPOT, "--executor", "cloud")[0] == 2


def test_scenario_schema_and_validate() -> None:
    code, out, _ = _run("scenario", "schema")
    schema = json.loads(out)
    assert code == 0 and {"dataset", "model", "training", "cluster", "spot", "checkpoint"} <= set(schema["properties"])
    code, out, _ = _run("scenario", "validate", SPOT)
    assert code == 0 and "ok" in out
    code, _, err = _run("scenario", "validate", SPOT, "--set", "checkpoint.policy=sometimes")
    assert code == 2 and "checkpoint.policy" in err


def test_calibration_profile_replaces_the_roofline_and_is_flagged(tmp_path: Path) -> None:
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps({"device": {"catalog_gpu": "rtx3090"},
                                "compute": {"a_s": 0.004, "c_s_per_sample": 0.0002, "cv": 0.05}}))
    code, out, err = _run("run", SPOT, "--replicas", "5", "--json", "--workers", "1", "--set", f"calibration={prof}")
    assert code == 0, err
    data = json.loads(out)
    assert any("extrapolated" in n and "RTX 3090" in n for n in data["notes"])
    base = json.loads(_run("run", SPOT, "--replicas", "5", "--json", "--workers", "1")[1])
    assert data["metrics"]["t_compute_h"]["mean"] != base["metrics"]["t_compute_h"]["mean"]


@pytest.mark.parametrize("content", [None, "{not json", '{"compute": {}}'])
def test_bad_calibration_profile_exits_2(tmp_path: Path, content: str | None) -> None:
    prof = tmp_path / "p.json"
    if content is not None:
        prof.write_text(content)
    code, _, err = _run("run", SPOT, "--replicas", "2", "--set", f"calibration={prof}")
    assert code == 2 and "calibration" in err and "Traceback" not in err
