"""``hsisim prices fetch``: boto3 against botocore's Stubber replaying real responses, botocore's own
retry loop, and a real moto server on 127.0.0.1. Nothing here contacts AWS."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pandas as pd
import pytest
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber
from conftest import SHARED_DATA
from typer.testing import CliRunner

from hsisim.cli import app
from hsisim.errors import HsisimInputError
from hsisim.pricing.fetch import fetch_prices, make_clients
from hsisim.pricing.trace import read_provenance, read_table, read_trace

COST = SHARED_DATA / "spot" / "training_on_a_dime" / "logs" / "aws" / "cost"
REAL = COST / "us-east-1" / "2020-03-23.p3.2xlarge.json"
NOW = datetime(2020, 3, 23, 18, 0, tzinfo=UTC)
DAYS = 10.0
START = NOW - timedelta(days=DAYS)
# fake credentials, distinctive enough to search every output for
KEY_ID, SECRET, TOKEN = "AKIAHSISIMFAKE0000042", "hsisim/secret/never-printed/0042", "hsisim-token-never-printed-42"
runner = CliRunner()


def _real_records() -> list[dict[str, Any]]:
    """The real response's records, with timestamps as boto3 returns them (aware datetimes)."""
    if not REAL.is_file():
        pytest.skip(f"{REAL} is absent (../shared/data/spot)")
    recs = json.loads(REAL.read_text())["SpotPriceHistory"]
    return [r | {"Timestamp": datetime.fromisoformat(r["Timestamp"].replace("Z", "+00:00"))} for r in recs]


def _pages(records: list[dict[str, Any]], n: int = 3) -> list[list[dict[str, Any]]]:
    size = -(-len(records) // n)
    return [records[i:i + size] for i in range(0, len(records), size)]


def _clients() -> tuple[Any, Any]:
    kw = {"region_name": "us-east-1", "aws_access_key_id": KEY_ID, "aws_secret_access_key": SECRET}
    return boto3.client("ec2", **kw), boto3.client("pricing", **kw)


def _expect_pages(stub: Stubber, pages: list[list[dict[str, Any]]], types: list[str], more: bool = False) -> None:
    """Queue ``pages`` linked by NextToken; the last one ends the listing unless ``more`` follow."""
    for i, page in enumerate(pages):
        params: dict[str, Any] = {"InstanceTypes": types, "ProductDescriptions": ["Linux/UNIX"], "StartTime": START,
                                  "EndTime": NOW, "MaxResults": 1000}
        if i:
            params["NextToken"] = f"token-{i}"
        last = i == len(pages) - 1 and not more
        stub.add_response("describe_spot_price_history",
                          {"SpotPriceHistory": page, "NextToken": "" if last else f"token-{i + 1}"}, params)


def _price_list(itype: str, usd: str) -> str:
    """One Price List entry as the Pricing API returns it: a JSON string (trimmed to the fields we read)."""
    sku, term = "JRTCKXETXF3J9KCM", "JRTCKXETXF"
    return json.dumps({
        "product": {"productFamily": "Compute Instance", "sku": sku,
                    "attributes": {"instanceType": itype, "location": "US East (N. Virginia)",
                                   "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
                                   "capacitystatus": "Used"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {f"{sku}.{term}": {"sku": sku, "priceDimensions": {f"{sku}.{term}.6YS6EN2CT7": {
            "unit": "Hrs", "pricePerUnit": {"USD": usd}, "description": f"${usd} per On Demand Linux {itype}"}}}}}})


def _expect_pricing(stub: Stubber, itype: str, usd: str) -> None:
    filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in (
        ("instanceType", itype), ("location", "US East (N. Virginia)"), ("operatingSystem", "Linux"),
        ("tenancy", "Shared"), ("preInstalledSw", "NA"), ("capacitystatus", "Used"))]
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [_price_list(itype, usd)]},
                      {"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1", "Filters": filters})


def _by_hand(records: list[dict[str, Any]], zone: str) -> list[tuple[datetime, float]]:
    """The window's price steps of one zone, worked out here: the price in effect at START, every
    change inside the window, and the last price again at NOW."""
    recs = sorted((r["Timestamp"], float(r["SpotPrice"])) for r in records if r["AvailabilityZone"] == zone)
    before = [p for t, p in recs if t <= START]
    steps = ([(START, before[-1])] if before else []) + [(t, p) for t, p in recs if START < t <= NOW]
    return [*steps, (NOW, steps[-1][1])] if steps[-1][0] < NOW else steps


