"""``hsisim prices import|show|hazard`` on the real files in ../shared/data/spot, each checked against
a computation written here, and ``hsisim run`` billing by an imported real trace."""

from __future__ import annotations

import bisect
import csv
import hashlib
import itertools
import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, SHARED_DATA
from scipy import stats
from typer.testing import CliRunner

from hsisim.cli import app

COST = SHARED_DATA / "spot" / "training_on_a_dime" / "logs" / "aws" / "cost" / "us-east-1"
LIFETIMES = SHARED_DATA / "spot" / "aws_spot_gpu_lifetimes_2020-03-15.csv"
GCP = SHARED_DATA / "spot" / "gcp_preemptible_2019" / "gcp_preemptible_lifetimes_2019.csv"
runner = CliRunner()


def _need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} is absent (../shared/data/spot)")
    return path


def _invoke(*args: str, columns: int | None = None) -> tuple[int, str, str]:
    res = runner.invoke(app, list(args), env={"COLUMNS": str(columns)} if columns else None)
    return res.exit_code, res.stdout, res.stderr


def _strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def _series(files: list[Path], zone: str) -> list[tuple[float, float]]:
    """(POSIX seconds, USD/h) of one zone's distinct records, by time, parsed here from the raw JSON."""
    seen = set()
    for f in files:
        for r in json.loads(f.read_text())["SpotPriceHistory"]:
            if r["AvailabilityZone"] == zone:
                stamp = datetime.fromisoformat(r["Timestamp"].replace("Z", "+00:00")).timestamp()
                seen.add((stamp, float(r["SpotPrice"])))
    return sorted(seen)


def _import(tmp_path: Path, *names: str) -> tuple[Path, list[Path]]:
    files = [_need(COST / n) for n in names]
    out = tmp_path / "trace.csv"
    code, _, err = _invoke("prices", "import", *map(str, files), "--out", str(out))
    assert code == 0, err
    return out, files


# --- import ----------------------------------------------------------------------------------

def test_import_of_real_json_keeps_every_distinct_record(tmp_path: Path) -> None:
    out, files = _import(tmp_path, "2020-03-13.p3.2xlarge.json", "2020-03-23.p3.2xlarge.json")
    records = [r for f in files for r in json.loads(f.read_text())["SpotPriceHistory"]]
    distinct = {(r["AvailabilityZone"], r["Timestamp"], r["SpotPrice"]) for r in records}
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(distinct) < len(records)  # the two windows overlap
    assert {r["region"] for r in rows} == {"us-east-1"} and {r["product"] for r in rows} == {"Linux/UNIX"}
    prov = json.loads(out.with_name("trace.csv.provenance.json").read_text())
    assert [f["sha256"] for f in prov["files"]] == [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
    assert prov["rows"] == len(distinct) and prov["on_demand"] is None


@pytest.mark.parametrize(("text", "match"), [
    ('{"SpotPriceHistory": [', "not valid JSON"),
    ('{"Prices": []}', "expected a describe-spot-price-history response"),
    ('{"SpotPriceHistory": [{"AvailabilityZone": "us-east-1a", "InstanceType": "p2.xlarge", "ProductDescription": '
     '"Linux/UNIX", "SpotPrice": "-0.9", "Timestamp": "2020-03-13T09:34:09.000Z"}]}', "not a positive price"),
    ('{"SpotPriceHistory": [{"AvailabilityZone": "us-east-1a", "InstanceType": "p2.xlarge", "ProductDescription": '
     '"Linux/UNIX", "SpotPrice": "0.9", "Timestamp": "last tuesday"}]}', "not ISO 8601"),
])
def test_malformed_json_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, text: str, match: str) -> None:
    good = _need(COST / "2020-03-23.p3.2xlarge.json")
    bad = tmp_path / "in" / "bad.json"
    bad.parent.mkdir()
    bad.write_text(text)
    out = tmp_path / "out"
    out.mkdir()
    code, _, err = _invoke("prices", "import", str(good), str(bad), "--out", str(out / "t.csv"))
    assert code == 2 and err.count("\n") == 1 and match in err and str(bad) in err
    assert list(out.iterdir()) == []


