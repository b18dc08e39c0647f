"""Option values given as comma lists of integers (`--grid 128,2`, `--devices 0,1`)."""

from __future__ import annotations

from mneme_cc.errors import UsageError


def int_list(text: str | None, flag: str, what: str) -> tuple[int, ...]:
    """`3,4` -> (3, 4); `None` or "" -> (); anything else: a one-line error."""
    try:
        return tuple(int(x) for x in (text or "").split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{flag} '{text}' is not {what}") from None
