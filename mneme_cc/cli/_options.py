"""Option values shared by commands: comma lists of integers (`--grid 128,2`,
`--devices 0,1`) and verification-policy files (`--verify FILE`)."""

from __future__ import annotations

from pathlib import Path

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
