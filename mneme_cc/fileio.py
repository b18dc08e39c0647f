"""Files the user hands over or gets back: JSON objects read with one-line
errors, and writes that a reader sees whole (the old content or the new)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mneme_cc.errors import UsageError


def write_text_atomic(path: Path, text: str) -> None:
    """Writes text to a temporary name beside path, then renames it over path;
    a failed write (a full disk) leaves no temporary file behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Holds an advisory lock on `.<name>.lock` beside path: writers that
    read, merge and rewrite one file take turns, so none loses another's
    entries."""
    lock = path.with_name(f".{path.name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in path (a file the user gave); a one-line UsageError if not."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not {what} (a JSON object)")
    return data
