"""The result store under ``--out``: replicas stream to Parquet part files as chunks finish.

Layout of a run directory::

    manifest.json          identity of the run (scenario hash, seed, chunk size) and its status
    parts/part-S-E.parquet replicas [S, E), one file per finished chunk, each written atomically
    replicas.parquet       every replica, when the run is complete (the parts are then removed)
    summary.json, scenario.json

A run killed at any point leaves only whole part files (a half-written one is a ``.tmp`` that is
swept away); ``--resume`` reads them back, runs only the chunks that are missing and so neither
loses nor duplicates a replica. The identity check refuses to mix runs of different scenarios or
seeds in one directory. The replica count is not part of the identity: a finished run resumed with
more replicas keeps what it has and runs the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import hsisim
from hsisim.errors import HsisimInputError
from hsisim.scenario import Scenario

PARTS = "parts"
MANIFEST = "manifest.json"


def atomic_write(path: Path, write: Callable[[str], Any]) -> None:
    """Write through a temporary file in the same directory and rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_identity(sc: Scenario, seed: int, chunk: int, interval_override: float | None) -> dict[str, Any]:
    """What must match for replicas of two runs to belong together."""
    scen = sc.model_dump(mode="json", by_alias=True)
    scen["simulation"].pop("replicas", None)
    text = json.dumps(scen, sort_keys=True)
    return {"scenario": hashlib.sha256(text.encode()).hexdigest(), "seed": seed, "chunk": chunk,
            "interval_override_s": interval_override}


class ResultStore:
    """One run directory: open it (fresh or resumed), add chunks, finish it."""

    def __init__(self, out: Path, identity: dict[str, Any], resume: bool) -> None:
        self.out = out
        self.parts = out / PARTS
        self.identity = identity
        self.done: dict[tuple[int, int], pd.DataFrame] = {}
        if out.exists() and not out.is_dir():
            raise HsisimInputError(f"--out {out} exists and is not a directory")
        old = self._read_manifest()
        if old is not None and old.get("status") == "running" and not resume:
            n = sum(1 for _ in self.parts.glob("part-*.parquet")) if self.parts.exists() else 0
            raise HsisimInputError(f"--out {out} holds an unfinished run ({n} chunks done): pass --resume to "
                                   "continue it, or choose another directory")
        if resume and old is not None:
            diff = [k for k in identity if old.get(k) != identity[k]]
            if diff:
                raise HsisimInputError(f"--resume: {out} holds a run with a different " + ", ".join(diff)
                                       + " (" + "; ".join(f"{k}: {old.get(k)} there, {identity[k]} now"
                                                          for k in diff) + ")")
            self._load(old)
        elif old is not None:  # a finished run being replaced
            shutil.rmtree(self.parts, ignore_errors=True)
        self.parts.mkdir(parents=True, exist_ok=True)
        for tmp in self.parts.glob(".*.tmp"):
            tmp.unlink()
        self._write_manifest({**identity, "status": "running", "hsisim_version": hsisim.__version__})

    @property
    def replicas_done(self) -> int:
        return sum(len(df) for df in self.done.values())

    def _read_manifest(self) -> dict[str, Any] | None:
        path = self.out / MANIFEST
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise HsisimInputError(f"--out {self.out}: unreadable {MANIFEST} ({exc})") from None
        return data if isinstance(data, dict) else None

    def _write_manifest(self, data: dict[str, Any]) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        atomic_write(self.out / MANIFEST, lambda p: Path(p).write_text(json.dumps(data, indent=2)))

    def _load(self, old: dict[str, Any]) -> None:
        chunk = int(self.identity["chunk"])
        if old.get("status") == "complete" and (self.out / "replicas.parquet").exists():
            df = pd.read_parquet(self.out / "replicas.parquet")
            keys = df["replica"].to_numpy() // chunk
            for k in np.unique(keys):
                part = df[keys == k].reset_index(drop=True)
                a = int(k) * chunk
                self.done[(a, a + len(part))] = part
        if self.parts.exists():
            for path in sorted(self.parts.glob("part-*.parquet")):
                a, b = (int(x) for x in path.stem.split("-")[1:3])
                self.done[(a, b)] = pd.read_parquet(path)

    def get(self, a: int, b: int) -> pd.DataFrame | None:
        """The rows of chunk [a, b) if an earlier run finished it."""
        return self.done.get((a, b))

    def put(self, a: int, b: int, df: pd.DataFrame) -> None:
        """Keep a finished chunk: its part file is complete on disk before this returns."""
        atomic_write(self.parts / f"part-{a:09d}-{b:09d}.parquet", lambda p: df.to_parquet(p, index=False))
        self.done[(a, b)] = df

    def finish(self, df: pd.DataFrame, summary: dict[str, Any], scenario: dict[str, Any],
               manifest: dict[str, Any]) -> None:
        """Write the whole table and the summary, mark the run complete, drop the part files."""
        atomic_write(self.out / "replicas.parquet", lambda p: df.to_parquet(p, index=False))
        atomic_write(self.out / "summary.json", lambda p: Path(p).write_text(json.dumps(summary, indent=2)))
        atomic_write(self.out / "scenario.json", lambda p: Path(p).write_text(json.dumps(scenario, indent=2)))
        self._write_manifest({**self.identity, **manifest, "status": "complete"})
        shutil.rmtree(self.parts, ignore_errors=True)
