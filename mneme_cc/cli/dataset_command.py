"""`mneme dataset -rdb DIR --out FILE`: every tuning trial as a dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors


@reports_errors
def dataset(
    database: Annotated[Path, typer.Option("-rdb", "--rdb", help="The record database.")],
    out: Annotated[Path, typer.Option(help="The file to write (*.parquet or *.json).")],
    form: Annotated[Optional[str], typer.Option(
        "--format", help="parquet, or t4 (the autotuning-results JSON schema); default: from "
                         "--out's suffix.")] = None,
) -> None:
    """Write every trial of every study: kernel, launch, config, outcome, samples, resources."""
    from functools import partial

    from mneme_cc.cli._progress import progress
    from mneme_cc.tune.dataset import export_dataset

    written = export_dataset(database, out, form, partial(progress, what="reading studies"))
    print(f"{out}: {written} trial(s)")
