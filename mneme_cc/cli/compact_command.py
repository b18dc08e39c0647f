"""`mneme compact -rdb DIR`: compress the chunks a recording stored raw
(what was still queued when the application exited; docs/record.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from mneme_cc.cli._errors import reports_errors
from mneme_cc.errors import RecordDBError


@reports_errors
def compact(
    rdb: Annotated[Path, typer.Option(
        "-rdb", "--rdb", help="The record database to compact in place.")],
    zstd_level: Annotated[int, typer.Option(
        "--zstd-level", metavar="L", help="zstd level: 1 to 19, or fast ones below 0.")] = 3,
    jobs: Annotated[Optional[int], typer.Option(
        "--jobs", "-j", min=1,
        help="Chunks compressed at once (default: the processors it may use).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Compress every chunk DIR stores uncompressed, in place (each verified first and
    replaced through a rename: readers and an interrupted run see a complete database)."""
    from mneme_cc.record.compact import compact_database

    began = time.perf_counter()
    r = compact_database(rdb, level=zstd_level, jobs=jobs)
    seconds = time.perf_counter() - began
    if as_json:
        print(json.dumps({"database": str(rdb), "seconds": round(seconds, 3), **r.__dict__},
                         indent=2))
    else:
        mib = 1 << 20
        print(f"{rdb}: {r.compacted} of {r.chunks} chunk(s) compressed, "
              f"{r.bytes_before / mib:.1f} MiB -> {r.bytes_after / mib:.1f} MiB "
              f"in {seconds:.1f} s")
    if r.failed:
        more = f" (and {len(r.failed) - 1} more)" if len(r.failed) > 1 else ""
        raise RecordDBError(f"{r.failed[0]}{more}: {len(r.failed)} of {r.chunks} chunk(s) "
                            "left as they were, the rest compacted")