def test_fetch_reads_every_page_and_windows_the_real_records(tmp_path: Path) -> None:
    records = _real_records()
    pages = _pages(records)
    assert len(pages) >= 3
    ec2, pricing = _clients()
    with Stubber(ec2) as s_ec2, Stubber(pricing) as s_pr:
        _expect_pages(s_ec2, pages, ["p3.2xlarge"])
        _expect_pricing(s_pr, "p3.2xlarge", "3.0600000000")
        res = fetch_prices(region="us-east-1", instance_types=["p3.2xlarge"], out=tmp_path / "p3.parquet",
                           days=DAYS, clients=(ec2, pricing), now=NOW)
        s_ec2.assert_no_pending_responses()
    prov = res.provenance
    assert prov["pages"] == len(pages) and prov["api_records"] == len(records)
    assert prov["on_demand"] == {"source": "pricing_api", "usd_per_hour": {"p3.2xlarge": 3.06},
                                 "note": "AWS Price List Query API"}
    assert read_provenance(res.path) == prov and prov["window"]["start_utc"] == "2020-03-13T18:00:00Z"
    df = read_table(res.path)
    zones = sorted({r["AvailabilityZone"] for r in records})
    assert sorted(df["availability_zone"].unique()) == zones
    for zone in zones:
        got = df[df["availability_zone"] == zone]
        assert list(zip(got["timestamp_utc"].dt.to_pydatetime(), got["spot_usd_per_hour"], strict=True)) == \
            _by_hand(records, zone)
    # cost.price_trace reads it as it is: one zone is one series covering the whole window
    tr = read_trace(res.path, where={"availability_zone": zones[0], "instance_type": "p3.2xlarge"})
    assert tr.span == pytest.approx(DAYS * 86400)


def test_pricing_api_failure_falls_back_to_the_catalog_and_says_so(tmp_path: Path) -> None:
    records = _real_records()
    ec2, pricing = _clients()
    with Stubber(ec2) as s_ec2, Stubber(pricing) as s_pr:
        _expect_pages(s_ec2, [records], ["p3.2xlarge"])
        s_pr.add_client_error("get_products", "AccessDeniedException", "not authorized to perform pricing:GetProducts",
                              http_status_code=400)
        res = fetch_prices(region="us-east-1", instance_types=["p3.2xlarge"], out=tmp_path / "p3.csv", days=DAYS,
                           clients=(ec2, pricing), now=NOW)
    od = res.provenance["on_demand"]
    assert od["source"] == "catalog" and od["usd_per_hour"] == {"p3.2xlarge": 3.06}
    assert "Pricing API was not usable" in od["note"] and "AccessDeniedException" in od["note"]


@pytest.mark.parametrize(("page", "error", "match", "key"), [
    (1, ("RequestLimitExceeded", "Request limit exceeded.", 503), "throttled", None),
    (0, ("InvalidParameterValue", "The value 'p3.2xlargee' for parameter InstanceType is invalid.", 400),
     "rejected", "instance_types"),
])
def test_aws_errors_are_one_clear_line_and_nothing_is_written(tmp_path: Path, page: int, error: tuple[str, str, int],
                                                              match: str, key: str | None) -> None:
    # Stubber answers before botocore's retry loop, so this is what arrives after the retries
    records = _real_records()
    ec2, pricing = _clients()
    with Stubber(ec2) as s_ec2:
        _expect_pages(s_ec2, _pages(records)[:page], ["p3.2xlarge"], more=True)
        code, message, status = error
        s_ec2.add_client_error("describe_spot_price_history", code, message, http_status_code=status)
        with pytest.raises(HsisimInputError, match=match) as err:
            fetch_prices(region="us-east-1", instance_types=["p3.2xlarge"], out=tmp_path / "p.csv", days=DAYS,
                         clients=(ec2, pricing), now=NOW)
    assert err.value.key == key and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_a_malformed_price_is_a_clear_error(tmp_path: Path) -> None:
    records = _real_records()
    pages = _pages(records)
    pages[1][3] = pages[1][3] | {"SpotPrice": "n/a"}
    ec2, pricing = _clients()
    with Stubber(ec2) as s_ec2, pytest.raises(HsisimInputError, match=r"SpotPrice 'n/a' is not a number"):
        _expect_pages(s_ec2, pages, ["p3.2xlarge"])
        fetch_prices(region="us-east-1", instance_types=["p3.2xlarge"], out=tmp_path / "p.csv", days=DAYS,
                     clients=(ec2, pricing), now=NOW)
    assert list(tmp_path.iterdir()) == []


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.data


