"""A report folder appears whole or not at all, and never takes the place of anything but a report.

The report is built in a temporary folder beside the target and renamed into place (``os.rename``
is atomic within one file system). The target may be new, an empty folder, or a previous hsisim
report (a ``report.json`` of this format and nothing but report files): that one is moved aside,
the new one renamed in, and only then are the old report's own files removed. A folder holding
anything else is refused before any work is done.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from hsisim.errors import HsisimInputError

FORMAT = "hsisim-report/1"
FILES = ("report.md", "report.json", "budget.png", "cost.png", "distribution.png", "checkpoint.png", "timeline.png",
         "scaling.png")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def is_report(folder: Path) -> bool:
    """True when ``folder`` holds an hsisim report and nothing else."""
    try:
        data = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    names = {p.name for p in folder.iterdir()}
    return isinstance(data, dict) and data.get("format") == FORMAT and names <= set(FILES)


def check(out: Path) -> None:
    """Refuse a target that is not new, empty or a previous report (before any work is done)."""
    if out.exists() and not out.is_dir():
        raise HsisimInputError(f"{{out}}: {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not is_report(out):
        found = sorted(p.name for p in out.iterdir())
        raise HsisimInputError(f"{{out}}: {out} holds files that are not an hsisim report ({', '.join(found[:3])}"
                               f"{', ...' if len(found) > 3 else ''}): choose a new or empty folder")
    if not out.parent.is_dir():
        raise HsisimInputError(f"{{out}}: the folder {out.parent} does not exist")


def staging(out: Path) -> Path:
    """A new temporary folder beside ``out`` (same file system), with the permissions of a new folder."""
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    os.chmod(tmp, 0o777 & ~_umask())
    return tmp


def discard(tmp: Path) -> None:
    """Remove a staging folder (everything in it was written by this run)."""
    shutil.rmtree(tmp, ignore_errors=True)


def publish(tmp: Path, out: Path) -> None:
    """Move the finished report in ``tmp`` to ``out``, replacing an empty folder or a previous report."""
    check(out)
    if not out.exists():
        os.rename(tmp, out)
        return
    if not any(out.iterdir()):
        out.rmdir()
        os.rename(tmp, out)
        return
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old.", suffix=".tmp"))
    old.rmdir()
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old, out)
        raise
    for name in FILES:
        with contextlib.suppress(FileNotFoundError):
            (old / name).unlink()
    with contextlib.suppress(OSError):
        old.rmdir()
