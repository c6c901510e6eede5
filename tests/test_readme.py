"""The README's notebook session runs as written (doctest), from the repository's root."""

from __future__ import annotations

import doctest

import pytest
from conftest import ROOT


def test_the_readme_notebook_session_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(ROOT / "README.md"), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 8 and result.failed == 0
