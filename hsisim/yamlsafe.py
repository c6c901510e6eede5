"""Reading YAML a user did not necessarily write: bounded, strict, with the line of every key.

PyYAML's ``safe_load`` refuses tags that build objects, but it still expands aliases without limit
(nine nested aliases make a "billion laughs" document of 10⁹ nodes), silently keeps the last of
two equal keys, and reads any bytes it is given. Here a document is composed once, checked
(size, alias expansion, recursion, duplicate keys) on the composed graph, which is as small as the
text, and only then constructed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hsisim.errors import HsisimInputError

MAX_BYTES = 1 << 20  # a scenario is a few kB; a megabyte is a generous bound
MAX_NODES = 20_000  # nodes after alias expansion (the reference scenario has ~120)


@dataclass(frozen=True)
class Document:
    """A parsed YAML document and the 1-based line of each dotted key path in it."""

    data: Any
    lines: dict[str, int]


def read_text(path: str | Path, what: str = "scenario") -> str:
    """The UTF-8 text of ``path``; a missing, binary, oversized or non-UTF-8 file is an input error."""
    p = Path(path)
    if not p.is_file():
        raise HsisimInputError(f"{what} file not found: {p}")
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise HsisimInputError(f"{p} is {size / 2**20:.1f} MiB; a {what} file is text of a few kB "
                                   f"(limit {MAX_BYTES // 2**20} MiB)")
        raw = p.read_bytes()
    except OSError as exc:
        raise HsisimInputError(f"cannot read {p}: {exc.strerror or exc}") from None
    return decode(raw, str(p), what)


def decode(raw: bytes, source: str, what: str = "scenario") -> str:
    """Bytes → text, naming the line of the first byte that is not UTF-8."""
    if b"\x00" in raw:
        raise HsisimInputError(f"this is a binary file, not a YAML {what}", source=source)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise HsisimInputError(f"not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be read (save the file as "
                               "UTF-8)", line=line, source=source) from None


def parse(text: str, source: str | None = None) -> Document:
    """Parse one YAML document with bounded expansion and no duplicate keys."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise HsisimInputError(f"YAML text over {MAX_BYTES // 2**20} MiB", source=source)
    loader: yaml.SafeLoader | None = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        lines: dict[str, int] = {}
        if node is not None:
            _check(node, source)
            _walk(node, "", lines, set())
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise HsisimInputError(f"malformed YAML: {problem}", line=mark.line + 1 if mark else None,
                               source=source) from None
    finally:
        if loader is not None:
            loader.dispose()
    return Document(data, lines)


def _check(root: yaml.Node, source: str | None) -> None:
    """Refuse recursive aliases, expansion beyond ``MAX_NODES`` and duplicate mapping keys."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise HsisimInputError("a YAML alias refers to the node that contains it (recursive)",
                                   line=node.start_mark.line + 1, source=source)
        active.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            _no_duplicates(node, source)
            total += sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(v) for v in node.value)
        active.discard(key)
        if total > MAX_NODES:
            raise HsisimInputError(f"YAML aliases expand this document beyond {MAX_NODES:,} values; a scenario "
                                   "needs a few hundred", line=node.start_mark.line + 1, source=source)
        sizes[key] = total
        return total

    size(root)


def _no_duplicates(node: yaml.MappingNode, source: str | None) -> None:
    seen: dict[str, int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.value == "<<":
            continue
        line = key.start_mark.line + 1
        if key.value in seen:
            raise HsisimInputError(f"key {key.value!r} appears twice in one mapping (first at line "
                                   f"{seen[key.value]}); remove one", line=line, source=source)
        seen[key.value] = line


def _walk(node: yaml.Node, prefix: str, out: dict[str, int], seen: set[int]) -> None:
    """Record the line of each key path; an aliased node is walked once, under its first path."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            path = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
            out.setdefault(path, key_node.start_mark.line + 1)
            _walk(value_node, path, out, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = f"{prefix}.{i}"
            out.setdefault(path, item.start_mark.line + 1)
            _walk(item, path, out, seen)
