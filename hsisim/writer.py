"""Everything hsisim writes goes through here: atomic files, strict JSON, the user's umask.

A file appears whole or not at all: it is written to a temporary name in the same directory and
renamed into place (``os.replace`` is atomic on POSIX within one file system). JSON is strict (no
``NaN`` or ``Infinity``, which strict parsers reject): a non-finite number is written as ``null``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write: Callable[[str], Any]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path`` and rename it into place.

    ``mkstemp`` creates files readable by their owner only; the result gets the permissions any
    new file of the user would get (0666 less the umask).
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def jsonable(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None (and tuples as lists)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return jsonable(obj.item())
    return obj


def dumps(obj: Any, indent: int | None = None) -> str:
    """Strict JSON text of ``obj`` (non-finite numbers as null)."""
    return json.dumps(jsonable(obj), indent=indent, allow_nan=False)


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as strict, indented JSON, atomically."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(dumps(obj, indent=2) + "\n", encoding="utf-8"))


def write_text(path: Path, text: str) -> None:
    """Write UTF-8 ``text`` atomically."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_results(folder: Path, results: Any, manifest: dict[str, Any]) -> None:
    """The files of a finished Monte Carlo run: replicas.parquet, summary.json, scenario.json, manifest.json."""
    atomic_write(folder / "replicas.parquet", lambda p: results.df.to_parquet(p, index=False))
    write_json(folder / "summary.json", results.summary())
    write_json(folder / "scenario.json", results.scenario.model_dump(mode="json", by_alias=True))
    write_json(folder / "manifest.json", {**manifest, **results.manifest(), "status": "complete"})