# --- show --------------------------------------------------------------------------------------

def test_show_statistics_match_a_hand_computation(tmp_path: Path) -> None:
    out, files = _import(tmp_path, "2020-03-23.p3.2xlarge.json")
    code, stdout, err = _invoke("prices", "show", str(out), "--json")
    assert code == 0, err
    summary = _strict(stdout)
    assert summary["median"] == "time-weighted"
    for s in summary["series"]:
        recs = _series(files, s["availability_zone"])
        t = np.array([r[0] for r in recs])
        p = np.array([r[1] for r in recs])
        assert s["min_usd_per_hour"] == pytest.approx(p.min()) and s["max_usd_per_hour"] == pytest.approx(p.max())
        # time-weighted lower median: expand each price to one entry per second it held
        held = np.repeat(p[:-1], np.diff(t).astype(int))
        assert s["median_usd_per_hour"] == pytest.approx(np.sort(held)[(len(held) - 1) // 2])
        changes = sum(a != b for a, b in itertools.pairwise(p))
        assert s["changes_per_day"] == pytest.approx(changes / ((t[-1] - t[0]) / 86400), abs=1e-3)
        assert s["spot_to_on_demand"] == pytest.approx(held.mean() / 3.06, abs=1e-4)  # catalog p3.2xlarge
    assert summary["on_demand"]["p3.2xlarge"] == {"usd_per_hour": 3.06, "source": "catalog"}
    _check_cheapest(summary["cheapest"][0], files)


def _check_cheapest(best: dict[str, Any], files: list[Path]) -> None:
    """The cheapest-zone shares against a 60-second grid sampled here with bisect."""
    series = {z: _series(files, z) for z in best["shares"]}
    lo, hi = max(s[0][0] for s in series.values()), max(s[-1][0] for s in series.values())
    grid = np.arange(lo, hi, 60.0) + 30.0
    wins = dict.fromkeys(series, 0)
    for x in grid:
        now = {z: s[bisect.bisect_right([r[0] for r in s], x) - 1][1] for z, s in series.items()}
        for z, v in now.items():
            wins[z] += v == min(now.values())
    for z, n in wins.items():
        assert best["shares"][z] == pytest.approx(n / len(grid), abs=2e-3)
    assert best["zone"] == max(wins, key=lambda z: wins[z])


def test_show_table_is_readable_at_80_columns(tmp_path: Path) -> None:
    out, _ = _import(tmp_path, "2020-03-23.p3.2xlarge.json")
    code, stdout, err = _invoke("prices", "show", str(out), columns=80)
    assert code == 0, err
    assert max(len(line) for line in stdout.splitlines()) <= 80
    for zone in ("us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"):
        assert f"p3.2xlarge │ {zone}" in stdout


def test_show_of_a_missing_or_bad_file_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("when,price\n1,2\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("timestamp_utc,spot_usd_per_hour\n")
    for path, match in ((tmp_path / "none.csv", "price trace not found"), (bad, "needs 'timestamp_utc'"),
                        (empty, "holds no price records")):
        code, _, err = _invoke("prices", "show", str(path))
        assert code == 2 and err.count("\n") == 1 and match in err


# --- hazard --------------------------------------------------------------------------------

def test_hazard_per_gpu_type_against_events_over_exposure(tmp_path: Path) -> None:
    with _need(LIFETIMES).open(newline="") as f:
        rows = list(csv.DictReader(f))
    code, stdout, err = _invoke("prices", "hazard", str(LIFETIMES), "--group-by", "gpu_type", "--json")
    assert code == 0, err
    groups = {g["group"]: g for g in _strict(stdout)["groups"]}
    assert set(groups) == {r["gpu_type"] for r in rows}
    for name, g in groups.items():
        mine = [r for r in rows if r["gpu_type"] == name]
        d = sum(r["status"] == "preempted" for r in mine)
        exposure = sum(float(r["lifetime_hours"]) for r in mine)
        assert (g["n"], g["events"]) == (len(mine), d) and g["exposure_hours"] == pytest.approx(exposure)
        if d == 0:  # v100: never preempted
            assert g["exponential"] is None and g["spot_hazard"] is None and "no rate can be fitted" in g["note"]
            assert g["rate_upper_95_per_hour"] == pytest.approx(-math.log(0.05) / exposure, rel=1e-5)
            continue
        e = g["exponential"]
        assert e["rate_per_hour"] == pytest.approx(d / exposure, rel=1e-5)
        lo, hi = stats.chi2.ppf(0.025, 2 * d) / (2 * exposure), stats.chi2.ppf(0.975, 2 * d + 2) / (2 * exposure)
        assert e["rate_ci95"] == pytest.approx([lo, hi], rel=1e-5)
    k80 = groups["k80"]
    assert k80["likelihood_ratio"]["p_value"] < 0.05 and k80["preferred"] == "weibull"
    _pastes(k80["spot_hazard"], k80["weibull"]["mean_hours"])


def _pastes(block: str, mean_hours: float) -> None:
    """The printed block is a valid spot.hazard whose lifetime mean is the fit's."""
    from hsisim.resolve.spot import resolve_spot
    from hsisim.scenario import load_scenario

    sc = load_scenario(ROOT / "scenarios" / "spot_8x.yaml", [f"spot.hazard={block}"])
    setup = resolve_spot(sc, 5.672)
    assert setup is not None and setup.lifetime.mean / 3600 == pytest.approx(mean_hours, rel=2e-3)


def test_hazard_human_output_and_single_family(tmp_path: Path) -> None:
    _need(LIFETIMES)
    code, stdout, err = _invoke("prices", "hazard", str(LIFETIMES), "--group-by", "gpu_type", "--fit", "exponential",
                                columns=80)
    assert code == 0, err
    assert "spot:\n    hazard: {dist: exponential, rate_per_hour: 0.199}" in stdout
    assert "gpu_type = v100: 4 lifetimes, 0 preemptions" in stdout and "Weibull" not in stdout
    _pastes("{dist: exponential, rate_per_hour: 0.199}", 1 / 0.199)


def test_hazard_reads_gcp_stopped_as_censored() -> None:
    code, stdout, err = _invoke("prices", "hazard", str(_need(GCP)), "--fit", "exponential", "--json")
    assert code == 0, err
    report = _strict(stdout)
    assert report["censored_statuses"] == {"stopped": 725}
    (g,) = report["groups"]
    assert (g["n"], g["events"]) == (1442, 717)


def test_hazard_groups_without_a_weibull_maximum_are_reported_not_crashed(tmp_path: Path) -> None:
    lifetimes = tmp_path / "few.csv"
    lifetimes.write_text("lifetime_hours,status,g\n2,preempted,same\n2,preempted,same\n2,preempted,same\n"
                         "3,preempted,solo\n1,preempted,ok\n4,preempted,ok\n9,stopped,ok\n0.5,preempted,ok\n")
    code, stdout, err = _invoke("prices", "hazard", str(lifetimes), "--group-by", "g", "--json")
    assert code == 0, err
    groups = {g["group"]: g for g in _strict(stdout)["groups"]}
    for name in ("same", "solo"):  # identical event times: the Weibull shape runs to infinity
        g = groups[name]
        assert g["weibull"] is None and "no finite Weibull maximum" in g["note"]
        assert g["preferred"] == "exponential" and g["exponential"]["rate_per_hour"] == pytest.approx(
            g["events"] / g["exposure_hours"], rel=1e-5)
    assert groups["ok"]["weibull"] is not None and groups["ok"]["note"] is None
    code, stdout, err = _invoke("prices", "hazard", str(lifetimes), "--group-by", "g", columns=80)
    assert code == 0 and "g = same: 3 lifetimes, 3 preemptions" in stdout


@pytest.mark.parametrize(("args", "match"), [(["--group-by", "gpu"], "group_by: no column 'gpu'"),
                                             (["--fit", "gamma"], "fit: expected one of")])
def test_hazard_bad_options_are_exit_2(args: list[str], match: str) -> None:
    code, _, err = _invoke("prices", "hazard", str(_need(LIFETIMES)), *args)
    assert code == 2 and err.count("\n") == 1 and match in err


# --- billing by an imported real trace ------------------------------------------------------------

SCENARIO = """
name: traced-real
dataset: {{name: xiongan, patch: 15, pca_components: 30}}
model: {{name: hybridsn}}
training: {{steps: {steps}, global_batch: 64, micro_batch: 64}}
cluster: {{instance: p3.2xlarge, nodes: 1, market: spot}}
timings: {{compute_per_step: 1 s}}
spot: {{hazard: {{dist: constant, value: 10000 h}}}}
cost: {{spot_price: trace, price_trace: {{file: {file}, availability_zone: {zone}, instance_type: p3.2xlarge}},
        min_billed: 0 s}}
simulation: {{replicas: 3, seed: 5}}
"""


def _hand_integral(recs: list[tuple[float, float]], a: float, b: float) -> float:
    """USD for [a, b] seconds after the first record, the trace repeating after its last record:
    an explicit loop over every (lap, price interval) that overlaps [a, b]."""
    start, span = recs[0][0], recs[-1][0] - recs[0][0]
    total = 0.0
    for lap in range(int(b // span) + 1):
        for (t0, price), (t1, _) in itertools.pairwise(recs):
            lo, hi = lap * span + t0 - start, lap * span + t1 - start
            total += price * max(0.0, min(hi, b) - max(lo, a)) / 3600.0
    return total


@pytest.mark.parametrize("laps", [1, 2])
def test_hsisim_run_bills_whole_laps_of_the_real_trace_exactly(tmp_path: Path, laps: int) -> None:
    # a run of exactly whole laps pays the same whatever the replica's random offset into the trace
    out, files = _import(tmp_path, "2020-03-23.p3.2xlarge.json")
    recs = _series(files, "us-east-1c")
    span = recs[-1][0] - recs[0][0]
    assert span == int(span)
    scenario = tmp_path / "traced.yaml"
    scenario.write_text(SCENARIO.format(steps=int(laps * span), file=out, zone="us-east-1c"))
    code, stdout, err = _invoke("run", str(scenario), "--json", "--executor", "inline")
    assert code == 0, err
    cost = _strict(stdout)["metrics"]["cost_usd"]
    expected = _hand_integral(recs, 0.0, laps * span)
    one_lap = sum(p * (t1 - t0) for (t0, p), (t1, _) in itertools.pairwise(recs)) / 3600
    assert expected == pytest.approx(laps * one_lap)
    assert cost["mean"] == pytest.approx(expected, rel=1e-9) and cost["std"] == pytest.approx(0.0, abs=1e-9)


def test_a_partial_lap_bills_the_trace_from_the_replicas_offset(tmp_path: Path) -> None:
    from hsisim.montecarlo import prepare, replica
    from hsisim.scenario import parse_scenario

    out, files = _import(tmp_path, "2020-03-23.p3.2xlarge.json")
    recs = _series(files, "us-east-1b")
    steps = int((recs[-1][0] - recs[0][0]) * 0.6)
    prep = prepare(parse_scenario(SCENARIO.format(steps=steps, file=out, zone="us-east-1b")), 5)
    assert prep.spec.spot is not None and prep.spec.spot.trace is not None
    for i in range(3):
        rep = replica(prep, 5, i)
        offset = rep.cluster.trace_offset  # where this replica starts replaying the trace
        r = rep.run()
        assert r.wall == pytest.approx(steps)
        assert r.cost == pytest.approx(_hand_integral(recs, offset, offset + steps), rel=1e-9)
