"""The one exception type that user-facing commands turn into a clean message and exit code 2."""

from __future__ import annotations


class HsisimInputError(Exception):
    """Bad user input: a scenario key, a file, a catalog name.

    ``key`` is the dotted key path (``spot.hazard.rate_per_hour``) and ``line`` the 1-based YAML
    line where known, so the message can point the user at the exact place to fix.
    """

    def __init__(self, message: str, *, key: str | None = None, line: int | None = None,
                 source: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key
        self.line = line
        self.source = source

    def __str__(self) -> str:
        where = ""
        if self.source:
            where = self.source + (f":{self.line}" if self.line else "")
        elif self.line:
            where = f"line {self.line}"
        head = ": ".join(p for p in (where, self.key) if p)
        return f"{head}: {self.message}" if head else self.message
