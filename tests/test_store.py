"""Result folders as a store that loses nothing: foreign folders, finished runs, resume, locks, damage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT
from typer.testing import CliRunner

from hsisim.api import simulate
from hsisim.cli import app
from hsisim.errors import HsisimInputError
from hsisim.montecarlo import CHUNK
from hsisim.montecarlo.store import LOCK, ResultStore, run_identity
from hsisim.scenario import load_scenario

SPOT8 = ROOT / "scenarios" / "spot_8x.yaml"
runner = CliRunner()


def _run(*args: str) -> tuple[int, str, str]:
    res = runner.invoke(app, ["run", str(SPOT8), "--executor", "inline", *args])
    return res.exit_code, res.stdout, res.stderr


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_that_is_not_a_run_is_refused_and_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    (out / "parts").mkdir(parents=True)
    (out / "parts" / "notes.txt").write_text("my notes")
    (out / "summary.json").write_text('{"mine": true}')
    before = _tree(out)
    code, _, err = _run("--replicas", "10", "--out", str(out))
    assert code == 2 and "holds no hsisim run" in err and str(out) in err
    assert _tree(out) == before


def test_a_finished_run_is_replaced_only_with_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _run("--replicas", "20", "--out", str(out), "--seed", "1")[0] == 0
    (out / "notes.txt").write_text("the user's file")
    before = _tree(out)
    code, _, err = _run("--replicas", "20", "--out", str(out), "--seed", "2")
    assert code == 2 and "finished run (20 replicas, seed 1)" in err and "--overwrite" in err
    assert _tree(out) == before
    code, _, err = _run("--replicas", "30", "--out", str(out), "--seed", "2", "--overwrite")
    assert code == 0, err
    assert len(pd.read_parquet(out / "replicas.parquet")) == 30
    assert json.loads((out / "manifest.json").read_text())["seed"] == 2
    assert (out / "notes.txt").read_text() == "the user's file"  # not ours: kept


def test_resume_with_fewer_replicas_keeps_the_finished_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert _run("--replicas", "200", "--out", str(out))[0] == 0
    before = _tree(out)
    code, stdout, err = _run("--replicas", "10", "--out", str(out), "--resume", "--json")
    assert code == 0, err
    data = json.loads(stdout)
    assert data["replicas"] == 200 and any("already holds 200 replicas" in n for n in data["notes"])
    assert _tree(out) == before  # nothing rewritten, nothing dropped


def test_resume_with_more_replicas_extends_the_run(tmp_path: Path) -> None:
    sc = load_scenario(SPOT8)
    out = tmp_path / "run"
    simulate(sc, replicas=100, executor="inline", out=out)
    res = simulate(sc, replicas=150, executor="inline", out=out, resume=True)
    pd.testing.assert_frame_equal(res.df, simulate(sc, replicas=150, executor="inline").df)
    assert len(pd.read_parquet(out / "replicas.parquet")) == 150


def test_a_damaged_part_is_run_again(tmp_path: Path) -> None:
    sc = load_scenario(SPOT8)
    out = tmp_path / "run"

    def stop_after_three(advance: int, total: int, seen: list[int] = []) -> None:  # noqa: B006
        seen.append(advance)
        if sum(seen) >= 3 * CHUNK:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        simulate(sc, replicas=300, executor="inline", out=out, progress=stop_after_three)
    parts = sorted((out / "parts").glob("part-*.parquet"))
    assert len(parts) == 3
    parts[1].write_bytes(parts[1].read_bytes()[:100])  # truncated, as by a full disk
    (out / "parts" / "part-000000000-000000064.parquet").write_bytes(b"not parquet at all")
    resumed = simulate(sc, replicas=300, executor="inline", out=out, resume=True)
    assert any("damaged" in n for n in resumed.notes)
    pd.testing.assert_frame_equal(resumed.df, simulate(sc, replicas=300, executor="inline").df)


def test_a_locked_folder_is_refused_with_its_holder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sc = load_scenario(SPOT8)
    holder = ResultStore.open(out, run_identity(sc, 42, CHUNK, None), resume=False)
    try:
        holder.begin(1000)
        (out / "parts" / ".part-000000000-000000064.parquet.abc.tmp").write_bytes(b"being written")
        code, _, err = _run("--replicas", "100", "--out", str(out), "--resume")
        assert code == 2 and "in use by another hsisim run" in err and f"pid {os.getpid()}" in err
        assert (out / "parts" / ".part-000000000-000000064.parquet.abc.tmp").exists()  # not swept
    finally:
        holder.close()
    assert not (out / LOCK).exists()
    code, _, err = _run("--replicas", "100", "--out", str(out), "--resume")
    assert code == 0, err


@pytest.mark.slow
def test_a_second_process_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "hsisim", "run", str(SPOT8), "--replicas", "3000", "--executor", "inline",
           "--out", str(out), "--json"]
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list((out / "parts").glob("part-*.parquet")):
            time.sleep(0.05)
        second = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=60)
        if first.poll() is not None:
            pytest.skip("the first run finished before the second started")
        assert second.returncode == 2 and f"pid {first.pid}" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    resumed = simulate(load_scenario(SPOT8), replicas=3000, executor="local", workers=2, out=out, resume=True)
    assert resumed.df["replica"].tolist() == list(range(3000))


def test_ctrl_c_says_how_to_continue(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "hsisim", "run", str(SPOT8), "--replicas", "3000", "--executor",
                             "inline", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list((out / "parts").glob("part-*.parquet")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before it could be interrupted")
    assert proc.returncode == 130 and "Traceback" not in err
    assert "replicas are saved in" in err and f"--out {out} --resume" in err


@pytest.mark.parametrize("make", ["under_a_file", "proc"])
def test_an_unwritable_folder_is_one_line_and_exit_2(tmp_path: Path, make: str) -> None:
    if make == "under_a_file":
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "results"
    else:
        out = Path("/proc/hsisim-cannot-write-here")
    code, stdout, err = _run("--replicas", "5", "--out", str(out))
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in stdout + err


def test_library_errors_name_parameters_not_flags(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sc = load_scenario(SPOT8)
    simulate(sc, replicas=10, executor="inline", out=out)
    with pytest.raises(HsisimInputError) as err:
        simulate(sc, replicas=10, executor="inline", out=out)
    assert "overwrite" in str(err.value) and "--" not in str(err.value)
    assert "--overwrite" in err.value.cli_text()
