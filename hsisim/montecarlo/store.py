"""The result store under ``--out``: replicas stream to Parquet part files as chunks finish.

Layout of a run directory::

    manifest.json          identity of the run (scenario hash, seed, chunk size) and its status
    .hsisim.lock           held (flock) by the process writing the run; removed when it finishes
    parts/part-S-E.parquet replicas [S, E), one file per finished chunk, each written atomically
    replicas.parquet       every replica, when the run is complete (the parts are then removed)
    summary.json, scenario.json

The store never deletes what it did not write: it refuses a non-empty folder without an hsisim
manifest, replaces a finished run only when told to (``overwrite``), and removes only its own
file names. A run killed at any point leaves only whole part files (a half-written one is a
``.tmp``); ``resume`` reads them back (a part that cannot be read or holds the wrong replicas is
run again), runs only the chunks that are missing and never drops a replica: asked for fewer
replicas than a finished run holds, it reports the run as it is. The identity check refuses to
mix runs of different scenarios or seeds in one directory.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from hsisim._version import __version__
from hsisim.errors import HsisimInputError
from hsisim.scenario import Scenario
from hsisim.writer import atomic_write, write_json, write_results

PARTS = "parts"
MANIFEST = "manifest.json"
LOCK = ".hsisim.lock"
FORMAT = "hsisim-results/1"
FINAL = ("replicas.parquet", "summary.json", "scenario.json", MANIFEST)
CHUNK = 64  # replicas per part file (and per task sent to a worker)


def run_identity(sc: Scenario, seed: int, chunk: int, interval_override: float | None) -> dict[str, Any]:
    """What must match for replicas of two runs to belong together."""
    scen = sc.model_dump(mode="json", by_alias=True)
    scen["simulation"].pop("replicas", None)
    text = json.dumps(scen, sort_keys=True)
    return {"scenario": hashlib.sha256(text.encode()).hexdigest(), "seed": seed, "chunk": chunk,
            "interval_override_s": interval_override}


@dataclass
class ResultStore:
    """One run directory, opened (and locked) by ``ResultStore.open``; chunks are added, then it finishes."""

    out: Path
    identity: dict[str, Any]
    lock: IO[str]
    done: dict[tuple[int, int], pd.DataFrame] = field(default_factory=dict)
    complete: bool = False  # the folder held a finished run when it was opened
    requested: int | None = None  # replicas the interrupted run was asked for
    notes: list[str] = field(default_factory=list)

    @property
    def parts(self) -> Path:
        return self.out / PARTS

    @property
    def saved_end(self) -> int:
        """One past the highest replica already saved."""
        return max((b for _, b in self.done), default=0)

    @classmethod
    def open(cls, out: Path, identity: dict[str, Any], *, resume: bool, overwrite: bool = False) -> ResultStore:
        """Open ``out`` for a run with ``identity``: fresh, resumed, or replacing a finished run."""
        old = _inspect(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HsisimInputError(f"results folder {out} cannot be created: {exc.strerror or exc}") from None
        lock = _acquire(out)
        try:
            store = cls(out, identity, lock)
            store._start(old, resume, overwrite)
        except BaseException:
            _release(out, lock)
            raise
        return store

    def _start(self, old: dict[str, Any] | None, resume: bool, overwrite: bool) -> None:
        if old is not None and overwrite:
            self._remove_own_files()
        elif old is not None and not resume:
            raise HsisimInputError(_occupied(self.out, old, self.parts))
        elif old is not None:
            diff = [k for k in self.identity if old.get(k) != self.identity[k]]
            if diff:
                raise HsisimInputError(f"{self.out} holds a run with a different " + ", ".join(diff) + " ("
                                       + "; ".join(f"{k}: {old.get(k)} there, {self.identity[k]} now"
                                                   for k in diff) + "); it is left as it is")
            self.complete = old.get("status") == "complete"
            self.requested = old.get("replicas_requested")
            self._load()
        self._sweep_tmp()

    def target(self, asked: int | None, default: int) -> int:
        """Replicas a resumed run should end with: what was asked (else what the run was asked for,
        else ``default``), but never fewer than it already holds."""
        want = asked if asked is not None else (self.requested or default)
        return max(want, self.saved_end)

    def begin(self, replicas: int) -> None:
        """Mark the run as running, for ``replicas`` replicas (so that a plain resume finishes the same run)."""
        self.parts.mkdir(exist_ok=True)
        self._write_manifest({**self.identity, "status": "running", "format": FORMAT,
                              "hsisim_version": __version__, "replicas_requested": replicas})

    def _write_manifest(self, data: dict[str, Any]) -> None:
        write_json(self.out / MANIFEST, data)

    def _load(self) -> None:
        chunk = int(self.identity["chunk"])
        final = self.out / "replicas.parquet"
        if final.exists():  # a finished run (or one being extended: its table stays until the new one is written)
            df = _read(final)
            if df is None:
                self.notes.append(f"{final} could not be read: its replicas are run again")
                self.complete = False
            else:
                keys = df["replica"].to_numpy() // chunk
                for k in np.unique(keys):
                    part = df[keys == k].reset_index(drop=True)
                    a = int(k) * chunk
                    self.done[(a, a + len(part))] = part
        for path in sorted(self.parts.glob("part-*.parquet")) if self.parts.is_dir() else []:
            bounds = _bounds(path)
            part = _read(path) if bounds else None
            if bounds is None or part is None or part["replica"].tolist() != list(range(*bounds)):
                self.notes.append(f"{path.name} was damaged (unreadable or wrong replicas): run again")
                path.unlink()
                continue
            self.done[bounds] = part

    def _sweep_tmp(self) -> None:
        """Remove half-written files of this store (our temporary names only)."""
        for folder in (self.out, self.parts):
            if folder.is_dir():
                for tmp in folder.glob(".*.tmp"):
                    if tmp.name.startswith((".part-", *(f".{n}." for n in FINAL))):
                        tmp.unlink()

    def _remove_own_files(self) -> None:
        for name in FINAL:
            (self.out / name).unlink(missing_ok=True)
        if self.parts.is_dir():
            for path in self.parts.glob("part-*.parquet"):
                path.unlink()
            with contextlib.suppress(OSError):  # other files in it are the user's: keep them and the folder
                self.parts.rmdir()

    def get(self, a: int, b: int) -> pd.DataFrame | None:
        """The rows of chunk [a, b) if an earlier run finished it."""
        return self.done.get((a, b))

    def put(self, a: int, b: int, df: pd.DataFrame) -> None:
        """Keep a finished chunk: its part file is complete on disk before this returns."""
        path = self.parts / f"part-{a:09d}-{b:09d}.parquet"
        try:
            atomic_write(path, lambda p: df.to_parquet(p, index=False))
        except OSError as exc:
            raise HsisimInputError(f"cannot write {path}: {exc.strerror or exc}") from None
        self.done[(a, b)] = df

    def finish(self, results: Any) -> None:
        """Write the whole table and the summary, mark the run complete, drop the part files."""
        write_results(self.out, results, {**self.identity, "format": FORMAT})
        if self.parts.is_dir():
            for path in self.parts.glob("part-*.parquet"):
                path.unlink()
            with contextlib.suppress(OSError):
                self.parts.rmdir()
        self.close()

    def close(self) -> None:
        """Release the lock (idempotent)."""
        if not self.lock.closed:
            _release(self.out, self.lock)


def _inspect(out: Path) -> dict[str, Any] | None:
    """The manifest of the hsisim run in ``out``, None for a new or empty folder; refuses anything else."""
    if out.exists() and not out.is_dir():
        raise HsisimInputError(f"results folder {out} exists and is not a folder")
    if not out.is_dir():
        return None
    try:
        entries = [p.name for p in out.iterdir()]
    except OSError as exc:
        raise HsisimInputError(f"results folder {out} cannot be read: {exc.strerror or exc}") from None
    if not [e for e in entries if e != LOCK]:
        return None
    path = out / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError) as exc:
        raise HsisimInputError(f"{out} has an unreadable {MANIFEST} ({exc}); choose another folder") from None
    if not isinstance(data, dict) or "status" not in data or "hsisim_version" not in data:
        raise HsisimInputError(f"{out} is not empty and holds no hsisim run: choose a new or empty folder "
                               "(nothing in it was changed)")
    return data


def _occupied(out: Path, old: dict[str, Any], parts: Path) -> str:
    if old.get("status") == "running":
        n = sum(1 for _ in parts.glob("part-*.parquet")) if parts.is_dir() else 0
        return (f"{out} holds an unfinished run ({n} chunks done): pass {{resume}} to continue it, {{overwrite}} "
                "to replace it, or choose another folder")
    return (f"{out} holds a finished run ({old.get('replicas', '?')} replicas, seed {old.get('seed')}): pass "
            "{resume} with more {replicas} to extend it, {overwrite} to replace it, or choose another folder")


def _acquire(out: Path) -> IO[str]:
    """Take the folder's lock without waiting; if another process holds it, say who."""
    import fcntl

    path = out / LOCK
    try:
        fh = path.open("a+", encoding="utf-8")
    except OSError as exc:
        raise HsisimInputError(f"results folder {out} cannot be written: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise HsisimInputError(f"{out} is in use by another hsisim run ({holder}); wait for it to finish or "
                               "choose another folder") from None
    fh.seek(0)
    fh.truncate()
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    fh.write(f"pid {os.getpid()} on {socket.gethostname()}, started {started}\n")
    fh.flush()
    return fh


