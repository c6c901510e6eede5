"""The shape of the package: small modules and functions, layers that import downwards only, no cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

PACKAGE = ROOT / "hsisim"
MODULES = sorted(PACKAGE.rglob("*.py"))
# layer of each top-level part: a module may import its own layer or lower ones, never higher
LAYERS = {
    "_version": 0, "errors": 0, "units": 0, "fields": 0, "writer": 0, "terminal": 0, "yamlsafe": 0, "stats": 0,
    "distributions": 1, "catalog": 1, "analytic": 1,
    "scenario": 2, "sections": 2, "sim": 2, "profile": 2, "answer": 8,
    "pricing": 3, "calibration": 3,  # the probes and the user's factories, which resolve measures
    "resolve": 4,
    "montecarlo": 5,
    "tuning": 6, "calibration.validate": 6,  # a real run against the simulator's prediction
    "planning": 7, "report": 7,
    "api": 8,
    "cli_common": 9, "cli_prices": 9, "cli_catalog": 9, "cli_report": 9, "cli": 10, "__main__": 11, "__init__": 11,
}


def _name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """hsisim modules imported anywhere in the file (also inside functions), except for type checking only."""
    tree = ast.parse(path.read_text())
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)
            for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hsisim"):
            if node.module != "hsisim":  # ``from hsisim import x``: only the submodules x count
                out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("hsisim"))
    known = {_name(p) for p in MODULES}
    return {m for m in out if m in known}


GRAPH = {_name(p): _imports(p) for p in MODULES}


def _layer(module: str) -> int:
    """The layer of the longest part of the module's path that LAYERS names."""
    parts = module.split(".")[1:]
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return LAYERS[".".join(parts[:n])]
    return LAYERS["__init__"]


def test_every_module_has_a_layer() -> None:
    missing = {m.split(".")[1] for m in GRAPH if "." in m and m.split(".")[1] not in LAYERS}
    assert not missing, f"add these to LAYERS: {missing}"


def test_layers_import_downwards_only() -> None:
    bad = [(m, i) for m, imports in GRAPH.items() for i in imports
           if _layer(i) > _layer(m) and not m.startswith("hsisim.__init__") and m != "hsisim"]
    assert not bad, bad


def test_no_import_cycle() -> None:
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(GRAPH.get(m, ())):
            if n == m or n.startswith(m + "."):  # a package importing its own submodules
                continue
            if state.get(n) == 1:
                pytest.fail("import cycle: " + " -> ".join([*path, m, n]))
            if n not in state:
                visit(n, [*path, m])
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m, [])


def test_the_simulation_never_reads_the_scenario() -> None:
    for m, imports in GRAPH.items():
        if m.startswith("hsisim.sim"):
            assert not {i for i in imports if i.startswith(("hsisim.scenario", "hsisim.catalog", "hsisim.resolve"))}, m


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_and_functions_are_small(path: Path) -> None:
    text = path.read_text()
    assert text.count("\n") <= 500, f"{path.name}: {text.count(chr(10))} lines (at most 500)"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            assert length <= 60, f"{path.name}: {node.name} has {length} lines (at most 60)"
