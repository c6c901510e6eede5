"""``hsisim catalog``: what the catalog knows, with the source and date of every figure.

A thin wrapper over ``hsisim.catalog.listing.listing``. Tables keep to the terminal's width: the
sources go below each table as numbered notes, and optional columns are dropped when it is narrow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from hsisim.cli_common import guard
from hsisim.writer import dumps

Entry = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """One table column: header, cell text of an entry, alignment, and whether it may be dropped."""

    header: str
    cell: Callable[[Entry], str]
    right: bool = True
    optional: bool = False


def _num(value: float | None, fmt: str = "g") -> str:
    """A figure as text; a missing one as '-'."""
    return "-" if value is None else format(value, fmt)


def _pair(baseline: float | None, burst: float | None) -> str:
    """'baseline/burst', or one figure where they are equal or only one is known."""
    if baseline is None or burst is None or baseline == burst:
        return _num(burst if baseline is None else baseline)
    return f"{baseline:g}/{burst:g}"


def _by_nodes(e: Entry) -> str:
    return " ".join(f"{r['nodes']}:{r['busbw_gb_per_s']:g}" for r in e["busbw_by_nodes"]) or "-"


def _peak(precision: str) -> Callable[[Entry], str]:
    return lambda e: _num(e["peak_tflops"][precision])


def _name(e: Entry) -> str:
    return str(e["name"])


GPUS = [
    Column("name", _name, right=False),
    Column("GiB\nusable", lambda e: _num(e["memory_gib"], ".1f")),
    Column("GiB\nnominal", lambda e: _num(e["memory_nominal_gib"], ".0f"), optional=True),
    Column("mem\nGB/s", lambda e: _num(e["mem_bw_gb_per_s"])),
    Column("fp32", _peak("fp32")),
    Column("tf32", _peak("tf32")),
    Column("fp16", _peak("fp16_tensor")),
    Column("bf16", _peak("bf16_tensor")),
    Column("host", lambda e: str(e["host_link"]), right=False),
]
INSTANCES = [
    Column("name", _name, right=False),
    Column("GPUs", lambda e: f"{e['gpus']} {e['gpu']}", right=False),
    Column("vCPU", lambda e: str(e["vcpus"] or "host")),
    Column("RAM\nGiB", lambda e: _num(e["ram_gib"])),
    Column("intra", lambda e: str(e["intra"]), right=False),
    Column("network", lambda e: str(e["network"]), right=False),
    Column("net\nGbit/s", lambda e: _pair(e["network_baseline_gbit_per_s"], e["network_burst_gbit_per_s"])),
    Column("EBS\nGbit/s", lambda e: _pair(e["ebs_baseline_gbit_per_s"], e["ebs_burst_gbit_per_s"])),
    Column("USD/h", lambda e: f"{e['on_demand_usd_per_hour']:.4g}"),
    Column("price\ndate", lambda e: e["price_as_of"] or "-", right=False, optional=True),
]
LINKS = [
    Column("name", _name, right=False),
    Column("line\nGB/s", lambda e: _num(e["line_gb_per_s"])),
    Column("effective\nGB/s", lambda e: _num(e["effective_gb_per_s"])),
    Column("bus GB/s by\nnode count", _by_nodes, right=False),
    Column("latency\nµs", lambda e: _num(e["latency_us"])),
]
STORAGE = [
    Column("name", _name, right=False),
    Column("write\nMB/s", lambda e: _num(e["write_mb_per_s"])),
    Column("read\nMB/s", lambda e: _num(e["read_mb_per_s"])),
    Column("latency\nms", lambda e: _num(e["latency_ms"])),
    Column("lost with\nnode", lambda e: "yes" if e["lost_with_node"] else "no", right=False),
]
DATASETS = [
    Column("name", _name, right=False),
    Column("pixels", lambda e: f"{e['rows']}×{e['cols']}"),
    Column("bands\n(raw)", lambda e: f"{e['bands']} ({e['raw_bands']})"),
    Column("classes", lambda e: str(e["classes"])),
    Column("labelled", lambda e: f"{e['labelled']:,}"),
]
MODELS = [
    Column("name", _name, right=False),
    Column("spectral\ninput", lambda e: str(e["spectral_input"]), right=False),
    Column("outputs", lambda e: str(e["outputs"]).replace("_plus_one", " + 1"), right=False),
    Column("prior\nefficiency", lambda e: _num(e["efficiency"])),
    Column("published\nparams", lambda e: f"{e['published_params']['value']:,}" if e["published_params"] else "-"),
]
TABLES = {"gpus": GPUS, "instances": INSTANCES, "links": LINKS, "storage": STORAGE, "datasets": DATASETS,
          "models": MODELS}
CAPTIONS = {
    "gpus": "Dense peak TFLOP/s; fp16/bf16 are tensor-core math with FP32 accumulate (as autocast runs it). "
            "Usable memory is what CUDA reports, ECC on.",
    "instances": "net and EBS: baseline/burst where they differ. USD/h: on-demand Linux list price.",
    "links": "Bandwidths per direction. Effective: the nccl-tests bus bandwidth an all-reduce reaches, "
             "held beyond the last measured node count.",
    "storage": "Sustained bandwidth per node (fsx and nfs: the file system's, shared by all nodes).",
    "datasets": "bands: those normally used (noisy and water-absorption bands removed).",
    "models": "prior efficiency: fraction of peak FLOP/s before calibration.",
}


def _note(kind: str, e: Entry) -> str:
    """The note under a table for one entry: display name, source, price where there is one, date."""
    who = f"{e['display']}: " if e.get("display") else ""
    extra = ""
    if kind == "instances" and e["price_as_of"]:
        extra = f"; {e['on_demand_usd_per_hour']:g} USD/h in {e['price_region']} on {e['price_as_of']}"
    if kind == "models" and e["published_params"]:
        extra = f"; published params at {e['published_params']['at']}"
    return f"{who}{e['source'] or 'no source given'}{extra}; as of {e['as_of'] or 'unknown'}"


def _width(col: Column, cells: list[str]) -> int:
    """Characters the column needs unwrapped."""
    return max(len(line) for text in [col.header, *cells] for line in text.split("\n"))


def fit_columns(columns: list[Column], entries: list[Entry], width: int) -> list[Column]:
    """``columns`` less the optional ones, last first, while the table would be wider than ``width``."""
    kept = list(columns)
    need = {c.header: _width(c, [c.cell(e) for e in entries]) for c in columns}
    for col in reversed(columns):
        if sum(need[c.header] for c in kept) + len(kept) - 1 <= width:  # one space between columns
            break
        if col.optional:
            kept.remove(col)
    return kept


def render(data: dict[str, Any], console: Any) -> None:
    """Print one catalog table (or the overview) on a rich ``console``, within its width."""
    from rich.table import Table
    from rich.text import Text

    if data["kind"] is None:
        _overview(data, console)
        return
    kind, entries = data["kind"], data["entries"]
    console.print(Text(f"{kind}: {data['about']}", style="bold"))
    columns = fit_columns(TABLES[kind], entries, console.width)
    table = Table(box=None, padding=(0, 1), collapse_padding=True, pad_edge=False, header_style="bold")
    for i, col in enumerate(columns):
        table.add_column(col.header, justify="right" if col.right else "left", no_wrap=i == 0, overflow="fold")
    for e in entries:
        table.add_row(*[Text(c.cell(e)) for c in columns])
    console.print(table)
    console.print(Text(CAPTIONS[kind], style="italic"))
    console.print(Text("Sources:", style="bold"))
    notes = Table.grid(padding=(0, 1))
    notes.add_column(no_wrap=True)
    notes.add_column(overflow="fold")
    for e in entries:
        notes.add_row(Text(str(e["name"])), Text(_note(kind, e)))
    for tag, text in data.get("legend", {}).items():
        notes.add_row(Text(tag), Text(text))
    console.print(notes)


def _overview(data: dict[str, Any], console: Any) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold", title="The catalog",
                  title_justify="left")
    table.add_column("table")
    table.add_column("entries", justify="right")
    table.add_column("what it holds", overflow="fold")
    for t in data["tables"]:
        table.add_row(t["kind"], str(t["count"]), Text(t["about"]))
    console.print(table)
    console.print(Text("hsisim catalog TABLE lists one table with the source of every entry; --json prints "
                       "everything as JSON."))


def catalog_command(
    kind: Annotated[str | None, typer.Argument(
        help="gpus | instances | links | storage | datasets | models (none: an overview).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print strict JSON on stdout.")] = False,
) -> None:
    """List what the catalog knows (GPUs, instances, links, storage, datasets, models) with sources."""
    from hsisim.catalog.listing import listing

    data = guard(lambda: listing(kind))
    if as_json:
        typer.echo(dumps(data, indent=2))
        return
    from rich.console import Console

    render(data, Console())