def _release(out: Path, fh: IO[str]) -> None:
    with contextlib.suppress(OSError):
        (out / LOCK).unlink()
    fh.close()


def _bounds(path: Path) -> tuple[int, int] | None:
    try:
        a, b = (int(x) for x in path.stem.split("-")[1:3])
    except ValueError:
        return None
    return (a, b) if 0 <= a < b else None


def _read(path: Path) -> pd.DataFrame | None:
    """A Parquet table, or None if it cannot be read (truncated, not Parquet, no replica column)."""
    try:
        df = pd.read_parquet(path)
    except Exception:  # pyarrow raises ArrowInvalid, OSError and others for damaged files
        return None
    return df if "replica" in df.columns else None


def saved_replicas(out: Path) -> int:
    """Replicas an interrupted run left in ``out`` (whole part files)."""
    parts = out / PARTS
    total = 0
    for path in parts.glob("part-*.parquet") if parts.is_dir() else []:
        bounds = _bounds(path)
        total += bounds[1] - bounds[0] if bounds else 0
    return total


def save(out: Path, results: Any) -> Path:
    """Write a finished ``Results`` into ``out`` (new, empty, or holding this very run); returns ``out``."""
    identity = run_identity(results.scenario, results.seed, CHUNK, results.interval_override)
    store = ResultStore.open(out, identity, resume=True)
    try:
        store.finish(results)
    finally:
        store.close()
    return out
