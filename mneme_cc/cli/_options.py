"""Option values shared by commands: the record database (`-rdb DIR`, or a
positional DIR where that reads naturally), comma lists of integers (`--grid
128,2`, `--devices 0,1`), verification-policy files (`--verify FILE`) and the
instance that `-rdb DIR [-rid ID] [--kernel NAME]` names."""

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


def database_given(option: Path | None, positional: Path | None, command: str) -> Path:
    """The record database: `-rdb DIR` as every command takes it, or `DIR`.

    Raises:
        UsageError: none is given, or two different ones.
    """
    if option is not None and positional is not None and option != positional:
        raise UsageError(f"two record databases given ({positional} and -rdb {option}); "
                         f"name one: mneme {command} -rdb DIR")
    if option is None and positional is None:
        raise UsageError(f"no record database given: mneme {command} -rdb DIR")
    return option or positional  # type: ignore[return-value]
