"""`mneme ls DIR`: the kernels and instances of a record database."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from mneme_cc.cli._errors import reports_errors
from mneme_cc.cli._format import determinism, determinism_note, human_bytes, instance_summary, shape


@reports_errors
def ls(
    database: Annotated[Path, typer.Argument(help="The record database directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    verify: Annotated[bool, typer.Option(
        help="Read every snapshot and check every checksum.")] = False,
) -> None:
    """List recorded kernels and instances: launch shapes, bytes, in-app time, replayability."""
    from mneme_cc.record.db import RecordDB

    db = RecordDB(database)
    if verify:
        db.verify()
    if as_json:
        print(json.dumps({
            "database": str(database),
            "kernels": [{
                "static_hash": k.static_hash, "name": k.name, "demangled": k.demangled,
                "has_ir": k.has_ir, "replay": k.replay_note,
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
