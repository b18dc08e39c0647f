"""`mneme merge -rdb DIR SOURCE...`: gather record databases into one (those
recorded on node-local disks of a cluster job, say; docs/cluster.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mneme_cc.cli._errors import reports_errors


@reports_errors
def merge(
    sources: Annotated[list[Path], typer.Argument(
        metavar="SOURCE...", help="Record databases to copy instances from.")],
    rdb: Annotated[Path, typer.Option(
        "-rdb", "--rdb", help="The record database to merge into (created if missing).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Copy into DIR every instance of each SOURCE that DIR lacks (chunks stored once,
    checked as they are read; an interrupted merge can be run again)."""
    from mneme_cc.record.merge import merge_databases

    results = {str(source): merge_databases(rdb, source).__dict__ for source in sources}
    if as_json:
        print(json.dumps({"database": str(rdb), "sources": results}, indent=2))
        return
    for source, r in results.items():
        print(f"{source}: {r['copied']} instance(s) copied into {rdb}, {r['present']} already "
              f"there, {r['chunks']} chunk(s) written")
