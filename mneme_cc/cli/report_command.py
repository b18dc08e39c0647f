"""`mneme report -rdb DIR [--study NAME ...] [--out DIR]`: plots of tuning studies."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors


@reports_errors
def report(
    database: Annotated[Path, typer.Option("-rdb", "--rdb", help="The record database.")],
    study: Annotated[Optional[list[str]], typer.Option(
        help="A study under DIR/tune (repeatable); default: every one.")] = None,
    out: Annotated[Optional[Path], typer.Option(
        help="Where to write (one study only); default: DIR/tune/<study>/report.")] = None,
) -> None:
    """Plot tuning studies: history, parameter importance, Pareto front, best vs baseline."""
    from mneme_cc.errors import UsageError
    from mneme_cc.tune.report import render
    from mneme_cc.tune.study_dir import find_studies

    studies = find_studies(database, study)
    if out is not None and len(studies) > 1:
        raise UsageError("--out names one directory: choose one study with --study")
    for s in studies:
        if s.damaged_lines:
            print(f"mneme: {s.path / 'trials.jsonl'}: {s.damaged_lines} damaged line(s) left "
                  "out", file=sys.stderr)
        for path in render(s, out):
            print(path)
