"""`mneme show -rdb DIR KEY` (or `mneme show DIR KEY`): one kernel or instance of a
record database in detail."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors
from mneme_cc.cli._format import determinism_note, human_bytes, instance_summary, shape
from mneme_cc.cli._options import database_given


def _regions(snapshot) -> list[dict]:
    return [{"kind": r.kind_name, "name": r.name, "address": hex(r.address), "size": r.size,
             "chunks": len(r.chunks)} for r in snapshot.regions]


def _instance_detail(inst) -> dict:
    return {**instance_summary(inst), "kernel": inst.kernel_name, "api": inst.api,
            "cluster": list(inst.cluster) if inst.cluster else None,
            "launch_index": inst.launch_index, "params": inst.params,
            "args_hex": inst.args.hex(), "window": inst.window, "device": inst.device,
            "process": inst.process, "prologue": _regions(inst.prologue),
            "epilogue": _regions(inst.epilogue)}


def _kernel_detail(kernel) -> dict:
    return {"static_hash": kernel.static_hash, "name": kernel.name,
            "demangled": kernel.demangled, "has_ir": kernel.has_ir,
            "replay": kernel.replay_note, "params": kernel.params, "globals": kernel.globals,
            "ir": kernel.description.get("ir"), "image": kernel.description.get("image"),
            "instances": [instance_summary(i) for i in kernel.instances]}


@reports_errors
def show(
    words: Annotated[Optional[list[str]], typer.Argument(
        metavar="[DIR] KEY", show_default=False,
        help="A kernel (static hash or name) or an instance (<static>.<dynamic> or dynamic "
             "hash), after the record database unless -rdb names it.")] = None,
    rdb: Annotated[Optional[Path], typer.Option(
        "-rdb", "--rdb", help="The record database.", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show one kernel or one instance: parameters, launch, snapshot regions."""
    from mneme_cc.errors import UsageError
    from mneme_cc.record.db import RecordDB

    words = words or []
    if len(words) not in (1, 2) or (rdb is not None and len(words) != 1):
        raise UsageError("mneme show -rdb DIR KEY: name the database once and one kernel or "
                         "instance")
    if len(words) == 1 and rdb is None and Path(words[0]).is_dir():
        raise UsageError(f"mneme show {words[0]} KEY: name a kernel or an instance of it "
                         f"(`mneme ls {words[0]}` lists them)")
    key = words[-1]
    db = RecordDB(database_given(rdb, Path(words[0]) if len(words) == 2 else None, "show"))
    # Damage in an instance's files is reported as such, not as "no kernel matches".
    is_instance = any(key in (i.name, i.dynamic_hash) for i in db.instances)
    detail = _instance_detail(db.find(rid=key)) if is_instance else _kernel_detail(db.kernel(key))
    if as_json:
        print(json.dumps(detail, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    # Full hashes and names when piped, not an 80-column cut.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    if not is_instance:
        console.print(f"[bold cyan]{detail['demangled']}[/]\n  mangled  {detail['name']}\n"
                      f"  static   {detail['static_hash']}\n  replay   {detail['replay']}")
        console.print(f"  params   {', '.join(str(p['size']) for p in detail['params'])} bytes")
        for g in detail["globals"]:
            console.print(f"  global   {g['name']} ({g['size']} bytes"
                          f"{', constant' if g.get('constant') else ''})")
        for i in detail["instances"]:
            console.print(f"  instance {i['instance']}  grid {shape(i['grid'])} block "
                          f"{shape(i['block'])}  {i['in_app_ms']:.3f} ms")
        return
    console.print(f"[bold cyan]{detail['kernel']}[/] instance {detail['instance']}")
    console.print(f"  launch   {detail['api']} grid {shape(detail['grid'])} block "
                  f"{shape(detail['block'])} smem {detail['shared_mem_bytes']}"
                  f"{' cooperative' if detail['cooperative'] else ''}")
    console.print(f"  args     {detail['args_hex']}")
    console.print(f"  in-app   {detail['in_app_ms']:.3f} ms on {detail['device']['name']} "
                  f"({detail['device']['arch']})")
    console.print(f"  window   {detail['window']['base']:#x} + {human_bytes(detail['window']['size'])}")
    console.print(f"  bytes    {human_bytes(detail['raw_bytes'])} raw, "
                  f"{human_bytes(detail['stored_bytes'])} stored")
    console.print("  replay   " + ("yes" if detail["replayable"]
                                   else "no: " + "; ".join(detail["reasons"])))
    console.print(f"  outputs  {determinism_note(detail['determinism'])}")
    for title in ("prologue", "epilogue"):
        table = Table(title, "name", "address", "size", "chunks", box=None, pad_edge=False)
        for r in detail[title]:
            table.add_row(r["kind"], r["name"], r["address"], str(r["size"]), str(r["chunks"]))
        console.print(table)
