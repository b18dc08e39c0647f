"""`mneme record -rdb DIR [options] -- APP ARGS`: run an application under the recorder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors


def _size(text: Optional[str], what: str) -> Optional[int]:
    from mneme_cc.recorder import parse_size

    return None if text is None else parse_size(text, what)


@reports_errors
def record(
    database: Annotated[Path, typer.Option("-rdb", "--rdb", help="The record database directory.")],
    command: Annotated[Optional[list[str]], typer.Argument(
        help="The application and its arguments (put them after --).")] = None,
    kernels: Annotated[Optional[str], typer.Option(
        help="Record only kernels whose mangled or demangled name matches this regex.")] = None,
    skip: Annotated[int, typer.Option(help="Warm-up launches to skip per kernel.")] = 0,
    max_instances: Annotated[int, typer.Option(help="Instances to keep per kernel.")] = 4,
    vass: Annotated[Optional[str], typer.Option(
        help="Size of the VA window (e.g. 256G); default twice the device memory.")] = None,
    va_base: Annotated[Optional[str], typer.Option(
        help="Base address of the VA window (default 0x200000000000).")] = None,
    ranks: Annotated[Optional[str], typer.Option(
        help="MPI ranks to record, e.g. 0,2-3 (default all).")] = None,
    chunk_size: Annotated[Optional[str], typer.Option(
        help="Snapshot chunk size (default 1M).")] = None,
    zstd_level: Annotated[Optional[int], typer.Option(
        help="zstd level for stored chunks; 0 stores them raw (default 1).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Report each instance.")] = False,
) -> None:
    """Run APP with the recorder; selected kernel launches are stored in DIR."""
    from mneme_cc.errors import UsageError
    from mneme_cc.recorder import RecordSettings
    from mneme_cc.recorder import record as run_recorded

    base = None
    if va_base is not None:
        try:
            base = int(va_base, 0)
        except ValueError:
            raise UsageError(f"--va-base '{va_base}' is not an address (e.g. 0x200000000000)") \
                from None
    settings = RecordSettings(
        database=database, kernels=kernels, skip=skip, max_instances=max_instances,
        vass=_size(vass, "--vass"), va_base=base, ranks=ranks,
        chunk_size=_size(chunk_size, "--chunk-size"), zstd_level=zstd_level, verbose=verbose)
    raise typer.Exit(run_recorded(settings, command or []))
