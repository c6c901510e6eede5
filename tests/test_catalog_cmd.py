"""``hsisim catalog`` and ``hsisim --version``: every entry listed with its source, strict JSON, 80 columns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

import hsisim
from hsisim import catalog
from hsisim.catalog.listing import KINDS, listing
from hsisim.cli import app
from hsisim.errors import HsisimInputError

runner = CliRunner()
NARROW = {"COLUMNS": "80"}


def _strict(text: str) -> Any:
    """Parse JSON, refusing NaN and Infinity (which strict parsers reject)."""
    def refuse(token: str) -> None:
        raise ValueError(f"non-finite number {token} in JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("kind", KINDS)
def test_json_lists_every_entry_with_its_source_and_date(kind: str) -> None:
    res = runner.invoke(app, ["catalog", kind, "--json"])
    assert res.exit_code == 0, res.stderr
    data = _strict(res.stdout)
    assert data["kind"] == kind
    entries = {e["name"]: e for e in data["entries"]}
    assert sorted(entries) == catalog.names(kind)
    for name, e in entries.items():
        assert isinstance(e["source"], str) and e["source"].strip(), f"{kind} {name} has no source"
        assert isinstance(e["as_of"], str) and e["as_of"].strip(), f"{kind} {name} has no as_of"


@pytest.mark.parametrize("kind", KINDS)
def test_table_names_every_entry_within_80_columns(kind: str) -> None:
    res = runner.invoke(app, ["catalog", kind], env=NARROW)
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    too_wide = [line for line in lines if len(line) > 80]
    assert not too_wide, too_wide
    first_words = {line.split()[0] for line in lines if line.strip()}
    missing = [n for n in catalog.names(kind) if n not in first_words]
    assert not missing, f"{kind}: {missing} not listed"


def test_instances_show_their_prices_with_date_and_region() -> None:
    for e in listing("instances")["entries"]:
        inst = catalog.instance(e["name"])
        assert e["on_demand_usd_per_hour"] == inst.on_demand_usd_per_hour
        assert e["gpus"] == inst.gpus and e["gpu"] == inst.gpu
        if inst.on_demand_usd_per_hour > 0:  # priced in a region on a date; owned hardware costs nothing
            assert e["price_as_of"] and e["price_region"]
    res = runner.invoke(app, ["catalog", "instances"], env=NARROW)
    assert "5.672 USD/h in us-east-1 on 2026-08-26" in " ".join(res.stdout.split())


def test_figures_are_the_catalogs_in_the_units_the_keys_name() -> None:
    gpus = {e["name"]: e for e in listing("gpus")["entries"]}
    assert gpus["v100"]["peak_tflops"]["fp16_tensor"] == 125.0
    assert gpus["v100"]["memory_gib"] == pytest.approx(catalog.gpu("v100").memory_bytes / 2**30, rel=1e-3)
    links = {e["name"]: e for e in listing("links")["entries"]}
    assert links["eth25"]["effective_gb_per_s"] == pytest.approx(15 / 8)  # 15 Gbit/s
    assert [r["nodes"] for r in links["efa400"]["busbw_by_nodes"]] == [2, 3, 4]


def test_overview_counts_every_table() -> None:
    res = runner.invoke(app, ["catalog", "--json"])
    assert res.exit_code == 0, res.stderr
    tables = {t["kind"]: t for t in _strict(res.stdout)["tables"]}
    assert set(tables) == set(KINDS)
    for kind, t in tables.items():
        assert t["count"] == len(catalog.names(kind))
    human = runner.invoke(app, ["catalog"], env=NARROW)
    assert human.exit_code == 0 and all(len(line) <= 80 for line in human.stdout.splitlines())
    for kind in KINDS:
        assert kind in human.stdout


def test_unknown_table_is_one_line_and_exit_2() -> None:
    res = runner.invoke(app, ["catalog", "tpus"])
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    for kind in KINDS:
        assert kind in lines[0]
    with pytest.raises(HsisimInputError, match="known: gpus"):
        listing("tpus")


def test_version_prints_the_package_version() -> None:
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.stdout.strip() == f"hsisim {hsisim.__version__}"
