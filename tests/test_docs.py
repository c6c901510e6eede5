"""The documentation stands alone and cannot drift from the code.

docs/ never sends readers outside the repository; every relative link in docs/*.md and README.md
resolves (anchors included); docs/scenarios.md lists exactly the scenario schema's keys, with every
choice of every enumerated key, and every parameter of every distribution.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from hsisim.scenario import json_schema

DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [*DOCS, ROOT / "README.md"]
SCENARIOS_MD = ROOT / "docs" / "scenarios.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`([^`]+)`")


def _prose(path: Path) -> str:
    """The page's text without fenced code blocks (where a bracket is not a link)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+)$", _prose(path), re.M)}


def test_docs_exist() -> None:
    names = {p.name for p in DOCS}
    assert {"README.md", "model.md", "accounting.md", "scenarios.md"} <= names


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_docs_never_point_outside_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "../shared" not in text
    assert "DESIGN.md" not in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    for target in LINK.findall(_prose(page)):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        assert dest.is_file(), f"{page.name}: link {target!r} leads nowhere"
        assert dest.is_relative_to(ROOT), f"{page.name}: link {target!r} leaves the repository"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{page.name}: no heading for #{anchor} in {dest.name}"


# -- the scenario reference against the schema ---------------------------------------------------


def _alternatives(prop: dict[str, Any]) -> list[dict[str, Any]]:
    return [prop, *prop.get("anyOf", [])]


def _section_ref(prop: dict[str, Any]) -> str | None:
    """The $defs name of a nested section (not a distribution: those are one-of unions)."""
    if any("oneOf" in p for p in _alternatives(prop)):
        return None
    refs = [p["$ref"] for p in _alternatives(prop) if "$ref" in p]
    return refs[0].rsplit("/", 1)[-1] if len(refs) == 1 else None


def _enum(prop: dict[str, Any]) -> list[str]:
    return [str(v) for p in _alternatives(prop) for v in p.get("enum", [])]


def schema_keys() -> dict[str, dict[str, Any]]:
    """Every key a scenario can hold, dotted (sections and leaves), with its JSON Schema."""
    schema = json_schema()
    out: dict[str, dict[str, Any]] = {}

    def walk(props: dict[str, Any], prefix: str) -> None:
        for name, prop in props.items():
            out[prefix + name] = prop
            ref = _section_ref(prop)
            if ref is not None:
                walk(schema["$defs"][ref]["properties"], f"{prefix}{name}.")

    walk(schema["properties"], "")
    return out


def distribution_defs() -> dict[str, dict[str, Any]]:
    """Every law a distribution key accepts, by its ``dist`` name, with its parameters' schemas."""
    schema = json_schema()
    names = {p["$ref"].rsplit("/", 1)[-1] for prop in schema_keys().values() for alt in _alternatives(prop)
             for p in alt.get("oneOf", [])}
    laws = {}
    for name in names:
        props = schema["$defs"][name]["properties"]
        laws[props["dist"]["const"]] = {k: v for k, v in props.items() if k != "dist"}
    return laws


def _tables(path: Path) -> list[tuple[list[str], list[list[str]]]]:
    """The Markdown tables of a page: (header cells, rows of cells)."""
    tables: list[tuple[list[str], list[list[str]]]] = []
    rows: list[list[str]] = []
    for line in [*_prose(path).splitlines(), ""]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            tables.append((rows[0], [r for r in rows[2:]]))
            rows = []
    return tables


def documented_keys() -> dict[str, str]:
    """Scenario keys of the reference's key tables, with the whole row's text."""
    out = {}
    for header, rows in _tables(SCENARIOS_MD):
        if header[0] == "key":
            for row in rows:
                (key,) = CODE.findall(row[0])
                assert key not in out, f"{key} documented twice"
                out[key] = " | ".join(row)
    return out


def documented_laws() -> dict[str, str]:
    """Distribution rows of the reference: dist name → the row's text."""
    out = {}
    for header, rows in _tables(SCENARIOS_MD):
        if header[0] == "dist":
            for row in rows:
                (name,) = re.findall(r"`dist: (\w+)`", row[0])
                out[name] = " | ".join(row)
    return out


def test_every_schema_key_is_documented_and_nothing_else() -> None:
    schema, docs = set(schema_keys()), set(documented_keys())
    assert not schema - docs, f"schema keys missing from docs/scenarios.md: {sorted(schema - docs)}"
    assert not docs - schema, f"docs/scenarios.md lists keys the schema lacks: {sorted(docs - schema)}"


def test_every_choice_of_an_enumerated_key_is_documented() -> None:
    docs = documented_keys()
    for key, prop in schema_keys().items():
        missing = [v for v in _enum(prop) if f"`{v}`" not in docs[key]]
        assert not missing, f"{key}: choices {missing} not in its row"


def test_every_distribution_and_parameter_is_documented() -> None:
    laws, docs = distribution_defs(), documented_laws()
    assert set(laws) == set(docs), f"dist names: schema {sorted(laws)}, docs {sorted(docs)}"
    for name, params in laws.items():
        row = docs[name]
        # parameter names: the identifiers in code outside parentheses (which hold types and choices)
        cell = re.sub(r"\([^()]*\)", "", row.split(" | ")[1])
        named = {c for c in CODE.findall(cell) if re.fullmatch(r"\w+", c)}
        assert set(params) == named, f"dist {name}: schema parameters {sorted(params)}, documented {sorted(named)}"
        for param, prop in params.items():
            missing = [v for v in _enum(prop) if v not in row]
            assert not missing, f"dist {name}.{param}: choices {missing} not documented"
