"""The one exception type that user-facing commands turn into a clean message and exit code 2."""

from __future__ import annotations

import re

# A parameter of a public function, written ``{name}`` or ``{name=value}`` in a message: a library
# user reads "resume=True", the command line user "--resume" (the CLI renders it with ``cli_text``).
_PARAM = re.compile(r"\{(\w+)(?:=([^{}]*))?\}")
# Parameters whose command-line flag has another name.
_FLAG_NAMES = {"overrides": "set", "sets": "set", "deadline_s": "deadline", "sweeps": "sweep",
               "max_lifetime_hours": "max_lifetime"}


def _as_python(match: re.Match[str]) -> str:
    name, value = match.group(1), match.group(2)
    return name if value is None else f"{name}={value}"


def _as_flag(match: re.Match[str]) -> str:
    name, value = match.group(1), match.group(2)
    flag = "--" + _FLAG_NAMES.get(name, name).replace("_", "-")
    return flag if value in (None, "True") else f"{flag} {value}"


class HsisimInputError(Exception):
    """Bad user input: a scenario key, a file, a catalog name, a parameter.

    ``key`` is the dotted key path (``spot.hazard.rate_per_hour``) and ``line`` the 1-based YAML
    line where known, so the message can point the user at the exact place to fix.
    """

    def __init__(self, message: str, *, key: str | None = None, line: int | None = None,
                 source: str | None = None, problems: list[HsisimInputError] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key
        self.line = line
        self.source = source
        self.problems = problems or []  # several problems found at once (then ``message`` introduces them)

    @classmethod
    def several(cls, problems: list[HsisimInputError], source: str | None = None) -> HsisimInputError:
        """One error for ``problems`` (itself when there is one)."""
        if len(problems) == 1:
            return problems[0]
        return cls(f"{len(problems)} problems" + (f" in {source}" if source else "") + ":", problems=problems)

    def _head(self) -> str:
        where = ""
        if self.source:
            where = self.source + (f":{self.line}" if self.line else "")
        elif self.line:
            where = f"line {self.line}"
        return ": ".join(p for p in (where, self.key) if p)

    def _render(self, message: str) -> str:
        head = self._head()
        return f"{head}: {message}" if head else message

    def _text(self) -> str:
        return "\n  ".join([self._render(self.message), *(p._text() for p in self.problems)])

    def __str__(self) -> str:
        return _PARAM.sub(_as_python, self._text())

    def cli_text(self) -> str:
        """The message with parameters written as the command line's flags (one line per problem)."""
        return _PARAM.sub(_as_flag, self._text())
