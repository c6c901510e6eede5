"""Monte Carlo at scale: executors agree exactly, the result store resumes, stopping rules and CIs."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from typer.testing import CliRunner

from hsisim.api import simulate
from hsisim.cli import app
from hsisim.montecarlo import CHUNK
from hsisim.scenario import load_scenario, parse_scenario
from hsisim.stats import describe, relative_halfwidth

SPOT8 = ROOT / "scenarios" / "spot_8x.yaml"
runner = CliRunner()

# Bougeret et al. (SC'11, Prop. 1, R = 0): exponential failures at rate λ, segments of τ of work each
# followed by a checkpoint C, a downtime D after each failure. E[segment] = (1/λ + D)(e^{λ(τ+C)} − 1).
KNOWN = """
name: known-answer
dataset: {name: xiongan, patch: 15, pca_components: 30}
model: {name: hybridsn}
training: {steps: 36000, global_batch: 64, micro_batch: 64}
cluster: {instance: g5.xlarge, nodes: 1, market: spot}
timings: {compute_per_step: 1 s}
spot:
  hazard: {dist: exponential, rate_per_hour: 0.5}
  notice: 0 s
  replacement_delay: {dist: constant, value: 10 min}
checkpoint: {policy: fixed, every_steps: 3600, write_time: 2 min, restore_time: 0 s}
overhead: {boot: 0 s}
cost: {spot_price: 0.4}
simulation: {replicas: 100, seed: 5}
"""


def known_mean_wall_s() -> float:
    lam, tau, c, d, segments = 0.5 / 3600, 3600.0, 120.0, 600.0, 10
    per = 1 / lam + d
    return (segments - 1) * per * math.expm1(lam * (tau + c)) + per * math.expm1(lam * tau)


@pytest.fixture(scope="module")
def spot8():  # type: ignore[no-untyped-def]
    return load_scenario(SPOT8)


@pytest.fixture(scope="module")
def reference(spot8):  # type: ignore[no-untyped-def]
    """spot_8x, 300 replicas, in this process: what every executor must reproduce exactly."""
    return simulate(spot8, replicas=300, executor="inline")


@pytest.mark.slow
def test_identical_results_inline_two_processes_and_dask_local_cluster(spot8, reference) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("distributed")
    local = simulate(spot8, replicas=300, executor="local", workers=2)
    dask = simulate(spot8, replicas=300, executor="dask", workers=2)
    pd.testing.assert_frame_equal(local.df, reference.df)
    pd.testing.assert_frame_equal(dask.df, reference.df)
    assert local.summary() == reference.summary() == dask.summary()


def _frames_equal(a: Path, b: Path) -> None:
    pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b))


def test_interrupted_run_resumes_to_the_uninterrupted_result(spot8, reference, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    full = tmp_path / "full"
    simulate(spot8, replicas=300, executor="inline", out=full)
    cut = tmp_path / "cut"
    seen = []

    def ctrl_c_after_two_chunks(advance: int, total: int) -> None:
        seen.append(advance)
        if sum(seen) >= 2 * CHUNK:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        simulate(spot8, replicas=300, executor="inline", out=cut, progress=ctrl_c_after_two_chunks)
    parts = sorted((cut / "parts").glob("part-*.parquet"))
    assert [p.name for p in parts] == ["part-000000000-000000064.parquet", "part-000000064-000000128.parquet"]
    assert not (cut / "replicas.parquet").exists()
    assert json.loads((cut / "manifest.json").read_text())["status"] == "running"

    # without --resume the unfinished run is refused and kept
    res = runner.invoke(app, ["run", str(SPOT8), "--replicas", "300", "--out", str(cut), "--executor", "inline"])
    assert res.exit_code == 2 and "--resume" in res.output and "2 chunks done" in res.output
    assert sorted((cut / "parts").glob("part-*.parquet")) == parts

    reused = []
    resumed = simulate(spot8, replicas=300, executor="local", workers=2, out=cut, resume=True,
                       progress=lambda a, n: reused.append(a))
    assert reused[0] == 2 * CHUNK  # the two finished chunks are read back, not run again
    assert sum(reused) == 300
    pd.testing.assert_frame_equal(resumed.df, reference.df)
    _frames_equal(cut / "replicas.parquet", full / "replicas.parquet")
    assert not (cut / "parts").exists()
    assert json.loads((cut / "summary.json").read_text()) == json.loads((full / "summary.json").read_text())
    manifest = json.loads((cut / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["replicas"] == 300
    assert not list(cut.glob(".*.tmp"))


@pytest.mark.slow
def test_killed_process_resumes_without_loss_or_duplicates(spot8, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "hsisim", "run", str(SPOT8), "--replicas", "1000", "--executor", "inline",
           "--out", str(out), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if len(list((out / "parts").glob("part-*.parquet"))) >= 3:
                break
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    kept = {p.name for p in (out / "parts").glob("part-*.parquet")}
    if not kept or (out / "replicas.parquet").exists():
        pytest.skip("the run finished (or never started a chunk) before it could be killed")
    reused = []
    resumed = simulate(spot8, replicas=1000, executor="inline", out=out, resume=True,
                       progress=lambda a, n: reused.append(a))
    assert reused[0] == CHUNK * len(kept)
    fresh = simulate(spot8, replicas=1000, executor="local", workers=2)
    pd.testing.assert_frame_equal(resumed.df, fresh.df)
    df = pd.read_parquet(out / "replicas.parquet")
    assert df["replica"].tolist() == list(range(1000))


def test_a_finished_run_extends_with_more_replicas(spot8, reference, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "grow"
    simulate(spot8, replicas=100, executor="inline", out=out)
    reused = []
    grown = simulate(spot8, replicas=300, executor="inline", out=out, resume=True,
                     progress=lambda a, n: reused.append(a))
    assert reused[0] == CHUNK  # [0, 64) kept; [64, 100) was a partial chunk and is rerun as [64, 128)
    pd.testing.assert_frame_equal(grown.df, reference.df)


def test_resume_refuses_a_different_run(tmp_path: Path) -> None:
    out = tmp_path / "r"
    args = ["run", str(SPOT8), "--replicas", "64", "--executor", "inline", "--out", str(out), "--json"]
    assert runner.invoke(app, args).exit_code == 0
    before = (out / "replicas.parquet").read_bytes()
    res = runner.invoke(app, [*args, "--resume", "--seed", "7"])
    assert res.exit_code == 2 and "different seed" in res.output
    res = runner.invoke(app, [*args, "--resume", "--set", "cluster.nodes=1"])
    assert res.exit_code == 2 and "different scenario" in res.output
    assert (out / "replicas.parquet").read_bytes() == before


@pytest.mark.parametrize("args, message", [
    (["--resume"], "--resume needs --out"),
    (["--executor", "dask", "--scheduler", "localhost:8786"], "tcp://HOST:PORT"),
    (["--executor", "local", "--scheduler", "tcp://127.0.0.1:8786"], "--scheduler needs --executor dask"),
    (["--executor", "spark"], "--executor must be one of inline, local, dask"),
    (["--ci-halfwidth", "abc"], "--ci-halfwidth expects a fraction"),
    (["--ci-halfwidth", "150%"], "between 0 and 100 %"),
    (["--ci-halfwidth", "1%", "--replicas", "10"], "not both"),
    (["--ci-halfwidth", "1%", "--max-replicas", "1"], "--max-replicas must be at least 2"),
    (["--workers", "0"], "--workers must be at least 1"),
])
def test_bad_execution_flags_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", str(SPOT8), *args])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output


def test_ci_halfwidth_stops_when_the_mean_cost_is_that_tight() -> None:
    sc = parse_scenario(KNOWN)
    res = simulate(sc, executor="inline", ci_halfwidth=0.01)
    st = res.summary()["stopping"]
    assert st["replicas"] == len(res.df) and not st["reached_max"]
    assert st["ci_halfwidth"] <= 0.01
    assert relative_halfwidth(res.df["cost_usd"].to_numpy()) == pytest.approx(st["ci_halfwidth"])
    # the same waves whatever the executor
    again = simulate(sc, executor="local", workers=2, ci_halfwidth=0.01)
    pd.testing.assert_frame_equal(again.df, res.df)
    capped = simulate(sc, executor="inline", ci_halfwidth=0.001, max_replicas=300)
    assert len(capped.df) == 300 and capped.summary()["stopping"]["reached_max"]


@pytest.mark.slow
def test_confidence_interval_covers_a_known_mean_at_the_nominal_rate() -> None:
    # 6000 independent replicas of a job whose expected wall time is known exactly, in 120 groups
    # of 50: the 95 % CI of each group should cover the truth about 95 % of the time. Binomial(120,
    # 0.95) has sd 2.0 %; the skew of the wall time costs a t-interval at n = 50 about a point.
    sc = parse_scenario(KNOWN)
    wall = simulate(sc, replicas=6000, executor="local", workers=2).df["wall_h"].to_numpy() * 3600
    truth = known_mean_wall_s()
    groups = wall.reshape(120, 50)
    covered = [lo <= truth <= hi for lo, hi in (describe(g)["ci95"] for g in groups)]
    rate = float(np.mean(covered))
    assert 0.88 <= rate <= 1.0, rate
    half = 3.29 * wall.std(ddof=1) / math.sqrt(len(wall))
    assert abs(wall.mean() - truth) <= half
