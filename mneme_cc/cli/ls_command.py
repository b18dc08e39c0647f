"""`mneme ls -rdb DIR` (or `mneme ls DIR`): the kernels and instances of a record database."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors
from mneme_cc.cli._format import determinism, determinism_note, human_bytes, instance_summary, shape
from mneme_cc.cli._options import database_given


@reports_errors
def ls(
    positional: Annotated[Optional[Path], typer.Argument(
        metavar="[DIR]", help="The record database (or -rdb DIR).", show_default=False)] = None,
    rdb: Annotated[Optional[Path], typer.Option(
        "-rdb", "--rdb", help="The record database.", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    verify: Annotated[bool, typer.Option(
        help="Read every snapshot and check every checksum.")] = False,
) -> None:
    """List recorded kernels and instances: launch shapes, bytes, in-app time, replayability."""
    from mneme_cc.record.db import RecordDB

    database = database_given(rdb, positional, "ls")
    db = RecordDB(database)
    if verify:
        db.verify()
    if as_json:
        print(json.dumps({
            "database": str(database),
            "kernels": [{
                "static_hash": k.static_hash, "name": k.name, "demangled": k.demangled,
                "has_ir": k.has_ir, "carries": k.provenance, "replay": k.replay_note,
                "instances": [instance_summary(i) for i in k.instances],
            } for k in db.kernels],
            "incomplete": db.incomplete,
        }, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    # Full hashes and names when piped, not an 80-column cut.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    raw = sum(i.raw_bytes for i in db.instances)
    stored = sum(i.stored_bytes for i in db.instances)
    console.print(f"[bold]{database}[/]: {len(db.kernels)} kernel(s), {len(db.instances)} "
                  f"instance(s); snapshots {human_bytes(raw)} raw, {human_bytes(stored)} stored"
                  + (" (verified)" if verify else ""), soft_wrap=True)
    for k in db.kernels:
        console.print(f"\n[bold cyan]{k.demangled}[/]  [dim]{k.static_hash}[/]  {k.replay_note}",
                      soft_wrap=True)
        table = Table("instance", "grid", "block", "smem", "raw", "stored", "in-app ms",
                      "replayable", "determinism", box=None, pad_edge=False)
        for i in k.instances:
            table.add_row(i.dynamic_hash, shape(i.grid), shape(i.block), str(i.shared_mem_bytes),
                          human_bytes(i.raw_bytes), human_bytes(i.stored_bytes),
                          f"{i.in_app_ms:.3f}",
                          "yes" if i.replayable else "no: " + "; ".join(i.reasons),
                          determinism_note(determinism(i)))
        console.print(table)
    if db.incomplete:
        console.print(f"\n{len(db.incomplete)} incomplete instance(s) (in flight, or the "
                      f"recorder was killed): {', '.join(db.incomplete)}")