def _xml(records: list[dict[str, Any]]) -> bytes:
    """The real records serialised as EC2's query protocol answers DescribeSpotPriceHistory."""
    items = "".join(
        f"<item><instanceType>{r['InstanceType']}</instanceType><productDescription>{r['ProductDescription']}"
        f"</productDescription><spotPrice>{r['SpotPrice']}</spotPrice><timestamp>"
        f"{r['Timestamp'].strftime('%Y-%m-%dT%H:%M:%S.000Z')}</timestamp><availabilityZone>{r['AvailabilityZone']}"
        "</availabilityZone></item>" for r in records)
    return (f'<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r-2'
            f"</requestId><spotPriceHistorySet>{items}</spotPriceHistorySet><nextToken/>"
            "</DescribeSpotPriceHistoryResponse>").encode()


THROTTLED = (b'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>RequestLimitExceeded</Code>'
             b"<Message>Request limit exceeded.</Message></Error></Errors><RequestID>r-1</RequestID></Response>")


def test_standard_retry_mode_rides_out_one_throttling_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # answered at the HTTP layer (below botocore's retry loop): one 503 throttle, then the real page
    records = _real_records()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    ec2, _ = make_clients("us-east-1", None, 3)
    assert ec2.meta.config.retries == {"mode": "standard", "total_max_attempts": 3}
    sent: list[str] = []

    def answer(request: Any, **_: Any) -> AWSResponse:
        sent.append(request.headers.get("amz-sdk-request", b"").decode())
        body, status = (THROTTLED, 503) if len(sent) == 1 else (_xml(records), 200)
        return AWSResponse(request.url, status, {}, _Body(body))

    ec2.meta.events.register("before-send.ec2.DescribeSpotPriceHistory", answer)
    res = fetch_prices(region="us-east-1", instance_types=["p3.2xlarge"], out=tmp_path / "p.csv", days=DAYS,
                       on_demand="catalog", clients=(ec2, None), now=NOW)
    assert [s.split(";")[0] for s in sent] == ["attempt=1", "attempt=2"]
    assert res.provenance["api_records"] == len(records) and res.provenance["pages"] == 1


# --- through the CLI, with the standard credential chain --------------------------------------

def _fake_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, present: bool = True) -> None:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask an instance metadata service
    for name, value in (("AWS_ACCESS_KEY_ID", KEY_ID), ("AWS_SECRET_ACCESS_KEY", SECRET),
                        ("AWS_SESSION_TOKEN", TOKEN)):
        if present:
            monkeypatch.setenv(name, value)
        else:
            monkeypatch.delenv(name, raising=False)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fetch(*args: str) -> tuple[int, str, str]:
    res = runner.invoke(app, ["prices", "fetch", *args])
    return res.exit_code, res.stdout, res.stderr


def test_unknown_region_is_refused_before_any_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_credentials(monkeypatch, tmp_path)
    code, _, err = _fetch("--region", "mars-north-1", "--instance-type", "g5.xlarge", "--out", str(tmp_path / "p.csv"))
    assert code == 2 and err.count("\n") == 1 and "region: unknown EC2 region 'mars-north-1'" in err
    assert not (tmp_path / "p.csv").exists()


def test_missing_credentials_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_credentials(monkeypatch, tmp_path, present=False)
    code, _, err = _fetch("--region", "us-east-1", "--instance-type", "g5.xlarge", "--out", str(tmp_path / "p.csv"),
                          "--endpoint-url", f"http://127.0.0.1:{_closed_port()}")
    assert code == 2 and err.count("\n") == 1 and "no usable AWS credentials" in err
    assert list(tmp_path.iterdir()) == []


