"""`mneme export -rdb DIR [BEST.json...] --proteus FILE --mneme FILE --bundle DIR`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors


@reports_errors
def export(
    best: Annotated[Optional[list[Path]], typer.Argument(
        help="best.json files (default: every DIR/tune/*/best.json).")] = None,
    database: Annotated[Optional[Path], typer.Option("-rdb", "--rdb",
                                                     help="The record database.")] = None,
    proteus: Annotated[Optional[Path], typer.Option(
        help="PROTEUS_TUNED_KERNELS file to write or merge into.")] = None,
    mneme: Annotated[Optional[Path], typer.Option(
        help="mneme-cc's tuned-kernels file (full configs, launch geometry).")] = None,
    bundle: Annotated[Optional[Path], typer.Option(
        help="A directory for the deployable bundle: each winner's cubin and a manifest "
             "(docs/deploy.md).")] = None,
) -> None:
    """Write the best verified configurations for deployment."""
    from functools import partial

    from mneme_cc.cli._progress import progress
    from mneme_cc.errors import UsageError
    from mneme_cc.record.db import require_database
    from mneme_cc.tune.export import export as export_files
    from mneme_cc.tune.export import refusals
    from mneme_cc.tune.study_dir import best_files

    if proteus is None and mneme is None and bundle is None:
        raise UsageError("say where to write: --proteus FILE, --mneme FILE, --bundle DIR")
    files = list(best or [])
    if database is not None:
        require_database(database)
        files += best_files(database)
    if not files:
        raise UsageError("nothing to export: give best.json files or -rdb DIR with tuned "
                         "studies (run `mneme tune` first)")
    written = export_files(files, proteus, mneme, bundle, database,
                           partial(progress, what="compiling the bundle"))
    for entry in written.values():
        if "skipped" in entry:
            print(f"mneme export: {entry['skipped']}", file=sys.stderr)
    print(json.dumps(written, indent=2))
    refused = refusals(written)
    for why in refused:
        print(f"mneme export: not written to {proteus}: {why}", file=sys.stderr)
    if refused:
        # Not a usage error (2): what could be written is; a script still notices.
        others = any(set(entry) & {"proteus", "mneme", "bundle"} for entry in written.values())
        print(f"mneme export: {len(refused)} kernel(s) not written to {proteus} (above)"
              + ("; the other outputs are written" if others else ""), file=sys.stderr)
        raise typer.Exit(1)
