"""Price traces from saved ``aws ec2 describe-spot-price-history`` JSON files (no AWS access needed)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from hsisim.errors import HsisimInputError
from hsisim.pricing.history import deduplicated, history_frame
from hsisim.pricing.trace import PriceTraceWritten, iso_utc, trace_facts, write_trace


def load_history_json(path: Path) -> tuple[list[Any], str]:
    """The ``SpotPriceHistory`` list of one saved JSON response and the file's SHA-256."""
    if not path.is_file():
        raise HsisimInputError(f"file not found: {path}", key="files")
    data = path.read_bytes()
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HsisimInputError(f"{path}: not valid JSON: {exc}", key="files") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("SpotPriceHistory"), list):
        raise HsisimInputError(f"{path}: expected a describe-spot-price-history response "
                               "(an object with a 'SpotPriceHistory' list)", key="files")
    return doc["SpotPriceHistory"], hashlib.sha256(data).hexdigest()


def import_history(*, files: Sequence[str | Path], out: str | Path) -> PriceTraceWritten:
    """Write one tidy trace (CSV or Parquet by ``out``'s suffix) from saved price-history JSON ``files``.

    Records repeated across files (overlapping windows) count once. Nothing is written when any
    file is malformed. Returns the written paths and the provenance (files with their SHA-256,
    rows, regions, instance types, products, time span).
    """
    if not files:
        raise HsisimInputError("give at least one JSON file", key="files")
    frames, sources = [], []
    for f in map(Path, files):
        records, digest = load_history_json(f)
        frames.append(history_frame(records, source=str(f), key="files"))
        sources.append({"name": f.name, "sha256": digest, "records": len(records)})
    df = deduplicated(pd.concat(frames, ignore_index=True), source="the imported files", key="files")
    if df.empty:
        raise HsisimInputError("the files hold no price records", key="files")
    prov = {"format": "hsisim price trace 1", "created_utc": iso_utc(pd.Timestamp(datetime.now(UTC))),
            "source": "import", "apis": ["ec2:DescribeSpotPriceHistory (saved JSON)"], "files": sources,
            **trace_facts(df), "on_demand": None}
    path, side = write_trace(df, out, prov)
    return PriceTraceWritten(path, side, prov)