def test_unreachable_endpoint_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_credentials(monkeypatch, tmp_path)
    url = f"http://127.0.0.1:{_closed_port()}"
    code, _, err = _fetch("--region", "us-east-1", "--instance-type", "g5.xlarge", "--out", str(tmp_path / "p.csv"),
                          "--endpoint-url", url, "--max-attempts", "1")
    assert code == 2 and err.count("\n") == 1 and f"endpoint_url: cannot reach {url}" in err
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    werkzeug = logging.getLogger("werkzeug")
    level = werkzeug.level
    werkzeug.setLevel(logging.CRITICAL)  # moto answers the Pricing API with a logged 500: expected here
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        werkzeug.setLevel(level)


def test_fetch_end_to_end_against_a_moto_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                moto_url: str) -> None:
    _fake_credentials(monkeypatch, tmp_path)
    out = tmp_path / "g5.csv"
    code, stdout, err = _fetch("--region", "us-east-1", "--instance-type", "g5.xlarge", "--instance-type",
                               "g5.12xlarge", "--days", "2", "--out", str(out), "--endpoint-url", moto_url,
                               "--max-attempts", "2")
    assert code == 0, err
    prov = read_provenance(out)
    assert prov is not None and prov["endpoint_url"] == moto_url and prov["pages"] >= 1
    assert prov["instance_types"] == ["g5.12xlarge", "g5.xlarge"] and prov["window"]["days"] == 2.0
    # moto has no Pricing API: the fallback is recorded and printed
    assert prov["on_demand"]["source"] == "catalog" and prov["on_demand"]["usd_per_hour"]["g5.xlarge"] == 1.006
    assert "on-demand: catalog" in stdout and "Pricing API was not usable" in stdout
    df = read_table(out)
    zone = sorted(df["availability_zone"].unique())[0]
    tr = read_trace(out, where={"availability_zone": zone, "instance_type": "g5.xlarge"})
    assert tr.span == pytest.approx(2 * 86400)
    show = runner.invoke(app, ["prices", "show", str(out), "--json"])
    assert show.exit_code == 0 and json.loads(show.stdout)["on_demand"]["g5.xlarge"]["source"] == "catalog"
    written = out.read_text() + out.with_name(out.name + ".provenance.json").read_text()
    for secret in (KEY_ID, SECRET, TOKEN):
        assert secret not in stdout + err + written + show.stdout + show.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g5.csv", "g5.csv.provenance.json"]


def test_an_instance_type_the_region_does_not_offer_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           moto_url: str) -> None:
    _fake_credentials(monkeypatch, tmp_path)
    code, _, err = _fetch("--region", "us-east-1", "--instance-type", "zz9.bogus", "--out", str(tmp_path / "p.csv"),
                          "--endpoint-url", moto_url, "--on-demand", "catalog")
    assert code == 2 and err.count("\n") == 1 and "instance_types: EC2 us-east-1 returned no" in err
    assert list(tmp_path.iterdir()) == []


def test_a_written_parquet_trace_keeps_its_types(tmp_path: Path) -> None:
    records = _real_records()
    ec2, pricing = _clients()
    with Stubber(ec2) as s_ec2:
        _expect_pages(s_ec2, [records], ["p3.2xlarge"])
        res = fetch_prices(region="us-east-1", instance_types=["p3.2xlarge"], out=tmp_path / "p.parquet", days=DAYS,
                           on_demand="catalog", clients=(ec2, pricing), now=NOW)
    raw = pd.read_parquet(res.path)
    assert list(raw.columns) == ["timestamp_utc", "region", "availability_zone", "instance_type", "product",
                                 "spot_usd_per_hour"]
    assert str(raw["timestamp_utc"].dt.tz) == "UTC" and raw["spot_usd_per_hour"].dtype == float


def test_only_a_public_endpoint_is_recorded() -> None:
    from hsisim.pricing.fetch import public_endpoint

    assert public_endpoint("http://user:pa55@127.0.0.1:5000/x?sig=abc#f") == "http://127.0.0.1:5000/x"
    for bad in ("ftp://host", "http://127.0.0.1:port", "127.0.0.1:5000"):
        with pytest.raises(HsisimInputError, match="expected http"):
            public_endpoint(bad)
