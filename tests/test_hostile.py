"""A corpus of malformed and hostile inputs through the real command line, each with a time limit.

Every case runs ``python -m hsisim`` in a fresh process (so a hang is caught by the timeout, not by
the test runner) and must end with either exit 0 and valid, strict output, or exit 2 and one line
``error: ...`` that names the key or file: never a traceback, a hang, or non-strict JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # ~45 subprocesses of the real CLI
SPOT = str(ROOT / "scenarios" / "spot_8x.yaml")
LIMIT_S = 30.0
LAUGHS = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)]) + "\n"
FACTORY = """
name: trojan
dataset: {name: indian_pines, patch: 15}
model: {factory: "os:system", kwargs: {command: "touch {tmp}/pwned"}}
training: {epochs: 1, global_batch: 64, micro_batch: 64}
cluster: {instance: g5.xlarge}
"""
GOOD = Path(SPOT).read_text()


@dataclass
class Case:
    id: str
    args: list[str]
    expect: str = "error"  # "error": exit 2 with one line; "ok": exit 0
    says: str = ""  # text the error (or the output) must contain
    files: dict[str, bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


def _set(key_value: str, says: str, *extra: str) -> Case:
    return Case(f"set:{key_value}", ["run", SPOT, "--replicas", "4", "--workers", "1", "--set", key_value, *extra],
                says=says)


CORPUS = [
    # files that are not YAML scenarios
    Case("billion-laughs", ["run", "{tmp}/laughs.yaml"], says="aliases", files={"laughs.yaml": LAUGHS.encode()}),
    Case("recursive-alias", ["run", "{tmp}/rec.yaml"], says="recursive", files={"rec.yaml": b"a: &a [*a]\n"}),
    Case("duplicate-key", ["run", "{tmp}/dup.yaml"], says="appears twice",
         files={"dup.yaml": GOOD.replace("name: spot_8x", "name: spot_8x\nname: again").encode()}),
    Case("latin1-comment", ["run", "{tmp}/latin1.yaml"], says="not UTF-8",
         files={"latin1.yaml": b"# caf\xe9\n" + GOOD.encode()}),
    Case("binary", ["run", "{tmp}/bin.yaml"], says="binary", files={"bin.yaml": bytes(range(256)) * 8}),
    Case("huge", ["run", "{tmp}/huge.yaml"], says="MiB", files={"huge.yaml": b"# x\n" * 600_000}),
    Case("python-tag", ["run", "{tmp}/tag.yaml"], says="malformed YAML",
         files={"tag.yaml": b"name: !!python/object/apply:os.system ['touch {tmp}/pwned']\n"}),
    Case("missing-file", ["run", "{tmp}/nope.yaml"], says="not found"),
    Case("a-folder", ["run", "{tmp}"], says="not found"),
    # numbers that are not what they seem
    _set("overhead.boot=9**9**9 s", "overhead.boot"),
    _set("spot.notice=1e999 s", "spot.notice"),
    _set("spot.hazard.rate_per_hour=.inf", "spot.hazard.rate_per_hour"),
    _set("spot.hazard.rate_per_hour=.nan", "spot.hazard.rate_per_hour"),
    _set("spot.hazard={dist: constant, value: 0}", "spot.hazard"),
    _set("spot.hazard={dist: weibull, shape: 1e-9, scale: 1 h}", "spot.hazard"),
    _set("spot.replacement_delay.sigma=.inf", "spot.replacement_delay.sigma"),
    _set("spot.correlated_rate_per_hour=.inf", "spot.correlated_rate_per_hour"),
    _set("cost.storage_usd_per_gb_month=.inf", "cost.storage_usd_per_gb_month"),
    _set("cost.egress_usd_per_gb=.inf", "cost.egress_usd_per_gb"),
    _set("cluster.nodes=true", "cluster.nodes"),
    _set("loader.num_workers=2.5", "loader.num_workers"),
    _set("loader.pin_memory=1", "loader.pin_memory"),
    _set("training.epochs=1e3", "training.epochs"),
    Case("plan-deadline-expression", ["plan", SPOT, "--replicas", "4", "--deadline", "9**9**9 s"], says="deadline"),
    # work that would never end, or never fit
    _set("checkpoint={policy: fixed, every_steps: 1}", "allow-long", "--replicas", "1000"),
    _set("spot.correlated_rate_per_hour=1e9", "interruptions per replica"),
    _set("simulation.fidelity=step", "allow-long"),
    Case("billion-replicas", ["run", SPOT, "--replicas", "1000000000"], says="GB"),
    Case("ten-million-replicas", ["run", SPOT, "--set", "simulation.replicas=10000000"], says="--replicas"),
    Case("many-workers", ["run", SPOT, "--replicas", "4", "--workers", "1000", "--json"], expect="ok"),
    Case("every-step-4-replicas", ["run", SPOT, "--replicas", "4", "--workers", "1", "--json", "--set",
                                   "checkpoint={policy: fixed, every_steps: 1}"], expect="ok", says="levers_skipped"),
    Case("endless-queue", ["run", SPOT, "--replicas", "4", "--workers", "1", "--json", "--set",
                           "overhead.queue={dist: constant, value: 1e20 s}"], expect="ok", says='"p_finished": 0.0'),
    Case("endless-replacement", ["run", SPOT, "--replicas", "4", "--workers", "1", "--json", "--set",
                                 "spot.replacement_delay={dist: constant, value: 1e20 s}"], expect="ok"),
    Case("unfinished-json-is-strict", ["run", SPOT, "--replicas", "4", "--workers", "1", "--json", "--set",
                                       "simulation.max_wall=1 h"], expect="ok"),
    # files around the run
    Case("out-under-a-file", ["run", SPOT, "--replicas", "4", "--out", "{tmp}/file/res"], says="file",
         files={"file": b"x"}),
    Case("profile-nan", ["run", SPOT, "--replicas", "4", "--set", "calibration={tmp}/p.json"], says="calibration",
         files={"p.json": b'{"compute": {"a_s": NaN, "c_s_per_sample": 1e-4}}'}),
    Case("profile-negative", ["run", SPOT, "--replicas", "4", "--set", "calibration={tmp}/p.json"],
         says="calibration", files={"p.json": b'{"compute": {"a_s": -1, "c_s_per_sample": 1e-4}}'}),
    Case("profile-binary", ["run", SPOT, "--replicas", "4", "--set", "calibration={tmp}/p.json"],
         says="calibration", files={"p.json": b"\xff\xfe\x00garbage"}),
    # code named in a scenario runs only when allowed
    Case("factory-validate", ["scenario", "validate", "{tmp}/trojan.yaml"], says="--allow-code",
         files={"trojan.yaml": FACTORY.encode()}),
    Case("factory-run", ["run", "{tmp}/trojan.yaml", "--replicas", "4"], says="model.factory",
         files={"trojan.yaml": FACTORY.encode()}),
    Case("factory-plan", ["plan", "{tmp}/trojan.yaml", "--replicas", "4"], says="model.factory",
         files={"trojan.yaml": FACTORY.encode()}),
    Case("factory-validate-cmd", ["validate", "--scenario", "{tmp}/trojan.yaml"], says="model.factory",
         files={"trojan.yaml": FACTORY.encode()}),
    # terminals
    Case("ascii-terminal", ["run", SPOT, "--replicas", "4", "--workers", "1"], expect="ok", says="eta",
         env={"PYTHONIOENCODING": "ascii"}),
    Case("ascii-terminal-error", ["run", SPOT, "--set", "spot.notice=-1 s"], says="spot.notice",
         env={"PYTHONIOENCODING": "ascii"}),
]


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def _run(case: Case, tmp: Path) -> tuple[Case, subprocess.CompletedProcess[str] | None, float]:
    folder = tmp / case.id.replace("/", "_").replace(":", "_").replace("=", "_")[:60]
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in case.files.items():
        (folder / name).write_bytes(data.replace(b"{tmp}", str(folder).encode()))
    args = [a.replace("{tmp}", str(folder)) for a in case.args]
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", **case.env}
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "hsisim", *args], capture_output=True, text=True,
                              timeout=LIMIT_S, env=env, cwd=folder, errors="replace")
    except subprocess.TimeoutExpired:
        return case, None, time.monotonic() - t0
    return case, proc, time.monotonic() - t0


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Case, object, float]]:
    tmp = tmp_path_factory.mktemp("hostile")
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda c: _run(c, tmp), CORPUS))
    return {c.id: (c, proc, secs) for c, proc, secs in done} | {"__tmp__": (CORPUS[0], tmp, 0.0)}


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_hostile_input(case: Case, outcomes: dict[str, tuple[Case, object, float]]) -> None:
    _, proc, _ = outcomes[case.id]
    assert isinstance(proc, subprocess.CompletedProcess), f"{case.id}: no answer within {LIMIT_S:.0f} s (hang)"
    out, err = proc.stdout, proc.stderr
    assert "Traceback" not in out + err, err[-2000:]
    if case.expect == "error":
        assert proc.returncode == 2, (proc.returncode, err[-1000:])
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        assert case.says in err, err
    else:
        assert proc.returncode == 0, err[-1000:]
        if "--json" in case.args:
            _strict(out)
        assert case.says in out + err


def test_no_code_ran_and_nothing_was_created(outcomes: dict[str, tuple[Case, object, float]]) -> None:
    tmp = outcomes["__tmp__"][1]
    assert isinstance(tmp, Path)
    assert not list(tmp.rglob("pwned")), "a scenario ran code it was not allowed to"
    assert not (tmp / "out-under-a-file" / "file").is_dir()
