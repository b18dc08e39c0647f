"""Option values shared by commands: comma lists of integers (`--grid 128,2`,
`--devices 0,1`), verification-policy files (`--verify FILE`) and the instance
that `-rdb DIR [-rid ID] [--kernel NAME]` names."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from mneme_cc.errors import UsageError


def int_list(text: str | None, flag: str, what: str) -> tuple[int, ...]:
    """`3,4` -> (3, 4); `None` or "" -> (); anything else: a one-line error."""
    try:
        return tuple(int(x) for x in (text or "").split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{flag} '{text}' is not {what}") from None


def policies_file(path: Path | None) -> dict:
    """`--verify FILE`: per-buffer verification policies (docs/replay.md); {} without one."""
    from mneme_cc.fileio import read_json_object

    return read_json_object(path, "verification policies keyed by buffer") if path else {}


def find_instance(database: Path, rid: Optional[str], kernel: Optional[str]):
    """The instance the user means; DIR/<static>.json (a kernel's file) names a kernel."""
    from mneme_cc.record import RecordDB

    static = None
    if database.suffix == ".json" and database.is_file():
        static, database = database.stem, database.parent
    return RecordDB(database).find(rid=rid, kernel=kernel, static=static)
